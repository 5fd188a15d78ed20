"""The hook API: what an integration (the notebook extension, a profiler, a test) may use.

    from xlanb import hooks
    mark = hooks.mark()                      # a cell starts
    hooks.subscribe(listener)                # every event, as it happens (graph executed: Execute)
    ...
    snapshot = hooks.snapshot_pending(ns)    # a cell ends: the pending IR, as an event
    events = hooks.since(mark)               # what the cell did, as plain events
    hooks.status()                           # {"mode", "pending_nodes", "cache_size"}

Modes are the public `xlanb.eager_mode` / `xlanb.compile`, and `compare` is `xlanb.compare` (the
magics are sugar for them). Nothing here hands out internal objects: events are plain data
(xlanb.events) and status is a dict.
"""

from __future__ import annotations

from xlanb.capture.compare import compare
from xlanb.capture.frames import user_frames
from xlanb.capture.detector import GraphLimitError
from xlanb.capture.modes import UnexpectedExecution, compile, eager_mode, eager_mode_context, is_eager_mode
from xlanb.capture.realize import pending_node_count, pending_snapshot
from xlanb.capture.scopes import recording_modules
from xlanb.state import runtime_state

__all__ = ["mark", "since", "subscribe", "unsubscribe", "snapshot_pending", "pending_signature", "status",
           "recording_texts", "recording_locations", "recording_modules", "set_location_namer", "user_frames", "compile",
           "compare", "eager_mode", "eager_mode_context", "is_eager_mode", "UnexpectedExecution",
           "GraphLimitError"]

_rt = runtime_state()


def mark() -> int:
    """A position in the event log; `since(mark)` returns what came after it."""
    return _rt.log.mark()


def since(position: int) -> list:
    return _rt.log.since(position)


def subscribe(listener) -> None:
    """`listener(event)` for every event, on the thread that emitted it (keep it quick)."""
    _rt.subscribe(listener)


def unsubscribe(listener) -> None:
    _rt.unsubscribe(listener)


def snapshot_pending(namespace=None):
    """The pending IR of all live tensors and the names in `namespace` holding it: an
    events.PendingSnapshot, also emitted to the log (None when nothing is pending)."""
    return pending_snapshot(namespace)


def pending_signature() -> tuple:
    """A cheap value that changes whenever new pending work is recorded (or a sync clears it)."""
    pending = _rt.pending
    return (len(pending), id(pending[-1]) if pending else None)


def status() -> dict:
    """{"mode": "eager"|"lazy", "pending_nodes": n, "cache_size": n}: what a status bar shows."""
    return {**_rt.status(), "pending_nodes": pending_node_count()}


def recording_texts():
    """Context manager: Compile events carry StableHLO, optimized HLO and XLA's analyses."""
    return _rt.recording_texts()


def recording_locations():
    """Context manager: every op recorded remembers the user's source line."""
    return _rt.recording_locations()


def set_location_namer(namer) -> None:
    """`namer("1234.py:3") -> "In [6] line 3"`: how explanations name source lines (None: as is)."""
    _rt.location_namer = namer
