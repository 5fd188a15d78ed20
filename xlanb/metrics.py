"""torch_xla-compatible counters and metrics, read from the event log.

Names are torch_xla's, so its users' habits carry over: CompileTime, ExecuteTime
(lazy and graph mode), EagerOpCompileTime / EagerOpExecuteTime (eager mode),
CachedCompile, UncachedCompile, MarkStep, TransferToDeviceTime,
TransferFromDeviceTime, PersistentCacheHit, and aten::<op> for CPU fallbacks; xlanb adds
LoweringTime (graph -> StableHLO), InputOutputAliasCount (donated buffers), GraphCut
(data-dependent ops), ValueReadExtraOutputs (live tensors a value read's graph computed
besides the one asked for, kept as device data), and for torch.compile(backend="xlanb")
DynamoGraph (FX graphs captured), DynamoGraphReplayed (of those, run op by op), DynamoGraphBreak
and DynamoRecompile (dynamo captured a frame again after a guard failed). Timed values are in nanoseconds.
"""

from __future__ import annotations

import collections
import time

from xlanb import events
from xlanb.state import runtime_state

MAX_SAMPLES = 1024
_rt = runtime_state()     # counters, metrics and their lock live on the Runtime (reset() zeroes them)


def _count(name: str, n: int = 1) -> None:
    _rt.counters[name] = _rt.counters.get(name, 0) + n


def _sample(name: str, value: float) -> None:
    m = _rt.metrics.get(name)
    if m is None:
        m = _rt.metrics[name] = [0, 0, collections.deque(maxlen=MAX_SAMPLES)]     # the newest samples
    m[0] += 1
    m[1] += value
    m[2].append((time.time(), value))


def count_event(e: events.Event) -> None:
    """The event-log listener that keeps the counters (subscribed by `install`)."""
    with _rt.lock:
        if isinstance(e, events.Compile):
            _count("UncachedCompile")
            _sample("EagerOpCompileTime" if e.eager else "CompileTime", e.lower_ns + e.compile_ns)
            _sample("LoweringTime", e.lower_ns)
            if e.persistent_hit:
                _count("PersistentCacheHit")
        elif isinstance(e, events.Execute):
            if e.cached:
                _count("CachedCompile")
            _sample("EagerOpExecuteTime" if e.eager else "ExecuteTime", e.ns)
            if e.donated:
                _count("InputOutputAliasCount", e.donated)
        elif isinstance(e, events.Transfer):
            _sample("TransferToDeviceTime" if e.direction == "to_device" else "TransferFromDeviceTime", e.ns)
        elif isinstance(e, events.Fallback):
            _count(e.op)
            _rt.fallback_counters.add(e.op)
        elif isinstance(e, events.Sync):
            if e.kind == "mark_step":
                _count("MarkStep")
            elif e.kind == "value" and e.roots > 1:
                _count("ValueReadExtraOutputs", e.roots - 1)
        elif isinstance(e, events.GraphCut):
            _count("GraphCut")
        elif isinstance(e, events.DynamoGraph):
            _count("DynamoGraph")
            if e.path == "replay":
                _count("DynamoGraphReplayed")
        elif isinstance(e, events.Replay):
            _count("ReplayHit")
            _sample("ReplayTime", e.ns)
            if e.donated:
                _count("InputOutputAliasCount", e.donated)
        elif isinstance(e, events.ReplayMiss):
            _count("ReplayMiss")
        elif isinstance(e, events.NotReplayable):
            _count("ReplayNotReplayable")
        elif isinstance(e, events.DynamoBreak):
            _count("DynamoGraphBreak" if e.kind == "graph_break" else "DynamoRecompile")



def install() -> None:
    _rt.subscribe(count_event)


def counter_names() -> list[str]:
    with _rt.lock:
        return sorted(_rt.counters)


def counter_value(name: str) -> int | None:
    with _rt.lock:
        return _rt.counters.get(name)


def metric_names() -> list[str]:
    with _rt.lock:
        return sorted(_rt.metrics)


def metric_data(name: str) -> tuple[int, float, list] | None:
    """(TotalSamples, Accumulator in ns, [(wall_s, value), ...]) or None."""
    with _rt.lock:
        m = _rt.metrics.get(name)
        return None if m is None else (m[0], m[1], list(m[2]))


def clear_counters() -> None:
    with _rt.lock:
        _rt.counters.clear()


def clear_metrics() -> None:
    with _rt.lock:
        _rt.metrics.clear()


def clear_all() -> None:
    clear_counters()
    clear_metrics()


def executed_fallback_ops() -> list[str]:
    """Ops that ran on CPU (`aten::<op>` counters), as torch_xla reports them."""
    with _rt.lock:
        return sorted(n for n in _rt.counters if n in _rt.fallback_counters)


def _format_ns(ns: float) -> str:
    ms, us = divmod(ns / 1000.0, 1000.0)
    return f"{int(ms):03d}ms{us:07.3f}us"


def _percentiles(values: list[float]) -> str:
    if not values:
        return ""
    values = sorted(values)
    parts = []
    for p in (1, 5, 10, 20, 50, 80, 90, 95, 99):
        v = values[min(len(values) - 1, int(len(values) * p / 100))]
        parts.append(f"{p}%={_format_ns(v)}")
    return "; ".join(parts)


def _report(counter_filter, metric_filter) -> str:
    lines = []
    with _rt.lock:
        metrics = {k: (v[0], v[1], list(v[2])) for k, v in _rt.metrics.items()}
        counters = dict(_rt.counters)
    for name in sorted(metrics):
        if not metric_filter(name):
            continue
        count, total, samples = metrics[name]
        timed = name.endswith("Time")
        lines.append(f"Metric: {name}")
        lines.append(f"  TotalSamples: {count}")
        lines.append(f"  Accumulator: {_format_ns(total) if timed else total}")
        if samples and timed:
            lines.append(f"  Percentiles: {_percentiles([v for _, v in samples])}")
    for name in sorted(counters):
        if counter_filter(name):
            lines.append(f"Counter: {name}")
            lines.append(f"  Value: {counters[name]}")
    return "\n".join(lines) + ("\n" if lines else "")


def metrics_report() -> str:
    return _report(lambda n: True, lambda n: True)


SHORT_COUNTERS = ("CachedCompile", "MarkStep")
SHORT_METRICS = ("CompileTime", "ExecuteTime", "TransferToDeviceTime", "TransferFromDeviceTime")


def short_metrics_report(counter_names=None, metric_names=None) -> str:
    counters = tuple(counter_names) if counter_names is not None else SHORT_COUNTERS
    metrics = tuple(metric_names) if metric_names is not None else SHORT_METRICS
    return _report(lambda n: n in counters or n in _rt.fallback_counters, lambda n: n in metrics)
