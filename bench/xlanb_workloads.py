"""The same workloads written in ordinary PyTorch, run on xlanb's xla device.

Usage: python xlanb_workloads.py W1|W3|W3compile
"""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import xlanb
from common import W3, emit, median, perf, timeit


def w1():
    x0 = torch.rand(128, 128).to("xla")
    xlanb.sync(wait=True)

    def trace():
        x = x0
        for _ in range(500):
            x = x * 1.0001 + 0.5
        return x
    traces = []
    for _ in range(7):
        t0 = perf()
        y = trace()
        traces.append(perf() - t0)
        del y
        xlanb.sync()          # nothing live is pending: drops the trace
    keep = []

    def step():
        keep[:] = [trace()]
        xlanb.sync(wait=True)
    step()
    cached = timeit(step, n=50, warmup=5)
    emit("W1", "xlanb", {"trace_per_op": median(traces) / 1000, "cached_step": median(cached)})


def w3(compiled: bool):
    s = W3
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(s["d_in"], s["d_hid"]), nn.ReLU(), nn.Linear(s["d_hid"], s["d_out"])).to("xla")
    opt = torch.optim.SGD(model.parameters(), lr=s["lr"])
    x = torch.randn(s["batch"], s["d_in"]).to("xla")
    y = torch.randint(0, s["d_out"], (s["batch"],)).to("xla")
    xlanb.sync(wait=True)

    def body():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    if compiled:
        body = xlanb.compile(body, name="train_step")

    def step():
        loss = body()
        xlanb.sync(wait=True)
        return loss
    t0 = perf()
    step()
    first = perf() - t0
    times = timeit(step, n=50, warmup=3)
    emit("W3" + ("_compile" if compiled else ""), "xlanb", {"first_step": first, "steady_step": median(times)})


{"W1": w1, "W3": lambda: w3(False), "W3compile": lambda: w3(True)}[sys.argv[1]]()
