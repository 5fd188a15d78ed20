"""Lowering rules: sorting and order statistics (sort, topk, kthvalue, median, nanmedian).

Everything goes through one stable sort along an axis: NaN sorts as the largest value (last
ascending, first descending) and -0.0 equals 0.0, as in torch. Ties keep their original
order (torch's `stable=True`; for the unstable overloads torch leaves tie order unspecified).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlanb.lower.registry import lowers

_I64 = np.dtype(np.int64)


def stable_sort(x, dim=-1, descending=False):
    """(values, int64 indices) of x sorted along dim."""
    if x.ndim == 0:
        return x, jnp.zeros((), _I64)
    ax = int(dim) % x.ndim
    idx = lax.broadcasted_iota(_I64, x.shape, ax)
    key = x.astype(jnp.uint8) if x.dtype == jnp.bool_ else x
    if descending:
        # stable descending = reversed(stable ascending of the reversed input)
        key, idx = jnp.flip(key, ax), jnp.flip(idx, ax)
    vals, idx = lax.sort((key, idx), dimension=ax, is_stable=True, num_keys=1)
    if descending:
        vals, idx = jnp.flip(vals, ax), jnp.flip(idx, ax)
    return vals.astype(x.dtype), idx


@lowers("aten.sort.default")
def sort(x, dim=-1, descending=False):
    return stable_sort(x, dim, descending)


@lowers("aten.sort.stable")
def sort_stable(x, *, stable=None, dim=-1, descending=False):
    return stable_sort(x, dim, descending)


def _take(v, ax, start, size):
    return lax.slice_in_dim(v, start, start + size, axis=ax)


@lowers("aten.topk.default")
def topk(x, k, dim=-1, largest=True, sorted=True):
    vals, idx = stable_sort(x, dim, descending=largest)
    if x.ndim == 0:
        return vals, idx
    ax = int(dim) % x.ndim
    return _take(vals, ax, 0, int(k)), _take(idx, ax, 0, int(k))


def _pick(vals, idx, ax, pos, keepdim):
    """vals/idx at per-row position `pos` (an int array shaped like the reduced result, kept dim)."""
    v = jnp.take_along_axis(vals, pos, axis=ax)
    i = jnp.take_along_axis(idx, pos, axis=ax)
    if not keepdim:
        v, i = jnp.squeeze(v, ax), jnp.squeeze(i, ax)
    return v, i


@lowers("aten.kthvalue.default")
def kthvalue(x, k, dim=-1, keepdim=False):
    vals, idx = stable_sort(x, dim)
    if x.ndim == 0:
        return vals, idx
    ax = int(dim) % x.ndim
    v, i = _take(vals, ax, int(k) - 1, 1), _take(idx, ax, int(k) - 1, 1)
    return (v, i) if keepdim else (jnp.squeeze(v, ax), jnp.squeeze(i, ax))


def median_(x, dim, keepdim, ignore_nan):
    if x.ndim == 0:
        return x, jnp.zeros((), _I64)
    ax = int(dim) % x.ndim
    n = x.shape[ax]
    if n == 0:
        raise ValueError("median of an empty dimension")
    vals, idx = stable_sort(x, ax)
    is_float = jnp.issubdtype(x.dtype, jnp.inexact)
    if is_float:
        nan_count = jnp.sum(jnp.isnan(x), axis=ax, keepdims=True, dtype=_I64)
    else:
        nan_count = jnp.zeros(x.shape[:ax] + (1,) + x.shape[ax + 1:], _I64)
    if ignore_nan:
        # lower median of the non-NaN values; all-NaN rows give the middle (NaN) position
        m = n - nan_count
        pos = jnp.where(m > 0, (m - 1) // 2, (n - 1) // 2)
    else:
        # a row with NaN gives its first NaN (NaNs sort last, stably)
        pos = jnp.where(nan_count > 0, n - nan_count, (n - 1) // 2)
    return _pick(vals, idx, ax, pos, keepdim)


@lowers("aten.median.dim")
def median_dim(x, dim, keepdim=False):
    return median_(x, dim, keepdim, ignore_nan=False)


@lowers("aten.nanmedian.dim")
def nanmedian_dim(x, dim, keepdim=False):
    return median_(x, dim, keepdim, ignore_nan=True)


def _median_all(x, ignore_nan):
    if x.size == 0:
        return jnp.full((), jnp.nan, x.dtype) if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.zeros((), x.dtype)
    return median_(x.reshape(-1), 0, False, ignore_nan)[0]


@lowers("aten.median.default")
def median(x):
    return _median_all(x, ignore_nan=False)


@lowers("aten.nanmedian.default")
def nanmedian(x):
    return _median_all(x, ignore_nan=True)
