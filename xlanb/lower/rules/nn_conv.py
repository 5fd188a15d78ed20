"""Lowering rules: convolution (forward, transposed, backward), im2col / col2im."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from xlanb.lower.precision import dot_precision
from xlanb.lower.registry import lowers
from xlanb.lower.rules.autodiff import grad_at

_SPATIAL = "DHW"


def expand(v, n):
    """An int[] hyperparameter as an n-tuple (ATen broadcasts one-element lists)."""
    if isinstance(v, int):
        return (int(v),) * n
    v = tuple(int(x) for x in v)
    return v * n if len(v) == 1 else v


def _dims(k):
    sp = _SPATIAL[-k:] if k <= 3 else "".join(chr(ord("a") + i) for i in range(k))
    return ("NC" + sp, "OI" + sp, "NC" + sp)


def _compute_dtype(x):
    return x.dtype if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.float32


def _precision_kw(x, w) -> dict:
    """torch's precision: half types accumulate in float32 (one rounding at the end); float32
    follows the graph's matmul precision, as products do, and float16 is multiplied exactly
    (lower/precision.py)."""
    dt = jnp.result_type(x, w)
    if dt in (jnp.bfloat16, jnp.float16):
        return {"preferred_element_type": jnp.float32, "precision": dot_precision(dt)}
    return {"precision": dot_precision(dt)}


def _conv(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    k = w.ndim - 2
    unbatched = x.ndim == k + 1
    if unbatched:
        x = x[None]
    stride, padding, dilation = expand(stride, k), expand(padding, k), expand(dilation, k)
    groups = int(groups)
    dn = lax.conv_dimension_numbers(x.shape, w.shape, _dims(k))
    if not transposed:
        out = lax.conv_general_dilated(x, w, window_strides=stride, padding=[(p, p) for p in padding],
                                       rhs_dilation=dilation, dimension_numbers=dn,
                                       feature_group_count=groups, **_precision_kw(x, w))
    else:
        output_padding = expand(output_padding, k)
        cin, cout_g = w.shape[0], w.shape[1]
        ksz = w.shape[2:]
        # (Cin, Cout/g, *k) -> (Cout, Cin/g, *k), spatially flipped: the transposed conv is
        # a conv over the stride-dilated input
        wt = w.reshape((groups, cin // groups, cout_g) + ksz)
        wt = jnp.swapaxes(wt, 1, 2).reshape((groups * cout_g, cin // groups) + ksz)
        wt = jnp.flip(wt, axis=tuple(range(2, 2 + k)))
        pads = [(d * (kk - 1) - p, d * (kk - 1) - p + op)
                for kk, p, d, op in zip(ksz, padding, dilation, output_padding)]
        dn = lax.conv_dimension_numbers(x.shape, wt.shape, _dims(k))
        out = lax.conv_general_dilated(x, wt, window_strides=(1,) * k, padding=pads, lhs_dilation=stride,
                                       rhs_dilation=dilation, dimension_numbers=dn,
                                       feature_group_count=groups, **_precision_kw(x, wt))
    if bias is not None:
        out = out + bias.astype(out.dtype).reshape((1, -1) + (1,) * k)
    return out[0] if unbatched else out


@lowers("aten.convolution.default")
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return _conv(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


@lowers("aten.convolution_backward.default")
def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask):
    want_in, want_w, want_b = (bool(m) for m in output_mask)
    grad_input = grad_weight = grad_bias = None
    if want_in or want_w:
        def f(x, w):
            return _conv(x, w, None, stride, padding, dilation, transposed, output_padding, groups)
        out, vjp = jax.vjp(f, input, weight)
        gi, gw = vjp(grad_output.astype(out.dtype))
        grad_input = gi if want_in else None
        grad_weight = gw if want_w else None
    if want_b:
        k = weight.ndim - 2
        axes = (0,) + tuple(range(2, 2 + k)) if grad_output.ndim == k + 2 else tuple(range(1, 1 + k))
        grad_bias = jnp.sum(grad_output, axis=axes, dtype=_compute_dtype(grad_output))
    return grad_input, grad_weight, grad_bias


# im2col / col2im -----------------------------------------------------------------------

def _im2col(x, kernel_size, dilation, padding, stride):
    kh, kw = expand(kernel_size, 2)
    dh, dw = expand(dilation, 2)
    ph, pw = expand(padding, 2)
    sh, sw = expand(stride, 2)
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    n, c, h, w = x.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = jnp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    cols = []
    for i in range(kh):
        for j in range(kw):
            cols.append(lax.slice(xp, (0, 0, i * dh, j * dw),
                                  (n, c, i * dh + (oh - 1) * sh + 1, j * dw + (ow - 1) * sw + 1),
                                  (1, 1, sh, sw)))
    out = jnp.stack(cols, axis=2).reshape(n, c * kh * kw, oh * ow)
    return out[0] if unbatched else out


@lowers("aten.im2col.default")
def im2col(self, kernel_size, dilation, padding, stride):
    return _im2col(self, kernel_size, dilation, padding, stride)


@lowers("aten.col2im.default")
def col2im(self, output_size, kernel_size, dilation, padding, stride):
    kh, kw = expand(kernel_size, 2)
    oh, ow = expand(output_size, 2)
    unbatched = self.ndim == 2
    lead = () if unbatched else (self.shape[0],)
    c = self.shape[-2] // (kh * kw)
    zeros = jnp.zeros(lead + (c, oh, ow), self.dtype)
    return grad_at(lambda x: _im2col(x, kernel_size, dilation, padding, stride), zeros, self)
