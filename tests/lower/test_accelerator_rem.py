"""Division's remainders by an infinite divisor give the CPU's answer whatever XLA's backend computes.

XLA's GPU and TPU backends compute a float `rem` as a - trunc(a / b) * b: NaN for a finite a and an
infinite b, where C's fmod, torch and XLA:CPU give a (the third TPU run's fmod, remainder,
floor_divide and div(rounding_mode="floor") failures). Here `lax.rem` is replaced by that formula
while the rules are traced, so the CPU shows what those backends would compute."""

import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702

import jax
import jax.numpy as jnp
import pytest
import torch

from rulecheck import check

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
