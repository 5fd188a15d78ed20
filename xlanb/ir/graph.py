"""A Graph is the pending computation behind a set of root nodes, ready to compile.

The canonical key lists every node in post-order as (local key, operand positions).
Positions make aliasing part of the key: `x + x` and `x + y` are two graphs, while
`x + y` and `y + x` (different tensors, same program) are one. Keys compare exactly,
so a hash collision can never pick the wrong executable.
"""

from __future__ import annotations

import dataclasses
import hashlib

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
            for i in n.ins:
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


def graph_text(graph: Graph) -> str:
    """torch_xla-like IR text: one node a line, `%i = type op(operands), attrs`."""
    index = {n: i for i, n in enumerate(graph.order)}
    roots = {}
    for r_i, r in enumerate(graph.roots):
        roots.setdefault(r, []).append(r_i)
    lines = ["IR {"]
    for i, n in enumerate(graph.order):
        lines.append(f"  %{i} = {node_text(n, index)}" + "".join(f", ROOT={r}" for r in roots.get(n, ())))
    lines.append("}")
    return "\n".join(lines)


def node_text(n: Node, index: dict) -> str:
    typ = _type_text(n.meta)
    if n.buf is not None:
        return f"{typ} xlanb::device_data()"
    operands, attrs = [], []
    for a in n.args:
        _format_arg(a, index, operands, attrs)
    for k, v in (n.kwargs or {}).items():
        sub_ops: list = []
        sub_attrs: list = []
        _format_arg(v, index, sub_ops, sub_attrs)
        if sub_ops:
            operands.extend(sub_ops)
        else:
            attrs.append(f"{k}={sub_attrs[0] if sub_attrs else v!r}")
    text = f"{typ} {n.name}({', '.join(operands)})"
    if attrs:
        text += ", " + ", ".join(attrs)
    if n.loc is not None:
        text += f", location={n.loc}"
    return text


def _type_text(meta) -> str:
    if isinstance(meta, tuple):
        return "(" + ", ".join(m.text if m is not None else "none" for m in meta) + ")"
    return meta.text


def _format_arg(a, index, operands, attrs) -> None:
    t = type(a)
    if t is Node:
        operands.append(f"%{index[a]}" if a in index else "%?")
    elif t is Scalar:
        operands.append(f"scalar({a.value!r})")
    elif (t is tuple or t is list) and any(type(x) in (Node, Scalar) for x in a):
        for x in a:
            _format_arg(x, index, operands, attrs)
    else:
        attrs.append(repr(a))
