"""compile_effort=fast against default (runtime/stages.py): the first step (with XLA's compile) and the
steady step of W3, W4 and W7 (the HF GPT-2 training step, bench/hf_training.py), lazy, each setting in a
fresh process (persistent cache off).

    python bench/compile_effort.py [--emit]          # both workloads, both settings
    python bench/compile_effort.py W4 fast           # one process: prints its RESULT line

Prints, per workload and setting, the first step, the seconds XLA spent compiling (the Compile events'
compile_ns, lowering not included), the steady step, and fast/default ratios; the target (issue 29)
is a compile at least 1.5x faster (ratio <= 0.67).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

os.environ.setdefault("XLANB_PERSISTENT_CACHE", "0")
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import W3_STEPS, W4_STEPS, emit, median, perf  # noqa: E402
from figures import Figure, at_most  # noqa: E402

WORKLOADS = {"W3": W3_STEPS // 4, "W4": W4_STEPS, "W7": 4}       # steady steps timed
EFFORTS = ("default", "fast")


def one(workload: str, effort: str) -> dict:
    os.environ["XLANB_COMPILE_EFFORT"] = effort
    import xlanb
    from xlanb import events
    from xlanb.state import runtime_state
    from models import w3_setup, w4_setup
    if workload == "W7":
        from hf_training import setup
        body = setup("xla")[0]
    else:
        body = (w3_setup if workload == "W3" else w4_setup)("xla")
    mark = runtime_state().log.mark()
    t0 = perf()
    body()
    xlanb.sync(wait=True)
    first = perf() - t0
    compile_s = sum(e.compile_ns for e in runtime_state().log.since(mark) if isinstance(e, events.Compile)) / 1e9
    body()
    xlanb.sync(wait=True)
    times = []
    for _ in range(WORKLOADS[workload]):
        t0 = perf()
        body()
        xlanb.sync(wait=True)
        times.append(perf() - t0)
    return {"first_step": first, "compile": compile_s, "steady_step": median(times)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", nargs="?")
    parser.add_argument("effort", nargs="?")
    parser.add_argument("--emit", action="store_true", help="print RESULT lines for bench/run.py")
    args = parser.parse_args()
    if args.workload:
        print("ONE " + json.dumps(one(args.workload, args.effort)), flush=True)
        return
    metrics = {}
    for workload in WORKLOADS:
        got = {}
        for effort in EFFORTS:
            out = subprocess.run([sys.executable, __file__, workload, effort], capture_output=True, text=True,
                                 cwd=HERE, check=True)
            got[effort] = json.loads(next(line[4:] for line in out.stdout.splitlines() if line.startswith("ONE ")))
            g = got[effort]
            print(f"{workload} {effort:7s} first step {g['first_step']:6.2f} s (XLA compile {g['compile']:6.2f} s), "
                  f"steady step {g['steady_step'] * 1e3:8.2f} ms", flush=True)
        for m in ("first_step", "compile", "steady_step"):
            metrics[f"{workload}.{m}"] = got["fast"][m] / got["default"][m]
        print(f"{workload} fast / default: first step x{metrics[workload + '.first_step']:.2f}, compile "
              f"x{metrics[workload + '.compile']:.2f}, steady step x{metrics[workload + '.steady_step']:.2f}", flush=True)
    if args.emit:
        emit("compile_effort", "xlanb", metrics)


# bench/run.py: the job (it runs both settings itself) and the figures of the table
SCRIPT = "compile_effort.py"
JOBS = [("xlanb", "compile_effort", "compile_effort")]
ARGS = ["--emit"]
FIGURES = [Figure(f"compile_effort.{w}.{m}", f"{w} {label}, compile_effort fast / default", "x",
                  f"compile_effort.{w}.{m}", target=at_most(0.67, "<= 0.67x (1.5x faster)") if m == "compile" else None)
           for w in WORKLOADS for m, label in (("compile", "XLA compile"), ("first_step", "first step"),
                                               ("steady_step", "steady step"))]


if __name__ == "__main__":
    main()
