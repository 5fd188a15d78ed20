"""The device RNG on a CPU (lower/threefry.py): JAX's threefry with its rounds written out gives JAX's own
numbers for the same key data, a draw is computed once inside a conditional (no `while` loop in the
program), and the key's next state (`rng_next`) is a 64-bit multiply-add whose streams do not overlap
for nearby seeds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import xlanb
from xlanb import events, hooks
from xlanb.lower import threefry
from xlanb.lower.registry import lookup
from xlanb.state import runtime_state

SEEDS = [0, 1, 2 ** 40 + 7, 2 ** 64 - 1]


def _keys(seed: int):
    data = np.array([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], np.uint32)
    return jax.random.wrap_key_data(data), jax.random.wrap_key_data(data, impl=threefry.UNROLLED)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.uint16, jnp.uint32, jnp.uint64])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (1000,)])
def test_bits_are_jaxs(seed, dtype, shape):
    theirs, ours = _keys(seed)
    with jax.enable_x64(True):
        want, got = jax.random.bits(theirs, shape, dtype), jax.random.bits(ours, shape, dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("seed", SEEDS)
def test_splits_fold_ins_and_distributions_are_jaxs(seed):
    theirs, ours = _keys(seed)
    for derive in (lambda k: jax.random.split(k, 5), lambda k: jax.random.split(k, (2, 3)),
                   lambda k: jax.random.fold_in(k, 0x5EED)):
        np.testing.assert_array_equal(jax.random.key_data(derive(ours)), jax.random.key_data(derive(theirs)))
    for draw in (lambda k: jax.random.normal(k, (50,)), lambda k: jax.random.uniform(k, (4, 4)),
                 lambda k: jax.random.permutation(k, 20), lambda k: jax.random.bernoulli(k, 0.3, (64,)),
                 lambda k: jax.random.categorical(k, jnp.zeros((3, 5)))):
        np.testing.assert_array_equal(np.asarray(draw(ours)), np.asarray(draw(theirs)))


def test_gamma_and_poisson_take_jaxs_own_key():
    theirs, ours = _keys(3)
    key = threefry.jax_key(ours)
    np.testing.assert_array_equal(np.asarray(jax.random.poisson(key, 3.0, (10,))),
                                  np.asarray(jax.random.poisson(theirs, 3.0, (10,))))


def _stablehlo(run) -> str:
    log = runtime_state().log
    before = len([e for e in log.all() if isinstance(e, events.Compile)])
    with hooks.recording_texts():
        run()
    return "\n".join(e.stablehlo for e in [e for e in log.all() if isinstance(e, events.Compile)][before:])


@pytest.mark.skipif(runtime_state().jax_device().platform not in threefry.UNROLLED_ON,
                    reason="JAX's own threefry lowering is kept on this platform")
def test_a_draw_is_one_conditional_and_no_loop():
    xlanb.manual_seed(5)
    text = _stablehlo(lambda: torch.nn.functional.dropout(torch.ones(4096, device="xla"), 0.25).cpu())
    assert "stablehlo.while" not in text
    assert "stablehlo.case" in text or "stablehlo.if" in text


def _next(words):
    fn = lookup("xlanb.rng_next").fn
    with jax.enable_x64(True):
        return np.asarray(fn(jnp.asarray(words, jnp.uint32)))


@pytest.mark.parametrize("seed", SEEDS)
def test_the_next_key_is_the_64_bit_multiply_add(seed):
    words = np.array([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], np.uint32)
    state = (seed * 6364136223846793005 + 1442695040888963407) % 2 ** 64
    np.testing.assert_array_equal(_next(words), [state >> 32, state & 0xFFFFFFFF])


def test_streams_of_nearby_seeds_share_no_key():
    seen = set()
    for seed in range(8):
        words = np.array([0, seed], np.uint32)
        for _ in range(64):
            key = (int(words[0]), int(words[1]))
            assert key not in seen
            seen.add(key)
            words = _next(words)


def test_dropout_keeps_its_rate_and_a_seed_gives_the_same_mask():
    def mask(seed):
        xlanb.manual_seed(seed)
        return (torch.nn.functional.dropout(torch.ones(200_000, device="xla"), 0.25) != 0).cpu()
    first = mask(11)
    assert abs(first.float().mean().item() - 0.75) < 0.005
    assert torch.equal(first, mask(11))
    assert not torch.equal(first, mask(12))


@pytest.mark.parametrize("seed", [0, 5, 2 ** 33 + 1])
def test_a_seed_makes_jaxs_key_data(seed):
    with jax.enable_x64(True):
        np.testing.assert_array_equal(jax.random.key_data(jax.random.key(seed, impl=threefry.UNROLLED)),
                                      jax.random.key_data(jax.random.key(seed)))
