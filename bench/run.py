"""Runs every workload for xlanb, pure jitted JAX and torch CPU eager, prints the figures with their
targets, writes bench/results/latest.json and regenerates the table in docs/performance.md.

Each (workload, system) runs in a fresh process, so first steps include compilation; rounds are
interleaved because the machine is shared and noisy. Compare ratios within one run.

    python bench/run.py                        # the full run (`make bench`), about 10 minutes
    python bench/run.py --only W2,W4 --rounds 1  # a quick look: prints, writes .bench/partial.json
    python bench/run.py --from-json            # regenerate docs/performance.md from latest.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

import figures
import compile_effort
import debug_nans
import generation
import hf_training
import module_scopes
import notebook06

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
LATEST = HERE / "results" / "latest.json"
PARTIAL = ROOT / ".bench" / "partial.json"
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
SCRIPTS = {"xlanb": "xlanb_workloads.py", "jax": "jax_workloads.py", "torch": "torch_workloads.py"}
JOBS = [   # (system, script argument, the --only name it belongs to), in the order of one round
    ("jax", "W1", "W1"), ("xlanb", "W1", "W1"), ("xlanb", "W1torch", "W1"), ("xlanb", "W1replay", "W1"),
    ("torch", "W1", "W1"),
    ("jax", "W2", "W2"), ("xlanb", "W2", "W2"), ("torch", "W2", "W2"),
    ("jax", "W3", "W3"), ("xlanb", "W3", "W3"), ("xlanb", "W3compile", "W3"), ("xlanb", "W3torch", "W3"),
    ("xlanb", "W3replay", "W3"), ("torch", "W3", "W3"),
    ("jax", "W4", "W4"), ("xlanb", "W4", "W4"), ("xlanb", "W4compile", "W4"), ("xlanb", "W4torch", "W4"),
    ("xlanb", "W4replay", "W4"), ("torch", "W4", "W4"),
    ("xlanb", "W5", "W5"), ("xlanb", "notebook", "notebook"),
] + generation.JOBS + hf_training.JOBS + module_scopes.JOBS + debug_nans.JOBS + compile_effort.JOBS + notebook06.JOBS
ALIASES = {"lowering": "W1", "memory": "W3"}
NOT_MEASURED = [
    "W5 at 100k nodes: trace, hash and key only. Lowering 100k nodes took about 40 s (machine under load), and XLA's "
    "compile of it ran for minutes until the process was killed (SIGKILL, most likely out of memory "
    "on this 23 GiB machine): past the 15-minute budget of `make bench`.",
    "torch CPU eager has no figure where there is nothing to compare: trace, lowering, compile, "
    "host overhead, device bytes, notebook hooks, W5.",
]


def run_job(system: str, arg: str, timeout: float) -> tuple[list[dict], str]:
    env = {**os.environ, "XLANB_PERSISTENT_CACHE": "0", "PYTHONUNBUFFERED": "1"}
    python = hf_training.interpreter(system)
    try:
        command = ([generation.SCRIPT, system] if arg == "W6" else
                   hf_training.command(system, arg) if arg.startswith("W7") else
                   [module_scopes.SCRIPT, *module_scopes.ARGS] if arg == "scopes" else
                   [debug_nans.SCRIPT, *debug_nans.ARGS] if arg == "debug_nans" else
                   [compile_effort.SCRIPT, *compile_effort.ARGS] if arg == "compile_effort" else
                   [notebook06.SCRIPT, *notebook06.ARGS] if arg == "notebook06" else [SCRIPTS[system], arg])
        out = subprocess.run([python, *command], capture_output=True, text=True, env=env,
                             cwd=HERE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [], f"timed out after {timeout:.0f} s"
    records = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    error = "" if out.returncode == 0 else f"exit {out.returncode}: {out.stderr[-2000:]}"
    return records, error


def machine() -> dict:
    cpu = platform.processor()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform()}


def versions() -> dict:
    code = ("import json, platform, torch, jax, jaxlib, xlanb; print(json.dumps({'python': platform.python_version(),"
            " 'torch': torch.__version__, 'jax': jax.__version__, 'jaxlib': jaxlib.__version__,"
            " 'xlanb': xlanb.__version__}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=HERE)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(args) -> dict:
    only = {ALIASES.get(w, w) for w in args.only.split(",")} if args.only else None
    jobs = [j for j in JOBS if only is None or j[2] in only]
    not_measured = list(NOT_MEASURED)
    if any(hf_training.interpreter(system) is None for system, _, _ in jobs):
        jobs = [j for j in jobs if hf_training.interpreter(j[0]) is not None]
        not_measured.append(hf_training.NO_TORCH_XLA)
    samples: dict = {s: {} for s in (*figures.SYSTEMS, "torch_xla")}
    log, errors = [], []
    start = time.perf_counter()
    rounds = 0
    for r in range(args.rounds):
        elapsed = time.perf_counter() - start
        if r and elapsed + elapsed / r > args.budget:
            print(f"stopping after {r} rounds: another would pass the {args.budget:.0f} s budget", file=sys.stderr)
            break
        for system, arg, _ in jobs:
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            records, error = run_job(system, arg, args.timeout)
            wall = time.perf_counter() - t0
            log.append({"round": r, "system": system, "job": arg, "wall_s": round(wall, 2), "load1": load})
            if error:
                errors.append(f"round {r + 1} {system} {arg}: {error}")
                print(f"  {system} {arg} FAILED: {error[-300:]}", file=sys.stderr)
            for rec in records:
                for metric, value in rec["metrics"].items():
                    series = samples[rec["system"]].setdefault(f"{rec['workload']}.{metric}", [])
                    series.extend([None] * (r - len(series)))
                    series.append(value)
            print(f"  round {r + 1} {system:5} {arg:10} {wall:6.1f} s  (load {load:.1f})", file=sys.stderr)
        rounds += 1
    for series in (m for per in samples.values() for m in per.values()):
        series.extend([None] * (rounds - len(series)))
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine(), "versions": versions(), "rounds": rounds, "only": args.only or None,
        "wall_s": round(time.perf_counter() - start, 1), "persistent_cache": False,
        "figures": figures.evaluate(samples, rounds), "samples": samples, "jobs": log, "errors": errors,
        "not_measured": not_measured,
    }


def heading(result: dict) -> str:
    m, v = result["machine"], result["versions"]
    loads = sorted(j["load1"] for j in result["jobs"]) or [0.0]
    return (f"{result['date'][:10]}: {m['cpu']}, {m['cores']} cores; Python {v['python']}, torch {v['torch']}, "
            f"jax {v['jax']}, xlanb {v['xlanb']}; median (min - max) of {result['rounds']} interleaved rounds; "
            f"the run took {result['wall_s'] / 60:.1f} min, 1-minute load average "
            f"{loads[0]:.1f} - {loads[-1]:.1f} (median {loads[len(loads) // 2]:.1f}) before its processes")


def write_docs(result: dict) -> None:
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC} has no {BEGIN} ... {END} markers to replace")
    notes = "\n".join(f"- {n}" for n in result["not_measured"] + result["errors"])
    block = (f"{BEGIN}\n<!-- generated by bench/run.py from bench/results/latest.json; edits here are lost -->\n\n"
             f"Results of {heading(result)}.\n\n{figures.table(result['figures'])}\n\n"
             f"Not measured:\n\n{notes}\n{END}")
    head, rest = text.split(BEGIN, 1)
    DOC.write_text(head + block + rest.split(END, 1)[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated: W1,W2,W3,W4,W5,W6,W7,notebook,scopes,debug_nans,compile_effort,notebook06 (lowering=W1, memory=W3)")
    parser.add_argument("--budget", type=float, default=780, help="seconds: start no round that would end later")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per process")
    parser.add_argument("--json", help=f"where to write the results (default {LATEST.relative_to(ROOT)}, "
                                       f"or {PARTIAL.relative_to(ROOT)} with --only)")
    parser.add_argument("--from-json", nargs="?", const=str(LATEST), metavar="PATH",
                        help="regenerate docs/performance.md from a results file; runs nothing")
    args = parser.parse_args()
    if args.from_json:
        result = json.loads(pathlib.Path(args.from_json).read_text())
        result["figures"] = figures.evaluate(result["samples"], result["rounds"])   # today's catalogue
        write_docs(result)
        print(f"Results of {heading(result)}.\n\n{figures.table(result['figures'])}")
        return
    result = measure(args)
    path = pathlib.Path(args.json) if args.json else (PARTIAL if args.only else LATEST)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nResults of {heading(result)}.\n\n{figures.table(result['figures'])}\n")
    for line in result["errors"]:
        print(f"FAILED: {line[:500]}")
    missed = [f["label"] for f in result["figures"] if f.get("met") is False]
    print(f"{len(missed)} of {sum('met' in f for f in result['figures'])} targets missed; wrote {path}")
    if not args.only:
        write_docs(result)
        print(f"regenerated the table in {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
