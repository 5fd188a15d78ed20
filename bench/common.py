"""Timing helpers and workload shapes shared by the xlanb, pure-JAX and torch-CPU scripts.

Every script prints `RESULT {json}` lines (seconds, bytes or counts); bench/run.py collects them.
"""

import json
import os
import statistics
import time

perf = time.perf_counter

W1_OPS = 1000                      # 500 x (mul, add) on a 128x128 f32 tensor
W2_OPS = 200                       # 25 x the 8-op mix of each workload script
W3 = dict(batch=64, d_in=784, d_hid=512, d_out=10, lr=0.01)
W4 = dict(layers=2, d_model=256, heads=4, seq=128, batch=8, vocab=1000, d_ff=1024,
          lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, warmup=10)
W3_STEPS = 200                     # timed steady steps (xlanb's lazy run takes 1000 for the RSS figure)
W4_STEPS = 10
W5_SIZES = (1_000, 10_000, 100_000)
W5_LOWER_MAX = 10_000              # lowering and compiling 100k nodes takes minutes: trace, hash, key only


def median(xs):
    return statistics.median(xs)


def timeit(fn, n, warmup=3):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t0 = perf()
        fn()
        out.append(perf() - t0)
    return out


def warmup_lr(step: int) -> float:
    """The W4 LR schedule's factor (torch LambdaLR and the JAX step use the same function)."""
    return min(1.0, (step + 1) / W4["warmup"])


def rss_bytes() -> int:
    """Resident set size of this process (psutil when installed, else /proc/self/status)."""
    try:
        import psutil
        return psutil.Process(os.getpid()).memory_info().rss
    except ImportError:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    return 0


def emit(workload, system, metrics):
    print("RESULT " + json.dumps({"workload": workload, "system": system, "metrics": metrics}), flush=True)
