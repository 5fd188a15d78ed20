"""A Graph is the pending computation behind a set of root nodes, ready to compile.

Its CacheKey is a small frozen record of named ingredients, used both by the LRU lookup
and by the recompile explainer (runtime/explain.py), so every miss can name what changed:
  entries  every node in post-order: an input's Meta, or an op's (local key, operand
           positions). Positions make aliasing part of the key: `x + x` and `x + y` are
           two graphs, while `x + y` and `y + x` (different tensors, same program) are one.
  roots    the post-order positions of the outputs
  scalars  the kinds (float, int) of the lifted Python numbers, one per distinct value: uses of
           equal numbers (a literal in a loop, one learning rate for every parameter) share
           one slot, so a 1000-op chain of `x * 1.0001 + 0.5` passes 2 numbers, not 1000
           (torch_xla shares equal scalars' device data the same way)
  scalar_uses  the slot of each use, in walk order: which uses share is part of the program, so
           two numbers that become equal (or stop being equal) compile once more
  donate   input positions whose buffers the outputs may reuse
  recycled  the metas of buffers passed after the inputs that the graph does not read, donated so
           that outputs of the same shape and dtype are written into them (a replayed step hands
           its previous gradients back: runtime/executor.py)
  shardings  one ShardingKey per input (ir/sharding.py), empty when every input is on one device
  matmul_precision  torch.get_float32_matmul_precision() when the graph was built: the lowering gives
           float32 dots and convolutions the XLA precision it maps to (ir/precision.py)
  nan_check  debug_nans was on when it ran: the executable also returns one flag, any float output
           is NaN, and donates nothing (runtime/nans.py)
  compile_effort  the compile_effort setting when the graph was built: how hard XLA optimizes it
           (the same program, another executable: runtime/stages.py)
  platform  the JAX backend configured when the graph was built ("" for JAX's default): an
           executable compiled for one backend never runs on another
Keys compare exactly, so a hash collision can never pick the wrong executable.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import NamedTuple

from xlanb.events import IrLine, lines_text
from xlanb.ir.node import Node, Scalar, meta_text
from xlanb.ir.precision import DEFAULT
from xlanb.ir.sharding import input_shardings


@dataclasses.dataclass(frozen=True)
class CacheKey:
    entries: tuple
    roots: tuple[int, ...]
    scalars: tuple[type, ...]
    scalar_uses: tuple[int, ...] = ()
    donate: tuple[int, ...] = ()
    shardings: tuple = ()
    recycled: tuple = ()
    matmul_precision: str = DEFAULT
    nan_check: bool = False
    compile_effort: str = "default"
    platform: str = ""

    def __hash__(self) -> int:
        """Hashed once: a key is looked up at every sync and replayed call, and hashing its entries
        walks every node (a dataclass's own __hash__ would, each time)."""
        h = self.__dict__.get("_hash")
        if h is None:      # every field (tests/runtime/test_graph_cache.py checks the list)
            h = hash((self.entries, self.roots, self.scalars, self.scalar_uses, self.donate, self.shardings,
                      self.recycled, self.matmul_precision, self.nan_check, self.compile_effort, self.platform))
            object.__setattr__(self, "_hash", h)
        return h

    def digest(self) -> str:
        """A short id for reports (stable within a process; never used for lookups)."""
        return hashlib.blake2b(repr(hash(self)).encode(), digest_size=8).hexdigest()


@dataclasses.dataclass
class Graph:
    name: str
    order: list[Node]           # post-order; inputs included
    inputs: list[Node]          # computed nodes whose buffers feed the graph
    scalars: list[Scalar]       # lifted Python numbers, one per slot (first use), in walk order
    roots: list[Node]           # the outputs, in the order given
    key: CacheKey
    scalar_slot: dict = dataclasses.field(default_factory=dict)   # id(Scalar) of each use -> its slot

    @property
    def compute_nodes(self) -> int:
        return len(self.order) - len(self.inputs)

    @property
    def donate(self) -> tuple[int, ...]:
        return self.key.donate

    def digest(self) -> str:
        return self.key.digest()

    def with_recycling(self, metas: tuple) -> "Graph":
        return dataclasses.replace(self, key=dataclasses.replace(self.key, recycled=tuple(metas)))

    def checking_nans(self) -> "Graph":
        """The graph as debug_nans runs it: one more output (any float output is NaN), nothing donated."""
        return dataclasses.replace(self, key=dataclasses.replace(self.key, nan_check=True, donate=()))


class Settings(NamedTuple):
    """What a graph is built under besides its nodes, read by the runtime when a graph is made
    (runtime/executor.py's new_graph, at every sync and eager op: a tuple is cheap to make) and
    passed in: the IR reads no configuration itself."""
    matmul_precision: str = DEFAULT
    compile_effort: str = "default"
    platform: str = ""
    nan_check: bool = False      # debug_nans: the checked executable (runtime/nans.py), which donates nothing


def build_graph(roots: list[Node], name: str, settings: Settings = Settings(), donatable=None) -> Graph:
    """Post-order walk from the roots; computed nodes become inputs. `donatable(node)` says which
    inputs' buffers the outputs may reuse (nothing is donated without it)."""
    index: dict[Node, int] = {}
    order: list[Node] = []
    inputs: list[Node] = []
    scalars: list[Scalar] = []
    entries: list = []
    for root in roots:
        if root in index:
            continue
        stack = [root]
        while stack:
            n = stack[-1]
            if n in index:
                stack.pop()
                continue
            if n.buffer is not None:
                stack.pop()
                index[n] = len(order)
                order.append(n)
                inputs.append(n)
                entries.append(n.meta)
                continue
            pushed = False
            for i in reversed(n.operands):     # reversed: operands come out in argument order
                if type(i) is Node and i not in index:
                    stack.append(i)
                    pushed = True
            if pushed:
                continue
            stack.pop()
            positions = []
            for i in n.operands:
                if type(i) is Node:
                    positions.append(index[i])
                else:
                    scalars.append(i)
            index[n] = len(order)
            order.append(n)
            entries.append((n.local_key, tuple(positions)))
    distinct, slot_of_value, scalar_slot, uses = [], {}, {}, []
    for s in scalars:
        v = s.value
        same = (type(v), v) if v == v and v != 0 else (type(v), repr(v))    # NaN, and -0.0 vs 0.0
        if type(v) is not float and type(v) is not int:     # a flag (an int subclass) never shares
            same = id(s)
        slot = slot_of_value.get(same)
        if slot is None:
            slot = slot_of_value[same] = len(distinct)
            distinct.append(s)
        scalar_slot[id(s)] = slot
        uses.append(slot)
    donate = (tuple(i for i, n in enumerate(inputs) if donatable(n))
              if donatable is not None and inputs and not settings.nan_check else ())
    key = CacheKey(tuple(entries), tuple(index[r] for r in roots), tuple(type(s.value) for s in distinct), tuple(uses),
                   donate=donate, shardings=input_shardings(inputs), matmul_precision=settings.matmul_precision,
                   nan_check=settings.nan_check, compile_effort=settings.compile_effort, platform=settings.platform)
    return Graph(name=name, order=order, inputs=inputs, scalars=distinct, roots=list(roots), key=key,
                 scalar_slot=scalar_slot)


def graph_lines(graph: Graph) -> tuple[IrLine, ...]:
    index = {n: i for i, n in enumerate(graph.order)}
    roots: dict = {}
    for r_i, r in enumerate(graph.roots):
        roots.setdefault(r, []).append(r_i)
    lines = []
    for i, n in enumerate(graph.order):
        location = location_text(n.location)
        if n.buffer is not None:
            lines.append(IrLine(i, "xlanb::device_data", meta_text(n.meta), (), "", location,
                                tuple(roots.get(n, ())), True))
            continue
        operands, attrs = [], []
        names = _arg_names(n.op)
        for position, a in enumerate(n.args):
            before = len(attrs)
            _format_arg(a, index, operands, attrs)
            if len(attrs) == before + 1 and position < len(names) and not attrs[-1].startswith("scalar="):
                attrs[-1] = f"{names[position]}={attrs[-1]}"
        for k, v in (n.kwargs or {}).items():
            sub_ops: list = []
            sub_attrs: list = []
            _format_arg(v, index, sub_ops, sub_attrs)
            operands.extend(sub_ops)
            if not sub_ops:
                attrs.append(f"{k}={sub_attrs[0] if sub_attrs else v!r}")
        lines.append(IrLine(i, _op_text(n.name), meta_text(n.meta), tuple(operands), ", ".join(attrs),
                            location, tuple(roots.get(n, ())), scope=n.scope))
    return tuple(lines)


def location_text(location) -> str:
    """(filename, line) -> `"file.py:12"` ("" when unknown)."""
    return f"{os.path.basename(location[0])}:{location[1]}" if location else ""


def graph_text(graph: Graph) -> str:
    """torch_xla-like IR text: one node a line, `%i = type op(operands), attrs`."""
    return lines_text(graph_lines(graph))


def _arg_names(op) -> list[str]:
    """Positional argument names from the ATen schema (for `dim=1` instead of `1`)."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return []
    return [a.name for a in schema.arguments if not a.kwarg_only]


def _op_text(name: str) -> str:
    """`aten.add.Tensor` -> `aten::add.Tensor` (torch_xla prints aten::add)."""
    ns, _, rest = name.partition(".")
    return f"{ns}::{rest}" if rest else name


def _format_arg(a, index, operands, attrs) -> None:
    t = type(a)
    if t is Node:
        operands.append(index.get(a, -1))
    elif t is Scalar:
        attrs.append(f"scalar={a.value!r}")
    elif (t is tuple or t is list) and any(type(x) in (Node, Scalar) for x in a):
        for x in a:
            _format_arg(x, index, operands, attrs)
    else:
        attrs.append(repr(a))
