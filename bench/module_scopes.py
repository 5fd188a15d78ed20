"""The cost of module scopes (capture/scopes.py) on W3 and W4 steady steps (lazy, `xlanb.sync()` per step).

    python bench/module_scopes.py [--rounds 5] [--out bench/results/module_scopes.json]

Three settings, alternated round by round in one process so machine noise hits them alike:
  off        no recording_modules() scope (the library default: Module.__call__ is torch's own)
  modules    hooks.recording_modules(): a Module.__call__ wrapper pushes and pops the path, backward
             nodes are labelled (what the notebook adds for "ops by module")
  notebook   recording_modules() and recording_locations(), as the notebook extension runs a cell
Prints, for each, the median host CPU time of a step (trace and sync until the launch returns: what
scopes can cost, since the executable is the same) and of the whole step, and their ratios to `off`.
The off setting of this tree against the tree before module scopes is
`PYTHONPATH=<other tree> python bench/module_scopes.py --only off`. `make bench` runs it with `--emit`
(RESULT lines for bench/run.py; the figures and the <= 3% target are FIGURES below).
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

SETTINGS = ("off", "modules", "notebook")
STEPS = {"W3": 60, "W4": 6}


def _scope(setting: str):
    from xlanb import hooks
    stack = contextlib.ExitStack()
    if setting in ("modules", "notebook") and hasattr(hooks, "recording_modules"):
        stack.enter_context(hooks.recording_modules())
    if setting == "notebook":
        stack.enter_context(hooks.recording_locations())
    return stack


def _steps(body, n: int) -> list[tuple[float, float]]:
    """(host, step) seconds per step. host: the process's CPU time for the trace and the sync until
    the launch returns (what scopes can slow down; the executable is the same, since the cache key
    ignores them), the autograd engine's thread included. CPU time, unlike wall time, hardly moves
    when other processes load the machine. step: wall time with the wait."""
    import xlanb
    out = []
    for _ in range(n):
        t0, c0 = perf(), time.process_time()
        body()
        xlanb.sync()
        c1 = time.process_time()
        xlanb.wait()
        out.append((c1 - c0, perf() - t0))
    return out


def _in_scope_code(body, n: int) -> float:
    """Seconds per step spent in capture/scopes.py's own code: the wrapper of each module call (its push
    and pop, timed as the wrapper's whole call less the module's own call inside it, nested calls
    apart) and the backward lookup, timed around each call: the direct cost, which the step ratios
    above bury in the machine's noise."""
    import torch
    import xlanb
    from xlanb import hooks
    from xlanb.capture import scopes
    spent = [0.0]
    inner: list = []               # per wrapper call in flight: the time of the module's own call in it

    def lookup(*args):
        t = perf()
        try:
            return real_lookup(*args)
        finally:
            spent[0] += perf() - t

    def call_through(self, *args, **kwargs):
        t = perf()
        try:
            return real_call(self, *args, **kwargs)
        finally:
            inner[-1] += perf() - t

    def wrapper(self, *args, **kwargs):
        inner.append(0.0)
        t = perf()
        try:
            return real_wrapper(self, *args, **kwargs)
        finally:
            spent[0] += perf() - t - inner.pop()
    real_lookup, scopes.backward_scope = scopes.backward_scope, lookup
    try:
        with hooks.recording_modules():
            real_wrapper, real_call = torch.nn.Module.__call__, scopes._calls[0]
            torch.nn.Module.__call__, scopes._calls[0] = wrapper, call_through
            try:
                for _ in range(n):
                    body()
                    xlanb.sync()
                    xlanb.wait()
            finally:
                torch.nn.Module.__call__, scopes._calls[0] = real_wrapper, real_call
    finally:
        scopes.backward_scope = real_lookup
    return spent[0] / n


def main():
    import xlanb  # noqa: F401  (the xla device; bench/run.py imports this module for FIGURES alone)
    from models import w3_setup, w4_setup
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default=",".join(SETTINGS))
    parser.add_argument("--out", default="")
    parser.add_argument("--emit", action="store_true", help="print RESULT lines for bench/run.py")
    args = parser.parse_args()
    settings = args.only.split(",")
    result = {}
    for name, setup in (("W3", w3_setup), ("W4", w4_setup)):
        body = setup("xla")
        for setting in settings:              # first steps: compile once (the key ignores scopes)
            with _scope(setting):
                _steps(body, 2)
        times = {s: [] for s in settings}
        for r in range(args.rounds):
            order = settings if r % 2 == 0 else list(reversed(settings))
            for setting in order:
                with _scope(setting):
                    times[setting] += _steps(body, STEPS[name])
        host = {s: median([h for h, _ in t]) for s, t in times.items()}
        step = {s: median([x for _, x in t]) for s, t in times.items()}
        result[name] = {s: {"host_ms": round(host[s] * 1e3, 3), "steady_step_ms": round(step[s] * 1e3, 3),
                            "host_ratio": round(host[s] / host["off"], 4) if "off" in host else None,
                            "step_ratio": round(step[s] / step["off"], 4) if "off" in step else None,
                            "samples": len(times[s])} for s in settings}
        if "off" in step:
            direct = _in_scope_code(body, STEPS[name] * 2)
            result[name]["in_scope_code"] = {"us_per_step": round(direct * 1e6, 1),
                                             "share_of_step": round(direct / step["off"], 5)}
            print(f"{name} in scopes.py's functions: {direct * 1e6:.1f} us a step "
                  f"({100 * direct / step['off']:.2f}% of the step without scopes)", flush=True)
        for s in settings:
            ratio = (f"  x{host[s] / host['off']:.3f} host, x{step[s] / step['off']:.3f} step"
                     if "off" in host else "")
            print(f"{name} {s:9s} host {host[s] * 1e3:8.2f} ms, steady step {step[s] * 1e3:8.2f} ms{ratio}",
                  flush=True)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    if args.emit:
        metrics = {f"{w}.{s}_{kind}": r[s][f"{kind}_ratio"] for w, r in result.items()
                   for s in settings if s != "off" for kind in ("step", "host")}
        metrics.update({f"{w}.in_scope_code": r["in_scope_code"]["share_of_step"] for w, r in result.items()
                        if "in_scope_code" in r})
        emit("scopes", "xlanb", metrics)


# bench/run.py: the job of one round (it alternates the settings itself) and the figures of the table
SCRIPT = "module_scopes.py"
JOBS = [("xlanb", "scopes", "scopes")]
ARGS = ["--rounds", "4", "--emit"]
FIGURES = [
    Figure(f"scopes.{w}.{s}_{kind}", f"{w} steady {'step' if kind == 'step' else 'host CPU time'}, "
           f"{'module scopes' if s == 'modules' else 'module scopes + source lines (the notebook)'} / none",
           "x", f"scopes.{w}.{s}_{kind}", target=at_most(1.03, "<= 1.03x") if (s, kind) == ("modules", "step") else None)
    for w in STEPS for s in ("modules", "notebook") for kind in ("step", "host")
] + [Figure(f"scopes.{w}.in_scope_code", f"{w} steady step: share spent in module-scope code", "%",
            f"scopes.{w}.in_scope_code", target=at_most(0.03, "<= 3%")) for w in STEPS]


if __name__ == "__main__":
    main()
