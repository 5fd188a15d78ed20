"""torch_xla's own test files as a referee for the compat layer:

    python -m xlanb.compat.referee PYTORCH_XLA_CHECKOUT [test/file.py ...]

Each file runs under pytest in a fresh process with the compat layer installed first, from the
checkout's `test/` directory (the SPMD files on 8 CPU devices), and one line per file says how
many tests passed, failed, errored and were skipped. Nothing of torch_xla is imported: the test
files only import `torch_xla`, which the compat layer serves.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

FILES = ("test/test_async_closures.py", "test/test_metrics.py", "test/test_devices.py",
         "test/test_dynamic_shapes_detector.py", "test/eager/test_eager.py", "test/eager/test_eager_spmd.py",
         "test/eager/test_eager_with_xla_compile.py", "test/eager/test_eager_with_torch_compile.py",
         "test/dynamo/test_dynamo.py", "test/spmd/test_xla_sharding.py")
RUN = ("import sys, xlanb.compat; xlanb.compat.install(); import pytest; "
       "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[1:]]))")
SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped)")


def run_file(checkout: pathlib.Path, name: str, timeout: int = 1800) -> dict:
    """{'passed', 'failed', 'error', 'skipped'} counts for one test file (and 'note' when it did not run)."""
    path = checkout / name
    test_dir = checkout / "test"
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLANB_")}
    env["PYTHONPATH"] = os.pathsep.join([str(test_dir), str(test_dir / "spmd"), str(path.parent)] +
                                        [p for p in sys.path if p])
    if "/spmd/" in name or "spmd" in path.name:
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    try:
        proc = subprocess.run([sys.executable, "-c", RUN, str(path)], cwd=str(test_dir), env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "note": f"timed out after {timeout} s"}
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    lines = proc.stdout.strip().splitlines()
    for number, word in SUMMARY.findall(lines[-1] if lines else ""):
        counts["error" if word.startswith("error") else word] = int(number)
    if not any(counts.values()):
        counts["note"] = (lines[-1] if lines else proc.stderr.strip().splitlines()[-1:] or ["no output"])[-1][:200]
    return counts


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    checkout = pathlib.Path(argv[0]).resolve()
    if not (checkout / "test").is_dir():
        print(f"xlanb.compat.referee: {checkout} has no test/ directory; give a pytorch/xla checkout", file=sys.stderr)
        return 2
    total = {"passed": 0, "run": 0}
    for name in argv[1:] or FILES:
        if not (checkout / name).is_file():
            print(f"{name}: missing in the checkout")
            continue
        c = run_file(checkout, name)
        ran = c["passed"] + c["failed"] + c["error"]
        total["passed"] += c["passed"]
        total["run"] += ran
        print(f"{name}: {c['passed']} of {ran} pass ({c['failed']} failed, {c['error']} errors, {c['skipped']} skipped)"
              + (f"; {c['note']}" if "note" in c else ""), flush=True)
    if total["run"]:
        print(f"all: {total['passed']} of {total['run']} pass ({100 * total['passed'] / total['run']:.0f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
