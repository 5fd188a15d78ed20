"""Counters the tests read (metric sample counts; 0 when the metric does not exist yet)."""

import xlanb


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
