"""Lowering rules: nn — embedding (and embedding_bag), dropout, padding.

The rest of the nn family lives next door: nn_conv (convolution, im2col), nn_pool
(pooling), nn_norm (batch/layer/group norm), nn_loss (losses), nn_resample (upsampling,
grid_sampler) and nn_distance (cdist, pdist).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlanb.lower.registry import lowers
from xlanb.lower.rules.autodiff import acc_dtype, linear_backward
from xlanb.lower.rules.random import draw


# Embedding -------------------------------------------------------------------------------

@lowers("aten.embedding.default")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return jnp.take(weight, indices, axis=0, mode="clip")


@lowers("aten.embedding_dense_backward.default")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    dtype = acc_dtype(grad_output.dtype)
    idx = indices.reshape(-1)
    g = grad_output.astype(dtype).reshape(idx.shape[0], -1)
    if scale_grad_by_freq:
        counts = jnp.zeros((num_weights,), dtype).at[idx].add(1, mode="drop")
        g = g / jnp.take(counts, idx, mode="clip")[:, None]
    # padding_idx is -1 (none) or a row index; indices are never negative
    g = jnp.where((idx != padding_idx)[:, None], g, 0)
    return jnp.zeros((num_weights, g.shape[1]), dtype).at[idx].add(g, mode="drop")


_SUM, _MEAN, _MAX = 0, 1, 2


def _bags(indices, offsets, include_last_offset, padding_idx):
    """(offset2bag, in_bag mask, number of bags) for 1-d indices and offsets."""
    n = indices.shape[0]
    b = offsets.shape[0] - 1 if include_last_offset else offsets.shape[0]
    pos = jnp.arange(n)
    starts = offsets[:b]
    bag = jnp.searchsorted(starts, pos, side="right").astype(jnp.int64) - 1
    in_bag = (bag >= 0) & (indices != padding_idx)
    if include_last_offset:
        in_bag = in_bag & (pos < offsets[b])
    return jnp.maximum(bag, 0), in_bag, b


def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    indices, offsets = indices.reshape(-1), offsets.reshape(-1)
    bag, in_bag, nb = _bags(indices, offsets, include_last_offset, padding_idx)
    dtype = acc_dtype(weight.dtype)
    rows = jnp.take(weight, indices, axis=0, mode="clip").astype(dtype)
    seg = jnp.where(in_bag, bag, nb)                      # out-of-bag rows go to a dropped segment
    bag_size = jax.ops.segment_sum(in_bag.astype(jnp.int64), seg, num_segments=nb + 1)[:nb]
    if mode == _MAX:
        # CPU's kernel walks the bag keeping a row when it is greater than the best so far: a NaN in the
        # first row stays (nothing compares greater than it), a later NaN is never taken
        n = indices.shape[0]
        positions = jnp.arange(n)
        m = jax.ops.segment_max(jnp.where(in_bag[:, None] & ~jnp.isnan(rows), rows, -jnp.inf), seg,
                                num_segments=nb + 1)[:nb]
        hit = (rows == jnp.take(m, jnp.minimum(seg, nb - 1), axis=0)) & in_bag[:, None]
        first = jax.ops.segment_min(jnp.where(hit, positions[:, None], n), seg, num_segments=nb + 1)[:nb]
        start = jax.ops.segment_min(jnp.where(in_bag, positions, n), seg, num_segments=nb + 1)[:nb]
        leading_nan = jnp.isnan(jnp.take(rows, start, axis=0, mode="clip"))
        first = jnp.where(leading_nan, start[:, None], first)
        m = jnp.where(leading_nan, jnp.asarray(jnp.nan, m.dtype), m)
        nonempty = (bag_size > 0)[:, None]
        out = jnp.where(nonempty, m, 0)
        max_indices = jnp.where(nonempty, jnp.take(indices, first, mode="clip"), 0)
    else:
        if per_sample_weights is not None:
            rows = rows * per_sample_weights.astype(dtype)[:, None]
        out = jax.ops.segment_sum(jnp.where(in_bag[:, None], rows, 0), seg, num_segments=nb + 1)[:nb]
        if mode == _MEAN:
            out = out / jnp.maximum(bag_size, 1)[:, None].astype(dtype)
        max_indices = jnp.zeros((0,), jnp.int64)
    if bag_size.shape[0] < offsets.shape[0]:    # include_last_offset: torch's meta kernel keeps one per offset
        bag_size = jnp.pad(bag_size, (0, offsets.shape[0] - bag_size.shape[0]))
    return out.astype(weight.dtype), bag, bag_size, max_indices


@lowers("aten._embedding_bag.default")
def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    return _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                          include_last_offset, padding_idx)


@lowers("aten._embedding_bag_forward_only.default")
def embedding_bag_forward_only(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                               per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    return _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                          include_last_offset, padding_idx)


def _embedding_bag_grad(grad, indices, bag, in_bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq,
                        mode, per_sample_weights):
    dtype = acc_dtype(grad.dtype)
    grad = grad.astype(dtype)
    bag_size = bag_size[:grad.shape[0]]        # include_last_offset: one entry per offset, one bag fewer
    out = jnp.zeros((num_weights, grad.shape[1]), dtype)
    if mode == _MAX:
        d = jnp.arange(grad.shape[1])[None, :]
        g = jnp.where((bag_size > 0)[:, None], grad, 0)
        return out.at[maximum_indices, d].add(g, mode="drop")
    g = jnp.take(grad, bag, axis=0, mode="clip")
    if mode == _MEAN:
        g = g / jnp.maximum(jnp.take(bag_size, bag, mode="clip"), 1)[:, None].astype(dtype)
    elif per_sample_weights is not None:
        g = g * per_sample_weights.astype(dtype)[:, None]
    if scale_grad_by_freq:
        counts = jnp.zeros((num_weights,), dtype).at[indices].add(1, mode="drop")
        g = g / jnp.take(counts, indices, mode="clip")[:, None]
    return out.at[indices].add(jnp.where(in_bag[:, None], g, 0), mode="drop")


@lowers("aten._embedding_bag_dense_backward.default")
def embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                 scale_grad_by_freq, mode, per_sample_weights, padding_idx=-1):
    indices = indices.reshape(-1)
    in_bag = indices != padding_idx
    return _embedding_bag_grad(grad, indices, offset2bag, in_bag, bag_size, maximum_indices, num_weights,
                               scale_grad_by_freq, mode, per_sample_weights)


@lowers("aten._embedding_bag_backward.default")
def embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
                           scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx=-1):
    indices, offsets = indices.reshape(-1), offsets.reshape(-1)
    nb = grad.shape[0]
    bag, in_bag, _ = _bags(indices, offsets, offsets.shape[0] == nb + 1, padding_idx)
    return _embedding_bag_grad(grad, indices, bag, in_bag, bag_size, maximum_indices, num_weights,
                               scale_grad_by_freq, mode, per_sample_weights)


# Dropout -----------------------------------------------------------------------------------

@lowers("aten.native_dropout.default", rng=True)
def native_dropout(key, input, p, train=None):
    if train is False:
        return input, jnp.ones(input.shape, jnp.bool_)
    keep = 1.0 - p
    # drawn in float32 for float32 and half inputs (as bernoulli_p): a Python float's probability drew
    # a float64 uniform, twice the bits and a float64 program to compile
    u = draw(jax.random.uniform, key, input.shape, jnp.float64 if input.dtype == jnp.float64 else jnp.float32)
    mask = u < jnp.asarray(keep, u.dtype)
    scale = 0.0 if keep == 0 else 1.0 / keep
    return input * mask.astype(input.dtype) * jnp.asarray(scale, input.dtype), mask


@lowers("aten.native_dropout_backward.default")
def native_dropout_backward(grad_output, mask, scale):
    g = grad_output
    if not jnp.issubdtype(g.dtype, jnp.inexact):      # bool/int grads: torch computes in float
        g = g.astype(jnp.float32)
    return g * mask.astype(g.dtype) * jnp.asarray(scale, g.dtype)


# Padding -----------------------------------------------------------------------------------

def _pairs(x, pad):
    """torch pad list (last dim first, (before, after) pairs) -> per-dim pairs over x.ndim."""
    pad = [int(p) for p in pad]
    k = len(pad) // 2
    pairs = [(0, 0)] * (x.ndim - k)
    for d in range(k):
        i = k - 1 - d
        pairs.append((pad[2 * i], pad[2 * i + 1]))
    return pairs


@lowers("aten.constant_pad_nd.default")
def constant_pad_nd(self, pad, value=0):
    fill = jnp.asarray(value).astype(self.dtype)
    return lax.pad(self, fill, [(lo, hi, 0) for lo, hi in _pairs(self, pad)])


def _edge_pad(x, padding):
    """Replication padding as torch computes it: output i reads input clamp(i - before, 0, n - 1)
    (negative padding crops, and may crop past the input: then the edge repeats)."""
    for axis, (lo, hi) in enumerate(_pairs(x, padding)):
        if lo == 0 and hi == 0:
            continue
        n = x.shape[axis]
        idx = np.clip(np.arange(n + lo + hi) - lo, 0, n - 1)
        x = jnp.take(x, idx, axis=axis)
    return x


def _mode_pad(x, padding, mode):
    if mode == "edge":
        return _edge_pad(x, padding)
    pairs = _pairs(x, padding)
    # negative padding crops (torch allows it for replication / reflection too)
    crop = tuple(slice(-lo if lo < 0 else None, hi if hi < 0 else None) for lo, hi in pairs)
    x = x[crop]
    return jnp.pad(x, [(max(lo, 0), max(hi, 0)) for lo, hi in pairs], mode=mode)


def _register_pad(name, mode):
    @lowers(f"aten.{name}.default")
    def forward(self, padding):
        return _mode_pad(self, padding, mode)

    @lowers(f"aten.{name}_backward.default")
    def backward(grad_output, self, padding):
        return linear_backward(lambda x: _mode_pad(x, padding, mode), grad_output, self.shape, self.dtype)

    forward.__name__, backward.__name__ = name, f"{name}_backward"


for _d in (1, 2, 3):
    _register_pad(f"reflection_pad{_d}d", "reflect")
    _register_pad(f"replication_pad{_d}d", "edge")


@lowers("aten._embedding_bag_per_sample_weights_backward.default")
def embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1):
    """d loss / d per_sample_weights[i] = <grad of i's bag, weight row of indices[i]> (mode sum)."""
    dtype = acc_dtype(grad.dtype)
    indices = indices.reshape(-1)
    g = jnp.take(grad.astype(dtype), offset2bag.reshape(-1), axis=0, mode="clip")
    rows = jnp.take(weight.astype(dtype), indices, axis=0, mode="clip")
    out = jnp.sum(g * rows, axis=-1)
    return jnp.where(indices == padding_idx, 0, out)
