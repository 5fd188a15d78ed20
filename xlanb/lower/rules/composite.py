"""Lowering rules: ops that torch decomposes into prims or runs as composite CPU kernels
(_trilinear for bilinear, gcd/lcm, frexp, histc, embedding_renorm, masked_scatter_backward,
the margin losses), and the prims that torch's decompositions emit.

Backward ops without a hand-written rule are the forward rule under jax.vjp.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlanb.lower.dtypes import to_jax_dtype
from xlanb.lower.float64 import BITS_AVOID
from xlanb.lower.registry import lowers
from xlanb.lower.rules.autodiff import grad_at
from xlanb.lower.rules.pointwise import as_float


# bilinear ---------------------------------------------------------------------------------------

@lowers("aten._trilinear.default")
def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """i1 * i2 * i3 with each input unsqueezed at its expand dims, summed over sumdim (removed)."""
    def expand(x, dims):
        for d in sorted(int(d) for d in dims):
            x = jnp.expand_dims(x, d)
        return x
    dtype = jnp.result_type(i1, i2, i3)
    acc = jnp.float32 if dtype in (jnp.bfloat16, jnp.float16) else dtype
    prod = expand(i1.astype(acc), expand1) * expand(i2.astype(acc), expand2) * expand(i3.astype(acc), expand3)
    return jnp.sum(prod, axis=tuple(int(d) for d in sumdim)) if len(sumdim) else prod


# integer math --------------------------------------------------------------------------------

@lowers("aten.gcd.default", "prims.gcd.default", promote="same")
def gcd(self, other):
    return jnp.gcd(*jnp.broadcast_arrays(self, other))


@lowers("aten.lcm.default", promote="same")
def lcm(self, other):
    a, b = jnp.broadcast_arrays(self, other)
    g = jnp.gcd(a, b)
    return jnp.abs(jnp.where(g == 0, jnp.zeros_like(a), (a // jnp.where(g == 0, 1, g)) * b))


@lowers("aten.frexp.Tensor", "prims.frexp.default", avoid=BITS_AVOID)
def frexp(self):
    m, e = jnp.frexp(self)
    return m, e.astype(jnp.int32)


# prims emitted by torch's decompositions -------------------------------------------------------

@lowers("prims.where.default")
def prims_where(pred, a, b):
    return jnp.where(pred, a, b)


@lowers("prims.convert_element_type.default")
def prims_convert_element_type(a, dtype):
    return a.astype(to_jax_dtype(dtype))


@lowers("prims.div.default")
def prims_div(a, b):
    """prims.div: truncation for integers, true division for floats."""
    a, b = jnp.broadcast_arrays(a, b)
    if jnp.issubdtype(a.dtype, jnp.integer):
        return lax.div(a, b.astype(a.dtype))
    return a / b


# histc --------------------------------------------------------------------------------------

@lowers("aten.histc.default")
def histc(self, bins=100, min=0, max=0):
    """torch's CPU histc: equal-width bins over [min, max] (the data's range when min == max),
    values outside ignored, the right edge in the last bin."""
    x = as_float(self).reshape(-1)
    lo = jnp.asarray(min, x.dtype)
    hi = jnp.asarray(max, x.dtype)
    same = lo == hi
    if x.size:
        lo = jnp.where(same, jnp.min(x), lo)
        hi = jnp.where(same, jnp.max(x), hi)
    lo, hi = jnp.where(lo == hi, lo - 1, lo), jnp.where(lo == hi, hi + 1, hi)
    inside = (x >= lo) & (x <= hi)
    pos = ((x - lo) * bins / (hi - lo)).astype(jnp.int64)
    pos = jnp.where(pos == bins, bins - 1, pos)
    return jnp.zeros((bins,), x.dtype).at[jnp.where(inside, pos, bins)].add(1, mode="drop")


# embeddings and masked_scatter -------------------------------------------------------------------

@lowers("aten.embedding_renorm.default")
def embedding_renorm(self, indices, max_norm, norm_type):
    """Rows that `indices` names are scaled to norm max_norm when above it (in place in torch)."""
    rows = jnp.unique(indices.reshape(-1), size=indices.size, fill_value=self.shape[0])
    acc = as_float(self)
    picked = jnp.take(acc, jnp.minimum(rows, self.shape[0] - 1), axis=0)
    norm = jnp.sum(jnp.abs(picked) ** norm_type, axis=-1) ** (1.0 / norm_type)
    scale = jnp.where(norm > max_norm, max_norm / (norm + 1e-7), 1.0)
    return self.at[rows].set((picked * scale[:, None]).astype(self.dtype), mode="drop")


@lowers("aten.masked_scatter_backward.default")
def masked_scatter_backward(grad_output, mask, sizes):
    """The gradient of masked_scatter's source: grad_output at the mask's true positions, in
    order, zero-padded to the source's size."""
    g, m = jnp.broadcast_arrays(grad_output, mask)
    g, m = g.reshape(-1), m.reshape(-1)
    n = int(np.prod(sizes))
    pos = jnp.cumsum(m.astype(jnp.int64)) - 1
    out = jnp.zeros((n,), grad_output.dtype).at[jnp.where(m, pos, n)].set(g, mode="drop")
    return out.reshape(tuple(sizes))


# margin losses ------------------------------------------------------------------------------------

def _reduce(loss, reduction):
    if reduction == 1:
        return jnp.mean(loss)
    if reduction == 2:
        return jnp.sum(loss)
    return loss


def _multi_margin(x, target, p, margin, weight, reduction):
    unbatched = x.ndim <= 1
    x = as_float(x).reshape(1, -1) if unbatched else as_float(x)
    target = target.reshape(-1)
    c = x.shape[1]
    picked = jnp.take_along_axis(x, target[:, None], axis=1)
    z = margin - picked + x
    z = jnp.where(z > 0, z, 0)             # CPU adds z when z > 0: a NaN adds nothing
    z = jnp.where(p == 2, z * z, z)        # p is a (lifted) Scalar: 1 or 2
    if weight is not None:
        z = z * jnp.take(weight.astype(x.dtype), target)[:, None]
    z = jnp.where(jnp.arange(c)[None, :] == target[:, None], 0, z)
    loss = jnp.sum(z, axis=1) / c
    return _reduce(loss.reshape(()) if unbatched else loss, reduction)


@lowers("aten.multi_margin_loss.default")
def multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=1):
    return _multi_margin(self, target, p, margin, weight, reduction)


@lowers("aten.multi_margin_loss_backward.default")
def multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=1):
    return grad_at(lambda x: _multi_margin(x, target, p, margin, weight, reduction), as_float(self), grad_output)


def _multilabel(x, target, reduction):
    unbatched = x.ndim <= 1
    x = as_float(x).reshape(1, -1) if unbatched else as_float(x)
    t = target.reshape(x.shape)
    c = x.shape[1]
    valid = jnp.cumprod(t != -1, axis=1).astype(bool)          # targets up to the first -1
    rows = jnp.arange(x.shape[0])[:, None]
    is_target = jnp.zeros(x.shape, x.dtype).at[rows, jnp.where(valid, t, c)].set(1, mode="drop")
    xt = jnp.take_along_axis(x, jnp.where(valid, t, 0), axis=1)                 # (N, K)
    z = 1 - xt[:, :, None] + x[:, None, :]                                     # (N, K, C)
    z = jnp.where(z > 0, z, 0)             # CPU adds z when z > 0: a NaN adds nothing
    z = z * valid[:, :, None] * (1 - is_target)[:, None, :]
    loss = jnp.sum(z, axis=(1, 2)) / c
    loss = loss.reshape(()) if unbatched else loss
    return _reduce(loss, reduction), is_target.reshape(target.shape)


@lowers("aten.multilabel_margin_loss_forward.default")
def multilabel_margin_loss_forward(self, target, reduction):
    return _multilabel(self, target, reduction)


@lowers("aten.multilabel_margin_loss_backward.default")
def multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
    return grad_at(lambda x: _multilabel(x, target, reduction)[0], as_float(self), grad_output)

