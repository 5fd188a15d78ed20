"""Ops whose output shape depends on the data, computed on the device after one small cut.

nonzero(x) needs one number, the count of nonzeros: that count is computed (a value
access, counted as a GraphCut) and the rest stays lazy and on XLA: nonzero_static(x,
size=count). Boolean-mask indexing (`x[mask]`, `x[mask] = v`, masked_select) becomes
integer indexing through that nonzero, so only the mask is materialised, never `x`.

`x[mask] = scalar` needs no cut at all: the lowering selects with the mask.
"""

from __future__ import annotations

import torch

from xlanb import events
from xlanb._config import config
from xlanb.capture.frames import user_frames
from xlanb.capture.realize import execution_guards
from xlanb.capture.tensor import LazyTensor

aten = torch.ops.aten


def _cut(name: str) -> None:
    frames = user_frames(config().max_frames)
    for guard in execution_guards:
        guard(f"data-dependent op {name}", frames)
    events.emit(events.GraphCut(op=name, frames=frames))


def _is_mask(i) -> bool:
    return isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)


def nonzero(func, args, kwargs):
    x = args[0]
    if type(x) is not LazyTensor:
        return func(*args, **(kwargs or {}))
    _cut(str(func))
    count = int(aten._local_scalar_dense.default(aten.count_nonzero.default(x)))
    return aten.nonzero_static.default(x, size=count, fill_value=-1)


def _int_indices(indices) -> list:
    """Boolean/uint8 masks -> the integer index tensors of their nonzeros (one per mask dim)."""
    out = []
    for i in indices:
        if _is_mask(i):
            if i.dtype == torch.uint8:
                i = i.to(torch.bool)
            nz = aten.nonzero.default(i)
            out.extend(aten.unbind.int(nz, 1) if i.dim() else [])
            if i.dim() == 0:             # a 0-d mask adds a dim of size 0 or 1
                raise NotImplementedError("a 0-d boolean index on an xla tensor")
        else:
            out.append(i)
    return out


def index(inner):
    def h(func, args, kwargs):
        x, indices = args[0], args[1]
        if not any(_is_mask(i) for i in indices) or any(_is_mask(i) and i.dim() == 0 for i in indices):
            return inner(func, args, kwargs)
        return func(x, _int_indices(indices), *args[2:], **(kwargs or {}))
    return h


def _broadcast_scalar_mask(x, indices, values) -> bool:
    """x[mask] = v with one mask (and slices), v a single value: lowered as a select, no cut."""
    masks = [i for i in indices if i is not None]
    return (len(masks) == 1 and _is_mask(masks[0]) and masks[0].dtype == torch.bool
            and isinstance(values, torch.Tensor) and values.numel() == 1)


def index_put(inner):
    def h(func, args, kwargs):
        x, indices, values = args[0], args[1], args[2]
        if not any(_is_mask(i) for i in indices) or any(_is_mask(i) and i.dim() == 0 for i in indices) \
                or _broadcast_scalar_mask(x, indices, values):
            return inner(func, args, kwargs)
        return func(x, _int_indices(indices), values, *args[3:], **(kwargs or {}))
    return h


def masked_select(func, args, kwargs):
    x, mask = args[0], args[1]
    if type(x) is not LazyTensor and type(mask) is not LazyTensor:
        return func(*args, **(kwargs or {}))
    x, mask = aten.broadcast_tensors.default([x, mask])
    if x.dim() == 0:
        x, mask = aten.reshape.default(x, [1]), aten.reshape.default(mask, [1])
    return aten.index.Tensor(x, [mask])


HANDLERS = {
    "aten.nonzero.default": lambda inner: nonzero,
    "aten.masked_select.default": lambda inner: masked_select,
    "aten.index.Tensor": index,
    "aten._unsafe_index.Tensor": index,
    "aten.index_put.default": index_put,
    "aten.index_put_.default": index_put,
    "aten._index_put_impl_.default": index_put,
    "aten._unsafe_index_put.default": index_put,
}
