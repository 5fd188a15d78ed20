"""Timing helpers and workload shapes shared by the xlanb and pure-JAX benchmark scripts."""

import json
import statistics
import time

perf = time.perf_counter

W3 = dict(batch=64, d_in=784, d_hid=512, d_out=10, lr=0.01)


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


def emit(workload, system, metrics):
    print("RESULT " + json.dumps({"workload": workload, "system": system, "metrics": metrics}), flush=True)
