"""Lowering rules: reductions (sum, mean, prod, min/max, arg*, any/all, var/std, norms, scans).

Accumulation follows torch's CPU kernels: float16/bfloat16 accumulate in float32, bool and
integer sums/products in int64 (unless `dtype=` says otherwise); the driver casts results
to torch's output dtype. min/max reductions propagate NaN; arg* and *.dim indices take the
first occurrence (NaN counting as the extreme), as torch does.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlanb.lower.dtypes import default_float, to_jax_dtype
from xlanb.lower.registry import lowers
from xlanb.lower.rules.pointwise import truthy

_I64 = np.dtype(np.int64)


def dims_of(dim, ndim, empty_is_all=True):
    """Normalized, sorted reduction axes. None (and [] unless empty_is_all=False) is every axis."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)):
        dim = (dim,)
    dim = tuple(int(d) for d in dim)
    if not dim:
        return tuple(range(ndim)) if empty_is_all else ()
    if ndim == 0:
        return ()       # dim 0 / -1 of a 0-d tensor
    return tuple(sorted({d % ndim for d in dim}))


def up(x):
    return x.astype(jnp.float32) if x.dtype in (jnp.float16, jnp.bfloat16) else x


def acc_dtype(x, dtype=None):
    """x in the dtype torch accumulates a sum/prod in."""
    if dtype is not None:
        x = x.astype(to_jax_dtype(dtype))
    elif x.dtype == jnp.bool_ or jnp.issubdtype(x.dtype, jnp.integer):
        x = x.astype(_I64)
    return up(x)


def to_float(x):
    """Integer inputs computed in the default float dtype; halves in float32."""
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return x.astype(default_float())
    return up(x)


def _keep(out, x, axes, keepdim):
    """keepdim for reductions computed without it (and 0-d inputs)."""
    if keepdim and x.ndim:
        return jnp.expand_dims(out, axes) if out.ndim < x.ndim else out
    return out


def nan_reduce(fn, x, axes, keepdim, **kw):
    """A max or min reduction (`fn`: jnp.max or jnp.min, `kw`: its `initial`) that propagates NaN, as
    torch's CPU kernels do. Every float max/min reduction of a rule goes through here: XLA's CPU
    backend drops NaN from a vectorized max/min reduction (float32 and float64 past a few thousand
    elements: `jnp.max` of 5000 values with one NaN is a number), and a small test input never
    meets that path (tests/lower/test_nan_wide.py runs each rule on wide ones)."""
    out = fn(x, axis=axes, keepdims=keepdim, **kw)
    if jnp.issubdtype(x.dtype, jnp.inexact):
        has_nan = jnp.any(jnp.isnan(x), axis=axes, keepdims=keepdim)
        out = jnp.where(has_nan, jnp.asarray(jnp.nan, out.dtype), out)
    return out


# Sums and products --------------------------------------------------------------------------

@lowers("aten.sum.default")
def sum_default(x, *, dtype=None):
    return jnp.sum(acc_dtype(x, dtype))


@lowers("aten.sum.dim_IntList")
def sum_dim(x, dim, keepdim=False, *, dtype=None):
    return jnp.sum(acc_dtype(x, dtype), axis=dims_of(dim, x.ndim), keepdims=keepdim)


@lowers("aten.nansum.default")
def nansum(x, dim=None, keepdim=False, *, dtype=None):
    x = acc_dtype(x, dtype)
    if jnp.issubdtype(x.dtype, jnp.inexact):
        x = jnp.where(jnp.isnan(x), jnp.zeros_like(x), x)
    return jnp.sum(x, axis=dims_of(dim, x.ndim), keepdims=keepdim)


@lowers("aten.mean.default")
def mean_default(x, *, dtype=None):
    return jnp.mean(acc_dtype(x, dtype))


@lowers("aten.mean.dim")
def mean_dim(x, dim, keepdim=False, *, dtype=None):
    return jnp.mean(acc_dtype(x, dtype), axis=dims_of(dim, x.ndim), keepdims=keepdim)


@lowers("aten.prod.default")
def prod_default(x, *, dtype=None):
    return jnp.prod(acc_dtype(x, dtype))


@lowers("aten.prod.dim_int")
def prod_dim(x, dim, keepdim=False, *, dtype=None):
    return jnp.prod(acc_dtype(x, dtype), axis=dims_of(dim, x.ndim), keepdims=keepdim)


@lowers("aten.count_nonzero.default", "aten.count_nonzero.dim_IntList")
def count_nonzero(x, dim=None):
    return jnp.sum(truthy(x), axis=dims_of(dim, x.ndim), dtype=_I64)


# Min / max ----------------------------------------------------------------------------------

@lowers("aten.amax.default")
def amax(x, dim=(), keepdim=False):
    return nan_reduce(jnp.max, x, dims_of(dim, x.ndim), keepdim)


@lowers("aten.amin.default")
def amin(x, dim=(), keepdim=False):
    return nan_reduce(jnp.min, x, dims_of(dim, x.ndim), keepdim)


@lowers("aten.max.default")
def max_default(x):
    return nan_reduce(jnp.max, x, None, False)


@lowers("aten.min.default")
def min_default(x):
    return nan_reduce(jnp.min, x, None, False)


@lowers("aten.aminmax.default")
def aminmax(x, *, dim=None, keepdim=False):
    axes = dims_of(dim, x.ndim)
    return nan_reduce(jnp.min, x, axes, keepdim), nan_reduce(jnp.max, x, axes, keepdim)


def _argkey(x):
    return x.astype(jnp.uint8) if x.dtype == jnp.bool_ else x


def arg_reduce(fn, x, dim, keepdim):
    """argmax/argmin: first occurrence, NaN counts as the extreme. lax's arg reductions break ties
    between equal values by index but not between NaNs, whichever the reduction order meets first
    wins: XLA:TPU named the last NaN of a flattened tensor (the fifth TPU run), so the first NaN is
    found on its own."""
    if x.ndim == 0:
        return jnp.zeros((), _I64)
    key = _argkey(x) if dim is not None else _argkey(x).reshape(-1)
    axis = 0 if dim is None else int(dim) % x.ndim
    out = fn(key, axis=axis)
    if jnp.issubdtype(key.dtype, jnp.floating):
        nan = jnp.isnan(key)
        out = jnp.where(jnp.any(nan, axis=axis), jnp.argmax(nan, axis=axis), out)
    out = out.astype(_I64)
    if keepdim:
        out = out.reshape((1,) * x.ndim) if dim is None else jnp.expand_dims(out, axis)
    return out


@lowers("aten.argmax.default")
def argmax(x, dim=None, keepdim=False):
    return arg_reduce(jnp.argmax, x, dim, keepdim)


@lowers("aten.argmin.default")
def argmin(x, dim=None, keepdim=False):
    return arg_reduce(jnp.argmin, x, dim, keepdim)


@lowers("aten.max.dim")
def max_dim(x, dim, keepdim=False):
    axes = dims_of(dim, x.ndim)
    return nan_reduce(jnp.max, x, axes, keepdim), arg_reduce(jnp.argmax, x, dim, keepdim)


@lowers("aten.min.dim")
def min_dim(x, dim, keepdim=False):
    axes = dims_of(dim, x.ndim)
    return nan_reduce(jnp.min, x, axes, keepdim), arg_reduce(jnp.argmin, x, dim, keepdim)


# any / all ----------------------------------------------------------------------------------

@lowers("aten.any.default")
def any_default(x):
    return jnp.any(truthy(x))


@lowers("aten.all.default")
def all_default(x):
    return jnp.all(truthy(x))


@lowers("aten.any.dim")
def any_dim(x, dim, keepdim=False):
    return jnp.any(truthy(x), axis=dims_of(dim, x.ndim), keepdims=keepdim)


@lowers("aten.all.dim")
def all_dim(x, dim, keepdim=False):
    return jnp.all(truthy(x), axis=dims_of(dim, x.ndim), keepdims=keepdim)


@lowers("aten.any.dims")
def any_dims(x, dim=None, keepdim=False):
    # dim=[] reduces nothing here (unlike sum.dim_IntList)
    return jnp.any(truthy(x), axis=dims_of(dim, x.ndim, empty_is_all=False), keepdims=keepdim)


@lowers("aten.all.dims")
def all_dims(x, dim=None, keepdim=False):
    return jnp.all(truthy(x), axis=dims_of(dim, x.ndim, empty_is_all=False), keepdims=keepdim)


# Moments ------------------------------------------------------------------------------------

def var_mean_(x, dim, correction, keepdim):
    x = to_float(x)
    axes = dims_of(dim, x.ndim)
    n = 1
    for a in axes:
        n *= x.shape[a]
    mean = jnp.mean(x, axis=axes, keepdims=True)
    d = x - mean
    sq = jnp.real(d * jnp.conj(d)) if jnp.issubdtype(x.dtype, jnp.complexfloating) else d * d
    ssq = jnp.sum(sq, axis=axes, keepdims=keepdim)
    corr = 1 if correction is None else correction
    var = ssq / jnp.maximum(n - corr, 0)
    return var, (mean if keepdim else jnp.squeeze(mean, axes))


@lowers("aten.var.correction")
def var(x, dim=None, *, correction=None, keepdim=False):
    return var_mean_(x, dim, correction, keepdim)[0]


@lowers("aten.std.correction")
def std(x, dim=None, *, correction=None, keepdim=False):
    return jnp.sqrt(var_mean_(x, dim, correction, keepdim)[0])


@lowers("aten.var_mean.correction")
def var_mean(x, dim=None, *, correction=None, keepdim=False):
    return var_mean_(x, dim, correction, keepdim)


@lowers("aten.std_mean.correction")
def std_mean(x, dim=None, *, correction=None, keepdim=False):
    v, m = var_mean_(x, dim, correction, keepdim)
    return jnp.sqrt(v), m


@lowers("aten.logsumexp.default")
def logsumexp(x, dim, keepdim=False):
    x = to_float(x)
    axes = dims_of(dim, x.ndim)
    # complex: ATen takes the max of the real parts
    m = jnp.max(jnp.real(x), axis=axes, keepdims=True, initial=-jnp.inf)
    m = jnp.where(jnp.isinf(m), jnp.zeros_like(m), m)
    out = jnp.log(jnp.sum(jnp.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keepdim else jnp.squeeze(out, axes)


# Norms --------------------------------------------------------------------------------------

def vector_norm(x, ord, dim, keepdim, dtype):
    if dtype is not None:
        x = x.astype(to_jax_dtype(dtype))
    x = up(x)
    axes = dims_of(dim, x.ndim)
    a = jnp.abs(x)

    def red(fn, v, **kw):
        if fn is jnp.max or fn is jnp.min:
            return nan_reduce(fn, v, axes, keepdim, **kw)
        return fn(v, axis=axes, keepdims=keepdim, **kw)

    if isinstance(ord, (int, float)):          # a constant (0, 1, -1, or unlifted)
        if ord == 2:
            return jnp.sqrt(red(jnp.sum, a * a))
        if ord == 1:
            return red(jnp.sum, a)
        if ord == 0:
            return red(jnp.sum, (a != 0).astype(a.dtype))
        if ord == float("inf"):
            return red(jnp.max, a, initial=0.0)
        if ord == -float("inf"):
            return red(jnp.min, a, initial=jnp.inf)
        return red(jnp.sum, a ** ord) ** (1.0 / ord)
    # a lifted (traced) order: every candidate, selected without branching
    p = jnp.asarray(ord, a.real.dtype if jnp.iscomplexobj(a) else a.dtype)
    general = red(jnp.sum, a ** p) ** (1 / p)
    out = jnp.where(p == 1, red(jnp.sum, a), general)
    out = jnp.where(p == 0, red(jnp.sum, (a != 0).astype(a.dtype)), out)
    out = jnp.where(p == jnp.inf, red(jnp.max, a, initial=0.0), out)
    out = jnp.where(p == -jnp.inf, red(jnp.min, a, initial=jnp.inf), out)
    return jnp.where(p == 2, jnp.sqrt(red(jnp.sum, a * a)), out)


@lowers("aten.linalg_vector_norm.default")
def linalg_vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    return vector_norm(x, ord, dim, keepdim, dtype)


def _p(p):
    return 2 if p is None else p


@lowers("aten.norm.Scalar")
def norm_scalar(x, p=2):
    return vector_norm(x, _p(p), None, False, None)


@lowers("aten.norm.ScalarOpt_dim")
def norm_dim(x, p, dim, keepdim=False):
    return vector_norm(x, _p(p), dim, keepdim, None)


@lowers("aten.norm.ScalarOpt_dtype")
def norm_dtype(x, p, *, dtype):
    return vector_norm(x, _p(p), None, False, dtype)


@lowers("aten.norm.ScalarOpt_dim_dtype")
def norm_dim_dtype(x, p, dim, keepdim, *, dtype):
    return vector_norm(x, _p(p), dim, keepdim, dtype)


# Scans --------------------------------------------------------------------------------------

def _scan_axis(x, dim):
    return None if x.ndim == 0 else int(dim) % x.ndim


@lowers("aten.cumsum.default")
def cumsum(x, dim, *, dtype=None):
    x = acc_dtype(x, dtype)
    ax = _scan_axis(x, dim)
    return x if ax is None else jnp.cumsum(x, axis=ax)


@lowers("aten.cumprod.default")
def cumprod(x, dim, *, dtype=None):
    x = acc_dtype(x, dtype)
    ax = _scan_axis(x, dim)
    return x if ax is None else jnp.cumprod(x, axis=ax)


@lowers("aten.logcumsumexp.default")
def logcumsumexp(x, dim):
    x = to_float(x)
    ax = _scan_axis(x, dim)
    if ax is None or x.size == 0:
        return x
    if jnp.iscomplexobj(x):      # ATen: a sequential scan of the complex log-add-exp
        from xlanb.lower.rules.pointwise import complex_logaddexp
        moved = jnp.moveaxis(x, ax, 0)
        _, out = lax.scan(lambda c, v: (complex_logaddexp(c, v),) * 2,
                          jnp.full(moved.shape[1:], -jnp.inf, x.dtype), moved)
        return jnp.moveaxis(out, 0, ax)
    return lax.cumlogsumexp(x, axis=ax)


def cum_extreme(x, dim, better):
    """cummax/cummin: ATen takes a new element when it is NaN or ties/beats the running value."""
    ax = _scan_axis(x, dim)
    if ax is None:
        return x, jnp.zeros((), _I64)
    if x.size == 0:
        return x, jnp.zeros(x.shape, _I64)
    idx = lax.broadcasted_iota(_I64, x.shape, ax)
    is_float = jnp.issubdtype(x.dtype, jnp.inexact)

    def combine(a, b):
        (av, ai), (bv, bi) = a, b
        take = better(bv, av)
        if is_float:
            take = jnp.isnan(bv) | (~jnp.isnan(av) & take)
        return jnp.where(take, bv, av), jnp.where(take, bi, ai)

    return lax.associative_scan(combine, (x, idx), axis=ax)


@lowers("aten.cummax.default")
def cummax(x, dim):
    return cum_extreme(x, dim, lambda b, a: b >= a)


@lowers("aten.cummin.default")
def cummin(x, dim):
    return cum_extreme(x, dim, lambda b, a: b <= a)
