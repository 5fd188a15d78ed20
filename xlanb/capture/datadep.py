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
from xlanb.capture import record as rec
from xlanb.capture.checks import check_index_put, check_indices, check_representable, is_mask
from xlanb.capture.frames import user_frames
from xlanb.capture.nodes import make_node
from xlanb.capture.realize import check_execution, to_cpu
from xlanb.capture.tensor import LazyTensor, new_tensor, tensor_meta, value, write_value
from xlanb.capture.verdict import check_once
from xlanb.ir.node import data_node, intern_meta
from xlanb.lower.fallback import host_dispatch, probe_on_cpu
from xlanb.runtime.transfer import upload
from xlanb.state import emit, runtime_state

aten = torch.ops.aten
_rt = runtime_state()


def _cut(name: str) -> None:
    frames = user_frames(_rt.config.max_frames)
    check_execution(f"data-dependent op {name}", frames)
    emit(events.GraphCut(op=name, frames=frames))


def _to_host(x, cause: str):
    if type(x) is LazyTensor:
        return to_cpu(x, cause=cause)
    if type(x) in (list, tuple):
        return type(x)(_to_host(y, cause) for y in x)
    if isinstance(x, torch.device):
        return torch.device("cpu")
    return x


def _to_device(x):
    if isinstance(x, torch.Tensor) and type(x) is not LazyTensor and x.device.type == "cpu":
        node = rec.cpu_input(x)
        return new_tensor(node, node.meta)
    if isinstance(x, (list, tuple)):      # torch.return_types (tuple subclasses) included
        return (list if isinstance(x, list) else tuple)(_to_device(y) for y in x)
    return x


def cpu_cut(func, args, kwargs):
    """Runs func on CPU with computed inputs; outputs return as device data (an op with no
    meta kernel, or whose inputs are not all xla tensors)."""
    name = str(func)
    _cut(name)
    emit(events.Fallback(op=events.counter_name(name), reason="data-dependent output shape"))
    cause = f"data-dependent op {name}"
    host_args = _to_host(args, cause)
    host_kwargs = {k: _to_host(v, cause) for k, v in (kwargs or {}).items()}
    with torch.no_grad(), host_dispatch():
        out = func(*host_args, **host_kwargs)
    check_representable(name, out)
    if func._schema.is_mutable:     # an in-place op: write the CPU result back
        _write_back_host(func, args, host_args, host_kwargs)
        return _mutable_returns(func, args, kwargs, out)
    return _to_device(out)


def _mutable_returns(func, args, kwargs, out):
    """What a mutable op returns: its written arguments where a return aliases one, else the
    CPU result moved to the device."""
    returns = func._schema.returns
    if not returns:
        return None
    outs = out if len(returns) > 1 else (out,)
    by_alias = {}
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            by_alias[frozenset(a.alias_info.before_set)] = args[i] if i < len(args) else (kwargs or {}).get(a.name)
    values = []
    for r, o in zip(returns, outs):
        alias = frozenset(r.alias_info.before_set) if r.alias_info is not None else None
        values.append(by_alias[alias] if alias in by_alias else _to_device(o))
    return values[0] if len(returns) == 1 else tuple(values)


def _write_back_host(func, args, host_args, host_kwargs):
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            target = args[i] if i < len(args) else None
            host = host_args[i] if i < len(host_args) else host_kwargs.get(a.name)
            targets, hosts = (target, host) if isinstance(target, (list, tuple)) else ((target,), (host,))
            for t, h in zip(targets, hosts):
                if type(t) is LazyTensor:
                    write_value(t, data_node(upload(h), tensor_meta(t)))


def nonzero(func, args, kwargs):
    x = args[0]
    if type(x) is not LazyTensor:
        return func(*args, **(kwargs or {}))
    check_once(func, args, kwargs)
    _cut(str(func))
    count = _count(aten.count_nonzero.default(x), str(func))
    out = aten.nonzero_static.default(x, size=count, fill_value=-1)
    # CPU's nonzero is laid out column-major, (1, count); nonzero_static's meta kernel says so
    # from torch 2.11 on, row-major before
    layout = torch.empty(out.shape[::-1], device="meta").t().stride()
    if out.stride() != layout:
        out = aten.empty_strided.default(out.shape, layout, dtype=out.dtype, device=out.device).copy_(out)
    return out


def _int_indices(indices) -> list:
    """Boolean/uint8 masks -> the integer index tensors of their nonzeros (one per mask dim)."""
    out = []
    for i in indices:
        if is_mask(i):
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
        if func is aten.index.Tensor:
            check_indices(x, indices)
        if not any(is_mask(i) for i in indices) or any(is_mask(i) and i.dim() == 0 for i in indices):
            return inner(func, args, kwargs)
        return func(x, _int_indices(indices), *args[2:], **(kwargs or {}))
    return h


def _broadcast_scalar_mask(x, indices, values) -> bool:
    """x[mask] = v with one mask (and slices), v a single value: lowered as a select, no cut."""
    masks = [i for i in indices if i is not None]
    return (len(masks) == 1 and is_mask(masks[0]) and masks[0].dtype == torch.bool
            and isinstance(values, torch.Tensor) and values.numel() == 1)


def index_put(inner):
    def h(func, args, kwargs):
        x, indices, values = args[0], args[1], args[2]
        if func is not aten._unsafe_index_put.default:
            check_indices(x, indices)
            check_index_put(x, indices, values)
        if not any(is_mask(i) for i in indices) or any(is_mask(i) and i.dim() == 0 for i in indices) \
                or _broadcast_scalar_mask(x, indices, values):
            return inner(func, args, kwargs)
        return func(x, _int_indices(indices), values, *args[3:], **(kwargs or {}))
    return h


def masked_select(func, args, kwargs):
    x, mask = args[0], args[1]
    if type(x) is not LazyTensor and type(mask) is not LazyTensor:
        return func(*args, **(kwargs or {}))
    check_once(func, args, kwargs)             # CPU's dtype checks (a uint8 mask is refused)
    x, mask = aten.broadcast_tensors.default([x, mask])
    if x.dim() == 0:
        x, mask = aten.reshape.default(x, [1]), aten.reshape.default(mask, [1])
    return aten.index.Tensor(x, [mask])


def _count(t, name: str) -> int:
    """One number computed on the device and read back: the cut (a forced execution whose
    cause names the op)."""
    return int(to_cpu(t, cause=f"data-dependent op {name}").item())


def _distinct(flat, consecutive: bool):
    """Lazy count of distinct values of a 1-d tensor (all of them, or of consecutive runs);
    NaNs are each distinct, as in torch's kernels."""
    s = flat if consecutive else aten.sort.default(flat)[0]
    n = flat.shape[0]
    if n == 0:
        return 0
    change = aten.ne.Tensor(aten.slice.Tensor(s, 0, 1, n), aten.slice.Tensor(s, 0, 0, n - 1))
    return aten.add.Scalar(aten.sum.default(change), 1)


def _record_unique(func, x, n, return_inverse, return_counts, consecutive):
    metas = (intern_meta((n,), x.dtype),
             intern_meta(tuple(x.shape) if return_inverse else (0,), torch.int64),
             intern_meta((n,) if return_counts else (0,), torch.int64))
    node = make_node(func, "xlanb.unique", (value(x), n, bool(return_inverse), bool(return_counts), consecutive),
                     None, metas)
    return rec.outputs_of(node)


def _unique(func, x, kw: dict, consecutive: bool):
    """Counts the distinct values (the cut), then records the unique op of that size."""
    check_once(func, (x,), kw)
    _cut(str(func))
    count = _distinct(aten.reshape.default(x, [-1]), consecutive)
    n = count if isinstance(count, int) else _count(count, str(func))
    return _record_unique(func, x, n, kw.get("return_inverse", False), kw.get("return_counts", False), consecutive)


def unique2(inner):
    """torch.unique (dim=None): count the distinct values, then jnp.unique of that size."""
    def h(func, args, kwargs):
        x = args[0]
        if type(x) is not LazyTensor:
            return inner(func, args, kwargs)
        kw = dict(zip(("sorted", "return_inverse", "return_counts"), args[1:]), **(kwargs or {}))
        return _unique(func, x, kw, consecutive=False)
    return h


def unique_consecutive(inner):
    def h(func, args, kwargs):
        x = args[0]
        kw = dict(zip(("return_inverse", "return_counts", "dim"), args[1:]), **(kwargs or {}))
        if type(x) is not LazyTensor or kw.get("dim") is not None:
            return inner(func, args, kwargs)
        return _unique(func, x, kw, consecutive=True)
    return h


def repeat_interleave(inner):
    """repeat_interleave(repeats) without output_size: the total is counted first."""
    def h(func, args, kwargs):
        kwargs = dict(kwargs or {})
        repeats = args[0]
        if type(repeats) is not LazyTensor or kwargs.get("output_size") is not None:
            return inner(func, args, kwargs)
        check_once(func, args, kwargs)
        _cut(str(func))
        if not repeats.numel():
            kwargs["output_size"] = 0
            return inner(func, args, kwargs)
        # the total and the smallest count in one read: CPU refuses a negative count
        total, least = to_cpu(aten.stack.default([aten.sum.default(repeats), aten.min.default(repeats)]),
                              cause=f"data-dependent op {func}").tolist()
        if least < 0:
            with torch.no_grad(), host_dispatch():
                probe_on_cpu(func, torch.tensor([int(least)]))       # raises CPU's error
        kwargs["output_size"] = total
        return inner(func, args, kwargs)
    return h


def equal(func, args, kwargs):
    """torch.equal: a Python bool, computed on the device (a value access)."""
    a, b = args[0], args[1]
    if tuple(a.shape) != tuple(b.shape):
        return False
    if a.numel() == 0:
        return True
    return bool(aten._local_scalar_dense.default(aten.all.default(aten.eq.Tensor(a, b))))


def allclose(func, args, kwargs):
    a, b = args[0], args[1]
    kw = dict(zip(("rtol", "atol", "equal_nan"), args[2:]), **(kwargs or {}))
    close = aten.isclose.default(a, b, kw.get("rtol", 1e-5), kw.get("atol", 1e-8), kw.get("equal_nan", False))
    if close.numel() == 0:
        return True
    return bool(aten._local_scalar_dense.default(aten.all.default(close)))


HANDLERS = {
    "aten._unique2.default": unique2,
    "aten.unique_consecutive.default": unique_consecutive,
    "aten.repeat_interleave.Tensor": repeat_interleave,
    "aten.equal.default": lambda inner: equal,
    "aten.allclose.default": lambda inner: allclose,
    "aten.nonzero.default": lambda inner: nonzero,
    "aten.masked_select.default": lambda inner: masked_select,
    "aten.index.Tensor": index,
    "aten._unsafe_index.Tensor": index,
    "aten.index_put.default": index_put,
    "aten.index_put_.default": index_put,
    "aten._index_put_impl_.default": index_put,
    "aten._unsafe_index_put.default": index_put,
}
