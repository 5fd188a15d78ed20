"""Lowering rules: factories (arange, full, eye, linspace, *_like, new_*, tril_indices, ...).

Capture records tensor-less factories with constant arguments (Python numbers), so sizes
and ranges are static here. `fill_value` of full/full_like/new_full may still be a lifted
(weakly typed 0-d) scalar. layout/device/pin_memory/memory_format are accepted and ignored.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from xlanb.lower.dtypes import default_float, to_jax_dtype
from xlanb.lower.registry import lowers

_HALF = (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))


def _dt(dtype, default):
    if dtype is None:
        return np.dtype(default)
    if isinstance(dtype, torch.dtype):
        return to_jax_dtype(dtype)
    return np.dtype(dtype)


def _default_complex():
    return np.dtype(np.complex128) if default_float() == np.dtype(np.float64) else np.dtype(np.complex64)


def _infer_dtype(value):
    """torch's dtype for a factory filled with `value` when dtype is None."""
    if isinstance(value, jax.Array):
        k = value.dtype
        if k == np.dtype(np.bool_):
            return k
        if jnp.issubdtype(k, jnp.integer):
            return np.dtype(np.int64)
        if jnp.issubdtype(k, jnp.complexfloating):
            return _default_complex()
        return default_float()
    if isinstance(value, bool):
        return np.dtype(np.bool_)
    if isinstance(value, int):
        return np.dtype(np.int64)
    if isinstance(value, complex):
        return _default_complex()
    return default_float()


def _shape(size):
    return tuple(int(s) for s in size)


def _full(size, value, dtype):
    return jnp.full(_shape(size), value, dtype=dtype)


# arange -----------------------------------------------------------------------------------

def _static(x, name):
    if isinstance(x, jax.Array):
        raise TypeError(f"xlanb: arange needs a constant {name} (its length is part of the graph)")
    return x


def _arange(start, end, step, dtype):
    start, end, step = _static(start, "start"), _static(end, "end"), _static(step, "step")
    meta = torch.arange(start, end, step, dtype=dtype, device="meta")
    n = meta.numel()
    out = to_jax_dtype(meta.dtype)
    if jnp.issubdtype(out, jnp.integer) or out == np.dtype(np.bool_):
        # torch truncates start and step to integers first
        idx = jnp.arange(n, dtype=jnp.int64)
        return (int(start) + int(step) * idx).astype(out)
    # torch accumulates in double: start + step * i, then rounds once
    return (start + step * jnp.arange(n, dtype=jnp.float64)).astype(out)


@lowers("aten.arange.default")
def arange(end, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _arange(0, end, 1, dtype)


@lowers("aten.arange.start")
def arange_start(start, end, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _arange(start, end, 1, dtype)


@lowers("aten.arange.start_step")
def arange_start_step(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _arange(start, end, step, dtype)


# full / zeros / ones / eye ------------------------------------------------------------------

@lowers("aten.full.default")
def full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _full(size, fill_value, _dt(dtype, _infer_dtype(fill_value)))


@lowers("aten.zeros.default", "aten._efficientzerotensor.default")
def zeros(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(_shape(size), _dt(dtype, default_float()))


@lowers("aten.ones.default")
def ones(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.ones(_shape(size), _dt(dtype, default_float()))


@lowers("aten.empty_permuted.default")
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(_shape(size), _dt(dtype, default_float()))


@lowers("aten.scalar_tensor.default")
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    default = _default_complex() if isinstance(s, complex) or (
        isinstance(s, jax.Array) and jnp.issubdtype(s.dtype, jnp.complexfloating)) else default_float()
    return jnp.full((), s, dtype=_dt(dtype, default))


@lowers("aten.eye.default")
def eye(n, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.eye(int(n), dtype=_dt(dtype, default_float()))


@lowers("aten.eye.m")
def eye_m(n, m, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.eye(int(n), int(m), dtype=_dt(dtype, default_float()))


# linspace / logspace ------------------------------------------------------------------------

def _space_dtype(start, end, dtype):
    if dtype is not None:
        return _dt(dtype, None)
    cplx = any(isinstance(v, complex) or (isinstance(v, jax.Array) and jnp.issubdtype(v.dtype, jnp.complexfloating))
               for v in (start, end))
    return _default_complex() if cplx else default_float()


def _space(start, end, steps, out, base=None):
    """torch's CPU linspace/logspace: start and end cast to the output dtype first; the step
    in that dtype (in double for integers); the first half counted up from start, the
    second half down from end; logspace raises base (cast to the output dtype) to that."""
    steps = int(steps)
    if steps == 0:
        return jnp.zeros((0,), out)
    integral = jnp.issubdtype(out, jnp.integer) or out == np.dtype(np.bool_)
    cplx = jnp.issubdtype(out, jnp.complexfloating)
    if integral:
        cdt = np.dtype(np.float64)
        rnd = lambda x: x  # noqa: E731
        s = jnp.trunc(jnp.asarray(start, cdt))
        e = jnp.trunc(jnp.asarray(end, cdt))
    else:
        # half types: like torch's BFloat16/Half arithmetic, every operation computes in float32
        # and rounds to the output dtype
        cdt = np.dtype(np.float32) if out in _HALF else out
        rnd = (lambda x: x.astype(out).astype(cdt)) if out in _HALF else (lambda x: x)  # noqa: E731
        s = rnd(jnp.asarray(start).astype(cdt))
        e = rnd(jnp.asarray(end).astype(cdt))
        if base is not None:      # logspace: the exponents stay in float32 (matches torch's results)
            rnd = lambda x: x  # noqa: E731
    if steps == 1:
        if base is not None:      # torch fills pow(base, start) computed in double
            f = np.dtype(np.complex128) if cplx else np.dtype(np.float64)
            v = jnp.power(jnp.asarray(base, f), jnp.asarray(start).astype(f))
            return (jnp.trunc(v) if integral else v).reshape(1).astype(out)
        vals = s.reshape(1)
    else:
        idx = jnp.arange(steps)
        # the barrier keeps XLA from turning the division by a constant into a multiplication by
        # its rounded reciprocal (1 ulp off, and a wrong integer after trunc)
        step = rnd((e - s) / jax.lax.optimization_barrier(jnp.asarray(steps - 1, cdt)))
        up = rnd(s + rnd(step * rnd(idx.astype(cdt))))
        down = rnd(e - rnd(step * rnd((steps - idx - 1).astype(cdt))))
        vals = jnp.where(idx < steps // 2, up, down)
    if base is not None:
        b = jnp.asarray(base, cdt if not cplx else out)      # integral outputs: pow in double, then trunc
        vals = rnd(jnp.power(rnd(b.astype(cdt)), vals))
    if integral:
        vals = jnp.trunc(vals)
    return vals.astype(out)


@lowers("aten.linspace.default", "aten.linspace.Tensor_Tensor", "aten.linspace.Tensor_Scalar",
        "aten.linspace.Scalar_Tensor")
def linspace(start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _space(start, end, steps, _space_dtype(start, end, dtype))


@lowers("aten.logspace.default", "aten.logspace.Tensor_Tensor", "aten.logspace.Tensor_Scalar",
        "aten.logspace.Scalar_Tensor")
def logspace(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _space(start, end, steps, _space_dtype(start, end, dtype), base)


# *_like and new_* ------------------------------------------------------------------------------

@lowers("aten.full_like.default")
def full_like(self, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return jnp.full(self.shape, fill_value, dtype=_dt(dtype, self.dtype))


@lowers("aten.zeros_like.default", "aten.empty_like.default")
def zeros_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return jnp.zeros(self.shape, _dt(dtype, self.dtype))


@lowers("aten.ones_like.default")
def ones_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return jnp.ones(self.shape, _dt(dtype, self.dtype))


@lowers("aten.new_empty.default", "aten.new_zeros.default")
def new_zeros(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(_shape(size), _dt(dtype, self.dtype))


@lowers("aten.new_ones.default")
def new_ones(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.ones(_shape(size), _dt(dtype, self.dtype))


@lowers("aten.new_full.default")
def new_full(self, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.full(_shape(size), fill_value, dtype=_dt(dtype, self.dtype))


@lowers("aten.new_empty_strided.default")
def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(_shape(size), _dt(dtype, self.dtype))


# tril/triu indices ------------------------------------------------------------------------------

def _indices(fn, row, col, offset, dtype):
    r, c = fn(int(row), int(offset), int(col))
    return jnp.asarray(np.stack([r, c]).astype(np.int64).reshape(2, -1), dtype=_dt(dtype, np.int64))


@lowers("aten.tril_indices.default")
def tril_indices(row, col, offset=0, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _indices(np.tril_indices, row, col, offset, dtype)


@lowers("aten.triu_indices.default")
def triu_indices(row, col, offset=0, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _indices(np.triu_indices, row, col, offset, dtype)
