"""Where XLA's accelerator backends compute an elementwise op differently from XLA:CPU, the rules give
the CPU's answer anyway: here the accelerators' arithmetic is put in place of lax's op while the rules
are traced, so the CPU shows what those backends would compute.

- rem: XLA's GPU and TPU backends compute a float `rem` as a - trunc(a / b) * b, NaN for a finite a and
  an infinite b, where C's fmod, torch and XLA:CPU give a (the fourth TPU run's fmod, remainder,
  floor_divide and div(rounding_mode="floor") failures).
- pow: accelerators' pow is trusted for a positive base only (XLA:TPU gave NaN for 0 ** -0.0 on the
  fourth TPU run; JAX's issue 6042 was 0 ** 0 there).
- float64 bitcasts: XLA:TPU's float64 is two float32s without IEEE's bits, and a float64 bitcast failed
  to compile there (lower/float64.py)."""

import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702

import jax
import jax.numpy as jnp
import pytest
import torch

import xlanb
from rulecheck import check
from xlanb.lower.registry import lookup

inf = float("inf")
# a 7-element shape no other test uses: every graph here is compiled under the replaced rem
A = torch.tensor([5.0, -5.0, 0.0, -0.0, 2.5, inf, 1.0])
B = torch.tensor([inf, inf, -inf, inf, -inf, inf, 3.0])


@pytest.fixture
def accelerator_rem(monkeypatch):
    rem = jax.lax.rem

    def like_gpu_and_tpu(a, b):
        if not jnp.issubdtype(jnp.result_type(a), jnp.floating):
            return rem(a, b)
        return a - jnp.trunc(a / b) * b

    assert float(like_gpu_and_tpu(jnp.float32(5.0), jnp.float32(inf))) != 5.0    # NaN, as described
    monkeypatch.setattr(jax.lax, "rem", like_gpu_and_tpu)


@pytest.mark.parametrize("name", ["aten.fmod.Tensor", "aten.remainder.Tensor", "aten.floor_divide.default"])
def test_an_infinite_divisor(accelerator_rem, name):
    check(name, A, B)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_floor_division_by_an_infinite_divisor(accelerator_rem, dtype):
    check("aten.div.Tensor_mode", A.to(dtype), B.to(dtype), rounding_mode="floor")


def test_a_scalar_infinite_divisor(accelerator_rem):
    check("aten.fmod.Scalar", A[:5], inf)
    check("aten.remainder.Scalar", A[:5], -inf)


@pytest.fixture
def accelerator_pow(monkeypatch):
    pow_ = jax.lax.pow

    def right_for_positive_bases_only(x, y):
        out = pow_(x, y)
        if not jnp.issubdtype(jnp.result_type(out), jnp.floating):
            return out
        wrong = (x < 0) | ((x == 0) & (y == 0)) | ((x == 1) & jnp.isinf(y)) | (x == -jnp.inf)
        return jnp.where(wrong, jnp.nan, out)

    monkeypatch.setattr(jax.lax, "pow", right_for_positive_bases_only)
    # jnp.power calls it from jax's own module: replaced there too, so a rule written with jnp.power
    # would be tried on the same arithmetic
    from jax._src.lax import lax as lax_module
    monkeypatch.setattr(lax_module, "pow", right_for_positive_bases_only)


SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, -2.5, inf, -inf, float("nan")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pow_at_every_pair_of_special_values(accelerator_pow, dtype):
    # 15 x 15 pairs, a shape no other test uses
    base = torch.tensor(SPECIAL, dtype=dtype).repeat_interleave(len(SPECIAL))
    exp = torch.tensor(SPECIAL, dtype=dtype).repeat(len(SPECIAL))
    check("aten.pow.Tensor_Tensor", base, exp)
    check("aten.pow.Scalar", -2.0, exp[:15])
    check("aten.pow.Tensor_Scalar", base[::15], -3.0)


@pytest.fixture
def float64_without_bits(monkeypatch):
    """XLA:TPU's float64 (two float32s): a float64 bitcast failed to compile there (jnp.signbit and
    jnp.copysign in copysign and digamma, the fourth TPU run). This platform is taken for one, and a
    float64 bitcast raises."""
    from jax._src.lax import lax as lax_module
    from xlanb.lower import float64
    monkeypatch.setattr(float64, "EMULATED", float64.EMULATED | {xlanb.runtime_state().jax_device().platform})
    bitcast = jax.lax.bitcast_convert_type

    def refusing_float64(x, new_dtype):
        if jnp.result_type(x) == jnp.float64 or jnp.dtype(new_dtype) == jnp.float64:
            raise AssertionError("a float64 bitcast, which XLA:TPU does not compile")
        return bitcast(x, new_dtype)

    monkeypatch.setattr(jax.lax, "bitcast_convert_type", refusing_float64)
    monkeypatch.setattr(lax_module, "bitcast_convert_type", refusing_float64)


SIGNED = torch.tensor([-2.5, -0.0, 0.0, 3.0, inf, -inf, 1e-300, -7.0, 0.5], dtype=torch.float64)


def test_float64_signs_without_a_bitcast(float64_without_bits):
    check("aten.signbit.default", SIGNED)
    check("aten.copysign.Tensor", SIGNED.flip(0), SIGNED)
    check("aten.copysign.Scalar", SIGNED, -0.0)
    check("aten.digamma.default", SIGNED, rtol=1e-12, atol=1e-12)
    check("aten.div.Tensor_mode", SIGNED, SIGNED.roll(1), rounding_mode="floor")


@pytest.mark.parametrize("name", ["aten.nextafter.default", "aten.frexp.Tensor", "prims.frexp.default"])
def test_rules_that_read_float64_bits_avoid_a_tpu_for_float64(name):
    rule = lookup(name)
    assert rule.avoided_on("tpu", frozenset({"float64"})) and rule.avoided_on("tpu", frozenset({"float32"})) is None
    assert rule.avoided_on("cpu", frozenset({"float64"})) is None
