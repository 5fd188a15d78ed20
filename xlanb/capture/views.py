"""Views whose value depends on memory layout: as_strided reads the storage through the base's
memory order, resize_ takes a storage's first elements, and in-place shape changes that torch's
autograd would replay wrongly on a view are refused."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import torch

from xlanb.capture.record import plan_of
from xlanb.capture.tensor import LazyTensor, ViewStep, new_view, storage_of, tensor_meta
from xlanb.ir.node import Meta, contiguous_strides, intern_meta, meta_of

aten = torch.ops.aten

_AS_STRIDED = aten.as_strided.default
_REINTERPRETING = {"aten.view.dtype", "aten.view_as_real.default", "aten.view_as_complex.default",
                   "aten._conj.default", "aten._neg_view.default"}


def as_strided_view(base, size, stride, storage_offset=None):
    """as_strided reads the storage, not the tensor: a view of the storage's base value alone
    (the tensor's own view steps do not apply), through the base's memory order when the base
    is laid out as a permutation of row-major (an elementwise result of a transposed input)."""
    storage = storage_of(base)
    root = storage.node.meta
    size, stride = tuple(size), tuple(stride)
    offset = tensor_meta(base).offset if storage_offset is None else storage_offset
    plan = plan_of(_AS_STRIDED)
    key = (root, size, stride, offset)
    meta = plan.meta_cache.get(key)
    if meta is None:
        meta = meta_of(_AS_STRIDED(root.empty(), size, stride, offset))   # torch's bounds checks
        plan.meta_cache[key] = meta
    chain = (ViewStep(_AS_STRIDED, plan.name, (size, stride, offset), None, meta),)
    order = memory_order(root)
    if order is not None:
        shape = tuple(root.shape[d] for d in order)
        chain = (ViewStep(aten.permute.default, "aten.permute.default", (order,), None,
                          intern_meta(shape, root.dtype)),) + chain
    view = new_view(storage, chain, meta)
    if base.requires_grad and torch.is_grad_enabled() and not _inside(meta, tensor_meta(base)):
        storage.replay_hazard = weakref.ref(view)
    return view


def _positions(meta: Meta) -> np.ndarray:
    pos = np.full((), meta.offset, dtype=np.int64)
    for n, st in zip(meta.shape, meta.strides):
        pos = pos[..., None] + np.arange(n, dtype=np.int64) * st
    return pos.reshape(-1)


def _inside(view: Meta, base: Meta) -> bool:
    """Whether every storage element `view` reads is an element of `base`."""
    return bool(np.isin(_positions(view), _positions(base)).all())


def memory_order(meta: Meta) -> tuple | None:
    """The dims of `meta` from outermost to innermost in memory when its layout is a
    permutation of row-major (None when it is row-major); raises for layouts with gaps,
    overlaps or an offset, which no xla value has a storage for."""
    if meta.mkstrides is None or meta.numel == 0:
        return None
    order = tuple(sorted(range(len(meta.shape)), key=lambda d: -meta.strides[d]))
    shape = tuple(meta.shape[d] for d in order)
    dense = all(meta.strides[d] == st for d, st, n in zip(order, contiguous_strides(shape), shape) if n > 1)
    if not dense or meta.offset:
        raise NotImplementedError(
            f"as_strided of a tensor whose storage is not one dense block (shape {list(meta.shape)}, strides "
            f"{list(meta.strides)}, offset {meta.offset}) is not supported on xla; call .contiguous() first")
    return None if order == tuple(range(len(order))) else order


def check_no_replayed_views(base: LazyTensor, func) -> None:
    """torch rebuilds the autograd history of a view of `base` after an in-place op on `base` by
    replaying the view op on it (a subclass gets no as_strided replay). After a shape change in
    place the replay reads the new shape and backward fails far from here, so it is refused here,
    while a differentiable view of `base` is alive (torch_xla has the same limit)."""
    for ref in gc.get_referrers(base._storage):
        if type(ref) is LazyTensor and ref is not base and ref._base is base and ref.requires_grad:
            name = str(func).removeprefix("aten.").split(".")[0]
            raise NotImplementedError(
                f"{name}() changes the shape of a tensor in place while a view of it (shape {list(ref.shape)}) "
                "takes part in autograd; on xla torch replays that view on the new shape for backward, "
                f"which gives wrong shapes. Use the out-of-place form (`x = x.{name.rstrip('_')}(...)`), "
                "or take the view after the change")
