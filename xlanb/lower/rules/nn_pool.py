"""Lowering rules: max / avg / adaptive pooling, forward and backward (2d and 3d).

Max pooling gathers the K = prod(kernel) window taps as a stacked axis and reduces it;
indices are flat offsets into each input plane (h * W + w, as torch), chosen with torch's
tie rule (first maximum in window order; a NaN wins, the last NaN in the window).
"""

from __future__ import annotations

import functools
import itertools
import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlanb.lower.registry import lowers
from xlanb.lower.rules.autodiff import acc_dtype, linear_backward
from xlanb.lower.rules.nn_conv import expand


def pool_out_size(size, k, s, p, d, ceil_mode):
    num = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _lowest(dtype):
    if jnp.issubdtype(dtype, jnp.inexact):
        return -jnp.inf
    if dtype == jnp.bool_:
        return False
    return jnp.iinfo(dtype).min


def _params(k, kernel_size, stride, padding, dilation):
    ks = expand(kernel_size, k)
    st = expand(stride, k) if stride is not None and len(stride) else ks
    return ks, st, expand(padding, k), expand(dilation, k)


def _select_max(win, valid, bases, steps, lens, in_shape):
    """win (..., K, *out) -> (max, flat index). valid: numpy (K, *out); bases[d]: numpy (out_d,)."""
    k = len(in_shape)
    axis = win.ndim - k - 1
    m = jnp.max(win, axis=axis)
    hit = (win == jnp.expand_dims(m, axis)) & valid
    kk = jnp.argmax(hit, axis=axis)
    if jnp.issubdtype(win.dtype, jnp.inexact):     # a NaN wins, the last one (jnp.max may drop it: nan_reduce)
        isn = jnp.isnan(win) & valid
        last_nan = win.shape[axis] - 1 - jnp.argmax(jnp.flip(isn, axis), axis=axis)
        any_nan = jnp.any(isn, axis=axis)
        kk = jnp.where(any_nan, last_nan, kk)
        m = jnp.where(any_nan, jnp.asarray(jnp.nan, m.dtype), m)
    kk = kk.astype(jnp.int64)
    flat = 0
    for d in range(k):
        l_d = (kk // math.prod(lens[d + 1:])) % lens[d]
        shape = [1] * k
        shape[d] = -1
        pos = jnp.asarray(np.asarray(bases[d], np.int64).reshape(shape)) + l_d * steps[d]
        flat = flat + pos * math.prod(in_shape[d + 1:])
    return m, flat


# Max pooling -----------------------------------------------------------------------------

TAPS_AS_SLICES = 64      # windows of more taps are gathered: a slice per tap compiles in O(taps)


def _max_pool(x, k, kernel_size, stride, padding, dilation, ceil_mode):
    ks, st, pd, dl = _params(k, kernel_size, stride, padding, dilation)
    in_shape = x.shape[-k:]
    lead = x.ndim - k
    out = [pool_out_size(n, a, s, p, d, ceil_mode) for n, a, s, p, d in zip(in_shape, ks, st, pd, dl)]
    hi = [(o - 1) * s + d * (a - 1) + 1 - n - p for o, s, d, a, n, p in zip(out, st, dl, ks, in_shape, pd)]
    xp = lax.pad(x, jnp.array(_lowest(x.dtype), x.dtype), [(0, 0, 0)] * lead + [(p, h, 0) for p, h in zip(pd, hi)])
    valid = []
    for off in itertools.product(*(range(a) for a in ks)):
        pos = [np.arange(o) * s - p + f * d for o, s, p, f, d in zip(out, st, pd, off, dl)]
        ok = [(q >= 0) & (q < n) for q, n in zip(pos, in_shape)]
        valid.append(functools.reduce(np.logical_and, [v.reshape([-1 if i == j else 1 for j in range(k)])
                                                      for i, v in enumerate(ok)]))
    if math.prod(ks) > TAPS_AS_SLICES:       # a wide kernel (a global max pool): one gather a dim
        win = _gathered_windows(xp, k, [(np.arange(o) * s)[:, None] + np.arange(a) * d
                                        for o, s, a, d in zip(out, st, ks, dl)])
    else:
        taps = []
        for off in itertools.product(*(range(a) for a in ks)):
            start = [0] * lead + [o * d for o, d in zip(off, dl)]
            limit = list(x.shape[:lead]) + [b + (o - 1) * s + 1 for b, o, s in zip(start[lead:], out, st)]
            taps.append(lax.slice(xp, start, limit, [1] * lead + list(st)))
        win = jnp.stack(taps, axis=lead)
    bases = [np.arange(o) * s - p for o, s, p in zip(out, st, pd)]
    return _select_max(win, np.stack(valid), bases, dl, ks, in_shape)


def _gathered_windows(x, k, positions):
    """x's last k dims gathered into windows: positions[d] (o_d, L_d) are indices into dim d; the
    result is (..., L1 * ... * Lk, o1, ..., ok), taps in row-major order of (L1, ..., Lk)."""
    lead = x.ndim - k
    win = x
    for d, idx in enumerate(positions):
        o, length = idx.shape
        axis = lead + 2 * d
        win = jnp.take(win, jnp.asarray(idx.reshape(-1)), axis=axis)
        win = win.reshape(win.shape[:axis] + (o, length) + win.shape[axis + 1:])
    # (..., o1, L1, o2, L2, ...) -> (..., L1, L2, ..., o1, o2, ...)
    perm = list(range(lead)) + [lead + 2 * d + 1 for d in range(k)] + [lead + 2 * d for d in range(k)]
    out = tuple(idx.shape[0] for idx in positions)
    return jnp.transpose(win, perm).reshape(x.shape[:lead] + (-1,) + out)


def scatter_to_planes(grad, self, indices, k):
    """grad_input of a max pool: grad summed into each input plane at the flat indices."""
    plane = math.prod(self.shape[-k:])
    lead = self.shape[:-k]
    p = math.prod(lead)
    dtype = acc_dtype(grad.dtype)
    g = grad.astype(dtype).reshape(p, -1)
    idx = indices.reshape(p, -1)
    out = jnp.zeros((p, plane), dtype).at[jnp.arange(p)[:, None], idx].add(g, mode="drop")
    return out.reshape(self.shape)


@lowers("aten.max_pool2d_with_indices.default")
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(self, 2, kernel_size, stride, padding, dilation, ceil_mode)


@lowers("aten.max_pool3d_with_indices.default")
def max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(self, 3, kernel_size, stride, padding, dilation, ceil_mode)


@lowers("aten.max_pool2d_with_indices_backward.default")
def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode,
                                     indices):
    return scatter_to_planes(grad_output, self, indices, 2)


@lowers("aten.max_pool3d_with_indices_backward.default")
def max_pool3d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode,
                                     indices):
    return scatter_to_planes(grad_output, self, indices, 3)


# Average pooling -------------------------------------------------------------------------

def _avg_divisor(in_shape, ks, st, pd, out, count_include_pad):
    per_dim = []
    for n, a, s, p, o in zip(in_shape, ks, st, pd, out):
        start = np.arange(o) * s - p
        end = np.minimum(start + a, n + p)
        size = end - start
        if not count_include_pad:
            size = np.minimum(end, n) - np.maximum(start, 0)
        per_dim.append(size)
    div = per_dim[0]
    for v in per_dim[1:]:
        div = np.multiply.outer(div, v)
    return np.where(div > 0, div, 1)


def _avg_pool(x, k, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    ks, st, pd, _ = _params(k, kernel_size, stride, padding, 1)
    in_shape = x.shape[-k:]
    lead = x.ndim - k
    out = [pool_out_size(n, a, s, p, 1, ceil_mode) for n, a, s, p in zip(in_shape, ks, st, pd)]
    hi = [(o - 1) * s + a - n - p for o, s, a, n, p in zip(out, st, ks, in_shape, pd)]
    dtype = acc_dtype(x.dtype)
    xp = lax.pad(x.astype(dtype), jnp.array(0, dtype), [(0, 0, 0)] * lead + [(p, h, 0) for p, h in zip(pd, hi)])
    summed = lax.reduce_window(xp, np.zeros((), dtype), lax.add, (1,) * lead + ks, (1,) * lead + st, "VALID")
    if divisor_override is not None:
        return summed / divisor_override
    return summed / jnp.asarray(_avg_divisor(in_shape, ks, st, pd, out, count_include_pad), dtype)


@lowers("aten.avg_pool2d.default")
def avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(self, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@lowers("aten.avg_pool3d.default")
def avg_pool3d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(self, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@lowers("aten.avg_pool2d_backward.default")
def avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    return linear_backward(lambda x: _avg_pool(x, 2, kernel_size, stride, padding, ceil_mode,
                                               count_include_pad, divisor_override), grad_output, self.shape, self.dtype)


@lowers("aten.avg_pool3d_backward.default")
def avg_pool3d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    return linear_backward(lambda x: _avg_pool(x, 3, kernel_size, stride, padding, ceil_mode,
                                               count_include_pad, divisor_override), grad_output, self.shape, self.dtype)


# Adaptive pooling ------------------------------------------------------------------------

def _adaptive_windows(n, o):
    start = (np.arange(o) * n) // o
    end = ((np.arange(o) + 1) * n + o - 1) // o
    return start, end


def _adaptive_avg(x, k, output_size):
    out = expand(output_size, k)
    dtype = acc_dtype(x.dtype)
    x = x.astype(dtype)
    lead = x.ndim - k
    for d, o in enumerate(out):
        axis = lead + d
        n = x.shape[axis]
        if n % o == 0:
            x = jnp.mean(x.reshape(x.shape[:axis] + (o, n // o) + x.shape[axis + 1:]), axis=axis + 1)
            continue
        start, end = _adaptive_windows(n, o)
        length = int((end - start).max())
        ls = np.arange(length)
        idx = np.minimum(start[:, None] + ls, end[:, None] - 1)
        w = np.where(ls < (end - start)[:, None], 1.0, 0.0) / (end - start)[:, None]
        g = jnp.take(x, jnp.asarray(idx.reshape(-1)), axis=axis)
        g = g.reshape(x.shape[:axis] + (o, length) + x.shape[axis + 1:])
        wshape = (o, length) + (1,) * (x.ndim - axis - 1)
        x = jnp.sum(g * jnp.asarray(w.reshape(wshape), dtype), axis=axis + 1)
    return x


@lowers("aten._adaptive_avg_pool2d.default")
def adaptive_avg_pool2d(self, output_size):
    return _adaptive_avg(self, 2, output_size)


@lowers("aten._adaptive_avg_pool3d.default")
def adaptive_avg_pool3d(self, output_size):
    return _adaptive_avg(self, 3, output_size)


@lowers("aten._adaptive_avg_pool2d_backward.default")
def adaptive_avg_pool2d_backward(grad_output, self):
    return linear_backward(lambda x: _adaptive_avg(x, 2, grad_output.shape[-2:]), grad_output, self.shape, self.dtype)


@lowers("aten._adaptive_avg_pool3d_backward.default")
def adaptive_avg_pool3d_backward(grad_output, self):
    return linear_backward(lambda x: _adaptive_avg(x, 3, grad_output.shape[-3:]), grad_output, self.shape, self.dtype)


def _adaptive_max(x, k, output_size):
    out = expand(output_size, k)
    in_shape = x.shape[-k:]
    bases, lens, valids, positions = [], [], [], []
    for d, o in enumerate(out):
        n = in_shape[d]
        start, end = _adaptive_windows(n, o)
        length = int((end - start).max())
        ls = np.arange(length)
        positions.append(np.minimum(start[:, None] + ls, end[:, None] - 1))
        bases.append(start)
        lens.append(length)
        valids.append((ls[:, None] < (end - start)[None, :]))     # (L_d, o_d)
    win = _gathered_windows(x, k, positions)
    valid = np.ones((1,) * (2 * k), bool)
    for d in range(k):
        shape = [1] * (2 * k)
        shape[d], shape[k + d] = lens[d], out[d]
        valid = valid & valids[d].reshape(shape)
    valid = valid.reshape((-1,) + tuple(out))
    return _select_max(win, valid, bases, [1] * k, lens, in_shape)


@lowers("aten.adaptive_max_pool2d.default")
def adaptive_max_pool2d(self, output_size):
    return _adaptive_max(self, 2, output_size)


@lowers("aten.adaptive_max_pool3d.default")
def adaptive_max_pool3d(self, output_size):
    return _adaptive_max(self, 3, output_size)


@lowers("aten.adaptive_max_pool2d_backward.default")
def adaptive_max_pool2d_backward(grad_output, self, indices):
    return scatter_to_planes(grad_output, self, indices, 2)


@lowers("aten.adaptive_max_pool3d_backward.default")
def adaptive_max_pool3d_backward(grad_output, self, indices):
    return scatter_to_planes(grad_output, self, indices, 3)
