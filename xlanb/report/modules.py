"""Ops grouped by the nn.Module that recorded them (capture/scopes.py puts the path on each IR line).

`module_view(lines)` counts ops per module path (its own ops, and with its submodules), and
draws the graph collapsed to one box per top-level module (`blocks.0`, `head`) with its op
count; each box expands to the DAG of that module's ops (a click in the browser, a
`<details>` in the HTML fallback).
"""

from __future__ import annotations

import collections
import dataclasses

from xlanb.report.dag import _Box, _clip, _link, draw_dag, layout, short_op
from xlanb.report.format import plural
from xlanb.report.model import Dag

OUTSIDE = "(outside modules)"     # ops recorded while no module ran: a loss function, the optimizer
TOP = "<top>"                     # the outermost module's own ops
MAX_EXPANDED = 40                 # module boxes that carry the DAG of their ops


def scope_label(scope: str | None) -> str:
    if scope is None:
        return OUTSIDE
    return scope or TOP


def box_key(scope: str | None) -> str:
    """The box a module's ops are drawn in: its top-level module, with the index of a
    ModuleList or Sequential entry (`blocks.0.attn.qkv` -> `blocks.0`)."""
    if scope is None or scope == "":
        return scope_label(scope)
    parts = scope.split(".")
    n = 2 if len(parts) > 1 and parts[1].isdigit() else 1
    return ".".join(parts[:n])


def _top(ops) -> str:
    return " ".join(f"{op}\u00d7{n}" for op, n in collections.Counter(ops).most_common(3))


@dataclasses.dataclass(frozen=True)
class ModuleGroup:
    path: str                 # the module path as recorded ("" is the outermost module), or OUTSIDE
    ops: int                  # ops recorded while this module itself ran (not its submodules)
    total: int                # with its submodules
    top: str                  # its three most common ops, "addmm×2 gelu×1"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ModuleView:
    groups: tuple[ModuleGroup, ...]
    dag: Dag | None                           # one box per top-level module
    expanded: tuple[tuple[str, Dag], ...]     # box key -> the DAG of its ops

    def to_json(self) -> dict:
        return {"groups": [g.to_json() for g in self.groups], "dag": self.dag.to_json() if self.dag else None,
                "expanded": {key: dag.to_json() for key, dag in self.expanded}}


def module_groups(lines) -> tuple[ModuleGroup, ...]:
    """Every module path with ops, in first-use order."""
    own: dict[str | None, list[str]] = {}
    for line in lines:
        if not line.is_input:
            own.setdefault(line.scope, []).append(short_op(line.op))
    groups = []
    for path, ops in own.items():
        if path is None:
            total = len(ops)
        elif path == "":
            total = sum(len(o) for p, o in own.items() if p is not None)
        else:
            total = sum(len(o) for p, o in own.items()
                        if p is not None and (p == path or p.startswith(path + ".")))
        groups.append(ModuleGroup(scope_label(path), len(ops), total, _top(ops)))
    return tuple(groups)


def module_view(lines, *, dags: bool = True) -> ModuleView | None:
    """None when the graph's ops carry no module (module scopes were not recorded)."""
    lines = tuple(lines)
    if not any(line.scope is not None for line in lines if not line.is_input):
        return None
    groups = module_groups(lines)
    if not dags:
        return ModuleView(groups, None, ())
    key_of: dict[int, str] = {}
    members: dict[str, list] = {}
    runs: dict[str, int] = {}          # the glue code (outside modules, the top module's own ops): runs
    previous = None
    for line in lines:
        if line.is_input:
            continue
        key = box_key(line.scope)
        if line.scope is None or line.scope == "":
            # one box per run of consecutive ops, so code before and after a module call stays apart
            # (one box for both would draw a cycle: <top> -> ff -> <top>)
            if previous != (key, runs.get(key)):
                runs[key] = runs.get(key, 0) + 1
            run = runs[key]
            previous = (key, run)
            key = key if run == 1 else f"{key} ({run})"
        else:
            previous = (key, None)
        key_of[line.index] = key
        members.setdefault(key, []).append(line)
    ids = {key: i for i, key in enumerate(members)}
    boxes: dict[int, _Box] = {}
    for key, group in members.items():
        ops = [short_op(line.op) for line in group]
        title = f"{key}: {plural(len(ops), 'op')} (click to expand)\n" + "\n".join(
            f"{op}: {n}" for op, n in collections.Counter(ops).most_common(8))
        b = _Box(ids[key], _clip(f"{key}: {plural(len(ops), 'op')}", 30), _clip(_top(ops), 30), title, "group",
                 key=key)
        preds = []
        for line in group:
            for o in line.operands:
                k = key_of.get(o)
                if k is not None and k != key:
                    preds.append(ids[k])
        b.preds = list(dict.fromkeys(preds))
        boxes[b.id] = b
    _link(boxes)
    dag = layout(boxes, len(lines), "modules")
    expanded = tuple((key, d) for key, group in list(members.items())[:MAX_EXPANDED]
                     if (d := draw_dag(group)) is not None)
    return ModuleView(groups, dag, expanded)
