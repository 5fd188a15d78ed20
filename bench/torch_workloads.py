"""The same PyTorch code as xlanb_workloads.py, on the CPU, eagerly (torch's default threads).

Usage: python torch_workloads.py W1|W2|W3|W4. torch CPU is synchronous: every op is forced.
"""

import sys

import torch

from common import W2_OPS, W3_STEPS, W4_STEPS, emit, median, perf, timeit
from models import w1_chain, w2_ops, w3_setup, w4_setup


def w1():
    x = torch.rand(128, 128)
    t0 = perf()
    w1_chain(x)
    first = perf() - t0
    chain = timeit(lambda: w1_chain(x), n=20, warmup=3)
    emit("W1", "torch", {"first_call": first, "cached_step": median(chain)})


def w2():
    x, w = torch.rand(128, 128), torch.rand(128, 128) / 64
    per_run = timeit(lambda: w2_ops(x, w, lambda: None), n=20, warmup=3)
    emit("W2", "torch", {"per_op": median(per_run) / W2_OPS})


def train(workload, setup, steps):
    step = setup("cpu")
    t0 = perf()
    step()
    first = perf() - t0
    times = timeit(step, n=steps, warmup=3)
    emit(workload, "torch", {"first_step": first, "steady_step": median(times)})


{"W1": w1, "W2": w2, "W3": lambda: train("W3", w3_setup, W3_STEPS),
 "W4": lambda: train("W4", w4_setup, W4_STEPS)}[sys.argv[1]]()
