"""Runs every workload for xlanb and pure JAX side by side and prints the ratios.

Each (workload, system) runs in a fresh process, so first steps include compilation; rounds
are interleaved because the machine is shared and noisy. Compare ratios within one run.

    python bench/run.py [--rounds 3] [--json .bench/results.json]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
JOBS = [
    ("jax", "W1"), ("xlanb", "W1"),
    ("jax", "W3"), ("xlanb", "W3"), ("xlanb", "W3compile"),
]
TARGETS = {   # this stage's targets (BENCHMARKS.md has the later ones)
    ("W1", "trace_per_op"): ("<= 10 us/op", lambda v, ref: v <= 10e-6),
    ("W3", "steady_step"): ("<= 3.0x JAX", lambda v, ref: v <= 3.0 * ref),
}


def run(system: str, workload: str) -> list[dict]:
    script = HERE / ("jax_workloads.py" if system == "jax" else "xlanb_workloads.py")
    env = {**os.environ, "XLANB_PERSISTENT_CACHE": "0", "PYTHONUNBUFFERED": "1"}
    out = subprocess.run([sys.executable, str(script), workload], capture_output=True, text=True, env=env,
                         cwd=HERE, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{system} {workload} failed:\n{out.stderr[-3000:]}")
    return [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]


def fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=str(HERE.parent / ".bench" / "results.json"))
    args = parser.parse_args()
    samples: dict = {}
    for r in range(args.rounds):
        for system, workload in JOBS:
            for rec in run(system, workload):
                for metric, value in rec["metrics"].items():
                    samples.setdefault((rec["workload"], metric, rec["system"]), []).append(value)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    table = {k: statistics.median(v) for k, v in samples.items()}
    rows = ["| workload | figure | xlanb | pure JAX | ratio | target |", "|---|---|---|---|---|---|"]
    for (workload, metric, system), value in sorted(table.items()):
        if system != "xlanb":
            continue
        base = workload.split("_")[0]
        ref = table.get((base, metric, "jax"))
        ratio = f"{value / ref:.2f}x" if ref else "-"
        target = TARGETS.get((workload, metric))
        verdict = ""
        if target:
            verdict = f"{target[0]}: {'met' if target[1](value, ref) else 'NOT met'}"
        rows.append(f"| {workload} | {metric} | {fmt(value)} | {fmt(ref) if ref else '-'} | {ratio} | {verdict} |")
    print("\n".join(rows))
    path = pathlib.Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"|".join(k): v for k, v in samples.items()}, indent=1))


if __name__ == "__main__":
    main()
