"""torch_xla's metric names that xlanb's events also answer, kept beside xlanb.metrics' own (in the
same tables, so `met.metric_data`, the reports and `met.clear_all` see them):

| torch_xla | xlanb event |
|---|---|
| `OutboundData`, `InboundData` (bytes) | `Transfer` to / from the device |
| `TensorToData` (ns) | `Transfer` to the device (the same time as `TransferToDeviceTime`) |
| `InputOutputAliasCount` (a metric: aliased buffers per compiled graph) | the first `Execute` of a compiled graph that donated buffers |
| `ExecuteReplicatedTime` | `Execute` of a graph compiled for several devices (`Partitioned`) |

Subscribed by `xlanb.compat.install()`; torch_xla's other internal counters have no xlanb event.
"""

from __future__ import annotations

from xlanb import events
from xlanb.metrics import _count, _sample
from xlanb.state import runtime_state

_rt = runtime_state()


def count_event(e: events.Event) -> None:
    with _rt.lock:
        if isinstance(e, events.Transfer):
            _sample("OutboundData" if e.direction == "to_device" else "InboundData", e.nbytes)
            if e.direction == "to_device":
                _sample("TensorToData", e.ns)
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


def install() -> None:
    _rt.subscribe(count_event)


def uninstall() -> None:
    _rt.unsubscribe(count_event)


def save_metrics() -> None:
    """`met.save_metrics`: torch_xla writes XLA_METRICS_FILE here; xlanb keeps metrics in memory only."""
