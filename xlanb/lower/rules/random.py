"""Lowering rules: random sampling (every rule takes a jax PRNG key first).

Values follow torch's distributions, not its bit streams. float16/bfloat16 samples are
drawn in float32 and rounded; float64 samples are drawn in float64. Integer draws use
torch's ranges: random_() without bounds gives [0, 2**mantissa_digits] for floating
dtypes and [0, max] for integer dtypes. Generator arguments are ignored (xlanb has one
device RNG stream, threaded through the graph).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from xlanb.lower import threefry
from xlanb.lower.dtypes import default_float, to_jax_dtype
from xlanb.lower.registry import lowers

_HALF = (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))
_DIGITS = {np.dtype(np.float64): 53, np.dtype(np.float32): 24, np.dtype(jnp.float16): 11,
           np.dtype(jnp.bfloat16): 8}


def _dt(dtype, default):
    if dtype is None:
        return np.dtype(default)
    return to_jax_dtype(dtype) if isinstance(dtype, torch.dtype) else np.dtype(dtype)


def _cdt(dt):
    """The dtype to draw floats in for an output of dtype `dt`."""
    dt = np.dtype(dt)
    if dt == np.dtype(np.float64):
        return dt
    return np.dtype(np.float32)


def draw(sample, key, shape, *args):
    """`sample(key, shape, *args)` (jax.random.uniform, bits, bernoulli, ...) drawn over the flat element
    count and reshaped: the same values (JAX numbers the counters in row-major order either way), and
    XLA's CPU compile of the counter-based generator is 2 to 3x faster on a flat array than on a
    shaped one (W7's three dropouts: 0.94 s of the eager first step's 4.1 s of compiles)."""
    shape = tuple(int(d) for d in shape)
    if len(shape) < 2:
        return sample(key, shape, *args)
    return sample(key, (int(np.prod(shape)),), *args).reshape(shape)


def _uniform(key, shape, dt, lo=0.0, hi=1.0):
    """U[lo, hi) in the compute dtype for `dt`."""
    return draw(jax.random.uniform, key, shape, _cdt(dt), lo, hi)


def _normal(key, shape, dt):
    return draw(jax.random.normal, key, shape, _cdt(dt))


def _shape(size):
    return tuple(int(s) for s in size)


def _rand_int(key, shape, lo: int, hi: int):
    """Uniform int64 in [lo, hi] (inclusive, Python-int bounds), as torch does: bits mod span."""
    span = hi - lo + 1
    if span <= 0:
        raise ValueError(f"xlanb: empty random range [{lo}, {hi}]")
    shape = tuple(shape)
    if span <= 2 ** 32:
        bits = draw(jax.random.bits, key, shape, jnp.uint32)
        if span < 2 ** 32:
            bits = bits % jnp.uint32(span)
        return bits.astype(jnp.int64) + jnp.int64(lo)
    bits = draw(jax.random.bits, key, shape, jnp.uint64)
    if span < 2 ** 64:
        bits = bits % jnp.uint64(span)
    bits = bits + jnp.uint64(lo % 2 ** 64)            # wraps modulo 2**64
    return lax.bitcast_convert_type(bits, jnp.int64)


def _int_range_max(dt) -> int:
    """The largest value random_() draws for dtype `dt` (torch's defaults)."""
    dt = np.dtype(dt)
    if dt == np.dtype(np.bool_):
        return 1
    if dt in _DIGITS:
        return 2 ** _DIGITS[dt]
    return int(np.iinfo(dt).max)


def _cast_ints(x, dt):
    dt = np.dtype(dt)
    if dt == np.dtype(np.bool_):
        return x != 0
    return x.astype(dt)


# Distributions on an existing tensor's shape ----------------------------------------------

@lowers("aten.normal_functional.default", rng=True)
def normal_functional(key, self, mean=0.0, std=1.0, *, generator=None):
    return (mean + std * _normal(key, self.shape, self.dtype)).astype(self.dtype)


@lowers("aten.normal.Tensor_float", rng=True)
def normal_tensor_float(key, mean, std=1.0, *, generator=None):
    dt = mean.dtype
    return (mean.astype(_cdt(dt)) + std * _normal(key, mean.shape, dt)).astype(dt)


@lowers("aten.normal.float_Tensor", rng=True)
def normal_float_tensor(key, mean, std, *, generator=None):
    dt = std.dtype
    return (mean + std.astype(_cdt(dt)) * _normal(key, std.shape, dt)).astype(dt)


@lowers("aten.normal.Tensor_Tensor", rng=True)
def normal_tensor_tensor(key, mean, std, *, generator=None):
    dt = jnp.result_type(mean, std)
    shape = jnp.broadcast_shapes(mean.shape, std.shape)
    c = _cdt(dt)
    return (mean.astype(c) + std.astype(c) * _normal(key, shape, dt)).astype(dt)


@lowers("aten.normal.float_float", rng=True)
def normal_float_float(key, mean, std, size, *, generator=None, dtype=None, layout=None, device=None,
                       pin_memory=None):
    dt = _dt(dtype, default_float())
    return (mean + std * _normal(key, _shape(size), dt)).astype(dt)


@lowers("aten.uniform.default", rng=True)
def uniform(key, self, from_=0.0, to=1.0, *, generator=None, **kwargs):
    from_ = kwargs.pop("from", from_)     # `from` is a Python keyword
    u = _uniform(key, self.shape, self.dtype)
    return (from_ + (to - from_) * u).astype(self.dtype)


@lowers("aten.bernoulli.default", rng=True)
def bernoulli(key, self, *, generator=None):
    u = _uniform(key, self.shape, self.dtype)
    return (u < self.astype(u.dtype)).astype(self.dtype)


@lowers("aten.bernoulli.p", rng=True)
def bernoulli_p(key, self, p, *, generator=None):
    u = _uniform(key, self.shape, self.dtype if jnp.issubdtype(self.dtype, jnp.floating) else jnp.float32)
    return (u < p).astype(self.dtype)


@lowers("aten.bernoulli.Tensor", rng=True)
def bernoulli_tensor(key, self, p, *, generator=None):
    u = _uniform(key, self.shape, p.dtype)
    return (u < jnp.broadcast_to(p, self.shape).astype(u.dtype)).astype(self.dtype)


@lowers("aten.random.default", rng=True)
def random_(key, self, *, generator=None):
    return _cast_ints(_rand_int(key, self.shape, 0, _int_range_max(self.dtype)), self.dtype)


@lowers("aten.random.to", rng=True)
def random_to(key, self, to, *, generator=None):
    return _cast_ints(_rand_int(key, self.shape, 0, int(to) - 1), self.dtype)


@lowers("aten.random.from", rng=True)
def random_from(key, self, from_=None, to=None, *, generator=None, **kwargs):
    from_ = kwargs.pop("from", from_)
    hi = _int_range_max(self.dtype) if to is None else int(to) - 1
    return _cast_ints(_rand_int(key, self.shape, int(from_), hi), self.dtype)


@lowers("aten.exponential.default", rng=True)
def exponential(key, self, lambd=1.0, *, generator=None):
    e = draw(jax.random.exponential, key, self.shape, _cdt(self.dtype))
    return (e / lambd).astype(self.dtype)


@lowers("aten.geometric.default", rng=True)
def geometric(key, self, p, *, generator=None):
    c = _cdt(self.dtype) if jnp.issubdtype(self.dtype, jnp.floating) else np.dtype(np.float64)
    u = draw(jax.random.uniform, key, self.shape, c, jnp.finfo(c).tiny, 1.0)
    return jnp.ceil(jnp.log(u) / jnp.log1p(jnp.asarray(-p, c))).astype(self.dtype)


@lowers("aten.log_normal.default", rng=True)
def log_normal(key, self, mean=1.0, std=2.0, *, generator=None):
    return jnp.exp(mean + std * _normal(key, self.shape, self.dtype)).astype(self.dtype)


@lowers("aten.cauchy.default", rng=True)
def cauchy(key, self, median=0.0, sigma=1.0, *, generator=None):
    u = _uniform(key, self.shape, self.dtype)
    return (median + sigma * jnp.tan(np.pi * (u - 0.5))).astype(self.dtype)


# Factories ------------------------------------------------------------------------------

@lowers("aten.rand.default", "aten.rand.generator", rng=True)
def rand(key, size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    dt = _dt(dtype, default_float())
    return _uniform(key, _shape(size), dt).astype(dt)


@lowers("aten.randn.default", "aten.randn.generator", rng=True)
def randn(key, size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    dt = _dt(dtype, default_float())
    return _normal(key, _shape(size), dt).astype(dt)


@lowers("aten.randint.default", "aten.randint.generator", rng=True)
def randint(key, high, size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return _cast_ints(_rand_int(key, _shape(size), 0, int(high) - 1), _dt(dtype, np.int64))


@lowers("aten.randint.low", "aten.randint.low_generator", rng=True)
def randint_low(key, low, high, size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return _cast_ints(_rand_int(key, _shape(size), int(low), int(high) - 1), _dt(dtype, np.int64))


@lowers("aten.randperm.default", "aten.randperm.generator", rng=True)
def randperm(key, n, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return jax.random.permutation(key, int(n)).astype(_dt(dtype, np.int64))


@lowers("aten.rand_like.default", "aten.rand_like.generator", rng=True)
def rand_like(key, self, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None,
              memory_format=None):
    dt = _dt(dtype, self.dtype)
    return _uniform(key, self.shape, dt).astype(dt)


@lowers("aten.randn_like.default", "aten.randn_like.generator", rng=True)
def randn_like(key, self, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    dt = _dt(dtype, self.dtype)
    return _normal(key, self.shape, dt).astype(dt)


@lowers("aten.randint_like.default", "aten.randint_like.generator", rng=True)
def randint_like(key, self, high, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None,
                 memory_format=None):
    return _cast_ints(_rand_int(key, self.shape, 0, int(high) - 1), _dt(dtype, self.dtype))


@lowers("aten.randint_like.low_dtype", "aten.randint_like.low_generator_dtype", rng=True)
def randint_like_low(key, self, low, high, *, generator=None, dtype=None, layout=None, device=None,
                     pin_memory=None, memory_format=None):
    return _cast_ints(_rand_int(key, self.shape, int(low), int(high) - 1), _dt(dtype, self.dtype))


@lowers("aten.randint_like.Tensor", "aten.randint_like.Tensor_generator", rng=True)
def randint_like_tensor(key, self, high, *, generator=None, dtype=None, layout=None, device=None,
                        pin_memory=None, memory_format=None):
    # `high` is data: floor(u * high) with a float64 u (bias below 2**-52 per value)
    u = draw(jax.random.uniform, key, self.shape, jnp.float64)
    v = jnp.floor(u * high.astype(jnp.float64)).astype(jnp.int64)
    return _cast_ints(jnp.minimum(v, high.astype(jnp.int64) - 1), _dt(dtype, self.dtype))


@lowers("aten.multinomial.default", rng=True)
def multinomial(key, self, num_samples, replacement=False, *, generator=None):
    c = _cdt(self.dtype)
    logits = jnp.log(self.astype(c))
    n = int(num_samples)
    if replacement:
        batch = self.shape[:-1]
        out = jax.random.categorical(key, logits, axis=-1, shape=(n,) + batch)
        return jnp.moveaxis(out, 0, -1).astype(jnp.int64)
    # without replacement: the top num_samples of log p + Gumbel noise
    g = draw(jax.random.gumbel, key, self.shape, c)
    _, idx = lax.top_k(logits + g, n)
    return idx.astype(jnp.int64)


@lowers("aten.poisson.default", rng=True)
def poisson(key, self, generator=None):
    return jax.random.poisson(threefry.jax_key(key), self.astype(_cdt(self.dtype)), self.shape).astype(self.dtype)


@lowers("aten._standard_gamma.default", rng=True)
def standard_gamma(key, self, generator=None):
    return jax.random.gamma(threefry.jax_key(key), self.astype(_cdt(self.dtype)), self.shape, _cdt(self.dtype)).astype(self.dtype)


@lowers("aten.binomial.default", rng=True)
def binomial(key, count, prob, generator=None):
    dt = jnp.result_type(count, prob)
    c = _cdt(dt)
    shape = jnp.broadcast_shapes(count.shape, prob.shape)
    return jax.random.binomial(key, count.astype(c), prob.astype(c), shape, c).astype(dt)


@lowers("aten._sample_dirichlet.default", rng=True)
def sample_dirichlet(key, self, generator=None):
    c = _cdt(self.dtype)
    return jax.random.dirichlet(threefry.jax_key(key), self.astype(c), self.shape[:-1], c).astype(self.dtype)
