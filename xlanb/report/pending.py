"""Pending IR left behind at the end of a cell (lazy mode), and which names hold it.

This reads the live capture state, so it is the one part of the report that is not a
function of events; the notebook calls it once per cell, after the cell ran.
"""

from __future__ import annotations

from collections.abc import Mapping

from xlanb.capture.realize import pending_roots
from xlanb.capture.state import state
from xlanb.capture.tensor import LazyTensor, base_node
from xlanb.ir.graph import build_graph, graph_lines
from xlanb.ir.node import dtype_text
from xlanb.report.build import relocate
from xlanb.report.dag import draw_dag
from xlanb.report.model import IrText, PendingIR, PendingTensor
from xlanb.report.where import Cells

IR_LINES = 400


def _type(t: LazyTensor) -> str:
    return f"{dtype_text(t.dtype)}[{','.join(map(str, t.shape))}]"


def snapshot_pending(namespace: Mapping[str, object] | None = None, *, cells: Cells = Cells(),
                     limit: int | None = IR_LINES, dag: bool = True) -> PendingIR | None:
    """The pending graph of all live tensors, with the names in `namespace` that hold a part of it."""
    roots = pending_roots()
    if not roots:
        return None
    position = {n: i for i, n in enumerate(roots)}
    lines = relocate(graph_lines(build_graph(roots, state.graph_name)), cells)
    tensors, root_names, held = [], [], set()
    for name, v in (namespace or {}).items():
        if type(v) is not LazyTensor or name.startswith("_"):
            continue
        n = base_node(v)
        i = position.get(n)
        if i is not None:
            tensors.append(PendingTensor(name, _type(v)))
            root_names.append((i, name))
            held.add(i)
    nodes = sum(1 for line in lines if not line.is_input)
    cut = limit is not None and len(lines) > limit
    ir = IrText(tuple(lines[:limit] if cut else lines), len(lines), cut, tuple(root_names))
    return PendingIR(nodes, tuple(tensors), len(roots) - len(held), ir, draw_dag(lines) if dag else None)
