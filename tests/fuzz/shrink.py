"""Delta-debugging of a failing fuzz program down to a minimal failing statement list."""

from programs import Program
from runner import compare, execute


def still_fails(program: Program, status: str) -> bool:
    """Fails the same way (mismatch or error) and still runs on CPU."""
    _, cpu_err = execute(program, "cpu")
    if cpu_err is not None and status != "error":
        return False
    return compare(program).status == status


def shrink(program: Program) -> Program:
    """ddmin over the statements: drop chunks, then single statements, while the failure persists."""
    status = compare(program).status
    if status == "ok":
        return program
    stmts = list(program.statements)
    chunk = max(len(stmts) // 2, 1)
    while chunk >= 1:
        i, changed = 0, False
        while i < len(stmts):
            candidate = stmts[:i] + stmts[i + chunk:]
            if candidate and still_fails(program.with_statements(candidate), status):
                stmts, changed = candidate, True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    return program.with_statements(stmts)


if __name__ == "__main__":
    import sys

    from programs import generate
    print(shrink(generate(int(sys.argv[1]))).source("xla"))
