"""torch_xla's metric names that xlanb's events also answer, kept beside xlanb.metrics' own (in the
same tables, so `met.metric_data`, the reports and `met.clear_all` see them):

| torch_xla | xlanb event |
|---|---|
| `OutboundData`, `InboundData` (bytes) | `Transfer` to / from the device |
| `TensorToData` (ns) | `Transfer` to the device (the same time as `TransferToDeviceTime`) |
| `InputOutputAliasCount` (a metric: aliased buffers per compiled graph) | the first `Execute` of a compiled graph that donated buffers |
| `ExecuteReplicatedTime` | `Execute` of a graph compiled for several devices (`Partitioned`) |
| `CreateCompileHandles` (a counter: graphs compiled) | `Compile` |
| `xla::<op>` (a counter per ATen op an xla tensor ran) | each op capture recorded (`op_listener`) |
| `LazyTracing` (ns: the time each op took to record) | the same op, timed |
| `CreateXlaTensor`, `DestroyXlaTensor` (counters) | an xla tensor made (an op's output, a view, an upload: `torch.tensor(2077, device="xla")` is one) and one freed (`tensor_listener`) |

Subscribed by `xlanb.compat.install()`; torch_xla's other internal counters have no xlanb event. The
per-op ones cost a timer and a count per op, so they run only while compat is installed (capture's
dispatch calls `runtime_state().op_listener` then, and nothing otherwise). Factories with no xla
tensor argument (`torch.zeros(..., device="xla")`) do not pass there and are not counted as ops; the
tensor they make is counted (`CreateXlaTensor`: capture/tensor.py calls `tensor_listener` for every
tensor it makes, a weakref with a callback per tensor, while compat is installed).
"""

from __future__ import annotations

import weakref

from xlanb import events
from xlanb.capture import dispatch
from xlanb.metrics import _count, _sample
from xlanb.state import runtime_state

_rt = runtime_state()


def count_event(e: events.Event) -> None:
    with _rt.lock:
        if isinstance(e, events.Transfer):
            _sample("OutboundData" if e.direction == "to_device" else "InboundData", e.nbytes)
            if e.direction == "to_device":
                _sample("TensorToData", e.ns)
        elif isinstance(e, events.Compile):
            _count("CreateCompileHandles")
        elif isinstance(e, events.Partitioned):
            _rt.partitioned_keys.add(e.key)
        elif isinstance(e, events.Execute):
            if e.donated and not e.cached:
                _sample("InputOutputAliasCount", e.donated)
            if e.key in _rt.partitioned_keys:
                _sample("ExecuteReplicatedTime", e.ns)


def increment_counter(name: str, n: int = 1) -> None:
    """`_XLAC._xla_increment_counter`: adds to a counter (made when missing)."""
    with _rt.lock:
        _count(name, n)


_op_names: dict = {}        # OpOverload -> "xla::add": a pure memo of a name


def count_op(func, ns: int) -> None:
    """torch_xla's `xla::<op>` counter and `LazyTracing` metric for one recorded op. An in-place op
    counts as its functional op (`t += 2`: `xla::add`), as torch_xla's functionalized ops do."""
    name = _op_names.get(func)
    if name is None:
        base = func._schema.name.split("::")[-1]
        if func._schema.is_mutable and base.endswith("_") and not base.endswith("__"):
            base = base[:-1]
        name = _op_names[func] = f"xla::{base}"
    with _rt.lock:
        _count(name)
        _sample("LazyTracing", ns)


_alive: set = set()        # a weakref per counted tensor, whose callback counts it freed


def _freed(ref) -> None:
    """A counted tensor was freed (run by the garbage collector too: the metrics lock is reentrant)."""
    _alive.discard(ref)
    with _rt.lock:
        _count("DestroyXlaTensor")


def count_tensor(t) -> None:
    """torch_xla's `CreateXlaTensor` for each xla tensor made, and `DestroyXlaTensor` when it is freed."""
    _alive.add(weakref.ref(t, _freed))
    with _rt.lock:
        _count("CreateXlaTensor")


def install() -> None:
    _rt.subscribe(count_event)
    _rt.op_listener = count_op
    _rt.tensor_listener = count_tensor
    dispatch.use_dispatch()


def uninstall() -> None:
    _rt.unsubscribe(count_event)
    _rt.op_listener = None
    _rt.tensor_listener = None
    dispatch.use_dispatch()


def save_metrics() -> None:
    """`met.save_metrics`: torch_xla writes XLA_METRICS_FILE here; xlanb keeps metrics in memory only."""
