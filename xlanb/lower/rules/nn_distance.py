"""Lowering rules: pairwise distances (_cdist_forward / _cdist_backward, _pdist_forward /
_pdist_backward)."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlanb.lower.registry import lowers
from xlanb.lower.rules.autodiff import acc_dtype
from xlanb.lower.rules.reduce import nan_reduce


def _norm(diff, p, nan_max=True):
    """p-norm over the last dim, with torch's special cases for p = 0, 1, 2, inf. p = inf: pdist's
    CPU kernel propagates NaN (nan_max); cdist's keeps a running max from 0 with std::max, which
    passes over a NaN (a row of NaN is 0 away)."""
    a = jnp.abs(diff)
    if p == 0:      # CPU counts min(ceil(|d|), 1): a NaN makes the count NaN (a min inside XLA's
        # vectorized CPU sum would drop it: the NaN is passed to the sum as it is)
        return jnp.sum(jnp.where(jnp.isnan(a), a, (a != 0).astype(a.dtype)), axis=-1)
    if p == 1:
        return jnp.sum(a, axis=-1)
    if p == 2:
        return jnp.sqrt(jnp.sum(a * a, axis=-1))
    if math.isinf(p):
        if nan_max:
            return nan_reduce(jnp.max, a, -1, False)
        return jnp.max(jnp.where(jnp.isnan(a), 0, a), axis=-1, initial=0)
    return jnp.sum(a ** p, axis=-1) ** (1.0 / p)


def _norm_grad(diff, dist, p):
    """d dist / d diff, zero where torch defines it as zero."""
    s = jnp.sign(diff)
    a = jnp.abs(diff)
    zero = jnp.zeros((), diff.dtype)
    if p == 0:
        return jnp.zeros_like(diff)
    if p == 1:
        return s
    if math.isinf(p):
        return s * (a == dist).astype(diff.dtype)
    safe = jnp.where(dist == 0, 1, dist)
    if p == 2:
        return jnp.where(dist == 0, zero, diff / safe)
    t = s * a ** (p - 1) / safe ** (p - 1)
    bad = (dist == 0) | ((diff == 0) & (p < 1))
    return jnp.where(bad, zero, t)


def _use_mm(p, r1, r2, compute_mode):
    return p == 2 and (compute_mode == 1 or ((compute_mode is None or compute_mode == 0) and (r1 > 25 or r2 > 25)))


@lowers("aten._cdist_forward.default")
def cdist_forward(x1, x2, p, compute_mode):
    dtype = acc_dtype(jnp.result_type(x1.dtype, x2.dtype))
    x1, x2 = x1.astype(dtype), x2.astype(dtype)
    if _use_mm(p, x1.shape[-2], x2.shape[-2], compute_mode):
        # torch's _euclidean_dist: |a|^2 + |b|^2 - 2 a.b, clamped at 0
        n1 = jnp.sum(x1 * x1, axis=-1)[..., :, None]
        n2 = jnp.sum(x2 * x2, axis=-1)[..., None, :]
        dot = jnp.matmul(x1, jnp.swapaxes(x2, -1, -2), precision=lax.Precision.HIGHEST)
        return jnp.sqrt(jnp.maximum(n1 + n2 - 2 * dot, 0))
    return _norm(x1[..., :, None, :] - x2[..., None, :, :], p, nan_max=False)


@lowers("aten._cdist_backward.default")
def cdist_backward(grad, x1, x2, p, cdist):
    """torch's kernel: the gradient over the broadcast batch (the autograd engine sums it to
    x1's shape), and zeros of x1's own shape when any size is 0."""
    if x1.size == 0 or x2.size == 0 or grad.size == 0:
        return jnp.zeros(x1.shape, x1.dtype)
    dtype = acc_dtype(x1.dtype)
    x1, x2 = x1.astype(dtype), x2.astype(dtype)
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    t = _norm_grad(diff, cdist.astype(dtype)[..., None], p)
    return jnp.sum(grad.astype(dtype)[..., None] * t, axis=-2)


def _pairs(n):
    i, j = np.triu_indices(n, 1)
    return jnp.asarray(i), jnp.asarray(j)


@lowers("aten._pdist_forward.default")
def pdist_forward(self, p=2.0):
    dtype = acc_dtype(self.dtype)
    x = self.astype(dtype)
    i, j = _pairs(x.shape[0])
    return _norm(jnp.take(x, i, axis=0) - jnp.take(x, j, axis=0), p)


@lowers("aten._pdist_backward.default")
def pdist_backward(grad, self, p, pdist):
    dtype = acc_dtype(self.dtype)
    x = self.astype(dtype)
    i, j = _pairs(x.shape[0])
    diff = jnp.take(x, i, axis=0) - jnp.take(x, j, axis=0)
    t = _norm_grad(diff, pdist.astype(dtype)[:, None], p) * grad.astype(dtype)[:, None]
    return jnp.zeros(x.shape, dtype).at[i].add(t).at[j].add(-t)
