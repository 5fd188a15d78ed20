"""Lowering rules: gather/scatter and advanced indexing.

Index tensors may be int32 or int64; negative indices wrap (torch raises on them for
some ops, wrapping is a superset). Out-of-range indices do not raise: gathers clamp or
fill and scatters drop them, as XLA does. Accumulating scatters of float16/bfloat16
run in float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlanb.lower.registry import lowers
from xlanb.lower.rules.shape import promoted_dtype, wrap_dim

_LOW_FLOATS = (np.dtype(np.float16), np.dtype(jnp.bfloat16))


def _cast(x, dtype):
    return x if x.dtype == dtype else x.astype(dtype)


def _acc_dtype(dtype):
    return np.dtype(np.float32) if dtype in _LOW_FLOATS else dtype


def _value(value, dtype):
    """A lifted Scalar (number or weak 0-d array) or a 0-d tensor, as `dtype`."""
    return jnp.asarray(value).astype(dtype)


# gather / scatter along a dim ------------------------------------------------------

def _dim_indices(index, dim):
    """The full index tuple of torch's scatter: `index` along dim, positions elsewhere."""
    return tuple(index if d == dim else lax.broadcasted_iota(index.dtype, index.shape, d)
                 for d in range(index.ndim))


def _leading(src, shape):
    """src cut to its leading `shape` block (torch reads src only where index is)."""
    if src.shape == tuple(shape):
        return src
    return src[tuple(slice(0, n) for n in shape)]


@lowers("aten.gather.default")
def gather(x, dim, index, *, sparse_grad=False):
    shape = index.shape
    if x.ndim == 0:
        x, dim = x.reshape(1), 0
    if index.ndim == 0:
        index = index.reshape((1,) * x.ndim)
    dim = wrap_dim(dim, x.ndim)
    if index.size == 0:
        return jnp.zeros(shape, x.dtype)
    x = x[tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(index.shape))]
    return jnp.take_along_axis(x, index, axis=dim, mode="clip").reshape(shape)


def _wrap_index(index, n):
    """Negative indices count from the end (torch's take/index_select/index_add...)."""
    return jnp.where(index < 0, index + n, index)


_REDUCE = {"add": "sum", "multiply": "prod", "sum": "sum", "prod": "prod", "mean": "mean",
           "amax": "amax", "amin": "amin"}


def _identity(reduce, dtype):
    if reduce == "sum" or reduce == "mean":
        return jnp.zeros((), dtype)
    if reduce == "prod":
        return jnp.ones((), dtype)
    if dtype == np.bool_:
        return jnp.asarray(reduce == "amin")
    if jnp.issubdtype(dtype, jnp.floating):
        return jnp.asarray(-np.inf if reduce == "amax" else np.inf, dtype)
    info = jnp.iinfo(dtype)
    return jnp.asarray(info.min if reduce == "amax" else info.max, dtype)


def _scatter(x, idx, src, reduce=None, include_self=True):
    """x.at[idx] combined with src under torch's reduction `reduce` (None: overwrite)."""
    if reduce is None:
        return x.at[idx].set(_cast(src, x.dtype))
    reduce = _REDUCE[reduce]
    out_dtype = x.dtype
    if x.dtype == np.bool_ and reduce in ("sum", "prod", "mean"):
        reduce = {"sum": "amax", "prod": "amin", "mean": "amax"}[reduce]
    acc = _acc_dtype(x.dtype)
    x, src = _cast(x, acc), _cast(src, acc)
    if include_self:
        base = x
    else:
        base = x.at[idx].set(_identity(reduce, acc))
    ref = base.at[idx]
    if reduce == "sum":
        out = ref.add(src)
    elif reduce == "prod":
        out = ref.multiply(src)
    elif reduce == "amax":
        out = ref.max(src)
    elif reduce == "amin":
        out = ref.min(src)
    else:   # mean: torch divides by the count of contributions (self included), floor for ints
        total = ref.add(src)
        count = jnp.zeros(x.shape, acc).at[idx].add(jnp.ones(src.shape, acc))
        if include_self:
            count = count + 1
        count = jnp.where(count == 0, jnp.ones((), acc), count)
        out = total / count if jnp.issubdtype(acc, jnp.inexact) else jnp.floor_divide(total, count)
    return _cast(out, out_dtype)


def _scatter_dim(x, dim, index, src, reduce=None, include_self=True):
    if x.ndim == 0:
        out = _scatter_dim(x.reshape(1), 0, index.reshape(-1), jnp.reshape(src, (1,) * min(src.ndim, 1)),
                           reduce, include_self)
        return out.reshape(())
    if index.ndim == 0:
        index = index.reshape((1,) * x.ndim)
    if index.size == 0:
        return x
    dim = wrap_dim(dim, x.ndim)
    if src.ndim == 0:
        src = jnp.broadcast_to(src, index.shape)
    else:
        src = _leading(src, index.shape)
    return _scatter(x, _dim_indices(index, dim), src, reduce, include_self)


@lowers("aten.scatter.src")
def scatter_src(x, dim, index, src):
    return _scatter_dim(x, dim, index, src)


@lowers("aten.scatter.value")
def scatter_value(x, dim, index, value):
    return _scatter_dim(x, dim, index, _value(value, x.dtype))


@lowers("aten.scatter.reduce")
def scatter_reduce_legacy(x, dim, index, src, *, reduce):
    return _scatter_dim(x, dim, index, src, reduce)


@lowers("aten.scatter.value_reduce")
def scatter_value_reduce(x, dim, index, value, *, reduce):
    return _scatter_dim(x, dim, index, _value(value, x.dtype), reduce)


@lowers("aten.scatter_add.default")
def scatter_add(x, dim, index, src):
    return _scatter_dim(x, dim, index, src, "sum")


@lowers("aten.scatter_reduce.two")
def scatter_reduce(x, dim, index, src, reduce, *, include_self=True):
    return _scatter_dim(x, dim, index, src, reduce, include_self)


# Advanced indexing -----------------------------------------------------------------

def _index_tuple(indices):
    for i in indices:
        if i is not None and i.dtype in (np.bool_, np.uint8):
            raise NotImplementedError("boolean/uint8 mask indices have a data-dependent shape")
    return tuple(slice(None) if i is None else i for i in indices)


@lowers("aten.index.Tensor", "aten._unsafe_index.Tensor")
def index(x, indices):
    """x[indices] with torch's (= numpy's) placement of the advanced-index dims."""
    idx = _index_tuple(indices)
    if not any(isinstance(i, jax.Array) for i in idx):
        return x
    return x[idx]


def _masked_put(x, indices, values, accumulate):
    """x[mask] = v (one boolean mask after leading slices, v a single value): a select."""
    lead = next(k for k, i in enumerate(indices) if i is not None)
    mask = indices[lead]
    mask = mask.reshape((1,) * lead + mask.shape + (1,) * (x.ndim - lead - mask.ndim))
    v = jnp.reshape(values, ()).astype(x.dtype)
    if accumulate:
        return jnp.where(mask, x + v, x) if x.dtype != jnp.bool_ else jnp.where(mask, x | v, x)
    return jnp.where(mask, v, x)


@lowers("aten.index_put.default", "aten._unsafe_index_put.default")
def index_put(x, indices, values, accumulate=False):
    given = [i for i in indices if i is not None]
    if len(given) == 1 and given[0].dtype == np.bool_ and jnp.size(values) == 1:
        return _masked_put(x, indices, values, accumulate)
    idx = _index_tuple(indices)
    if accumulate:
        return _scatter(x, idx, values, "sum")
    return x.at[idx].set(_cast(values, x.dtype))


@lowers("aten._index_put_impl.default")
def index_put_impl(x, indices, values, accumulate=False, unsafe=False):
    return index_put(x, indices, values, accumulate)


def _along(x, dim, index):
    """The index tuple selecting `index` (1-d) along `dim`."""
    return (slice(None),) * dim + (index.reshape(-1),)


@lowers("aten.index_select.default")
def index_select(x, dim, index):
    if x.ndim == 0:
        return jnp.take(x.reshape(1), _wrap_index(index.reshape(-1), 1), mode="clip").reshape(())
    dim = wrap_dim(dim, x.ndim)
    return jnp.take(x, _wrap_index(index.reshape(-1), x.shape[dim]), axis=dim, mode="clip")


def _index_update(x, dim, index, source, reduce, include_self=True):
    if x.ndim == 0:
        out = _index_update(x.reshape(1), 0, index, jnp.reshape(source, (-1,)), reduce, include_self)
        return out.reshape(())
    dim = wrap_dim(dim, x.ndim)
    idx = _along(x, dim, index)
    if source.ndim == 0:
        source = source.reshape((1,) * x.ndim)
    return _scatter(x, idx, source, reduce, include_self)


@lowers("aten.index_reduce.default")
def index_reduce(x, dim, index, source, reduce, *, include_self=True):
    return _index_update(x, dim, index, source, reduce, include_self)


@lowers("aten.index_add.default")
def index_add(x, dim, index, source, *, alpha=1):
    if not (isinstance(alpha, (int, float)) and alpha == 1):
        source = source.astype(_acc_dtype(source.dtype)) * alpha
    return _index_update(x, dim, index, source, "sum")


@lowers("aten.index_copy.default")
def index_copy(x, dim, index, source):
    return _index_update(x, dim, index, source, None)


@lowers("aten.index_fill.int_Scalar", "aten.index_fill.int_Tensor")
def index_fill(x, dim, index, value):
    if x.ndim == 0:
        return index_fill(x.reshape(1), 0, index, value).reshape(())
    dim = wrap_dim(dim, x.ndim)
    return x.at[_along(x, dim, index)].set(_value(value, x.dtype))


@lowers("aten.masked_scatter.default")
def masked_scatter(x, mask, source):
    """Masked positions take source's elements in order: the k-th True reads source[k]."""
    shape = jnp.broadcast_shapes(x.shape, mask.shape)
    x = jnp.broadcast_to(x, shape).reshape(-1)
    m = jnp.broadcast_to(mask, shape).reshape(-1)
    if source.size == 0 or x.size == 0:
        return x.reshape(shape)
    count_dtype = np.int32 if x.size < 2 ** 31 else np.int64
    pos = jnp.cumsum(m.astype(count_dtype)) - 1
    vals = jnp.take(source.reshape(-1), jnp.clip(pos, 0, source.size - 1), mode="clip")
    return jnp.where(m, _cast(vals, x.dtype), x).reshape(shape)


@lowers("aten.take.default")
def take(x, index):
    flat = x.reshape(-1)
    if flat.size == 0:
        return jnp.zeros(index.shape, x.dtype)
    return jnp.take(flat, _wrap_index(index, flat.size), mode="clip")


@lowers("aten.put.default")
def put(x, index, source, accumulate=False):
    flat = x.reshape(-1)
    idx = (index.reshape(-1),)
    src = source.reshape(-1)
    out = _scatter(flat, idx, src, "sum") if accumulate else flat.at[idx].set(_cast(src, x.dtype))
    return out.reshape(x.shape)


@lowers("aten.take_along_dim.default")
def take_along_dim(x, indices, dim=None):
    if dim is None:
        return take(x, indices.reshape(-1))
    if x.ndim == 0:
        return jnp.take(x.reshape(1), indices.reshape(-1), mode="clip").reshape(indices.shape)
    dim = wrap_dim(dim, x.ndim)
    xs, ks = list(x.shape), list(indices.shape)
    xs[dim] = ks[dim] = 1
    common = list(jnp.broadcast_shapes(tuple(xs), tuple(ks)))
    x = jnp.broadcast_to(x, tuple(common[:dim] + [x.shape[dim]] + common[dim + 1:]))
    indices = jnp.broadcast_to(indices, tuple(common[:dim] + [indices.shape[dim]] + common[dim + 1:]))
    return jnp.take_along_axis(x, indices, axis=dim, mode="clip")


# Sorted search ---------------------------------------------------------------------

def _searchsorted(seq, values, out_int32, right, side, sorter):
    side = side if side is not None else ("right" if right else "left")
    out_dtype = np.int32 if out_int32 else np.int64
    dtype = promoted_dtype([seq, values])
    seq, values = _cast(seq, dtype), _cast(values, dtype)
    if sorter is not None:
        seq = jnp.take_along_axis(seq, sorter, axis=-1, mode="clip")
    if seq.ndim <= 1:
        return jnp.searchsorted(seq.reshape(-1), values, side=side).astype(out_dtype)
    n = seq.shape[-1]
    rows = seq.reshape(-1, n)
    vals = values.reshape(rows.shape[0], -1)
    out = jax.vmap(lambda s, v: jnp.searchsorted(s, v, side=side))(rows, vals)
    return out.reshape(values.shape).astype(out_dtype)


@lowers("aten.searchsorted.Tensor")
def searchsorted(sorted_sequence, x, *, out_int32=False, right=False, side=None, sorter=None):
    return _searchsorted(sorted_sequence, x, out_int32, right, side, sorter)


def _scalar_operand(x, seq):
    """A lifted Scalar in the dtype torch compares it in: int sequence vs float -> float."""
    x = jnp.asarray(x)
    return x.astype(jnp.result_type(seq, x))


@lowers("aten.searchsorted.Scalar")
def searchsorted_scalar(sorted_sequence, x, *, out_int32=False, right=False, side=None, sorter=None):
    value = _scalar_operand(x, sorted_sequence)
    return _searchsorted(sorted_sequence, value, out_int32, right, side, sorter)


@lowers("aten.bucketize.Tensor")
def bucketize(x, boundaries, *, out_int32=False, right=False):
    return _searchsorted(boundaries, x, out_int32, right, None, None)


@lowers("aten.bucketize.Scalar")
def bucketize_scalar(x, boundaries, *, out_int32=False, right=False):
    value = _scalar_operand(x, boundaries)
    return _searchsorted(boundaries, value, out_int32, right, None, None)


@lowers("aten.nonzero_static.default")
def nonzero_static(x, *, size, fill_value=-1):
    """The first `size` nonzero positions (row-major), padded with fill_value (capture gives
    nonzero() its exact count, computed first)."""
    if x.ndim == 0:
        return jnp.zeros((size, 0), np.int64)
    cols = jnp.nonzero(x, size=size, fill_value=fill_value)
    return jnp.stack([c.astype(np.int64) for c in cols], axis=1)


@lowers("xlanb.unique")
def unique(x, size, return_inverse, return_counts, consecutive):
    """torch.unique / unique_consecutive with the number of values counted by capture first."""
    flat = x.reshape(-1)
    n = flat.shape[0]
    if consecutive:
        starts = jnp.concatenate([jnp.ones((min(n, 1),), bool), flat[1:] != flat[:-1]])
        first = jnp.nonzero(starts, size=size, fill_value=0)[0]
        values = flat[first]
        inverse = (jnp.cumsum(starts.astype(np.int64)) - 1).reshape(x.shape)
        counts = jnp.diff(jnp.concatenate([first, jnp.asarray([n])]).astype(np.int64))
    else:
        values, inverse, counts = jnp.unique(flat, return_inverse=True, return_counts=True, size=size,
                                             equal_nan=False)
        inverse = inverse.reshape(x.shape).astype(np.int64)
    empty = jnp.zeros((0,), np.int64)
    return values, (inverse if return_inverse else empty), (counts.astype(np.int64) if return_counts else empty)
