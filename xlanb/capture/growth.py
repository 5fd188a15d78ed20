"""Tensors that grow by `cat` along one dim: kept out of the graphs that use their ends.

A decode loop (HF `generate()`) appends one column per token to `input_ids`, the attention
mask and the position ids (`torch.cat([x, new], -1)`) and then reads only the newest part
(`x[:, -1:]`, `x[:, -1]`). Recorded naively, every step's graph would hold the whole
`s64[1,L]` tensor as an input and compile once per length L. Two exact rewrites keep the
growing tensor out of those graphs:

- **flat cat**: `cat([cat([a, b], d), c], d)` is recorded as `cat([a, b, c], d)` while the
  inner cat is pending, so a tensor grown N times is one pending cat of N+1 pieces, not a
  chain of N cats (nothing is computed until something needs the whole tensor);
- **view of a cat**: a slice or select along the cat dim whose range lies inside one piece
  is recorded on that piece (`cat([a, b], 1)[:, -1:]` is `b[:, -1:]` when b has one column).

Both are identities of the values (cat copies its pieces; a piece is an immutable IR value),
so no program sees a different number. Everything else (a reduction over the whole tensor,
a gather by position) reads the whole cat as before.
"""

from __future__ import annotations

import torch

from xlanb.capture import tensor as _tensor
from xlanb.capture.nodes import lift, make_node
from xlanb.capture.record import plan_of
from xlanb.capture.tensor import LazyTensor, value
from xlanb.ir.node import Node, Scalar, const_key, meta_of
from xlanb.runtime.transfer import download

_new_scalar = object.__new__

_CAT = "aten.cat.default"
_MAX_INT = 2 ** 63 - 1


def _pieces(node: Node, dim: int, dtype) -> list[Node] | None:
    """The pieces of a pending cat along `dim` whose pieces all have `dtype` (None: not one)."""
    if node.name != _CAT or node.buffer is not None:
        return None
    tensors = node.args[0]
    ndim = len(node.meta.shape)
    inner_dim = node.args[1] if len(node.args) > 1 else 0
    if inner_dim % ndim != dim or any(type(t) is not Node or t.meta.dtype is not dtype
                                      or len(t.meta.shape) != ndim for t in tensors):
        return None
    return list(tensors)


def flat_cat(inner):
    """Handler wrapper for aten.cat.default: splices pending cats along the same dim."""
    def h(func, args, kwargs):
        tensors = args[0]
        dim = args[1] if len(args) > 1 else (kwargs or {}).get("dim", 0)
        if kwargs or len(tensors) < 2 or any(type(t) is not LazyTensor for t in tensors):
            return inner(func, args, kwargs)
        nodes = [value(t) for t in tensors]
        first = nodes[0].meta
        ndim, dtype = len(first.shape), first.dtype
        if ndim == 0 or any(len(n.meta.shape) != ndim or n.meta.dtype is not dtype for n in nodes):
            return inner(func, args, kwargs)
        d = dim % ndim
        flat, spliced = [], False
        for n in nodes:
            parts = _pieces(n, d, dtype)
            if parts is None:
                flat.append(n)
            else:
                flat.extend(parts)
                spliced = True
        if not spliced:
            return inner(func, args, kwargs)
        out = inner(func, args, kwargs)          # torch's meta kernel checks shapes and picks the layout
        node = out._node
        if node is None or node.buffer is not None or node.meta.mkstrides is not None:
            return out
        out._node = make_node(func, _CAT, (tuple(flat), d), None, node.meta, node.location)
        return out
    return h


def fold_view(step, base: Node) -> Node | None:
    """`step` (a slice or select) applied to a pending cat, recorded on the one piece its range
    lies in; None when it does not lie in one piece (the caller applies the step to the cat)."""
    if base.name != _CAT or base.buffer is not None or step.name not in ("aten.slice.Tensor", "aten.select.int"):
        return None
    args = step.args
    ndim = len(base.meta.shape)
    cat_dim = base.args[1] if len(base.args) > 1 else 0
    dim = (args[0] if args else 0)
    if type(dim) is not int or dim % ndim != cat_dim % ndim or step.kwargs:
        return None
    dim %= ndim
    size = base.meta.shape[dim]
    if step.name == "aten.select.int":
        index = args[1]
        if type(index) is not int:
            return None
        start = index + size if index < 0 else index
        end = start + 1
    else:
        start, end, stride = (tuple(args[1:4]) + (None, None, 1)[len(args[1:4]):])
        if stride != 1 or any(v is not None and type(v) is not int for v in (start, end)):
            return None
        start, end = _clamp(0 if start is None else start, size), _clamp(_MAX_INT if end is None else end, size)
        if end <= start:
            return None
    offset = 0
    for piece in base.args[0]:
        length = piece.meta.shape[dim]
        if offset <= start and end <= offset + length:
            if step.name == "aten.select.int":
                new_args = (dim, start - offset)
            else:
                new_args = (dim, start - offset, end - offset, 1)
            return make_node(step.op, step.name, (piece,) + new_args, None, _view_meta(step, piece, new_args))
        offset += length
    return None


def fold_chain(steps: tuple, base: Node) -> Node | None:
    """A view chain applied to a pending cat, its first step folded into one piece (fold_view) and
    the later steps recorded on that piece's layout; None when the first step does not fold."""
    first = steps[0]
    if first.index is not None:
        return None
    n = fold_view(first, base)
    if n is None:
        return None
    for step in steps[1:]:
        args = (n,) + tuple(step.args)
        plan = plan_of(step.op)
        key = ("xlanb.fold", n.meta, const_key(step.args), const_key(step.kwargs) if step.kwargs else None)
        meta = plan.meta_cache.get(key)
        if meta is None:
            out = step.op(n.meta.empty(), *step.args, **(step.kwargs or {}))
            meta = meta_of(out) if isinstance(out, torch.Tensor) else tuple(meta_of(o) for o in out)
            plan.meta_cache[key] = meta
        if step.index is None:
            n = make_node(step.op, step.name, args, step.kwargs or None, meta)
        else:
            whole = make_node(step.op, step.name, args, step.kwargs or None, meta)
            n = make_node("xlanb.getitem", "xlanb.getitem", (whole, step.index), None, meta[step.index])
    return n


class Flag(int):
    """A Python bool passed as a graph input (0 or 1). Each flag has its own slot: two flags that
    are equal now and differ later (HF's `is_done` next to a constant False) would otherwise share
    one slot and then split, which changes the key."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(bool(self))


def lift_fill(args: tuple, kwargs: dict) -> tuple:
    """`torch.full(size, value, ...)` with its value as a graph input (a Python number, or a bool
    when the dtype is given), so a value that changes from call to call does not recompile: HF's
    stopping criteria build `torch.full((batch,), cur_len >= max_length, dtype=torch.bool)`."""
    if len(args) < 2:
        return args
    value = args[1]
    if type(value) is bool:
        if kwargs.get("dtype") is None:
            return args
        flag = _new_scalar(Scalar)
        flag.value = Flag(value)
        return (args[0], flag) + tuple(args[2:])
    return (args[0], lift(value)) + tuple(args[2:])


def _clamp(i: int, size: int) -> int:
    if i < 0:
        i += size
    return min(max(i, 0), size)


def _view_meta(step, piece: Node, args: tuple):
    """The view's meta on the piece (its own strides and offset, not the cat's), memoised."""
    plan = plan_of(step.op)
    key = ("xlanb.fold", piece.meta, args)
    meta = plan.meta_cache.get(key)
    if meta is None:
        meta = plan.meta_cache[key] = meta_of(step.op(piece.meta.empty(), *args))
    return meta


def host_cat(node: Node) -> torch.Tensor | None:
    """The value of a pending cat whose pieces are all device data, joined on the host (a copy, so
    exact): reading the tokens `generate()` returns compiles nothing, whatever their number.
    None when it is not such a cat."""
    if node.name != _CAT or node.buffer is not None:
        return None
    pieces = node.args[0]
    if any(type(p) is not Node or p.buffer is None or p.meta.dtype is not node.meta.dtype for p in pieces):
        return None
    dim = node.args[1] if len(node.args) > 1 else 0
    return torch.cat([download(p.buffer) for p in pieces], dim)


HANDLERS = {_CAT: flat_cat}


_tensor.fold_cat_views = fold_chain
