"""The cost of debug_nans (runtime/nans.py) on W3's steady step (lazy, `xlanb.sync(wait=True)` per step).

    python bench/debug_nans.py [--rounds 5] [--out bench/results/debug_nans.json]

Two settings, alternated round by round in one process so machine noise hits them alike:
  off   the default
  on    debug_nans=1: the graph returns one NaN flag (a max reduction of each float output), donates
        nothing, the flag is read once per step, and ops record their line and module path
Prints, for each, the median wall time of a step (trace, sync, wait) and of the trace alone (where
the line and module recording costs), and the on/off ratio of the step: the median of the rounds'
ratios (each round's median on / the median off of the same round), which machine drift between
rounds does not move. The target is <= 1.05x.
"""

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("XLANB_PERSISTENT_CACHE", "0")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import emit, median, perf  # noqa: E402
from figures import Figure, at_most  # noqa: E402

SETTINGS = ("off", "on")
STEPS = 40


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
    import xlanb
    from xlanb import _config
    from models import w3_setup
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default="")
    parser.add_argument("--emit", action="store_true", help="print RESULT lines for bench/run.py")
    args = parser.parse_args()
    body = w3_setup("xla")
    for setting in SETTINGS:                    # first steps: one executable per setting
        with _config.override(debug_nans=setting == "on"):
            _steps(body, 3)
    times = {s: [] for s in SETTINGS}
    ratios = []
    for r in range(args.rounds):
        rounds = {}
        for setting in (SETTINGS if r % 2 == 0 else SETTINGS[::-1]):
            with _config.override(debug_nans=setting == "on"):
                rounds[setting] = _steps(body, STEPS)
            times[setting] += rounds[setting]
        ratios.append(median([x[1] for x in rounds["on"]]) / median([x[1] for x in rounds["off"]]))
    trace, step, cpu = ({s: median([x[i] for x in t]) for s, t in times.items()} for i in range(3))
    ratio = median(ratios)
    result = {s: {"trace_ms": round(trace[s] * 1e3, 3), "steady_step_ms": round(step[s] * 1e3, 3),
                  "cpu_ms": round(cpu[s] * 1e3, 3), "samples": len(times[s])} for s in SETTINGS}
    result["on"]["step_ratio"] = round(ratio, 4)
    result["on"]["cpu_ratio"] = round(cpu["on"] / cpu["off"], 4)
    result["on"]["round_ratios"] = [round(x, 3) for x in ratios]
    for s in SETTINGS:
        print(f"W3 debug_nans {s:3s} trace {trace[s] * 1e3:7.3f} ms, steady step {step[s] * 1e3:7.3f} ms, "
              f"CPU time {cpu[s] * 1e3:7.3f} ms", flush=True)
    print(f"W3 debug_nans on / off: x{ratio:.3f} a step (median of {len(ratios)} rounds' ratios, "
          f"{min(ratios):.3f} to {max(ratios):.3f}), x{cpu['on'] / cpu['off']:.3f} CPU time", flush=True)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    if args.emit:
        emit("debug_nans", "xlanb", {"W3.on_step": result["on"]["step_ratio"], "W3.on_cpu": result["on"]["cpu_ratio"]})


# bench/run.py: the job (it alternates the settings itself) and the figures of the table
SCRIPT = "debug_nans.py"
JOBS = [("xlanb", "debug_nans", "debug_nans")]
ARGS = ["--rounds", "10", "--emit"]
FIGURES = [Figure("debug_nans.W3.on_step", "W3 steady step, debug_nans on / off", "x", "debug_nans.W3.on_step",
                  target=at_most(1.05, "<= 1.05x")),
           Figure("debug_nans.W3.on_cpu", "W3 steady step's CPU time (all threads), debug_nans on / off", "x",
                  "debug_nans.W3.on_cpu")]


if __name__ == "__main__":
    main()
