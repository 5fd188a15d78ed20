"""The device RNG's draws on a CPU: JAX's threefry2x32, its 20 rounds written out, each draw computed once.

Every random rule draws through the jax PRNG key `wrap` makes of the device RNG's key data. On
XLA's CPU backend JAX lowers its threefry hash as a loop of five steps (lax.fori_loop, a `while` in
the program), which XLA runs pass after pass over the whole array: one draw of 131,072 numbers took
1.19 ms there and 0.17 s to compile, the same hash written out 0.17 ms and 0.05 s (one fusion;
pure JAX, a 2-core VM). Written out, though, XLA fuses the hash into each consumer of the draw (a
dropout mask is read by the forward and by the backward), so it is computed and compiled once per
consumer (W7's lazy graph compiled 25-60% slower so). A draw is therefore computed inside a
`lax.cond` whose predicate XLA cannot decide at compile time (always true at run time): a
conditional is not fused, its output is computed once and read by every consumer. W7's lazy graph
compiled alone, this against JAX's loops (with `rng_next`'s multiply-add, rules/internal.py, against
a fold-in hash), two runs of two compiles each: XLA's compile 0.82x and 0.78x, the step 0.94x and
0.86x (143 against 153 ms, 180 against 211 ms).

The key is JAX's threefry with that hash: the same bits, splits and fold-ins as `jax.random`'s
default key for the same key data (tests/lower/test_threefry.py), so every distribution jax.random
builds on them is kept; the gamma and poisson rules take JAX's own key (`jax_key`). Other platforms
keep JAX's lowering (a kernel of its own on a GPU; written out already on a TPU).
"""

from __future__ import annotations

import math

import jax
import jax.extend.random as jex_random
import numpy as np
from jax import lax

from xlanb.state import runtime_state

# Threefry-2x32's rotations and key-schedule parity (Salmon et al., "Parallel random numbers: as easy
# as 1, 2, 3", SC 2011), as jax.random's threefry2x32 uses them
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def hash2x32(k0, k1, x0, x1):
    """Threefry-2x32, 20 rounds, of the counters (x0, x1) under the key (k0, k1): uint32 arrays."""
    keys = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0, x1 = x0 + k0, x1 + k1
    for step in range(5):
        for r in _ROTATIONS[step % 2]:
            x0 = x0 + x1
            x1 = x0 ^ ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r)))
        x0 = x0 + keys[(step + 1) % 3]
        x1 = x1 + keys[(step + 2) % 3] + np.uint32(step + 1)
    return x0, x1


def _counters(shape: tuple):
    """(hi, lo): each element's row-major index in `shape` as a 64-bit number's two uint32 words."""
    size = math.prod(shape)
    if size <= 2 ** 32:
        return lax.full(shape, np.uint32(0)), lax.iota(np.uint32, size).reshape(shape)
    index = lax.iota(np.uint64, size).reshape(shape)
    return (lax.convert_element_type(index >> np.uint64(32), np.uint32),
            lax.convert_element_type(index, np.uint32))


def _bits(k0, k1, bit_width: int, shape: tuple):
    """jax.random.bits' numbers (its partitionable threefry draw) of `bit_width` bits."""
    hi, lo = hash2x32(k0, k1, *_counters(shape))
    if bit_width == 64:
        wide = np.dtype(np.uint64)
        return (lax.convert_element_type(hi, wide) << np.uint64(32)) | lax.convert_element_type(lo, wide)
    bits = hi ^ lo
    return bits if bit_width == 32 else lax.convert_element_type(bits, np.dtype(f"uint{bit_width}"))


def _random_bits(key, bit_width: int, shape):
    shape = tuple(int(d) for d in shape)
    k0, k1 = key[0], key[1]
    dtype = np.dtype(f"uint{bit_width}")
    # always true, and XLA cannot tell: the draw is computed once, not inside each consumer (above)
    computed = (k0 | np.uint32(1)) != np.uint32(0)
    return lax.cond(computed, lambda k0, k1: _bits(k0, k1, bit_width, shape),
                    lambda k0, k1: lax.full(shape, dtype.type(0)), k0, k1)


def _split(key, shape):
    shape = tuple(int(d) for d in shape)
    hi, lo = hash2x32(key[0], key[1], *_counters(shape))
    return lax.concatenate([hi[..., None], lo[..., None]], len(shape))


def _fold_in(key, data):
    data = lax.convert_element_type(data, np.uint32).reshape(1)
    hi, lo = hash2x32(key[0], key[1], np.zeros((1,), np.uint32), data)
    return lax.concatenate([hi, lo], 0)


def _seed(seed):
    """A seed's key data: jax.random.key's (the seed's 64-bit value as two words)."""
    return jax.random.key_data(jax.random.key(seed))


UNROLLED = jex_random.define_prng_impl(key_shape=(2,), seed=_seed, split=_split, random_bits=_random_bits,
                                       fold_in=_fold_in, name="threefry2x32_unrolled", tag="xfry")
UNROLLED_ON = frozenset({"cpu"})        # jax's platform names where JAX's own lowering is a loop


def wrap(key_data):
    """The jax PRNG key of (2,) uint32 key data, for the platform graphs are lowered for (read while
    a rule is traced)."""
    if runtime_state().jax_device().platform in UNROLLED_ON:
        return jax.random.wrap_key_data(key_data, impl=UNROLLED)
    return jax.random.wrap_key_data(key_data)


def jax_key(key):
    """`key` as JAX's own threefry key of the same data (the same numbers): jax.random.poisson takes
    no other, and jax.random.gamma (dirichlet's too) draws its per-element keys in one batch (vmap)
    for its own key only, one element after another otherwise."""
    return jax.random.wrap_key_data(jax.random.key_data(key))
