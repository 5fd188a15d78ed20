"""Lowering rules: shape and view ops.

View rules (view, permute, select, slice, as_strided, ...) are pure jax.numpy and
shape-static. Multi-output views (split, unbind) return tuples. (`xlanb.view_scatter` finds the
positions a chain of views selects with torch's own view ops on a CPU index tensor: rules/internal.py.)
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from xlanb.lower.dtypes import to_jax_dtype, to_torch_dtype
from xlanb.lower.registry import lowers


# Helpers (also used by index.py) ----------------------------------------------------

def wrap_dim(dim: int, ndim: int) -> int:
    """torch's maybe_wrap_dim: a 0-d tensor accepts dims -1 and 0."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"dimension {dim} out of range for a {ndim}-d tensor")
    return dim + n if dim < 0 else dim


def wrap_dims(dims, ndim: int) -> tuple:
    return tuple(wrap_dim(d, ndim) for d in dims)


def promoted_dtype(arrays):
    """torch.result_type over tensors (no Python scalars), as a numpy dtype."""
    dt = None
    for a in arrays:
        t = to_torch_dtype(a.dtype)
        dt = t if dt is None else torch.promote_types(dt, t)
    return to_jax_dtype(dt)


def _cast(x, dtype):
    return x if x.dtype == dtype else x.astype(dtype)


def _fill_value(value, dtype):
    """A lifted Scalar (Python number or weak 0-d array) or 0-d tensor, as `dtype`."""
    return jnp.asarray(value).astype(dtype)


def _slice_bounds(size: int, start, end, step: int):
    """torch's slice clamping: (start, end) with 0 <= start <= end <= size."""
    if step <= 0:
        raise ValueError("slice step must be positive")
    start = 0 if start is None else start
    end = size if end is None else end
    if start < 0:
        start += size
    if end < 0:
        end += size
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, end


def _shape_with_infer(size, numel: int) -> tuple:
    size = tuple(int(s) for s in size)
    if -1 in size:
        known = math.prod(s for s in size if s != -1)
        size = tuple((numel // known if known else 0) if s == -1 else s for s in size)
    return size


# View ops ---------------------------------------------------------------------------

@lowers("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.view_copy.default")
def view(x, size):
    return jnp.reshape(x, _shape_with_infer(size, x.size))


@lowers("aten._reshape_alias.default", "aten._reshape_alias_copy.default")
def reshape_alias(x, size, stride):
    return jnp.reshape(x, tuple(size))


def _real_pairs(x):
    """complex (...) -> real (..., 2)."""
    return jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)


@lowers("aten.view.dtype", "aten.view_copy.dtype")
def view_dtype(x, dtype):
    """Bit reinterpretation; a size change rescales the last dim, as in torch."""
    to = to_jax_dtype(dtype)
    if x.dtype == to:
        return x
    if x.ndim == 0:                     # only between dtypes of one size, as in torch: as one element
        return view_dtype(x.reshape(1), dtype).reshape(())
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        pairs = _real_pairs(x)
        x = pairs.reshape(x.shape[:-1] + (x.shape[-1] * 2,)) if x.ndim else pairs
    elif x.dtype == np.bool_:
        x = x.astype(np.uint8)
    if jnp.issubdtype(to, jnp.complexfloating):
        part = np.dtype(np.float32 if to == np.complex64 else np.float64)
        y = view_dtype(x, to_torch_dtype(part))
        y = y.reshape(y.shape[:-1] + (y.shape[-1] // 2, 2)) if y.ndim else y
        return lax.complex(y[..., 0], y[..., 1])
    target = np.dtype(np.uint8) if to == np.bool_ else to
    isz, osz = x.dtype.itemsize, target.itemsize
    if isz == osz:
        y = lax.bitcast_convert_type(x, target)
    elif isz > osz:
        y = lax.bitcast_convert_type(x, target)                 # (..., n, isz // osz)
        y = y.reshape(x.shape[:-1] + (x.shape[-1] * (isz // osz),))
    else:
        r = osz // isz
        y = lax.bitcast_convert_type(x.reshape(x.shape[:-1] + (x.shape[-1] // r, r)), target)
    return y != 0 if to == np.bool_ else y


@lowers("aten.permute.default", "aten.permute_copy.default")
def permute(x, dims):
    return jnp.transpose(x, wrap_dims(dims, x.ndim)) if x.ndim else x


@lowers("aten.transpose.int", "aten.transpose_copy.int", "aten.swapaxes.default")
def transpose(x, dim0, dim1):
    if x.ndim < 2:
        wrap_dims((dim0, dim1), x.ndim)
        return x
    return jnp.swapaxes(x, wrap_dim(dim0, x.ndim), wrap_dim(dim1, x.ndim))


@lowers("aten.t.default", "aten.t_copy.default")
def t(x):
    return x if x.ndim < 2 else jnp.swapaxes(x, 0, 1)


@lowers("aten.expand.default", "aten.expand_copy.default")
def expand(x, size, *, implicit=False):
    size = tuple(size)
    lead = len(size) - x.ndim
    shape = tuple(x.shape[i - lead] if i >= lead and s == -1 else s for i, s in enumerate(size))
    return jnp.broadcast_to(x, shape)


@lowers("aten.squeeze.default", "aten.squeeze_copy.default")
def squeeze(x):
    return jnp.reshape(x, tuple(s for s in x.shape if s != 1))


@lowers("aten.squeeze.dim", "aten.squeeze_copy.dim")
def squeeze_dim(x, dim):
    return squeeze_dims(x, (dim,))


@lowers("aten.squeeze.dims", "aten.squeeze_copy.dims")
def squeeze_dims(x, dim):
    if x.ndim == 0:
        wrap_dims(dim, 0)
        return x
    drop = {d for d in wrap_dims(dim, x.ndim) if x.shape[d] == 1}
    return jnp.reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in drop))


@lowers("aten.unsqueeze.default", "aten.unsqueeze_copy.default")
def unsqueeze(x, dim):
    return jnp.expand_dims(x, wrap_dim(dim, x.ndim + 1))


@lowers("aten.select.int", "aten.select_copy.int")
def select(x, dim, index):
    dim = wrap_dim(dim, x.ndim)
    index = index + x.shape[dim] if index < 0 else index
    return lax.index_in_dim(x, index, dim, keepdims=False)


@lowers("aten.slice.Tensor", "aten.slice_copy.Tensor")
def slice_(x, dim=0, start=None, end=None, step=1):
    dim = wrap_dim(dim, x.ndim)
    start, end = _slice_bounds(x.shape[dim], start, end, step)
    return lax.slice_in_dim(x, start, end, step, dim)


@lowers("aten.narrow.default")
def narrow(x, dim, start, length):
    dim = wrap_dim(dim, x.ndim)
    start = start + x.shape[dim] if start < 0 else start
    return lax.slice_in_dim(x, start, start + length, 1, dim)


@lowers("aten.diagonal.default", "aten.diagonal_copy.default")
def diagonal(x, offset=0, dim1=0, dim2=1):
    dim1, dim2 = wrap_dim(dim1, x.ndim), wrap_dim(dim2, x.ndim)
    n1, n2 = x.shape[dim1], x.shape[dim2]
    length = max(min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2), 0)
    if length == 0:
        rest = tuple(s for i, s in enumerate(x.shape) if i not in (dim1, dim2))
        return jnp.zeros(rest + (0,), x.dtype)
    return jnp.diagonal(x, offset, dim1, dim2)


def strided_positions(size, stride, storage_offset) -> np.ndarray:
    """Flat storage positions (int64, shape `size`) an as_strided view reads."""
    size = tuple(int(s) for s in size)
    pos = np.full(size, int(storage_offset or 0), dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        pos = pos + (np.arange(n, dtype=np.int64) * int(s)).reshape(shape)
    return pos


def _as_strided_by_slicing(flat, size, stride, offset):
    """as_strided as pad + reshape + slice + transpose, when strides nest; else None."""
    dims = [d for d in range(len(size)) if size[d] > 1 and stride[d] != 0]
    if any(stride[d] < 0 for d in dims):
        return None
    order = sorted(dims, key=lambda d: -stride[d])
    s = [stride[d] for d in order]
    n = [size[d] for d in order]
    for k in range(1, len(order)):
        if s[k - 1] % s[k] or n[k] * s[k] > s[k - 1]:
            return None
    if not order:
        return jnp.broadcast_to(flat[offset].reshape((1,) * len(size)), size)
    total = n[0] * s[0]
    seg = flat[offset:offset + total]
    if seg.shape[0] < total:
        seg = jnp.concatenate([seg, jnp.zeros((total - seg.shape[0],), flat.dtype)])
    grid = (n[0],) + tuple(s[k - 1] // s[k] for k in range(1, len(s))) + (s[-1],)
    seg = seg.reshape(grid)[(slice(None),) + tuple(slice(0, m) for m in n[1:]) + (0,)]
    y = jnp.transpose(seg, [order.index(d) for d in sorted(dims)])
    y = y.reshape(tuple(size[d] if d in dims else 1 for d in range(len(size))))
    return jnp.broadcast_to(y, size)


@lowers("aten.as_strided.default", "aten.as_strided_copy.default")
def as_strided(x, size, stride, storage_offset=None):
    """Reads x as the contiguous base storage (offset 0) through size/stride/offset."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    offset = int(storage_offset or 0)
    flat = x.reshape(-1)
    if math.prod(size) == 0:
        return jnp.zeros(size, x.dtype)
    y = _as_strided_by_slicing(flat, size, stride, offset)
    if y is not None:
        return y
    pos = strided_positions(size, stride, offset)
    pos = pos.astype(np.int32 if flat.shape[0] < 2 ** 31 else np.int64)
    return flat[pos]


@lowers("aten.unfold.default", "aten.unfold_copy.default")
def unfold(x, dimension, size, step):
    if x.ndim == 0:
        return x.reshape(1)
    d = wrap_dim(dimension, x.ndim)
    windows = (x.shape[d] - size) // step + 1
    if size <= 32:
        last = (windows - 1) * step
        parts = [lax.slice_in_dim(x, j, j + last + 1, step, d) for j in range(size)]
        return jnp.stack(parts, axis=-1)
    idx = (np.arange(windows)[:, None] * step + np.arange(size)[None, :]).astype(np.int32)
    y = jnp.take(x, idx, axis=d)                       # (..., windows, size, ...)
    return jnp.moveaxis(y, d + 1, -1)


def _split_sizes(x, sizes, dim):
    dim = wrap_dim(dim, x.ndim)
    out, start = [], 0
    for s in sizes:
        out.append(lax.slice_in_dim(x, start, start + s, 1, dim))
        start += s
    return tuple(out)


@lowers("aten.split.Tensor", "aten.split_copy.Tensor")
def split(x, split_size, dim=0):
    d = wrap_dim(dim, x.ndim)
    n = x.shape[d]
    if split_size == 0:
        return (x,) if n == 0 else ()
    count = max((n + split_size - 1) // split_size, 1)
    sizes = [split_size] * (count - 1) + [n - split_size * (count - 1)]
    return _split_sizes(x, sizes, d)


@lowers("aten.split_with_sizes.default", "aten.split_with_sizes_copy.default")
def split_with_sizes(x, split_sizes, dim=0):
    return _split_sizes(x, split_sizes, dim)


@lowers("aten.chunk.default")
def chunk(x, chunks, dim=0):
    d = wrap_dim(dim, x.ndim)
    n = x.shape[d]
    size = (n + chunks - 1) // chunks
    if size == 0:
        return _split_sizes(x, [0] * chunks, d)
    return split(x, size, d)


@lowers("aten.unbind.int", "aten.unbind_copy.int")
def unbind(x, dim=0):
    d = wrap_dim(dim, x.ndim)
    return tuple(lax.index_in_dim(x, i, d, keepdims=False) for i in range(x.shape[d]))


@lowers("aten.view_as_real.default", "aten.view_as_real_copy.default")
def view_as_real(x):
    return _real_pairs(x)


@lowers("aten.view_as_complex.default", "aten.view_as_complex_copy.default")
def view_as_complex(x):
    return lax.complex(x[..., 0], x[..., 1])


@lowers("aten.unflatten.int")
def unflatten(x, dim, sizes):
    d = wrap_dim(dim, x.ndim)
    sizes = _shape_with_infer(sizes, x.shape[d])
    return jnp.reshape(x, x.shape[:d] + sizes + x.shape[d + 1:])


@lowers("aten.flatten.using_ints")
def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return x.reshape(1)
    s, e = wrap_dim(start_dim, x.ndim), wrap_dim(end_dim, x.ndim)
    return jnp.reshape(x, x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


@lowers("aten.movedim.int")
def movedim(x, source, destination):
    if x.ndim == 0:
        return x
    return jnp.moveaxis(x, wrap_dim(source, x.ndim), wrap_dim(destination, x.ndim))


@lowers("aten.alias_copy.default", "aten.detach_copy.default", "aten.lift_fresh_copy.default")
def identity_copy(x):
    return x


# Non-view shape ops -----------------------------------------------------------------

@lowers("aten.cat.default")
def cat(tensors, dim=0):
    dtype = promoted_dtype(tensors)
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not kept:
        return jnp.zeros((0,), dtype)
    d = wrap_dim(dim, kept[0].ndim)
    if len(kept) == 1:
        return _cast(kept[0], dtype)
    return jnp.concatenate([_cast(t, dtype) for t in kept], axis=d)


@lowers("aten.stack.default")
def stack(tensors, dim=0):
    dtype = promoted_dtype(tensors)
    d = wrap_dim(dim, tensors[0].ndim + 1)
    return jnp.stack([_cast(t, dtype) for t in tensors], axis=d)


@lowers("aten.flip.default")
def flip(x, dims):
    if x.ndim == 0:
        return x
    dims = wrap_dims(dims, x.ndim)
    return jnp.flip(x, dims) if dims else x


@lowers("aten.roll.default")
def roll(x, shifts, dims=()):
    shifts, dims = tuple(shifts), tuple(dims)
    if not dims:
        return jnp.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
    if x.ndim == 0:
        return x
    return jnp.roll(x, shifts, wrap_dims(dims, x.ndim))


@lowers("aten.repeat.default")
def repeat(x, repeats):
    repeats = tuple(repeats)
    x = x.reshape((1,) * (len(repeats) - x.ndim) + x.shape)
    return jnp.tile(x, repeats)


@lowers("aten.tril.default")
def tril(x, diagonal=0):
    return jnp.tril(x, diagonal)


@lowers("aten.triu.default")
def triu(x, diagonal=0):
    return jnp.triu(x, diagonal)


@lowers("aten.select_scatter.default")
def select_scatter(x, src, dim, index):
    dim = wrap_dim(dim, x.ndim)
    index = index + x.shape[dim] if index < 0 else index
    return lax.dynamic_update_slice_in_dim(x, jnp.expand_dims(_cast(src, x.dtype), dim), index, dim)


@lowers("aten.slice_scatter.default")
def slice_scatter(x, src, dim=0, start=None, end=None, step=1):
    dim = wrap_dim(dim, x.ndim)
    start, end = _slice_bounds(x.shape[dim], start, end, step)
    src = _cast(src, x.dtype)
    if step == 1:
        return lax.dynamic_update_slice_in_dim(x, src, start, dim) if src.size else x
    return x.at[(slice(None),) * dim + (slice(start, end, step),)].set(src)


def _scatter_positions(x, src, pos: np.ndarray):
    """x with the flat positions `pos` (same shape as src) overwritten by src."""
    if pos.size == 0:
        return x
    pos = pos.reshape(-1).astype(np.int32 if x.size < 2 ** 31 else np.int64)
    flat = x.reshape(-1).at[pos].set(_cast(src, x.dtype).reshape(-1))
    return flat.reshape(x.shape)


@lowers("aten.diagonal_scatter.default")
def diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    positions = np.arange(x.size, dtype=np.int64).reshape(x.shape)
    d1, d2 = wrap_dim(dim1, x.ndim), wrap_dim(dim2, x.ndim)
    return _scatter_positions(x, src, np.diagonal(positions, offset, d1, d2))


@lowers("aten.as_strided_scatter.default")
def as_strided_scatter(x, src, size, stride, storage_offset=None):
    return _scatter_positions(x, src, strided_positions(size, stride, storage_offset))


@lowers("aten.fill.Scalar", "aten.fill.Tensor")
def fill(x, value):
    return jnp.broadcast_to(_fill_value(value, x.dtype), x.shape)


@lowers("aten.zero.default")
def zero(x):
    return jnp.zeros_like(x)


@lowers("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def masked_fill(x, mask, value):
    return jnp.where(mask, _fill_value(value, x.dtype), x)


@lowers("aten.repeat_interleave.self_int")
def repeat_interleave_self_int(x, repeats, dim=None, *, output_size=None):
    if dim is None:
        return jnp.repeat(x.reshape(-1), repeats, axis=0)
    if x.ndim == 0:
        return jnp.repeat(x.reshape(1), repeats, axis=0)
    return jnp.repeat(x, repeats, axis=wrap_dim(dim, x.ndim))


@lowers("aten.repeat_interleave.Tensor")
def repeat_interleave_tensor(repeats, *, output_size=None):
    if output_size is None:
        raise NotImplementedError("repeat_interleave without output_size has a data-dependent shape")
    repeats = repeats.reshape(-1)
    idx = jnp.arange(repeats.shape[0], dtype=np.int64)
    return jnp.repeat(idx, repeats, total_repeat_length=output_size)


@lowers("aten.block_diag.default")
def block_diag(tensors):
    dtype = promoted_dtype(tensors)
    mats = [t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t for t in tensors]
    rows, cols = sum(m.shape[0] for m in mats), sum(m.shape[1] for m in mats)
    out = jnp.zeros((rows, cols), dtype)
    r = c = 0
    for m in mats:
        if m.size:
            out = lax.dynamic_update_slice(out, _cast(m, dtype), (r, c))
        r, c = r + m.shape[0], c + m.shape[1]
    return out

