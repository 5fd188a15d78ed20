"""Notebook 06's steady transformer step four ways, in a notebook kernel with the extension loaded:
lazy, `xlanb.compile`, `torch.compile(backend="xlanb")` and `xlanb.compile(replay=True)`.

    python bench/notebook06.py [--rounds 4] [--steps 12] [--in-process] [--cells] [--emit]

Runs notebooks/06_torch_compile.ipynb's set-up cells (`%load_ext xlanb`, the model, `setup()`,
`train_step`) in a fresh kernel through nbclient (or, with --in-process, in IPython's
InteractiveShell in this process: cheaper, no kernel), then one cell that builds the three
(model, optimizer, schedule) triples once, warms each up (3 steps: both compiles and dynamo's
capture happen there), then runs `--rounds` rounds of `--steps` steps of each, one step of each way
in turn (the order turning every step), so that machine noise and order hit them alike. As in the
notebook, lazy and `xlanb.compile` are measured first, before `torch.compile` imports and sets up
dynamo; then torch.compile alternates with lazy and xlanb.compile again (`lazy_after_dynamo`,
`compile_after_dynamo`: a notebook's later cells), and their ratios are to that lazy. A step is what the notebook's `run` times: the step, `sched.step()`,
`xlanb.sync(wait=True)`. Prints the median wall time and main-thread CPU time of a step for each
way and the ratios to lazy taken within each round (medians over rounds); the target is
`xlanb.compile` <= 1.05x lazy (issue 22). --emit prints RESULT lines as bench/run.py reads them.
"""

import argparse
import json
import os
import pathlib
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from figures import Figure, at_most  # noqa: E402

NOTEBOOK = HERE.parent / "notebooks" / "06_torch_compile.ipynb"
SETUP_CELLS = 3          # the notebook's code cells up to `train_step` (import, model + set-up, run)

MEASURE = """
import json as _json, time as _time
def _step(state):
    step, model, opt, sched = state
    w, c = _time.perf_counter(), _time.thread_time()
    loss = step(model, opt, idx, tgt)
    sched.step()
    xlanb.sync(wait=True)
    return _time.perf_counter() - w, _time.thread_time() - c
def _rounds_of(ways):
    names, rounds = list(ways), []
    for state in ways.values():
        for _ in range(3):
            _step(state)
    for r in range(ROUNDS):
        times = {name: [] for name in names}
        for i in range(STEPS):       # one step of each way in turn, the order turning: they share the noise
            k = (r * STEPS + i) % len(names)
            for name in names[k:] + names[:k]:
                times[name].append(_step(ways[name]))
        rounds.append({name: [sorted(t[0] for t in v)[len(v) // 2], sorted(t[1] for t in v)[len(v) // 2]]
                       for name, v in times.items()})
    return rounds
%xla_mode lazy
# as in the notebook, lazy and xlanb.compile run before torch.compile has imported and set up dynamo
_rounds = _rounds_of({"lazy": (train_step, *setup()),
                      "compile": (xlanb.compile(train_step, name="train_step"), *setup())})
_lazy = (train_step, *setup())
for _r, _more in zip(_rounds, _rounds_of({"lazy_after_dynamo": _lazy,
                                          "compile_after_dynamo": (xlanb.compile(train_step, name="train_step"),
                                                                   *setup()),
                                          "torch_compile": (torch.compile(train_step, backend="xlanb"), *setup()),
                                          "replay": (xlanb.compile(train_step, name="train_step", replay=True),
                                                     *setup())})):
    _r.update(_more)
print("NB06 " + _json.dumps(_rounds))
"""


def cells(rounds: int, steps: int) -> list[str]:
    nb = json.loads(NOTEBOOK.read_text())
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    return code[:SETUP_CELLS] + [MEASURE.replace("ROUNDS", str(rounds)).replace("STEPS", str(steps))]


def run_kernel(sources: list[str]) -> str:
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    NotebookClient(nb, timeout=1800, kernel_name="python3", cwd=str(NOTEBOOK.parent)).execute()
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    return text


def run_in_process(sources: list[str]) -> str:
    import contextlib
    import io

    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    out = io.StringIO()
    for source in sources:
        with contextlib.redirect_stdout(out):
            result = shell.run_cell(source)
        if not result.success:
            raise SystemExit(f"cell failed: {result.error_in_exec or result.error_before_exec}")
    return out.getvalue()


LAZY_CELL = "loss = train_step(model, opt, idx, tgt)\nsched.step()\nxlanb.sync()"
COMPILE_CELL = "%%xla_compile --name train_step\nloss = train_step(model, opt, idx, tgt)\nsched.step()"


def cell_rounds(rounds: int, steps: int) -> list[dict]:
    """In-process: a cell of one lazy step against an `%%xla_compile` cell of the same step, one of
    each in turn, each timed with the extension's hooks and its report (what a user waits for)."""
    import contextlib
    import io
    import time

    from IPython.core.interactiveshell import InteractiveShell

    import xlanb
    shell = InteractiveShell.instance()

    def cell(source: str) -> tuple[float, float]:
        w, c = time.perf_counter(), time.thread_time()
        with contextlib.redirect_stdout(io.StringIO()):
            result = shell.run_cell(source)
        xlanb.wait()                                 # both cells launch their graph; the step ends here
        if not result.success:
            raise SystemExit(f"cell failed: {result.error_in_exec or result.error_before_exec}")
        return time.perf_counter() - w, time.thread_time() - c
    for source in cells(0, 0)[:SETUP_CELLS] + ["%xla_mode lazy\nmodel, opt, sched = setup()"]:
        cell(source)
    ways = {"lazy_cell": LAZY_CELL, "xla_compile_cell": COMPILE_CELL}
    for source in list(ways.values()) * 3:
        cell(source)
    out = []
    for r in range(rounds):
        times = {name: [] for name in ways}
        for i in range(steps):
            for name in (list(ways) if (r + i) % 2 == 0 else list(ways)[::-1]):
                times[name].append(cell(ways[name]))
        out.append({name: [sorted(t[0] for t in v)[len(v) // 2], sorted(t[1] for t in v)[len(v) // 2]]
                    for name, v in times.items()})
    return out


def summarize(rounds: list[dict]) -> dict:
    """Median wall and main-thread CPU per step for each way, and the within-round ratios to lazy."""
    out = {}
    for name in rounds[0]:
        out[f"{name}_step"] = statistics.median(r[name][0] for r in rounds)
        out[f"{name}_cpu"] = statistics.median(r[name][1] for r in rounds)
        base = {"torch_compile": "lazy_after_dynamo", "compile_after_dynamo": "lazy_after_dynamo",
                "replay": "lazy_after_dynamo", "xla_compile_cell": "lazy_cell"}.get(name, "lazy")
        if not name.startswith("lazy"):
            out[f"{name}_vs_lazy"] = statistics.median(r[name][0] / r[base][0] for r in rounds)
            out[f"{name}_cpu_vs_lazy"] = statistics.median(r[name][1] / r[base][1] for r in rounds)
    if "replay" in rounds[0]:
        out["replay_vs_torch_compile"] = statistics.median(r["replay"][0] / r["torch_compile"][0] for r in rounds)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--in-process", action="store_true", help="IPython's InteractiveShell, no kernel")
    parser.add_argument("--cells", action="store_true",
                        help="in-process: a lazy-step cell against an %%%%xla_compile cell, hooks and report included")
    parser.add_argument("--emit", action="store_true", help="RESULT lines for bench/run.py")
    args = parser.parse_args()
    os.environ.setdefault("XLANB_PERSISTENT_CACHE", "0")
    if args.cells:
        rounds = cell_rounds(args.rounds, args.steps)
        figures = summarize(rounds)
        for i, r in enumerate(rounds):
            print(f"round {i + 1}: " + ", ".join(f"{n} {v[0] * 1e3:.1f} ms (CPU {v[1] * 1e3:.1f})" for n, v in r.items()))
        print(f"notebook 06 step as one cell, in-process IPython with the extension (hooks and report included): "
              f"%%xla_compile cell {figures['xla_compile_cell_vs_lazy']:.2f}x the lazy cell "
              f"(main-thread CPU {figures['xla_compile_cell_cpu_vs_lazy']:.2f}x)")
        return
    sources = cells(args.rounds, args.steps)
    text = run_in_process(sources) if args.in_process else run_kernel(sources)
    line = next((ln for ln in text.splitlines() if ln.startswith("NB06 ")), None)
    if line is None:
        raise SystemExit(f"the measuring cell printed no NB06 line:\n{text[-3000:]}")
    rounds = json.loads(line[5:])
    figures = summarize(rounds)
    if args.emit:
        print("RESULT " + json.dumps({"workload": "notebook06", "system": "xlanb", "metrics": figures}), flush=True)
        return
    where = "in-process IPython" if args.in_process else "kernel (nbclient)"
    for i, r in enumerate(rounds):
        print(f"round {i + 1}: " + ", ".join(f"{name} {r[name][0] * 1e3:.1f} ms (CPU {r[name][1] * 1e3:.1f})"
                                             for name in r))
    print(f"notebook 06 steady step, {where}, {len(rounds)} rounds x {args.steps} steps (medians):")
    for name in rounds[0]:
        ratio = "" if name.startswith("lazy") else (f"   {figures[f'{name}_vs_lazy']:.2f}x lazy "
                                           f"(main-thread CPU {figures[f'{name}_cpu_vs_lazy']:.2f}x)")
        print(f"  {name:20} {figures[f'{name}_step'] * 1e3:7.2f} ms  CPU {figures[f'{name}_cpu'] * 1e3:7.2f} ms{ratio}")
    target = figures["compile_vs_lazy"]
    print(f"  xlanb.compile / lazy = {target:.2f}x (target <= 1.05x: {'met' if target <= 1.05 else 'missed'})")
    replay = figures["replay_vs_torch_compile"]
    print(f"  replayed / torch.compile = {replay:.2f}x (target < 1.0x: {'met' if replay < 1.0 else 'missed'})")


# bench/run.py: the job (one kernel; it alternates the three ways itself) and the figures of the table
SCRIPT = "notebook06.py"
JOBS = [("xlanb", "notebook06", "notebook06")]
ARGS = ["--rounds", "4", "--steps", "12", "--emit"]
_WAYS = {"lazy": "lazy", "compile": "xlanb.compile", "lazy_after_dynamo": "lazy once dynamo is set up",
         "compile_after_dynamo": "xlanb.compile once dynamo is set up", "torch_compile": "torch.compile",
         "replay": "xlanb.compile(replay=True)"}
FIGURES = [Figure(f"notebook06.{w}_step", f"notebook 06 steady step in a kernel, {label}", "s", f"notebook06.{w}_step")
           for w, label in _WAYS.items()] + [
    Figure(f"notebook06.{w}_vs_lazy", f"notebook 06 steady step in a kernel, {label} / lazy", "x",
           f"notebook06.{w}_vs_lazy", target=at_most(1.05, "<= 1.05x") if w == "compile" else None)
    for w, label in _WAYS.items() if not w.startswith("lazy")] + [
    Figure("notebook06.replay_vs_torch_compile", "notebook 06 steady step in a kernel, replayed / torch.compile", "x",
           "notebook06.replay_vs_torch_compile", target=at_most(1.0, "< 1.0x (faster)"))]


if __name__ == "__main__":
    sys.exit(main())
