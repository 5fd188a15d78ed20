"""Structured events: the runtime's only output besides results.

Every trace, compile, execution, transfer, fallback and sync appends one event to the
log. Metrics (xlanb.metrics) and cell reports (xlanb.report) are pure readers of it.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import threading
import time
from typing import Callable

_seq = itertools.count(1)


@dataclasses.dataclass(frozen=True)
class Frame:
    """One user Python frame: where a compile or forced execution came from."""
    filename: str
    lineno: int
    function: str
    line: str = ""

    def __str__(self) -> str:
        return f"{self.function} ({self.filename}:{self.lineno})"


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    shape: tuple
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


@dataclasses.dataclass(frozen=True)
class Event:
    seq: int = dataclasses.field(default_factory=lambda: next(_seq), kw_only=True)
    wall: float = dataclasses.field(default_factory=time.time, kw_only=True)


@dataclasses.dataclass(frozen=True)
class Compile(Event):
    """A cache miss: the graph was lowered to StableHLO and compiled."""
    name: str
    key: str
    eager: bool
    nodes: int
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    scalars: int
    lower_ns: int
    compile_ns: int
    persistent_hit: bool
    cause: str
    frames: tuple[Frame, ...] = ()
    fallback_ops: tuple[str, ...] = ()
    recompile: object = None          # ir.explain.Explanation, or None for a first compile
    stages: object = None             # runtime.stages.Compiled, for HLO text and analyses
    ir: tuple = ()                    # ir.graph.IrLine per node: the graph as plain data


@dataclasses.dataclass(frozen=True)
class Execute(Event):
    """One launch of a compiled graph (asynchronous: ns is the launch time)."""
    name: str
    key: str
    eager: bool
    ns: int
    cached: bool                      # the executable came from the in-memory cache
    donated: int = 0


@dataclasses.dataclass(frozen=True)
class Transfer(Event):
    direction: str                    # "to_device" | "from_device"
    nbytes: int
    ns: int


@dataclasses.dataclass(frozen=True)
class Fallback(Event):
    """An op with no lowering ran on torch CPU (counted as aten::<op>)."""
    op: str
    reason: str = "no lowering"


@dataclasses.dataclass(frozen=True)
class Sync(Event):
    """A sync point: `mark_step` (xlanb.sync), `value` (a forced execution), or `eager`."""
    kind: str
    name: str
    roots: int
    cause: str = ""
    frames: tuple[Frame, ...] = ()


@dataclasses.dataclass(frozen=True)
class GraphCut(Event):
    """A data-dependent op (nonzero, masked_select, ...) materialised its inputs."""
    op: str
    frames: tuple[Frame, ...] = ()


@dataclasses.dataclass(frozen=True)
class DeferredError(Event):
    """An error raised inside the autograd engine, kept until the next sync."""
    message: str


class EventLog:
    """An append-only, bounded log with synchronous listeners."""

    def __init__(self, maxlen: int = 100_000):
        self._events: collections.deque[Event] = collections.deque(maxlen=maxlen)
        self._listeners: list[Callable[[Event], None]] = []
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)
        for listener in self._listeners:
            listener(event)

    def subscribe(self, listener: Callable[[Event], None]) -> None:
        if listener not in self._listeners:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[Event], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def mark(self) -> int:
        """A position to read from later with `since`."""
        return next(_seq)

    def since(self, mark: int) -> list[Event]:
        with self._lock:
            return [e for e in self._events if e.seq > mark]

    def all(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    def clear(self) -> None:
        with self._lock:
            self._events.clear()


log = EventLog()
emit = log.emit
