"""Lowering rules: complex numbers (complex, polar, conj, angle) and the FFT family.

XLA supports complex64 and complex128 (the CPU and GPU backends). torch's conjugate and
negative *bits* do not exist here: `_conj` computes the conjugate (a view rule: on the
integer positions capture scatters through, conj is the identity), and `resolve_conj` /
`resolve_neg` are identities.

FFTs: torch's `_fft_r2c` / `_fft_c2r` / `_fft_c2c` take the transformed dims and a
normalization (0: none, 1: 1/sqrt(n), 2: 1/n, n the signal size); jnp.fft's transforms
of at most 3 dims are applied in groups (an n-d FFT is separable).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

from xlanb.lower.registry import lowers
from xlanb.lower.rules.pointwise import as_float


def _complex_dtype(x):
    return jnp.complex128 if x.dtype == jnp.float64 else jnp.complex64


@lowers("aten.complex.default", promote="same")
def complex_(real, imag):
    return lax.complex(*jnp.broadcast_arrays(real, imag))


@lowers("aten.polar.default", promote="same")
def polar(abs, angle):
    abs, angle = jnp.broadcast_arrays(abs, angle)
    return lax.complex(abs * jnp.cos(angle), abs * jnp.sin(angle))


@lowers("aten._conj.default", "aten.conj_physical.default", "aten._conj_physical.default",
        "aten._conj_copy.default")
def conj(x):
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


@lowers("aten.resolve_conj.default", "aten.resolve_neg.default")
def resolve(x):
    return x


@lowers("aten.angle.default")
def angle(x):
    if jnp.iscomplexobj(x):
        return jnp.angle(x)
    x = as_float(x)
    pi = jnp.asarray(math.pi, x.dtype)
    return jnp.where(jnp.isnan(x), x, jnp.where(x < 0, pi, jnp.zeros_like(x)))


# FFT ---------------------------------------------------------------------------------------

def _groups(dims):
    dims = list(dims)
    return [dims[i:i + 3] for i in range(0, len(dims), 3)]


def _c2c(x, dims, forward):
    for g in _groups(dims):
        x = jnp.fft.fftn(x, axes=g) if forward else jnp.fft.ifftn(x, axes=g, norm="forward")
    return x


def _scale(x, n, normalization):
    if normalization == 1:
        return x * jnp.asarray(1 / math.sqrt(n), x.real.dtype)
    if normalization == 2:
        return x * jnp.asarray(1 / n, x.real.dtype)
    return x


def _wrap(dims, ndim):
    return [d % ndim for d in dims]


@lowers("aten._fft_c2c.default")
def fft_c2c(self, dim, normalization, forward):
    dims = _wrap(dim, self.ndim)
    if not dims:
        return self
    n = math.prod(self.shape[d] for d in dims)
    return _scale(_c2c(self, dims, forward), n, normalization)


@lowers("aten._fft_r2c.default")
def fft_r2c(self, dim, normalization, onesided):
    dims = _wrap(dim, self.ndim)
    n = math.prod(self.shape[d] for d in dims)
    x = self.astype(_complex_dtype(self)) if not onesided else self
    if onesided:
        x = jnp.fft.rfft(self, axis=dims[-1])
        x = _c2c(x, dims[:-1], True)
    else:
        x = _c2c(x, dims, True)
    return _scale(x, n, normalization)


@lowers("aten._fft_c2r.default")
def fft_c2r(self, dim, normalization, last_dim_size):
    dims = _wrap(dim, self.ndim)
    x = _c2c(self, dims[:-1], False)
    x = jnp.fft.irfft(x, n=last_dim_size, axis=dims[-1], norm="forward")
    n = math.prod([x.shape[d] for d in dims])
    return _scale(x, n, normalization)
