"""Lowering rules: upsampling (nearest, nearest-exact, linear/bilinear/trilinear, bicubic)
and their backward ops, grid_sampler_2d (+ backward).

Upsampling is separable: per spatial dim, a few taps (source index, weight) computed at
trace time in numpy with torch's CPU index arithmetic (float32 for float/half inputs,
float64 for double), then gathered and summed dim by dim. Backward ops are the transposes
(jax.vjp of the linear forward).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from xlanb.lower.registry import lowers
from xlanb.lower.rules.autodiff import acc_dtype, linear_backward

_CUBIC_A = -0.75


def _np_dtype(dtype):
    return np.float64 if dtype == jnp.float64 else np.float32


def _scale_value(scale, n_in, n_out, ft):
    """compute_scales_value: 1/scale when given, else in/out."""
    if scale is not None and scale > 0:
        return ft(1.0 / scale)
    return ft(n_in) / ft(n_out)


def _area_scale(n_in, n_out, align_corners, scale, ft):
    if align_corners:
        return ft(n_in - 1) / ft(n_out - 1) if n_out > 1 else ft(0)
    return _scale_value(scale, n_in, n_out, ft)


def _source_index(scale, dst, align_corners, cubic, ft):
    if align_corners:
        return scale * dst
    src = scale * (dst + ft(0.5)) - ft(0.5)
    return src if cubic else np.maximum(src, ft(0))


def _taps_nearest(n_in, n_out, scale, exact, ft):
    dst = np.arange(n_out)
    if exact:
        s = _scale_value(scale, n_in, n_out, np.float32)
        src = np.floor((dst.astype(np.float32) + np.float32(0.5)) * s).astype(np.int64)
    elif n_out == n_in:
        src = dst
    elif n_out == 2 * n_in:
        src = dst >> 1
    else:
        s = _scale_value(scale, n_in, n_out, np.float32)
        src = np.floor(dst.astype(np.float32) * s).astype(np.int64)
    return [(np.minimum(src, n_in - 1), np.ones(n_out, ft))]


def _taps_linear(n_in, n_out, align_corners, scale, ft):
    dst = np.arange(n_out).astype(ft)
    if n_out == n_in:
        return [(np.arange(n_out), np.ones(n_out, ft))]
    s = _area_scale(n_in, n_out, align_corners, scale, ft)
    real = _source_index(s, dst, align_corners, False, ft).astype(ft)
    i0 = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    lam1 = np.clip(real - i0.astype(ft), ft(0), ft(1)).astype(ft)
    i1 = i0 + (i0 < n_in - 1)
    return [(i0, (ft(1) - lam1).astype(ft)), (i1, lam1)]


def _keys_near(x, a):
    """Keys' cubic convolution kernel (parameter a) at a distance x with 0 <= x <= 1."""
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _keys_far(x, a):
    """Keys' cubic convolution kernel (parameter a) at a distance x with 1 <= x <= 2."""
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def _cubic_coeffs(t, ft=float):
    """The four weights of the source indices floor - 1 .. floor + 2 for a fraction t in [0, 1]."""
    a = ft(_CUBIC_A)
    return [_keys_far(t + 1, a), _keys_near(t, a), _keys_near(1 - t, a), _keys_far(2 - t, a)]


def _taps_cubic(n_in, n_out, align_corners, scale, ft):
    dst = np.arange(n_out).astype(ft)
    s = _area_scale(n_in, n_out, align_corners, scale, ft)
    real = _source_index(s, dst, align_corners, True, ft).astype(ft)
    i0 = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    t = np.clip(real - i0.astype(ft), ft(0), ft(1)).astype(ft)
    coeffs = _cubic_coeffs(t, ft)
    return [(np.clip(i0 - 1 + j, 0, n_in - 1), coeffs[j].astype(ft)) for j in range(4)]


def _sum_taps(y, axis, taps, dtype, acc=None):
    """acc plus, per tap (source indices, weights), y gathered at the indices along `axis` times the
    weights, in `dtype`; a single tap of weights all 1 is a gather alone."""
    wshape = (-1,) + (1,) * (y.ndim - axis - 1)
    for idx, w in taps:
        term = jnp.take(y, jnp.asarray(idx), axis=axis).astype(dtype)
        if not (len(taps) == 1 and np.all(w == 1)):
            term = term * jnp.asarray(w.reshape(wshape), dtype)
        acc = term if acc is None else acc + term
    return acc


def _resample(x, taps_per_dim):
    """Applies per-dim taps to the trailing len(taps_per_dim) dims of x."""
    k = len(taps_per_dim)
    gather_only = all(len(t) == 1 for t in taps_per_dim)
    dtype = x.dtype if gather_only else acc_dtype(x.dtype)
    y = x.astype(dtype)
    for d, taps in enumerate(taps_per_dim):
        y = _sum_taps(y, y.ndim - k + d, taps, dtype)
    return y.astype(x.dtype)


def _uint8_filter(kind):
    """The filter CPU's uint8 kernel samples: a triangle, or Keys' cubic with torch's a = -0.75."""
    if kind == "linear":
        return lambda x: 1.0 - abs(x) if abs(x) < 1.0 else 0.0

    def cubic(x):
        x = abs(x)
        if x < 1.0:
            return _keys_near(x, _CUBIC_A)
        return _keys_far(x, _CUBIC_A) if x < 2.0 else 0.0
    return cubic


def _uint8_taps(n_in, n_out, kind, align_corners, scale):
    """One dim of CPU's uint8 bilinear/bicubic kernel (antialias=False), as its weights are made:
    per output index the first source index and up to `interp` weights in float64 (taps past an edge
    are added to the edge's, not clamped per tap), then all of them as int16 fixed point with the most
    bits that keep the largest (running) weight under 2**15. Returns (first index, number of taps,
    int16 weights [n_out, interp], precision)."""
    interp = 2 if kind == "linear" else 4
    support = interp // 2
    filt = _uint8_filter(kind)
    s = _area_scale(n_in, n_out, align_corners, scale, float)
    first = np.zeros(n_out, np.int64)
    size = np.zeros(n_out, np.int64)
    weights = np.zeros((n_out, interp))
    wt_max = 0.0
    for i in range(n_out):
        real = float(_source_index(s, i, align_corners, kind == "cubic", float))
        index = min(int(math.floor(np.float32(real))), n_in - 1)       # floorf: the index in float32
        lam = min(max(real - index, 0.0), 1.0)
        lo = index - support + 1
        first[i] = max(lo, 0)
        size[i] = min(max(min(index + support + 1, n_in) - first[i], 0), interp)
        at = 0
        for j in range(interp):
            w = filt(float(j + 1 - support) - lam)
            if lo + j <= 0:
                at = 0
            elif lo + j >= n_in - 1:
                at = size[i] - 1
            weights[i, at] += w
            wt_max = max(wt_max, weights[i, at])
            at += 1
    precision = 0
    while precision < 22 and int(0.5 + wt_max * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    v = weights * (1 << precision)
    fixed = np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5)).astype(np.int32)
    return first, size, fixed, precision


def _resample_uint8(x, axis, n_out, kind, align_corners, scale):
    """One separable pass of CPU's uint8 kernel along `axis`: integer sums of uint8 values times int16
    weights, plus half, shifted right by the precision and clamped to [0, 255] (bit for bit)."""
    n_in = x.shape[axis]
    first, size, fixed, precision = _uint8_taps(n_in, n_out, kind, align_corners, scale)
    weights = [np.where(j < size, fixed[:, j], 0).astype(np.int32) for j in range(fixed.shape[1])]
    taps = [(np.minimum(first + j, n_in - 1), w) for j, w in enumerate(weights) if w.any()]
    acc = _sum_taps(x, axis, taps, jnp.int32, acc=jnp.full((), 1 << (precision - 1), jnp.int32))
    return jnp.clip(jnp.right_shift(acc, precision), 0, 255).astype(jnp.uint8)


def _upsample_uint8(x, output_size, kind, align_corners, scales):
    """CPU's uint8 bilinear/bicubic: the last dim resampled first, then the one before (each only if its
    size changes), rounded to uint8 after each pass as CPU's separable kernel does."""
    k = len(output_size)
    for d in reversed(range(k)):
        axis = x.ndim - k + d
        if int(output_size[d]) != x.shape[axis]:
            x = _resample_uint8(x, axis, int(output_size[d]), kind, align_corners, scales[d])
    return x


def _upsample(x, output_size, kind, align_corners, scales):
    k = len(output_size)
    if x.dtype == jnp.uint8 and kind in ("linear", "cubic") and k == 2:
        return _upsample_uint8(x, output_size, kind, align_corners, list(scales) + [None] * (k - len(scales)))
    in_sp = x.shape[-k:]
    ft = _np_dtype(acc_dtype(x.dtype))
    scales = list(scales) + [None] * (k - len(scales))
    taps = []
    for n_in, n_out, s in zip(in_sp, output_size, scales):
        n_out = int(n_out)
        if kind == "nearest":
            taps.append(_taps_nearest(n_in, n_out, s, False, ft))
        elif kind == "nearest_exact":
            taps.append(_taps_nearest(n_in, n_out, s, True, ft))
        elif kind == "linear":
            taps.append(_taps_linear(n_in, n_out, align_corners, s, ft))
        else:
            taps.append(_taps_cubic(n_in, n_out, align_corners, s, ft))
    return _resample(x, taps)


def _vec_args(input, output_size, scale_factors, k):
    """The .vec overloads: output size from output_size or floor(in * scale)."""
    if output_size is not None:
        return [int(s) for s in output_size], [None] * k
    sizes = [int(math.floor(n * float(s))) for n, s in zip(input.shape[-k:], scale_factors)]
    return sizes, [float(s) for s in scale_factors]


def _register(name, kind, k, has_align):
    def forward(self, output_size, *rest):
        if has_align:
            align_corners, scales = rest[0], rest[1:]
        else:
            align_corners, scales = False, rest
        return _upsample(self, output_size, kind, align_corners, scales)

    def backward(grad_output, output_size, input_size, *rest):
        return linear_backward(lambda x: forward(x, output_size, *rest), grad_output, input_size, grad_output.dtype)

    if has_align:
        def vec(input, output_size, align_corners, scale_factors):
            size, scales = _vec_args(input, output_size, scale_factors, k)
            return _upsample(input, size, kind, align_corners, scales)
    else:
        def vec(input, output_size, scale_factors):
            size, scales = _vec_args(input, output_size, scale_factors, k)
            return _upsample(input, size, kind, False, scales)

    forward.__name__, backward.__name__, vec.__name__ = name, name + "_backward", name + "_vec"
    lowers(f"aten.{name}.default")(forward)
    lowers(f"aten.{name}_backward.default")(backward)
    lowers(f"aten.{name}.vec")(vec)


for _k in (1, 2, 3):
    _register(f"upsample_nearest{_k}d", "nearest", _k, False)
    _register(f"_upsample_nearest_exact{_k}d", "nearest_exact", _k, False)
_register("upsample_linear1d", "linear", 1, True)
_register("upsample_bilinear2d", "linear", 2, True)
_register("upsample_trilinear3d", "linear", 3, True)
_register("upsample_bicubic2d", "cubic", 2, True)


# grid_sampler_2d ---------------------------------------------------------------------------

_BILINEAR, _NEAREST, _BICUBIC = 0, 1, 2
_ZEROS, _BORDER, _REFLECTION = 0, 1, 2


def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(x, twice_low, twice_high):
    if twice_low == twice_high:
        return jnp.zeros_like(x)
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = jnp.abs(x - lo)
    extra = jnp.fmod(x, span)
    flips = jnp.floor(x / span)
    return jnp.where(jnp.fmod(flips, 2) == 0, extra + lo, span - extra + lo)


def _coordinates(x, size, padding_mode, align_corners):
    if padding_mode == _BORDER:
        return jnp.clip(x, 0, size - 1)
    if padding_mode == _REFLECTION:
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return jnp.clip(x, 0, size - 1)
    return x


def _gather(input, iy, ix):
    """input (N, C, H, W), integer iy/ix (N, Ho, Wo, T) -> (N, C, Ho, Wo, T), zero out of bounds."""
    n, c, h, w = input.shape
    ok = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    flat = (jnp.clip(iy, 0, h - 1) * w + jnp.clip(ix, 0, w - 1)).reshape(n, -1)
    vals = jax.vmap(lambda im, f: im[:, f])(input.reshape(n, c, h * w), flat).reshape((n, c) + iy.shape[1:])
    return jnp.where(ok[:, None], vals, 0)


def _grid_sample(input, grid, interpolation_mode, padding_mode, align_corners):
    dtype = acc_dtype(input.dtype)
    input, grid = input.astype(dtype), grid.astype(dtype)
    h, w = input.shape[2], input.shape[3]
    x = _unnormalize(grid[..., 0], w, align_corners)
    y = _unnormalize(grid[..., 1], h, align_corners)
    if interpolation_mode == _BICUBIC:
        x0, y0 = jnp.floor(x), jnp.floor(y)
        cx, cy = _cubic_coeffs(x - x0), _cubic_coeffs(y - y0)
        iy = [_coordinates(y0 - 1 + i, h, padding_mode, align_corners).astype(jnp.int64) for i in range(4)]
        ix = [_coordinates(x0 - 1 + j, w, padding_mode, align_corners).astype(jnp.int64) for j in range(4)]
        vals = _gather(input, jnp.stack([a for a in iy for _ in range(4)], -1),
                       jnp.stack([b for _ in range(4) for b in ix], -1))
        weights = jnp.stack([a * b for a in cy for b in cx], -1)
        return jnp.sum(vals * weights[:, None], axis=-1)
    x = _coordinates(x, w, padding_mode, align_corners)
    y = _coordinates(y, h, padding_mode, align_corners)
    if interpolation_mode == _NEAREST:
        iy, ix = jnp.round(y).astype(jnp.int64), jnp.round(x).astype(jnp.int64)
        return _gather(input, iy[..., None], ix[..., None])[..., 0]
    x0, y0 = jnp.floor(x), jnp.floor(y)
    x1, y1 = x0 + 1, y0 + 1
    iy = jnp.stack([y0, y0, y1, y1], -1).astype(jnp.int64)
    ix = jnp.stack([x0, x1, x0, x1], -1).astype(jnp.int64)
    weights = jnp.stack([(x1 - x) * (y1 - y), (x - x0) * (y1 - y), (x1 - x) * (y - y0), (x - x0) * (y - y0)], -1)
    return jnp.sum(_gather(input, iy, ix) * weights[:, None], axis=-1)


@lowers("aten.grid_sampler_2d.default")
def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    return _grid_sample(input, grid, interpolation_mode, padding_mode, align_corners)


@lowers("aten.grid_sampler_2d_backward.default")
def grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
                             output_mask):
    dtype = acc_dtype(input.dtype)
    _, vjp = jax.vjp(lambda a, g: _grid_sample(a, g, interpolation_mode, padding_mode, align_corners),
                     input.astype(dtype), grid.astype(dtype))
    gi, gg = vjp(grad_output.astype(dtype))
    # torch always returns grad_grid (output_mask[1] only lets it skip work)
    return (gi if output_mask[0] else None), gg
