"""A Graph is the pending computation behind a set of root nodes, ready to compile.

The canonical key lists every node in post-order as (local key, operand positions).
Positions make aliasing part of the key: `x + x` and `x + y` are two graphs, while
`x + y` and `y + x` (different tensors, same program) are one. Keys compare exactly,
so a hash collision can never pick the wrong executable.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

from xlanb.ir.node import Node, Scalar


@dataclasses.dataclass
class Graph:
    name: str
    order: list[Node]           # post-order; inputs included
    inputs: list[Node]          # computed nodes whose buffers feed the graph
    scalars: list[Scalar]       # lifted Python numbers, in walk order
    roots: list[Node]           # the outputs, in the order given
    key: tuple                  # exact cache key (see module docstring)
    donate: tuple[int, ...] = ()    # input positions whose buffers the outputs may reuse

    @property
    def compute_nodes(self) -> int:
        return len(self.order) - len(self.inputs)

    def digest(self) -> str:
        """A short, stable-in-process id for reports (not used for lookups)."""
        return hashlib.blake2b(repr(hash(self.key)).encode(), digest_size=8).hexdigest()

    def with_donation(self, donate: tuple[int, ...]) -> "Graph":
        g = dataclasses.replace(self, donate=donate)
        g.key = (self.key, donate)
        return g


def build_graph(roots: list[Node], name: str) -> Graph:
    """Post-order walk from the roots; computed nodes become inputs."""
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
            if n.buf is not None:
                stack.pop()
                index[n] = len(order)
                order.append(n)
                inputs.append(n)
                entries.append(n.meta)
                continue
            pushed = False
            for i in reversed(n.ins):     # reversed: operands come out in argument order
                if type(i) is Node and i not in index:
                    stack.append(i)
                    pushed = True
            if pushed:
                continue
            stack.pop()
            positions = []
            for i in n.ins:
                if type(i) is Node:
                    positions.append(index[i])
                else:
                    scalars.append(i)
            index[n] = len(order)
            order.append(n)
            entries.append((n.lk, tuple(positions)))
    key = (tuple(entries), tuple(index[r] for r in roots))
    return Graph(name=name, order=order, inputs=inputs, scalars=scalars, roots=list(roots), key=key)


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

    def text(self) -> str:
        if self.is_input:
            body = f"{self.type} xlanb::device_data()"
        else:
            body = f"{self.type} {self.op}({', '.join(f'%{i}' for i in self.operands)})"
            if self.attrs:
                body += ", " + self.attrs
        if self.location:
            body += f", location={self.location}"
        return f"%{self.index} = {body}" + "".join(f", ROOT={r}" for r in self.roots)


def graph_lines(graph: Graph) -> tuple[IrLine, ...]:
    index = {n: i for i, n in enumerate(graph.order)}
    roots: dict = {}
    for r_i, r in enumerate(graph.roots):
        roots.setdefault(r, []).append(r_i)
    lines = []
    for i, n in enumerate(graph.order):
        location = f"{os.path.basename(n.loc[0])}:{n.loc[1]}" if n.loc else ""
        if n.buf is not None:
            lines.append(IrLine(i, "xlanb::device_data", _type_text(n.meta), (), "", location,
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
        lines.append(IrLine(i, _op_text(n.name), _type_text(n.meta), tuple(operands), ", ".join(attrs),
                            location, tuple(roots.get(n, ()))))
    return tuple(lines)


def lines_text(lines) -> str:
    return "\n".join(["IR {"] + [f"  {line.text()}" for line in lines] + ["}"])


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


def _type_text(meta) -> str:
    if isinstance(meta, tuple):
        return "(" + ", ".join(m.text if m is not None else "none" for m in meta) + ")"
    return meta.text


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
