"""Where XLA's accelerator backends compute an elementwise op differently from XLA:CPU, the rules give
the CPU's answer anyway: here the accelerators' arithmetic is put in place of lax's op while the rules
are traced, so the CPU shows what those backends would compute.

- rem: XLA's GPU and TPU backends compute a float `rem` as a - trunc(a / b) * b, NaN for a finite a and
  an infinite b, where C's fmod, torch and XLA:CPU give a (the fourth TPU run's fmod, remainder,
  floor_divide and div(rounding_mode="floor") failures).
- pow: accelerators' pow is trusted for a finite positive base and a finite exponent only (XLA:TPU gave
  NaN for 0 ** -0.0 on the fourth TPU run, for inf ** 1 in float64 on the fifth; JAX's issue 6042 was
  0 ** 0 there).
- rounding: XLA:TPU's emulated float64 rounded an infinity to NaN (a float64 division by zero
  truncated, the fifth TPU run).
- arg reductions: between NaNs, lax's argmax and argmin keep whichever the reduction meets first, and
  on XLA:TPU that was the last NaN of a flattened tensor (the fifth TPU run).
- float64 bitcasts: XLA:TPU's float64 is two float32s without IEEE's bits, and a float64 bitcast failed
  to compile there (lower/float64.py)."""

import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702

import jax
import jax.numpy as jnp
import pytest
import torch

import xlanb
from helpers import inside_float64_emulation
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

    def right_for_finite_positive_bases_only(x, y):
        out = pow_(x, y)
        if not jnp.issubdtype(jnp.result_type(out), jnp.floating):
            return out
        return jnp.where((x > 0) & jnp.isfinite(x) & jnp.isfinite(y), out, jnp.nan)

    monkeypatch.setattr(jax.lax, "pow", right_for_finite_positive_bases_only)
    # jnp.power calls it from jax's own module: replaced there too, so a rule written with jnp.power
    # would be tried on the same arithmetic
    from jax._src.lax import lax as lax_module
    monkeypatch.setattr(lax_module, "pow", right_for_finite_positive_bases_only)


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
def float64_rounding_infinities_to_nan(monkeypatch):
    from jax._src.lax import lax as lax_module
    for name in ("floor", "ceil", "round"):
        exact = getattr(jax.lax, name)

        def emulated(x, *args, exact=exact, **kwargs):
            out = exact(x, *args, **kwargs)
            return jnp.where(jnp.isinf(x), jnp.nan, out) if jnp.result_type(x) == jnp.float64 else out

        monkeypatch.setattr(jax.lax, name, emulated)
        monkeypatch.setattr(lax_module, name, emulated)


def test_rounding_keeps_infinities(float64_rounding_infinities_to_nan):
    # an 11-element float64 shape no other test uses
    x = torch.tensor([inf, -inf, 2.5, -2.5, float("nan"), 0.5, -0.0, 1e30, -3.7, 7.0, 0.0], dtype=torch.float64)
    for op in ("floor", "ceil", "trunc", "round", "frac"):
        check(f"aten.{op}.default", x)
    check("aten.round.decimals", x, decimals=2)
    check("aten.div.Tensor_mode", x, x.roll(3), rounding_mode="trunc")


@pytest.fixture
def accelerator_arg_reductions(monkeypatch):
    """jnp.argmax and jnp.argmin where the last NaN along the axis wins, as XLA:TPU's order gave."""
    def last_nan_wins(reduce):
        def arg(x, axis, keepdims=False):
            out = reduce(x, axis=axis, keepdims=keepdims)
            if not jnp.issubdtype(jnp.result_type(x), jnp.floating):
                return out
            nan = jnp.isnan(x)
            last = x.shape[axis] - 1 - reduce(jnp.flip(nan, axis), axis=axis, keepdims=keepdims)
            return jnp.where(jnp.any(nan, axis=axis, keepdims=keepdims), last, out)
        return arg

    monkeypatch.setattr(jnp, "argmax", last_nan_wins(jnp.argmax))
    monkeypatch.setattr(jnp, "argmin", last_nan_wins(jnp.argmin))


def test_arg_reductions_name_the_first_nan(accelerator_arg_reductions):
    # a 2 x 9 shape no other test uses: each NaN has another after it along both axes and flattened
    nan = float("nan")
    x = torch.tensor([[1.0, nan, 3.0, nan, inf, -inf, 0.5, nan, 2.0],
                      [nan, 4.0, nan, -1.0, nan, 6.0, 7.0, nan, -2.0]])
    for op in ("argmax", "argmin"):
        check(f"aten.{op}.default", x)
        check(f"aten.{op}.default", x, 1)
        check(f"aten.{op}.default", x, 0, True)
        check(f"aten.{op}.default", x.bfloat16(), -1)
    check("aten.max.dim", x, 1)
    check("aten.min.dim", x, 0)


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
    held = inside_float64_emulation(SIGNED)      # 1e-300 is 0 in XLA:TPU's float64
    check("aten.digamma.default", held, rtol=1e-12, atol=1e-12)
    check("aten.div.Tensor_mode", held, held.roll(1), rounding_mode="floor")


@pytest.mark.parametrize("name", ["aten.nextafter.default", "aten.frexp.Tensor", "prims.frexp.default"])
def test_rules_that_read_float64_bits_avoid_a_tpu_for_float64(name):
    rule = lookup(name)
    assert rule.avoided_on("tpu", frozenset({"float64"})) and rule.avoided_on("tpu", frozenset({"float32"})) is None
    assert rule.avoided_on("cpu", frozenset({"float64"})) is None
