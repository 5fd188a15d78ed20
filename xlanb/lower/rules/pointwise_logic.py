"""Lowering rules: pointwise comparisons, logic, bit ops, NaN/inf tests, where, lerp, addcmul.

Helpers and conventions are those of pointwise.py.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from xlanb.lower.float64 import sign_bit
from xlanb.lower.registry import lowers
from xlanb.lower.rules.pointwise import _same, _scaled, is_bool, is_float, torch_promote, truthy


# Comparisons and logic ----------------------------------------------------------------------

lowers("aten.eq.Tensor", "aten.eq.Scalar", promote="same", common_first=True)(lambda self, other: jnp.equal(self, other))
lowers("aten.ne.Tensor", "aten.ne.Scalar", promote="same", common_first=True)(lambda self, other: jnp.not_equal(self, other))
lowers("aten.lt.Tensor", "aten.lt.Scalar", promote="same", common_first=True)(lambda self, other: jnp.less(self, other))
lowers("aten.le.Tensor", "aten.le.Scalar", promote="same", common_first=True)(lambda self, other: jnp.less_equal(self, other))
lowers("aten.gt.Tensor", "aten.gt.Scalar", promote="same", common_first=True)(lambda self, other: jnp.greater(self, other))
lowers("aten.ge.Tensor", "aten.ge.Scalar", promote="same", common_first=True)(lambda self, other: jnp.greater_equal(self, other))


@lowers("aten.logical_and.default", promote="same")   # CPU casts both first: a 0-d 256 is int8 0
def logical_and(self, other):
    return jnp.logical_and(truthy(self), truthy(other))


@lowers("aten.logical_or.default", promote="same")
def logical_or(self, other):
    return jnp.logical_or(truthy(self), truthy(other))


@lowers("aten.logical_xor.default", promote="same")
def logical_xor(self, other):
    return jnp.logical_xor(truthy(self), truthy(other))


@lowers("aten.logical_not.default")
def logical_not(x):
    return jnp.logical_not(truthy(x))


@lowers("aten.bitwise_and.Tensor", "aten.bitwise_and.Scalar", "aten.bitwise_and.Scalar_Tensor", promote="same")
def bitwise_and(self, other):
    return jnp.bitwise_and(self, other)


@lowers("aten.bitwise_or.Tensor", "aten.bitwise_or.Scalar", "aten.bitwise_or.Scalar_Tensor", promote="same")
def bitwise_or(self, other):
    return jnp.bitwise_or(self, other)


@lowers("aten.bitwise_xor.Tensor", "aten.bitwise_xor.Scalar", "aten.bitwise_xor.Scalar_Tensor", promote="same")
def bitwise_xor(self, other):
    return jnp.bitwise_xor(self, other)


@lowers("aten.bitwise_not.default")
def bitwise_not(x):
    return jnp.logical_not(x) if is_bool(x) else jnp.bitwise_not(x)


@lowers("aten.bitwise_left_shift.Tensor", "aten.bitwise_left_shift.Tensor_Scalar",
        "aten.bitwise_left_shift.Scalar_Tensor", "aten.__lshift__.Tensor", "aten.__lshift__.Scalar",
        promote="same")
def lshift(self, other):
    # XLA: shifts by >= bit width (or negative, read as unsigned) give 0, as ATen
    return lax.shift_left(*jnp.broadcast_arrays(*_same(self, other)))


@lowers("aten.bitwise_right_shift.Tensor", "aten.bitwise_right_shift.Tensor_Scalar",
        "aten.bitwise_right_shift.Scalar_Tensor", "aten.__rshift__.Tensor", "aten.__rshift__.Scalar",
        promote="same")
def rshift(self, other):
    a, b = jnp.broadcast_arrays(*_same(self, other))
    if jnp.issubdtype(a.dtype, jnp.unsignedinteger):
        return lax.shift_right_logical(a, b)
    return lax.shift_right_arithmetic(a, b)


@lowers("aten.isnan.default")
def isnan(x):
    return jnp.isnan(x) if is_float(x) else jnp.zeros(x.shape, bool)


@lowers("aten.isinf.default")
def isinf(x):
    return jnp.isinf(x) if is_float(x) else jnp.zeros(x.shape, bool)


@lowers("aten.isposinf.default")
def isposinf(x):
    return (x == jnp.inf) if is_float(x) else jnp.zeros(x.shape, bool)


@lowers("aten.isneginf.default")
def isneginf(x):
    return (x == -jnp.inf) if is_float(x) else jnp.zeros(x.shape, bool)


@lowers("aten.signbit.default")
def signbit(x):
    if is_bool(x):
        return jnp.zeros(x.shape, bool)
    return sign_bit(x) if is_float(x) else x < 0


@lowers("aten.nan_to_num.default")
def nan_to_num(x, nan=None, posinf=None, neginf=None):
    if not is_float(x):
        return x
    info = jnp.finfo(x.dtype)
    nan = jnp.asarray(0.0 if nan is None else nan).astype(x.dtype)
    posinf = jnp.asarray(info.max if posinf is None else posinf).astype(x.dtype)
    neginf = jnp.asarray(info.min if neginf is None else neginf).astype(x.dtype)
    x = jnp.where(jnp.isnan(x), nan, x)
    x = jnp.where(x == jnp.inf, posinf, x)
    return jnp.where(x == -jnp.inf, neginf, x)


@lowers("aten.heaviside.default", promote="same")
def heaviside(self, values):
    self, values = jnp.broadcast_arrays(*_same(self, values))
    zero, one = jnp.zeros_like(self), jnp.ones_like(self)
    return jnp.where(self == 0, values, jnp.where(self > 0, one, zero)).astype(self.dtype)


# Selection and fused arithmetic -------------------------------------------------------------

@lowers("aten.where.self")
def where(condition, self, other):
    dt = torch_promote(self, other)
    return jnp.where(truthy(condition), jnp.asarray(self, dt), jnp.asarray(other, dt))


def _lerp(start, end, weight):
    diff = end - start
    small = jnp.abs(weight) < 0.5
    return jnp.where(small, start + weight * diff, end - diff * (1 - weight))


@lowers("aten.lerp.Scalar", "aten.lerp.Tensor", promote="same")
def lerp(self, end, weight):
    return _lerp(self, end, weight)


@lowers("aten.addcmul.default", promote="same")
def addcmul(self, tensor1, tensor2, *, value=1):
    return self + _scaled(tensor1, value) * tensor2


@lowers("aten.addcdiv.default", promote="same")
def addcdiv(self, tensor1, tensor2, *, value=1):
    return self + _scaled(tensor1, value) / tensor2
