"""Lowering rules: batch norm, layer norm, group norm (forward and backward).

Statistics are computed in float32 for half inputs (torch's accumulate type); the driver
casts each output to the dtype torch's meta kernel predicts (mean/invstd stay float32).

Batch norm: `native_batch_norm` is what reaches dispatch for nn.BatchNorm*d (train and eval).
Its kernels update running_mean/running_var in place in training although the schema does
not say so, so it has no rule here (see below); the functional form that returns the new
running stats is `_native_batch_norm_legit_functional`.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

from xlanb.lower.registry import lowers
from xlanb.lower.rules.autodiff import acc_dtype


def _bshape(x, c_axis=1):
    """Shape broadcasting a per-channel vector against x."""
    return tuple(-1 if i == c_axis else 1 for i in range(x.ndim))


def _affine(out, weight, bias, shape):
    if weight is not None:
        out = out * weight.astype(out.dtype).reshape(shape)
    if bias is not None:
        out = out + bias.astype(out.dtype).reshape(shape)
    return out


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(out, save_mean, save_invstd, new_running_mean, new_running_var)."""
    dtype = acc_dtype(input.dtype)
    x = input.astype(dtype)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = _bshape(x)
    if training:
        mean = jnp.mean(x, axis=axes)
        var = jnp.mean(jnp.square(x - mean.reshape(shape)), axis=axes)
        invstd = lax.rsqrt(var + eps)
        new_mean, new_var = running_mean, running_var
        if running_mean is not None:
            new_mean = momentum * mean + (1 - momentum) * running_mean.astype(dtype)
        if running_var is not None:
            n = x.size // x.shape[1]
            new_var = momentum * var * (n / max(n - 1, 1)) + (1 - momentum) * running_var.astype(dtype)
    else:
        mean = running_mean.astype(dtype)
        invstd = 1 / jnp.sqrt(running_var.astype(dtype) + eps)
        new_mean, new_var = running_mean, running_var
    if training and input.dtype != dtype and all(p is None or p.dtype == input.dtype
                                                 for p in (weight, bias, running_mean, running_var)):
        # torch's CPU kernel keeps half-precision statistics (parameters of the input's dtype)
        mean, invstd = mean.astype(input.dtype).astype(dtype), invstd.astype(input.dtype).astype(dtype)
    # torch's CPU kernel: out = x * alpha + beta, alpha = invstd * weight, beta = bias - mean * alpha
    alpha = invstd if weight is None else invstd * weight.astype(dtype)
    beta = -mean * alpha if bias is None else bias.astype(dtype) - mean * alpha
    out = x * alpha.reshape(shape) + beta.reshape(shape)
    return out.astype(input.dtype), mean, invstd, new_mean, new_var


# NOT registered for "aten.native_batch_norm.default" on purpose: that op updates
# running_mean/running_var in place in training (the schema hides it), and a functional rule
# would drop the update silently. Without a rule, capture takes torch's decomposition, which
# writes the stats back with copy_. Once capture records native_batch_norm (training, with
# stats) as `_native_batch_norm_legit_functional` plus a write-back of outputs 3 and 4, this
# function can be registered for the remaining cases (eval, no running stats).
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    return _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)[:3]


@lowers("aten._native_batch_norm_legit_functional.default")
def native_batch_norm_legit_functional(input, weight, bias, running_mean, running_var, training, momentum, eps):
    return _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


@lowers("aten._native_batch_norm_legit_no_training.default")
def native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps):
    return _batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps)[:3]


@lowers("aten._native_batch_norm_legit.no_stats")
def native_batch_norm_legit_no_stats(input, weight, bias, training, momentum, eps):
    return _batch_norm(input, weight, bias, None, None, True, momentum, eps)[:3]


def _batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train,
                         eps, output_mask):
    dtype = acc_dtype(input.dtype)
    x, g = input.astype(dtype), grad_out.astype(dtype)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = _bshape(x)
    if train:
        mean, invstd = save_mean.astype(dtype), save_invstd.astype(dtype)
    else:
        mean = running_mean.astype(dtype)
        invstd = 1 / jnp.sqrt(running_var.astype(dtype) + eps)
    w = jnp.ones(x.shape[1], dtype) if weight is None else weight.astype(dtype)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    sum_g = jnp.sum(g, axis=axes)
    sum_gx = jnp.sum(g * xhat, axis=axes)
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        scale = (w * invstd).reshape(shape)
        if train:
            n = x.size // x.shape[1]
            grad_input = scale * (g - (sum_g / n).reshape(shape) - xhat * (sum_gx / n).reshape(shape))
        else:
            grad_input = g * scale
        grad_input = grad_input.astype(input.dtype)
    if output_mask[1]:
        grad_weight = sum_gx
    if output_mask[2]:
        grad_bias = sum_g
    return grad_input, grad_weight, grad_bias


@lowers("aten.native_batch_norm_backward.default")
def native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
                               train, eps, output_mask):
    return _batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
                                train, eps, output_mask)


@lowers("aten.batch_norm_backward.default")
def batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_var, update, eps,
                        output_mask, reserve):
    return _batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_var,
                                update, eps, output_mask)


# Layer norm ------------------------------------------------------------------------------

@lowers("aten.native_layer_norm.default")
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    k = len(normalized_shape)
    dtype = acc_dtype(input.dtype)
    x = input.astype(dtype)
    axes = tuple(range(x.ndim - k, x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    var = jnp.mean(jnp.square(xc), axis=axes, keepdims=True)
    rstd = lax.rsqrt(var + eps)
    out = xc * rstd
    if weight is not None:
        out = out * weight.astype(dtype)
    if bias is not None:
        out = out + bias.astype(dtype)
    return out.astype(input.dtype), mean, rstd


@lowers("aten.native_layer_norm_backward.default")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    k = len(normalized_shape)
    dtype = acc_dtype(input.dtype)
    x, g = input.astype(dtype), grad_out.astype(dtype)
    axes = tuple(range(x.ndim - k, x.ndim))
    batch_axes = tuple(range(x.ndim - k))
    mean, rstd = mean.astype(dtype), rstd.astype(dtype)
    xhat = (x - mean) * rstd
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        gw = g if weight is None else g * weight.astype(dtype)
        n = math.prod(x.shape[x.ndim - k:])
        mg = jnp.sum(gw, axis=axes, keepdims=True) / n
        mgx = jnp.sum(gw * xhat, axis=axes, keepdims=True) / n
        grad_input = (rstd * (gw - mg - xhat * mgx)).astype(input.dtype)
    if output_mask[1] and weight is not None:
        grad_weight = jnp.sum(g * xhat, axis=batch_axes)
    if output_mask[2] and bias is not None:
        grad_bias = jnp.sum(g, axis=batch_axes)
    return grad_input, grad_weight, grad_bias


# Group norm ------------------------------------------------------------------------------

@lowers("aten.native_group_norm.default")
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    dtype = acc_dtype(input.dtype)
    x = input.astype(dtype).reshape(N, group, -1)
    mean = jnp.mean(x, axis=2)
    xc = x - mean[:, :, None]
    var = jnp.mean(jnp.square(xc), axis=2)
    rstd = lax.rsqrt(var + eps)
    out = (xc * rstd[:, :, None]).reshape(N, C, -1)
    if weight is not None:
        out = out * weight.astype(dtype)[None, :, None]
    if bias is not None:
        out = out + bias.astype(dtype)[None, :, None]
    return out.reshape(input.shape).astype(input.dtype), mean, rstd


@lowers("aten.native_group_norm_backward.default")
def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):
    dtype = acc_dtype(input.dtype)
    cg = C // group
    x = input.astype(dtype).reshape(N, group, cg, HxW)      # explicit sizes: N may be 0
    g = grad_out.astype(dtype).reshape(N, group, cg, HxW)
    mean = mean.astype(dtype).reshape(N, group, 1, 1)
    rstd = rstd.astype(dtype).reshape(N, group, 1, 1)
    xhat = (x - mean) * rstd
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        gw = g if weight is None else g * weight.astype(dtype).reshape(1, group, cg, 1)
        n = max(cg * HxW, 1)
        mg = jnp.sum(gw, axis=(2, 3), keepdims=True) / n
        mgx = jnp.sum(gw * xhat, axis=(2, 3), keepdims=True) / n
        grad_input = (rstd * (gw - mg - xhat * mgx)).reshape(input.shape).astype(input.dtype)
    if output_mask[1]:
        grad_weight = jnp.sum(g * xhat, axis=(0, 3)).reshape(C)
    if output_mask[2]:
        grad_bias = jnp.sum(g, axis=(0, 3)).reshape(C)
    return grad_input, grad_weight, grad_bias
