"""State that starts as a fill: made device data at the sync, so the first step runs the steady step's graph.

An optimizer makes its state on the first step (`torch.zeros_like(p)` for Adam's moments, `full_like`
for Adagrad's sums) and writes it in place at once. Left a pending fill, the first step's graph computes
the moments from a constant where every later step reads them as inputs: another graph, and XLA
compiles the step twice (W7, GPT-2 with AdamW: 2.9 s for the second step's compile, docs/performance.md).
An in-place write over a pending fill notes the tensor written (`note`); at the next full sync each such
fill whose tensor is still alive is made on the CPU and uploaded (`materialize`): an input of the graph,
donated like any overwritten buffer. A temporary (a mask filled, then written, and dropped before the
sync) stays a constant in the graph.
"""

from __future__ import annotations

import weakref

import torch

from xlanb.capture import tensor as _tensor
from xlanb.ir.node import Node, Scalar
from xlanb.lower.fallback import host_dispatch
from xlanb.runtime.transfer import upload
from xlanb.state import runtime_state

_rt = runtime_state()

# a fill's name -> the position of its value among the node's arguments (None: the value is in the name)
_VALUE_AT = {
    "aten.zeros.default": None, "aten.zeros_like.default": None, "aten.new_zeros.default": None,
    "aten.ones.default": None, "aten.ones_like.default": None, "aten.new_ones.default": None,
    "aten.full.default": 1, "aten.full_like.default": 1, "aten.new_full.default": 2, "aten.fill.Scalar": 1,
}
FILLS = frozenset(_VALUE_AT)


def fill_value(node: Node):
    """The number a pending fill node writes everywhere, None if it is not such a fill."""
    if node.name not in _VALUE_AT:
        return None
    at = _VALUE_AT[node.name]
    if at is None:
        return 1 if "ones" in node.name else 0
    value = node.args[at] if len(node.args) > at else None
    if type(value) is Scalar:
        value = value.value
    return value if type(value) in (bool, int, float) else None


def note(holder, old: Node, new: Node) -> None:
    """tensor.write made `new` the value of `holder` (a LazyTensor or a Storage) in place of `old`, a
    pending fill: remembered when `new` reads it (an update, not an overwrite such as `copy_` of other
    data), directly or as one of the lists of a foreach op whose output `new` is."""
    if old in new.operands or any(type(o) is Node and old in o.operands for o in new.operands):
        noted = _rt.state_fills
        noted.append((weakref.ref(holder), weakref.ref(old)))     # weak: a value read never syncs them away
        if len(noted) > 4096:
            noted[:] = [(h, n) for h, n in noted if h() is not None and n() is not None]
        # pending from here, as it is at each later step, which writes it first here: the same graph
        _rt.pending[:] = [ref for ref in _rt.pending if ref() is not holder]


def materialize() -> None:
    """Uploads the fills that in-place writes overwrote and whose tensors are alive (state, not
    temporaries); called by a full sync before it builds its graph."""
    noted, _rt.state_fills = _rt.state_fills, []
    if _rt.several_devices or (_rt.several_devices is None and _rt.count_devices()):
        return          # a sharded tensor's state keeps its place in the graph (tensor.keep_sharding)
    for ref, node_ref in noted:
        node = node_ref()
        if node is None or node.buffer is not None or ref() is None or type(node.meta) is tuple:
            continue
        value = fill_value(node)
        if value is None:
            continue
        with host_dispatch():
            host = torch.full(node.meta.shape, value, dtype=node.meta.dtype, device="cpu")
        node.release(upload(host))
        _rt.overwritten.add(node)


_tensor.fill_names = FILLS
_tensor.note_fill = note
