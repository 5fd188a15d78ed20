"""Why did it recompile? A compile is compared with the nearest earlier graph of its name.

The key of a graph is a list of ingredients (input shapes and dtypes, the ops in
post-order with their constants and output shapes); a recompile is explained by naming
the ingredients that differ, with the user's source line where capture recorded one.
"""

from __future__ import annotations

import collections
import dataclasses
import os

from xlanb.ir.graph import Graph
from xlanb.ir.node import NODE

HISTORY = 8     # earlier graphs kept per name


@dataclasses.dataclass(frozen=True)
class Change:
    kind: str              # "input", "inputs", "op", "constant", "shape", "scalars", "outputs"
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
        if self.kind == "constant":
            return f"constant in op {self.index}: {self.before} -> {self.after}{where}"
        if self.kind == "shape":
            return f"op {self.index} output: {self.before} -> {self.after}{where}"
        return f"{self.kind}: {self.before} -> {self.after}"


@dataclasses.dataclass(frozen=True)
class Explanation:
    name: str
    against: str                     # digest of the earlier graph compared with
    changes: tuple[Change, ...]

    def text(self) -> str:
        if not self.changes:
            return f"{self.name}: same ops and shapes as graph {self.against} (it was evicted from the cache)"
        return f"{self.name}: recompiled; vs graph {self.against}: " + "; ".join(map(str, self.changes))

    def to_json(self) -> dict:
        return {"name": self.name, "against": self.against,
                "changes": [dataclasses.asdict(c) for c in self.changes], "text": self.text()}


@dataclasses.dataclass(frozen=True)
class Summary:
    digest: str
    inputs: tuple[str, ...]
    ops: tuple[tuple, ...]          # (name, output type, constants, location)
    scalars: int
    outputs: int


def _location(loc) -> str:
    return f"{os.path.basename(loc[0])}:{loc[1]}" if loc else ""


def _type(meta) -> str:
    if isinstance(meta, tuple):
        return "(" + ", ".join(m.text for m in meta if m is not None) + ")"
    return meta.text


def _constants(lk) -> str:
    def show(x):
        if x is NODE:
            return "%"
        if isinstance(x, type):
            return f"<{x.__name__}>"
        if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], type):
            return repr(x[1])
        if isinstance(x, tuple):
            return "(" + ", ".join(show(y) for y in x) + ")"
        return repr(x)
    args = show(lk[1])
    return args if lk[2] is None else f"{args} {show(lk[2])}"


def summarize(graph: Graph) -> Summary:
    ops = tuple((n.name, _type(n.meta), _constants(n.lk), _location(n.loc))
                for n in graph.order if n.buf is None)
    return Summary(graph.digest(), tuple(n.meta.text for n in graph.inputs), ops, len(graph.scalars),
                   len(graph.roots))


def diff(before: Summary, after: Summary) -> list[Change]:
    changes: list[Change] = []
    for i, (a, b) in enumerate(zip(before.inputs, after.inputs)):
        if a != b:
            changes.append(Change("input", i, a, b))
    if len(before.inputs) != len(after.inputs):
        changes.append(Change("inputs", len(after.inputs), f"{len(before.inputs)} inputs", f"{len(after.inputs)} inputs"))
    first_op = first_const = first_shape = None
    for i, (a, b) in enumerate(zip(before.ops, after.ops)):
        if a[0] != b[0] and first_op is None:
            first_op = Change("op", i, a[0], b[0], b[3])
        elif a[0] == b[0] and a[2] != b[2] and first_const is None:
            first_const = Change("constant", i, f"{a[0]} {a[2]}", f"{b[0]} {b[2]}", b[3])
        elif a[0] == b[0] and a[1] != b[1] and first_shape is None:
            first_shape = Change("shape", i, f"{a[0]} {a[1]}", f"{b[0]} {b[1]}", b[3])
    if first_op is None and len(before.ops) != len(after.ops):
        i = min(len(before.ops), len(after.ops))
        a = before.ops[i][0] if i < len(before.ops) else "end of graph"
        b = after.ops[i][0] if i < len(after.ops) else "end of graph"
        loc = after.ops[i][3] if i < len(after.ops) else ""
        first_op = Change("op", i, a, b, loc)
    for c in (first_op, first_const):
        if c is not None:
            changes.append(c)
    if first_shape is not None and not any(c.kind == "input" for c in changes):
        changes.append(first_shape)
    if before.scalars != after.scalars:
        changes.append(Change("scalars", 0, str(before.scalars), str(after.scalars)))
    if before.outputs != after.outputs:
        changes.append(Change("outputs", 0, str(before.outputs), str(after.outputs)))
    return changes


def _distance(a: Summary, b: Summary) -> int:
    d = sum(x != y for x, y in zip(a.inputs, b.inputs)) + abs(len(a.inputs) - len(b.inputs))
    d += sum(x != y for x, y in zip(a.ops, b.ops)) + abs(len(a.ops) - len(b.ops))
    return d


class Explainer:
    """Remembers the last graphs compiled under each name; explains each new compile."""

    def __init__(self):
        self.history: dict[str, collections.deque] = {}

    def __call__(self, graph: Graph) -> Explanation | None:
        summary = summarize(graph)
        earlier = self.history.setdefault(graph.name, collections.deque(maxlen=HISTORY))
        result = None
        if earlier:
            nearest = min(earlier, key=lambda s: _distance(s, summary))
            result = Explanation(graph.name, nearest.digest, tuple(diff(nearest, summary)))
        earlier.append(summary)
        return result

    def clear(self) -> None:
        self.history.clear()


explainer = Explainer()
