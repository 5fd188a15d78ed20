"""Counting the distinct graphs a compiled function traces (max_different_graphs).

Each call's ops, in recording order, walk a trie keyed by the ops' local keys (op,
shapes, dtypes, baked constants; lifted scalar values do not matter). A path that ends
where an earlier call ended is a graph seen before. A new branch, or a new end, is a
new graph: allowed while fewer than N graphs exist, otherwise it raises at the op
that diverged, before anything is compiled. Unlike torch_xla the limit belongs to one
compiled function (or one name), and a call that fails adds nothing to the trie.

The error names each op in torch_xla's words (`[scope] aten::add, xla_shape=f32[5]{0}, dynamic_dims:
()`: the same fact, so its users and tests read it as they know it), and then the user's lines, which
torch_xla does not know.
"""

from __future__ import annotations

from xlanb.ir.graph import location_text
from xlanb.ir.node import Node, meta_text


class _TrieNode:
    __slots__ = ("children", "end", "label", "name", "location")

    def __init__(self, label: str = "", name: str = "", location=None):
        self.children: dict = {}
        self.end = False
        self.label, self.name, self.location = label, name, location


def describe(node: Node) -> str:
    """An op as torch_xla's graph-limit error names it: `[blocks.0] aten::add, xla_shape=f32[5]{0},
    dynamic_dims: ()` (the module scope when recorded; xlanb's shapes are static)."""
    namespace, _, rest = node.name.partition(".")
    shapes = node.meta if isinstance(node.meta, tuple) else (node.meta,)
    xla_shape = ", ".join("none" if m is None else m.text + _layout(len(m.shape)) for m in shapes)
    if len(shapes) > 1:
        xla_shape = f"({xla_shape})"
    return f"[{node.scope or ''}] {namespace}::{rest.partition('.')[0]}, xla_shape={xla_shape}, dynamic_dims: ()"


def _layout(rank: int) -> str:
    """XLA's default layout, minor to major: `{1,0}` for a matrix; a scalar shows none."""
    return "{" + ",".join(str(d) for d in reversed(range(rank))) + "}" if rank else ""


def _where(label: str, trie_node: _TrieNode | None = None, node: Node | None = None) -> str:
    name, location = (node.name, node.location) if node is not None else (trie_node.name, trie_node.location)
    return f"{label} {name}" + (f" at {location_text(location)}" if location else "")


class GraphLimitError(RuntimeError):
    xlanb_user_error = True         # a verdict on the user's program: shown at their line, no note


class Detector:
    def __init__(self, max_graphs: int, name: str):
        if max_graphs < 1:
            raise ValueError(f"max_different_graphs must be >= 1, got {max_graphs}")
        self.max_graphs, self.name = max_graphs, name
        self.root = _TrieNode()
        self.graphs = 0
        self._at: _TrieNode | None = None
        self._created: list = []

    def start(self) -> None:
        self._at = self.root
        self._created = []

    def observe(self, node: Node) -> None:
        at = self._at
        if at is None:
            return
        key = node.local_key
        child = at.children.get(key)
        if child is None:
            if self.graphs >= self.max_graphs:
                seen = list(at.children.values())
                self.abort()
                if seen:
                    head = f"Got: {describe(node)}"
                else:
                    head = f"Got: {describe(node)}\nReached the end of the function at: {at.label or '<start>'}"
                raise self._error(head, seen, [_where("got", node=node)])
            child = _TrieNode(describe(node), node.name, node.location)
            at.children[key] = child
            self._created.append((at, key))
        self._at = child

    def end(self) -> None:
        """The call finished: its path is a graph (new or seen)."""
        at = self._at
        self._at = None
        if at is None or at.end:
            return
        if self.graphs >= self.max_graphs:
            self.abort_created()
            head = f"Reached the end of the function at: {at.label or '<start>'}"
            raise self._error(head, list(at.children.values()), [_where("ended after", at)] if at.name else [])
        at.end = True
        self.graphs += 1

    def _error(self, head: str, seen: list, where: list) -> GraphLimitError:
        """torch_xla's text (what was met, what earlier graphs did there), then where, in the user's lines."""
        if len(seen) == 1:
            expected = f"Expected: {seen[0].label}"
        elif seen:
            expected = "Expected either of:\n" + "\n".join(f"  - {c.label}" for c in seen)
        else:
            expected = "Expected: the function to end here, as an earlier call did"
        where += [_where("expected", c) for c in seen]
        lines = "; ".join(where)
        return GraphLimitError(
            f"Maximum number of different graphs allowed per function exceeded: {self.max_graphs}\n"
            f"{head}\n{expected}\n" + (f"Where: {lines}" if lines else ""))

    def abort(self) -> None:
        """The call failed: forget the branches it created."""
        self.abort_created()
        self._at = None

    def abort_created(self) -> None:
        for parent, key in reversed(self._created):
            parent.children.pop(key, None)
        self._created = []
