"""Lowering rules: losses (nll_loss / nll_loss2d, mse, smooth_l1, huber, bce, soft margin).

`reduction` is an int constant: 0 none, 1 mean, 2 sum (torch.nn._reduction).
Cross entropy reaches dispatch as `_log_softmax` + `nll_loss_forward`; l1_loss and kl_div
are CompositeImplicit (torch decomposes them before dispatch).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xlanb.lower.registry import lowers
from xlanb.lower.rules.autodiff import acc_dtype

_NONE, _MEAN, _SUM = 0, 1, 2


def _reduce(loss, reduction):
    if reduction == _MEAN:
        return jnp.mean(loss)
    if reduction == _SUM:
        return jnp.sum(loss)
    return loss


def _pair(self, target):
    dtype = acc_dtype(jnp.result_type(self.dtype, target.dtype))
    return self.astype(dtype), target.astype(dtype)


def _grad_scale(grad_output, reduction, n, dtype):
    g = grad_output.astype(dtype)
    return g / n if reduction == _MEAN else g


def _sum_to(x, shape):
    """Sums a broadcast gradient back to `shape`."""
    if x.shape == tuple(shape):
        return x
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and x.shape[lead + i] != 1)
    return jnp.sum(x, axis=axes, keepdims=True).reshape(shape)


# NLL ---------------------------------------------------------------------------------------

def _nll_parts(self, target, weight, ignore_index):
    """(per-element -w * self[target], w), both 0 where ignored; class axis 1 (0 if unbatched)."""
    c_axis = 0 if self.ndim == 1 else 1
    dtype = acc_dtype(self.dtype)
    valid = target != ignore_index
    t = jnp.where(valid, target, 0).astype(jnp.int64)
    picked = jnp.take_along_axis(self.astype(dtype), jnp.expand_dims(t, c_axis), axis=c_axis,
                                 mode="clip").squeeze(c_axis)
    if weight is None:
        w = valid.astype(dtype)
    else:
        w = jnp.where(valid, jnp.take(weight.astype(dtype), t, mode="clip"), 0)
    return jnp.where(valid, -picked * w, 0), w


def _nll_forward(self, target, weight, reduction, ignore_index):
    loss, w = _nll_parts(self, target, weight, ignore_index)
    if reduction == _NONE:
        return loss, jnp.zeros((), loss.dtype)
    total = jnp.sum(w)
    if reduction == _SUM:
        return jnp.sum(loss), total
    return jnp.sum(loss) / total, total


def _nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    dtype = acc_dtype(self.dtype)
    w, t, c_axis = _nll_weights(self, target, weight, ignore_index, dtype)
    g = grad_output.astype(dtype)
    if reduction == _MEAN:
        g = g / total_weight.astype(dtype)
    val = -w * g
    classes = jnp.arange(self.shape[c_axis]).reshape([-1 if i == c_axis else 1 for i in range(self.ndim)])
    hit = classes == jnp.expand_dims(t, c_axis)
    return jnp.where(hit, jnp.expand_dims(val, c_axis), jnp.zeros((), dtype))


def _nll_weights(self, target, weight, ignore_index, dtype):
    c_axis = 0 if self.ndim == 1 else 1
    valid = target != ignore_index
    t = jnp.where(valid, target, -1).astype(jnp.int64)   # -1 matches no class
    if weight is None:
        w = valid.astype(dtype)
    else:
        w = jnp.where(valid, jnp.take(weight.astype(dtype), jnp.where(valid, t, 0), mode="clip"), 0)
    return w, t, c_axis


@lowers("aten.nll_loss_forward.default")
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    return _nll_forward(self, target, weight, reduction, ignore_index)


@lowers("aten.nll_loss2d_forward.default")
def nll_loss2d_forward(self, target, weight, reduction, ignore_index):
    return _nll_forward(self, target, weight, reduction, ignore_index)


@lowers("aten.nll_loss_backward.default")
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    return _nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


@lowers("aten.nll_loss2d_backward.default")
def nll_loss2d_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    return _nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


# Elementwise losses --------------------------------------------------------------------------

def _elementwise_backward(grad_output, self, target, reduction, dloss):
    """grad wrt self of reduce(loss(self, target)), given dloss(x, t) = d loss / d x."""
    x, t = _pair(self, target)
    d = dloss(x, t)
    n = d.size
    g = _grad_scale(grad_output, reduction, n, d.dtype)
    return _sum_to(d * g, self.shape)


@lowers("aten.mse_loss.default")
def mse_loss(self, target, reduction=_MEAN):
    x, t = _pair(self, target)
    return _reduce(jnp.square(x - t), reduction)


@lowers("aten.mse_loss_backward.default")
def mse_loss_backward(grad_output, self, target, reduction):
    return _elementwise_backward(grad_output, self, target, reduction, lambda x, t: 2 * (x - t))


def _smooth_l1(x, t, beta):
    d = jnp.abs(x - t)
    if beta == 0:
        return d
    return jnp.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)


def _smooth_l1_grad(x, t, beta):
    d = x - t
    if beta == 0:
        return jnp.sign(d)
    return jnp.where(d < -beta, -1.0, jnp.where(d > beta, 1.0, d / beta)).astype(d.dtype)


@lowers("aten.smooth_l1_loss.default")
def smooth_l1_loss(self, target, reduction=_MEAN, beta=1.0):
    x, t = _pair(self, target)
    return _reduce(_smooth_l1(x, t, beta), reduction)


@lowers("aten.smooth_l1_loss_backward.default")
def smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
    return _elementwise_backward(grad_output, self, target, reduction, lambda x, t: _smooth_l1_grad(x, t, beta))


@lowers("aten.huber_loss.default")
def huber_loss(self, target, reduction=_MEAN, delta=1.0):
    x, t = _pair(self, target)
    d = jnp.abs(x - t)
    return _reduce(jnp.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


@lowers("aten.huber_loss_backward.default")
def huber_loss_backward(grad_output, self, target, reduction, delta):
    def dloss(x, t):
        d = x - t
        return jnp.where(d <= -delta, -delta, jnp.where(d >= delta, delta, d)).astype(d.dtype)
    return _elementwise_backward(grad_output, self, target, reduction, dloss)


@lowers("aten.binary_cross_entropy.default")
def binary_cross_entropy(self, target, weight=None, reduction=_MEAN):
    x, t = _pair(self, target)
    loss = (t - 1) * jnp.maximum(jnp.log1p(-x), -100) - t * jnp.maximum(jnp.log(x), -100)
    if weight is not None:
        loss = loss * weight.astype(loss.dtype)
    return _reduce(loss, reduction)


@lowers("aten.binary_cross_entropy_backward.default")
def binary_cross_entropy_backward(grad_output, self, target, weight=None, reduction=_MEAN):
    def dloss(x, t):
        d = (x - t) / jnp.maximum((1 - x) * x, 1e-12)
        return d if weight is None else d * weight.astype(d.dtype)
    return _elementwise_backward(grad_output, self, target, reduction, dloss)


@lowers("aten.binary_cross_entropy_with_logits.default")
def binary_cross_entropy_with_logits(self, target, weight=None, pos_weight=None, reduction=_MEAN):
    x, t = _pair(self, target)
    log_sig = jax.nn.log_sigmoid(x)
    if pos_weight is not None:
        log_sig = log_sig * ((pos_weight.astype(x.dtype) - 1) * t + 1)
    loss = (1 - t) * x - log_sig
    if weight is not None:
        loss = loss * weight.astype(loss.dtype)
    return _reduce(loss, reduction)


@lowers("aten.soft_margin_loss.default")
def soft_margin_loss(self, target, reduction=_MEAN):
    x, t = _pair(self, target)
    return _reduce(jnp.log1p(jnp.exp(-t * x)), reduction)


@lowers("aten.soft_margin_loss_backward.default")
def soft_margin_loss_backward(grad_output, self, target, reduction):
    def dloss(x, t):
        z = jnp.exp(-t * x)
        return -t * z / (1 + z)
    return _elementwise_backward(grad_output, self, target, reduction, dloss)
