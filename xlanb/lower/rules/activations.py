"""Lowering rules: activations, their backward ops, softmax family.

No type promotion: activations keep their input dtype. float16/bfloat16 compute in float32
(as torch's CPU kernels do) and the driver casts the result back. Scalar hyperparameters
(alpha, negative_slope, beta, threshold, min_val, ...) are lifted: never branched on.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from xlanb.lower.torch_versions import SOFTSHRINK_LAMBDA_IN_INPUT_DTYPE
from xlanb.lower.dtypes import to_jax_dtype
from xlanb.lower.registry import lowers
from xlanb.lower.rules.pointwise import nan_max, nan_min
from xlanb.lower.to_jax import saturated


def up(x):
    """float16/bfloat16 -> float32 (torch's opmath); other dtypes unchanged."""
    return x.astype(jnp.float32) if x.dtype in (jnp.float16, jnp.bfloat16) else x


@lowers("aten.relu.default")
def relu(x):
    return nan_max(x, jnp.zeros((), x.dtype))


@lowers("aten.gelu.default")
def gelu(x, *, approximate="none"):
    x = up(x)
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + jnp.tanh(inner))
    return x * 0.5 * (1 + lax.erf(x * math.sqrt(0.5)))


@lowers("aten.gelu_backward.default")
def gelu_backward(grad_output, x, *, approximate="none"):
    g, x = up(grad_output), up(x)
    if approximate == "tanh":
        beta = math.sqrt(2) * (2 / math.sqrt(math.pi)) * 0.5
        kappa = 0.044715
        x_sq = x * x
        inner = beta * (x + kappa * x_sq * x)
        t = jnp.tanh(inner)
        left = 0.5 * x
        right = 1 + t
        dleft = 0.5 * right
        dright = left * (1 - t * t) * beta * (1 + 3 * kappa * x_sq)
        return g * (dleft + dright)
    cdf = 0.5 * (1 + lax.erf(x * math.sqrt(0.5)))
    pdf = (2 / math.sqrt(math.pi)) * math.sqrt(0.5) * 0.5 * jnp.exp(x * x * -0.5)
    return g * (cdf + x * pdf)


@lowers("aten.silu.default")
def silu(x):
    x = up(x)
    return x * jax.nn.sigmoid(x)


@lowers("aten.silu_backward.default")
def silu_backward(grad_output, x):
    g, x = up(grad_output), up(x)
    s = jax.nn.sigmoid(x)
    return g * s * (1 + x * (1 - s))


def _softplus(x, beta=1, threshold=20):
    bx = x * beta
    return jnp.where(bx > threshold, x, jnp.log1p(jnp.exp(bx)) / beta)


@lowers("aten.mish.default")
def mish(x):
    x = up(x)
    return x * jnp.tanh(jnp.log1p(jnp.exp(x)))


@lowers("aten.mish_backward.default")
def mish_backward(grad_output, x):
    g, x = up(grad_output), up(x)
    s = jax.nn.sigmoid(x)
    t = jnp.tanh(jnp.log1p(jnp.exp(x)))
    return g * (t + x * s * (1 - t * t))


@lowers("aten.softplus.default")
def softplus(x, beta=1, threshold=20):
    return _softplus(up(x), beta, threshold)


@lowers("aten.softplus_backward.default")
def softplus_backward(grad_output, x, beta, threshold):
    g, x = up(grad_output), up(x)
    z = jnp.exp(x * beta)
    return jnp.where(x * beta > threshold, g, g * z / (z + 1))


@lowers("aten.elu.default")
def elu(x, alpha=1, scale=1, input_scale=1):
    x = up(x)
    neg = jnp.expm1(x * input_scale) * (alpha * scale)
    return jnp.where(x <= 0, neg, x * scale)


@lowers("aten.elu_backward.default")
def elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    g, x = up(grad_output), up(self_or_result)
    negcoef = alpha * scale
    if is_result:
        neg = g * input_scale * (x + negcoef)
    else:
        neg = g * input_scale * negcoef * jnp.exp(x * input_scale)
    # a NaN input gives a NaN gradient (torch's CPU kernels answer it by the machine's vector width)
    return jnp.where(x <= 0, neg, jnp.where(jnp.isnan(x), x, g * scale))


@lowers("aten.celu.default")
def celu(x, alpha=1.0):
    x = up(x)
    return jnp.where(x <= 0, jnp.expm1(x / alpha) * alpha, x)


@lowers("aten.leaky_relu.default")
def leaky_relu(x, negative_slope=0.01):
    x = up(x)
    return jnp.where(x > 0, x, x * negative_slope)


@lowers("aten.leaky_relu_backward.default")
def leaky_relu_backward(grad_output, x, negative_slope, self_is_result):
    g, x = up(grad_output), up(x)
    return jnp.where(x > 0, g, g * negative_slope)


@lowers("aten.hardtanh.default")
def hardtanh(x, min_val=-1, max_val=1):
    x = up(x)
    if jnp.issubdtype(x.dtype, jnp.integer):     # a bound past the range bounds nothing (torch 2.15: it is clamp)
        min_val, max_val = saturated((min_val, max_val), x.dtype)
    return nan_min(nan_max(x, jnp.asarray(min_val, x.dtype)), jnp.asarray(max_val, x.dtype))


@lowers("aten.hardtanh_backward.default")
def hardtanh_backward(grad_output, x, min_val, max_val):
    g, x = up(grad_output), up(x)
    return jnp.where((x > min_val) & (x < max_val), g, jnp.zeros_like(g))


@lowers("aten.hardsigmoid.default")
def hardsigmoid(x):
    x = up(x)
    return jnp.minimum(jnp.maximum(x + 3, 0), 6) / 6


@lowers("aten.hardsigmoid_backward.default")
def hardsigmoid_backward(grad_output, x):
    g, x = up(grad_output), up(x)
    return jnp.where((x > -3) & (x < 3), g / 6, jnp.zeros_like(g))


@lowers("aten.hardswish.default")
def hardswish(x):
    x = up(x)
    return x * jnp.minimum(jnp.maximum(x + 3, 0), 6) / 6


@lowers("aten.hardswish_backward.default")
def hardswish_backward(grad_output, x):
    g, x = up(grad_output), up(x)
    # a NaN input gives a NaN gradient (torch's CPU kernels answer it by the machine's vector width)
    return jnp.where(x <= -3, jnp.zeros_like(g), jnp.where(x < 3, g * (x / 3 + 0.5), jnp.where(jnp.isnan(x), x, g)))


@lowers("aten.threshold.default")
def threshold(x, threshold, value):
    return jnp.where(up(x) <= threshold, jnp.asarray(value).astype(x.dtype), x)


@lowers("aten.threshold_backward.default")
def threshold_backward(grad_output, x, threshold):
    return jnp.where(up(x) <= threshold, jnp.zeros_like(grad_output), grad_output)


def _in_dtype(v, x):
    """A Scalar rounded to x's dtype (ATen compares these in the input dtype, even bfloat16)."""
    return jnp.asarray(v).astype(x.dtype)


@lowers("aten.softshrink.default")
def softshrink(x, lambd=0.5):
    if SOFTSHRINK_LAMBDA_IN_INPUT_DTYPE:
        lambd = up(_in_dtype(lambd, x))
    x = up(x)
    return jnp.where(x > lambd, x - lambd, jnp.where(x < -lambd, x + lambd, x * 0))


@lowers("aten.softshrink_backward.default")
def softshrink_backward(grad_output, x, lambd):
    lambd = _in_dtype(lambd, x)
    return jnp.where((x < -lambd) | (x > lambd), grad_output, jnp.zeros_like(grad_output))


@lowers("aten.hardshrink.default")
def hardshrink(x, lambd=0.5):
    lambd = _in_dtype(lambd, x)
    return jnp.where((x >= -lambd) & (x <= lambd), jnp.zeros_like(x), x)


@lowers("aten.hardshrink_backward.default")
def hardshrink_backward(grad_out, x, lambd):
    lambd = _in_dtype(lambd, x)
    return jnp.where((x < -lambd) | (x > lambd), grad_out, jnp.zeros_like(grad_out))


@lowers("aten.sigmoid_backward.default")
def sigmoid_backward(grad_output, output):
    g, y = up(grad_output), up(output)
    return g * (1 - y) * y


@lowers("aten.tanh_backward.default")
def tanh_backward(grad_output, output):
    g, y = up(grad_output), up(output)
    return g * (1 - y * y)


@lowers("aten.logit_backward.default")
def logit_backward(grad_output, x, eps=None):
    g, x = up(grad_output), up(x)
    dx = g / (x * (1 - x))
    nan = jnp.full_like(dx, jnp.nan)
    if eps is None:
        return jnp.where((x < 0) | (x > 1), nan, dx)
    eps = jnp.asarray(eps)
    clipped = jnp.where((x < eps) | (x > 1 - eps), jnp.zeros_like(dx), dx)
    return jnp.where(eps < 0, jnp.where((x < 0) | (x > 1), nan, dx), clipped)


@lowers("aten.log_sigmoid_forward.default")
def log_sigmoid_forward(x):
    x = up(x)
    z = jnp.exp(-jnp.abs(x))
    return jnp.minimum(x, 0) - jnp.log1p(z), z


@lowers("aten.log_sigmoid_backward.default")
def log_sigmoid_backward(grad_output, x, buffer):
    g, x = up(grad_output), up(x)
    neg = x < 0
    z = jnp.exp(-jnp.abs(x))
    return g * (jnp.where(neg, 1.0, 0.0) - jnp.where(neg, 1.0, -1.0) * (z / (1 + z)))


@lowers("aten.glu.default")
def glu(x, dim=-1):
    a, b = jnp.split(up(x), 2, axis=dim)
    return a * jax.nn.sigmoid(b)


@lowers("aten.glu_backward.default")
def glu_backward(grad_output, x, dim):
    g = up(grad_output)
    a, b = jnp.split(up(x), 2, axis=dim)
    s = jax.nn.sigmoid(b)
    return jnp.concatenate([s * g, (1 - s) * s * a * g], axis=dim)


@lowers("aten._prelu_kernel.default")
def prelu_kernel(x, weight):
    x, w = up(x), up(weight)
    return jnp.where(x > 0, x, w * x)


@lowers("aten._prelu_kernel_backward.default")
def prelu_kernel_backward(grad_output, x, weight):
    g, x, w = up(grad_output), up(x), up(weight)
    return jnp.where(x > 0, g, w * g), jnp.where(x > 0, jnp.zeros_like(x * g), x * g)


# Softmax family -----------------------------------------------------------------------------

def _as_1d(x, dim):
    """0-d tensors reduce over a size-1 axis."""
    if x.ndim == 0:
        return x.reshape(1), 0
    return x, dim % x.ndim


def softmax_(x, dim):
    x1, d = _as_1d(x, dim)
    if x1.size == 0:
        return x
    e = jnp.exp(x1 - jnp.max(x1, axis=d, keepdims=True))
    return (e / jnp.sum(e, axis=d, keepdims=True)).reshape(x.shape)


def log_softmax_(x, dim):
    x1, d = _as_1d(x, dim)
    if x1.size == 0:
        return x
    shifted = x1 - jnp.max(x1, axis=d, keepdims=True)
    return (shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=d, keepdims=True))).reshape(x.shape)


@lowers("aten._softmax.default")
def _softmax(x, dim, half_to_float):
    return softmax_(up(x), dim)


@lowers("aten._log_softmax.default")
def _log_softmax(x, dim, half_to_float):
    return log_softmax_(up(x), dim)


@lowers("aten._safe_softmax.default")
def _safe_softmax(x, dim, dtype=None):
    if dtype is not None:
        x = x.astype(to_jax_dtype(dtype))
    x = up(x)
    out = softmax_(x, dim)
    if x.size == 0:
        return out
    x1, d = _as_1d(x, dim)
    masked = jnp.all(x1 == -jnp.inf, axis=d, keepdims=True)
    if x.ndim == 0:
        masked = masked.reshape(())
    return jnp.where(masked, jnp.zeros_like(out), out)


def _softmax_grad(grad_output, output, dim, grad):
    """grad(g, y, d) of the softmax family along `dim`, in float32 for half inputs."""
    g, y = up(grad_output), up(output)
    g1, d = _as_1d(g, dim)
    if g1.size == 0:
        return g
    return grad(g1, y.reshape(g1.shape), d).reshape(g.shape)


@lowers("aten._softmax_backward_data.default")
def _softmax_backward_data(grad_output, output, dim, input_dtype):
    return _softmax_grad(grad_output, output, dim,
                         lambda g, y, d: g * y - y * jnp.sum(g * y, axis=d, keepdims=True))


@lowers("aten._log_softmax_backward_data.default")
def _log_softmax_backward_data(grad_output, output, dim, input_dtype):
    return _softmax_grad(grad_output, output, dim,
                         lambda g, y, d: g - jnp.exp(y) * jnp.sum(g, axis=d, keepdims=True))
