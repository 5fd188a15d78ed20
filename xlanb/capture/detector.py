"""Counting the distinct graphs a compiled function traces (max_different_graphs).

Each call's ops, in recording order, walk a trie keyed by the ops' local keys (op,
shapes, dtypes, baked constants; lifted scalar values do not matter). A path that ends
where an earlier call ended is a graph seen before. A new branch, or a new end, is a
new graph: allowed while fewer than N graphs exist, otherwise it raises at the op
that diverged, before anything is compiled. Unlike torch_xla the limit belongs to one
compiled function (or one name), and a call that fails adds nothing to the trie.
"""

from __future__ import annotations

from xlanb.ir.graph import location_text
from xlanb.ir.node import Node, meta_text


class _TrieNode:
    __slots__ = ("children", "end", "label", "location")

    def __init__(self, label: str = "", location=None):
        self.children: dict = {}
        self.end = False
        self.label, self.location = label, location


def describe(node: Node) -> str:
    text = f"{node.name} {meta_text(node.meta)}"
    return text + (f" ({location_text(node.location)})" if node.location else "")


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
                expected = [f"  - {c.label}" + (f" ({location_text(c.location)})" if c.location else "")
                            for c in at.children.values()]
                self.abort()
                got = describe(node)
                if len(expected) == 1:
                    tail = f"Expected: {expected[0].strip().removeprefix('- ')}"
                elif expected:
                    tail = "Expected either of:\n" + "\n".join(expected)
                else:
                    tail = f"Reached the end of the function at: {at.label or '<start>'}"
                raise GraphLimitError(
                    f"Maximum number of different graphs allowed per function exceeded: {self.max_graphs}\n"
                    f"Got: {got}\n{tail}")
            child = _TrieNode(f"{node.name} {meta_text(node.meta)}", node.location)
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
            raise GraphLimitError(
                f"Maximum number of different graphs allowed per function exceeded: {self.max_graphs}\n"
                f"Got: the function ended after {at.label or '<start>'}\n"
                f"Expected: the graph to continue as in an earlier call")
        at.end = True
        self.graphs += 1

    def abort(self) -> None:
        """The call failed: forget the branches it created."""
        self.abort_created()
        self._at = None

    def abort_created(self) -> None:
        for parent, key in reversed(self._created):
            parent.children.pop(key, None)
        self._created = []
