"""What tests share: counters they read (metric sample counts; 0 when the metric does not exist
yet), and a small compiled step's cell report."""

import torch

import xlanb
from xlanb.report import CellContext, build_report


def samples(name: str) -> int:
    data = xlanb.metrics.metric_data(name)
    return 0 if data is None else data[0]


def compiles() -> int:
    return samples("CompileTime")


def executes() -> int:
    return samples("ExecuteTime")


def eager_compiles() -> int:
    return samples("EagerOpCompileTime")


def eager_executes() -> int:
    return samples("EagerOpExecuteTime")


def counter(name: str) -> int:
    return xlanb.metrics.counter_value(name) or 0


def step_report(execution_count: int):
    """The CellReport of one named compiled step (matmul, relu, sum) from an empty cache."""
    xlanb.runtime_state().cache.clear()
    w = torch.ones(8, 8, device="xla")
    xlanb.sync()
    mark = xlanb.runtime_state().log.mark()
    with xlanb.hooks.recording_texts(), xlanb.compile(name="step"):
        y = (w @ w).relu().sum()
    y.item()
    return build_report(xlanb.runtime_state().log.since(mark), CellContext(execution_count=execution_count))
