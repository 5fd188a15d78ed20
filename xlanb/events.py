"""Structured events: the runtime's only output besides results.

Every compile, execution, transfer, fallback and sync appends one event to the log
(`xlanb.runtime_state().log`). Metrics (xlanb.metrics) and cell reports (xlanb.report) are
pure readers of it. Events are plain, immutable data: numbers, strings, and tuples and frozen
dataclasses of those, all defined here. They never hold executables, nodes or buffers, so a
long log keeps no device or compiler memory alive.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import os
import sys
import threading
import time
from typing import Callable

_seq = itertools.count(1)          # event ids: increasing for the whole process, never reset
_PACKAGE_DIRS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


@functools.lru_cache(maxsize=4096)
def in_package(filename: str) -> bool:
    """The file belongs to an installed package (jax, IPython, ...), not to the user's code: under a
    site-packages or dist-packages folder, or in a folder on sys.path that pip installed into (a
    `*.dist-info` beside it: `pip install --target DIR` on PYTHONPATH, as on a machine without a network)."""
    if any(d in filename for d in _PACKAGE_DIRS):
        return True
    return any(_installed_into(entry) for entry in sys.path if entry and filename.startswith(os.path.join(entry, "")))


@functools.lru_cache(maxsize=64)
def _installed_into(folder: str) -> bool:
    try:
        return any(name.endswith(".dist-info") for name in os.listdir(folder))
    except OSError:
        return False


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


def counter_name(name: str) -> str:
    """`aten.nonzero.default` or `aten::nonzero.default` -> `aten::nonzero` (torch_xla's counter name)."""
    if "::" in name:
        ns, _, rest = name.partition("::")
        return f"{ns}::{rest.split('.')[0]}"
    parts = name.split(".")
    return f"{parts[0]}::{parts[1]}" if len(parts) >= 2 else name


@dataclasses.dataclass(frozen=True)
class IrLine:
    """One node of a graph as plain data (no references to nodes or buffers)."""
    index: int
    op: str
    type: str
    operands: tuple[int, ...]
    attrs: str
    location: str = ""
    roots: tuple[int, ...] = ()
    is_input: bool = False
    scope: str | None = None          # the nn.Module path ("" the outermost module), when recorded

    def text(self) -> str:
        if self.is_input:
            body = f"{self.type} xlanb::device_data()"
        else:
            body = f"{self.type} {self.op}({', '.join(f'%{i}' for i in self.operands)})"
            if self.attrs:
                body += ", " + self.attrs
        if self.location:
            body += f", location={self.location}"
        if self.scope is not None and not self.is_input:
            body += f", module={self.scope or '<top>'}"
        return f"%{self.index} = {body}" + "".join(f", ROOT={r}" for r in self.roots)


def lines_text(lines) -> str:
    """torch_xla-like IR text: one node a line, `%i = type op(operands), attrs`."""
    return "\n".join(["IR {"] + [f"  {line.text()}" for line in lines] + ["}"])


@dataclasses.dataclass(frozen=True)
class Change:
    """One ingredient of a graph's cache key that differs from the graph compared with."""
    kind: str              # "input", "inputs", "op", "operands", "constant", "shape", "scalar", "scalars",
                           # "outputs", "donation", "sharding", "shardings", "precision", "effort", "platform", "evicted", "cleared",
                           # "growth" (a hint)
    index: int
    before: str
    after: str
    location: str = ""     # "file.py:12" of the op, when known

    def __str__(self) -> str:
        where = f" ({self.location})" if self.location else ""
        if self.kind == "input":
            return f"input {self.index}: {self.before} -> {self.after}"
        if self.kind == "op":
            return f"op {self.index}: {self.before} -> {self.after}{where}"
        if self.kind == "operands":
            return f"op {self.index} operands: {self.before} -> {self.after}{where}"
        if self.kind == "constant":
            return f"constant in op {self.index}: {self.before} -> {self.after}{where}"
        if self.kind == "shape":
            return f"op {self.index} output: {self.before} -> {self.after}{where}"
        if self.kind == "scalar":
            return f"scalar {self.index}: {self.before} -> {self.after}"
        if self.kind == "sharding":
            return f"input {self.index} sharding: {self.before} -> {self.after}"
        if self.kind == "shardings":
            return f"and the sharding of {self.after}"
        if self.kind == "donation":
            return f"donation changed: {self.before} -> {self.after}"
        if self.kind == "precision":
            return f"matmul precision {self.before!r} -> {self.after!r} (torch.set_float32_matmul_precision)"
        if self.kind == "effort":
            return f"compile effort {self.before!r} -> {self.after!r} (xlanb's compile_effort setting)"
        if self.kind == "platform":
            return f"platform {self.before} -> {self.after} (xlanb's platform setting: an executable runs on its own backend)"
        if self.kind == "evicted":
            return f"the same graph was evicted from the cache ({self.after})"
        if self.kind == "growth":      # location holds the dim that grows
            return (f"a dimension grows by 1 each call: input {self.index} dim {self.location}, {self.before} -> "
                    f"{self.after}, so every length compiles its own graph; give it a fixed size (a "
                    f"preallocated buffer; for HF generate(), cache_implementation=\"static\")")
        if self.kind == "cleared":
            return f"the same graph compiled before; {self.after}"
        return f"{self.kind}: {self.before} -> {self.after}"


@dataclasses.dataclass(frozen=True)
class Recompile:
    """Why a graph compiled again: its key against the nearest earlier key of the same name."""
    name: str
    against: str                     # digest of the earlier graph compared with
    changes: tuple[Change, ...]
    where: str = ""                  # "file.py:12": the user's line that made the graph run

    def text(self, name_location=None) -> str:
        """One line; `name_location("f.py:3") -> "In [2] line 3"` names notebook cells."""
        changes, where = self.changes, self.where
        if name_location is not None:
            changes = tuple(dataclasses.replace(c, location=name_location(c.location)) if c.location else c
                            for c in changes)
            where = name_location(where) if where else where
        head = f"{self.name}: recompiled" + (f" at {where}" if where else "")
        if len(changes) == 1 and changes[0].kind in ("evicted", "cleared"):
            return f"{head}: {changes[0]} (graph {self.against})"
        return f"{head}; vs graph {self.against}: " + "; ".join(map(str, changes))


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
    recompile: Recompile | None = None    # None for the first compile of a name
    ir: tuple[IrLine, ...] = ()           # the graph as plain data
    # kept while the runtime is asked for them (runtime_state().recording_texts()); else empty
    stablehlo: str = ""
    optimized: str = ""
    cost: tuple[tuple[str, float], ...] = ()       # XLA's cost analysis, (name, value) pairs
    memory: tuple[tuple[str, int], ...] = ()       # XLA's memory analysis, (name, bytes) pairs
    # XLA's cost analysis of each fusion: (name, flops, transcendentals, bytes accessed)
    fusion_costs: tuple[tuple[str, float, float, float], ...] = ()
    matmul_precision: str = "highest"     # torch's float32 matmul precision the graph was lowered at
    compile_effort: str = "default"       # how hard XLA optimized it (the compile_effort setting)


@dataclasses.dataclass(frozen=True)
class CompileStart(Event):
    """A cache miss: lowering and compiling starts now (a Compile event follows, or an error)."""
    name: str
    eager: bool
    nodes: int


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
    """A sync point: `mark_step` (xlanb.sync), `value` (a forced execution), or `violation` (an
    execution forced inside a full_graph compiled function, which raised instead)."""
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
class PendingTensor:
    name: str
    type: str
    root: int                         # which root of the pending graph the variable holds


@dataclasses.dataclass(frozen=True)
class PendingSnapshot(Event):
    """The pending IR of all live tensors at one moment, and the named variables that hold it."""
    ir: tuple[IrLine, ...]
    roots: int
    tensors: tuple[PendingTensor, ...] = ()


@dataclasses.dataclass(frozen=True)
class DeferredError(Event):
    """An error raised inside the autograd engine, kept until the next sync."""
    message: str


@dataclasses.dataclass(frozen=True)
class DynamoGraph(Event):
    """torch.compile(backend="xlanb") handed over one FX graph (xlanb/dynamo). `path` is "macro"
    (lowered once, each call records one lazy node) or "replay" (run op by op on the lazy path;
    `reason` says why)."""
    name: str
    kind: str                         # "forward" | "backward" | "inference"
    path: str
    ops: int
    inputs: int
    reason: str = ""
    location: str = ""                # the user line of the graph's first op, as dynamo recorded it
    ns: int = 0                       # time to lower it into a Program
    fallback_ops: tuple[str, ...] = ()   # its ops with no lowering (torch CPU inside the executable)


@dataclasses.dataclass(frozen=True)
class DynamoBreak(Event):
    """dynamo split a compiled function (`kind` "graph_break", with the user line) or captured a
    frame again because a guard failed (`kind` "recompile", with the failed guard)."""
    kind: str
    reason: str
    location: str = ""


# SPMD and the device loader (xlanb/spmd, xlanb/loader.py) -----------------------------

@dataclasses.dataclass(frozen=True)
class Tile:
    """One block of an array and the devices holding it: rows [r0, r1) x columns [c0, c1) of the
    array seen as 2-D (leading dimensions folded into rows)."""
    r0: int
    r1: int
    c0: int
    c1: int
    devices: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class ShardingInfo:
    """A graph input's or output's sharding after propagation, with its tile map."""
    index: int
    type: str                         # "f32[8,4]"
    text: str                         # "('data', None) on mesh data=8", "replicated on mesh data=8"
    hlo: str                          # XLA's HloSharding text
    rows: int                         # the 2-D view the tiles are drawn on: sizes of dimensions `dims`
    cols: int
    dims: tuple[int, ...] = ()        # the (row, column) dimensions drawn; () for a 0-d array
    tiles: tuple[Tile, ...] = ()


@dataclasses.dataclass(frozen=True)
class Collective:
    """A collective the SPMD partitioner inserted, read from the optimized HLO."""
    op: str                           # "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"
    type: str                         # its result type, "f32[4,8]"
    nbytes: int
    groups: str                       # replica groups (or source-target pairs) as XLA writes them
    line: str                         # the HLO instruction, trimmed


@dataclasses.dataclass(frozen=True)
class Partitioned(Event):
    """A graph compiled for several devices: shardings after propagation, collectives, memory per device."""
    name: str
    key: str
    devices: int
    mesh: str                         # "mesh data=2 model=4" ("" when the graph names no mesh)
    inputs: tuple[ShardingInfo, ...]
    outputs: tuple[ShardingInfo, ...]
    collectives: tuple[Collective, ...] = ()
    memory: tuple[tuple[str, int], ...] = ()     # per device, XLA's memory analysis


@dataclasses.dataclass(frozen=True)
class BatchUpload(Event):
    """xlanb.DeviceLoader issued the (asynchronous) upload of batch `index`."""
    index: int
    nbytes: int
    sharded: bool


@dataclasses.dataclass(frozen=True)
class LoaderWait(Event):
    """The host waited `ns` for batch `index` from the wrapped data loader (and its upload)."""
    index: int
    ns: int


@dataclasses.dataclass(frozen=True)
class Replay(Event):
    """A call of `xlanb.compile(fn, replay=True)` replayed: guards checked, the cached executable
    launched on the current buffers, outputs rebound; `ns` is the whole call's host time."""
    name: str
    key: str
    ns: int
    donated: int = 0


@dataclasses.dataclass(frozen=True)
class ReplayMiss(Event):
    """A replayed function's guard failed (or its retrace check found the body changed): the call
    was traced instead; `reason` says which guard, with the old and new value."""
    name: str
    reason: str


@dataclasses.dataclass(frozen=True)
class NotReplayable(Event):
    """A replayed function's traced calls cannot become a plan (said once per reason)."""
    name: str
    reason: str


@dataclasses.dataclass(frozen=True)
class CompareRow:
    """One op of an `xlanb.compare()` region, its xla outputs against its CPU twin's.

    `status`: "ok" (within tolerance), "introduced" (its inputs agreed, its outputs differ: the
    divergence starts here) or "inherited" (an input already differed). `location` is the user's
    "file.py:LINE" ("" when unknown), `module` the dotted path of the module whose forward ran it."""
    index: int              # program order within the region
    op: str                 # str(OpOverload): "aten.gelu.default", "mylib.myop.default"
    location: str
    module: str
    phase: str              # "forward" | "backward"
    status: str
    max_abs: float
    max_rel: float
    shape: tuple = ()       # the first output's shape
    dtype: str = ""         # the first output's dtype, "float32"


@dataclasses.dataclass(frozen=True)
class Compared(Event):
    """An `xlanb.compare()` region ended: every op compared with its CPU twin, in program order.
    `first` indexes `rows` (the first divergence) or is None; `skipped` ops were not compared
    (random ops, ops the CPU cannot run: their twins took the xla values); `hint` names a likely
    cause (a matmul or convolution under reduced precision), or is ""."""
    rows: tuple[CompareRow, ...]
    first: int | None
    rtol: float | None
    atol: float | None
    skipped: int = 0
    precision: str = "highest"      # torch.get_float32_matmul_precision() in force
    hint: str = ""
    widened: str = ""               # where the platform widens torch's defaults, in words ("" for none)


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

