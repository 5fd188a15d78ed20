"""The cost of debug_nans (runtime/nans.py) on W3's steady step (lazy, `xlanb.sync(wait=True)` per step).

    python bench/debug_nans.py [--rounds 5] [--out bench/results/debug_nans.json]

Three settings, alternated round by round in one process so machine noise hits them alike:
  off        the default in a script
  recording  ops record their line and module path, debug_nans off: what the notebook does anyway
             (its report names lines and modules: notebook/extension.py)
  on         debug_nans=1: the graph returns one NaN flag (a sum of each checked float output),
             donates nothing, the flag is read once the graph has finished (here: at the wait), and
             ops record their line and module
Prints, for each, the median wall time of a step (trace, sync, wait) and of the trace alone (where
the line and module recording costs), and two ratios of the step's median (every round's steps
pooled): on / off, what debug_nans costs a script, and on / recording, what the check itself costs
(in a notebook, all of it). The target is <= 1.05x. A round runs a short block of each setting
(`STEPS`, the first step of a block dropped: the switch's), so that machine noise, which comes in
spells longer than a block, falls on all three alike; the range of the rounds' own ratios is printed
to show that noise.
"""

import argparse
import contextlib
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("XLANB_PERSISTENT_CACHE", "0")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import emit, median, perf  # noqa: E402
from figures import Figure, at_most  # noqa: E402

SETTINGS = ("off", "recording", "on")
STEPS = 12


def _setting(name: str):
    """The block's settings: debug_nans for "on", the notebook's recording for "recording"."""
    from xlanb import _config, hooks
    scope = contextlib.ExitStack()
    scope.enter_context(_config.override(debug_nans=name == "on"))
    if name == "recording":
        scope.enter_context(hooks.recording_modules())
        scope.enter_context(hooks.recording_locations())
    return scope


def _steps(body, n: int) -> list[tuple[float, float, float]]:
    """(trace seconds, step seconds, CPU seconds) per step, the step waited for. CPU: the process's
    CPU time over the step, every thread (XLA's, the autograd engine's): the work done, which other
    processes on the machine move less than they move wall time."""
    import xlanb
    out = []
    for _ in range(n):
        t0, c0 = perf(), time.process_time()
        body()
        t1 = perf()
        xlanb.sync()
        xlanb.wait()
        out.append((t1 - t0, perf() - t0, time.process_time() - c0))
    return out


def main():
    from models import w3_setup
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--out", default="")
    parser.add_argument("--emit", action="store_true", help="print RESULT lines for bench/run.py")
    args = parser.parse_args()
    body = w3_setup("xla")
    for setting in SETTINGS:                    # first steps: one executable per setting
        with _setting(setting):
            _steps(body, 3)
    times = {s: [] for s in SETTINGS}
    ratios = {"off": [], "recording": []}      # on / each
    for r in range(args.rounds):
        rounds = {}
        for setting in (SETTINGS if r % 2 == 0 else SETTINGS[::-1]):
            with _setting(setting):
                rounds[setting] = _steps(body, STEPS)[1:]
            times[setting] += rounds[setting]
        for base, found in ratios.items():
            found.append(median([x[1] for x in rounds["on"]]) / median([x[1] for x in rounds[base]]))
    trace, step, cpu = ({s: median([x[i] for x in t]) for s, t in times.items()} for i in range(3))
    result = {s: {"trace_ms": round(trace[s] * 1e3, 3), "steady_step_ms": round(step[s] * 1e3, 3),
                  "cpu_ms": round(cpu[s] * 1e3, 3), "samples": len(times[s])} for s in SETTINGS}
    result["on"]["step_ratio"] = round(step["on"] / step["off"], 4)
    result["on"]["check_ratio"] = round(step["on"] / step["recording"], 4)
    result["on"]["cpu_ratio"] = round(cpu["on"] / cpu["off"], 4)
    result["on"]["round_ratios"] = [round(x, 3) for x in ratios["off"]]
    for s in SETTINGS:
        print(f"W3 debug_nans {s:9s} trace {trace[s] * 1e3:7.3f} ms, steady step {step[s] * 1e3:7.3f} ms, "
              f"CPU time {cpu[s] * 1e3:7.3f} ms", flush=True)
    for base, found in ratios.items():
        print(f"W3 debug_nans on / {base}: x{step['on'] / step[base]:.3f} a step ({len(found)} rounds' own ratios: "
              f"median {median(found):.3f}, {min(found):.3f} to {max(found):.3f}), x{cpu['on'] / cpu[base]:.3f} CPU time",
              flush=True)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    if args.emit:
        emit("debug_nans", "xlanb", {"W3.on_step": result["on"]["step_ratio"], "W3.check_step": result["on"]["check_ratio"],
                                     "W3.on_cpu": result["on"]["cpu_ratio"]})


# bench/run.py: the job (it alternates the settings itself) and the figures of the table
SCRIPT = "debug_nans.py"
JOBS = [("xlanb", "debug_nans", "debug_nans")]
ARGS = ["--rounds", "100", "--emit"]
FIGURES = [Figure("debug_nans.W3.on_step", "W3 steady step, debug_nans on / off", "x", "debug_nans.W3.on_step",
                  target=at_most(1.05, "<= 1.05x")),
           Figure("debug_nans.W3.check_step", "W3 steady step, debug_nans on / lines and modules recorded (the "
                  "notebook's setting): the check itself", "x", "debug_nans.W3.check_step",
                  target=at_most(1.05, "<= 1.05x")),
           Figure("debug_nans.W3.on_cpu", "W3 steady step's CPU time (all threads), debug_nans on / off", "x",
                  "debug_nans.W3.on_cpu")]


if __name__ == "__main__":
    main()
