"""Lowering rules: pointwise arithmetic, math functions, rounding, min/max, clamp.

(Comparisons, logic, bit ops, where, lerp and addcmul/addcdiv are in pointwise_logic.py.)

Binary/ternary arithmetic uses promote="same" (operands arrive in torch's computation
dtype; bfloat16/float16 compute in float32) and ops that turn integers into floats use
promote="float". `.Tensor` overloads may still receive a Python number or a lifted
(weakly typed, traced) 0-d scalar as `other`; jnp handles both. Scalars are never
branched on; only dtypes and static attributes are.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from xlanb.lower.dtypes import default_float, to_jax_dtype, to_torch_dtype
from xlanb.lower.float64 import BITS_AVOID, copy_sign, sign_bit
from xlanb.lower.registry import lowers
from xlanb.lower.to_jax import _cast_operands


# Helpers ------------------------------------------------------------------------------------

def _dtype(x):
    return x.dtype if hasattr(x, "dtype") else jnp.result_type(x)


def is_int(x) -> bool:
    """Integer (not bool) dtype."""
    return jnp.issubdtype(_dtype(x), jnp.integer)


def is_bool(x) -> bool:
    return _dtype(x) == jnp.bool_


def is_float(x) -> bool:
    return jnp.issubdtype(_dtype(x), jnp.inexact)


def is_one(v) -> bool:
    return type(v) in (int, float) and v == 1


def as_float(x):
    """x in a float dtype torch would compute it in (ints -> default float; halves -> float32)."""
    dt = _dtype(x)
    if dt in (jnp.float16, jnp.bfloat16):
        return jnp.asarray(x, jnp.float32)
    if not jnp.issubdtype(dt, jnp.inexact):
        return jnp.asarray(x, default_float())
    return x


def truthy(x):
    return x if is_bool(x) else x != 0


def nan_max(a, b):
    """torch.maximum: NaN-propagating for floats."""
    out = jnp.maximum(a, b)
    if is_float(out):
        out = jnp.where(jnp.isnan(a) | jnp.isnan(b), jnp.asarray(jnp.nan, out.dtype), out)
    return out


def nan_min(a, b):
    out = jnp.minimum(a, b)
    if is_float(out):
        out = jnp.where(jnp.isnan(a) | jnp.isnan(b), jnp.asarray(jnp.nan, out.dtype), out)
    return out


def _is_weak(x) -> bool:
    if isinstance(x, (int, float, bool)):
        return True
    aval = getattr(x, "aval", None)
    return bool(getattr(aval, "weak_type", False))


def torch_promote(*xs, kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT, result=False):
    """torch's computation dtype for these jax operands (weak 0-d arrays act as Python numbers);
    its result dtype with result=True."""
    examples = []
    for x in xs:
        if x is None:
            continue
        dt = _dtype(x)
        if _is_weak(x):
            if dt == jnp.bool_:
                examples.append(True)
            elif jnp.issubdtype(dt, jnp.integer):
                examples.append(2)
            elif jnp.issubdtype(dt, jnp.complexfloating):
                examples.append(2j)
            else:
                examples.append(2.0)
        else:
            examples.append(torch.empty(tuple(x.shape), dtype=to_torch_dtype(dt), device="meta"))
    compute, out = elementwise_dtypes(*examples, type_promotion_kind=kind)
    return to_jax_dtype(out if result else compute)


# Arithmetic ---------------------------------------------------------------------------------

def _scaled(v, alpha):
    return v if is_one(alpha) else alpha * v


@lowers("aten.add.Tensor", "aten.add.Scalar", promote="same", common_first=True)
def add(self, other, alpha=1):
    if is_bool(self) and is_bool(other):
        return jnp.logical_or(self, other) if is_one(alpha) else jnp.logical_or(self, other & alpha)
    return self + _scaled(other, alpha)


@lowers("aten.sub.Tensor", "aten.sub.Scalar", promote="same", common_first=True)
def sub(self, other, alpha=1):
    return self - _scaled(other, alpha)


@lowers("aten.rsub.Tensor", "aten.rsub.Scalar", promote="same", common_first=True)
def rsub(self, other, alpha=1):
    return other - _scaled(self, alpha)


@lowers("aten.mul.Tensor", "aten.mul.Scalar", promote="same")
def mul(self, other):
    if is_bool(self) and is_bool(other):
        return jnp.logical_and(self, other)
    return self * other


@lowers("aten.div.Tensor", "aten.div.Scalar", promote="float")
def div(self, other):
    return jnp.true_divide(self, other)


def _cast_to(x, dtype):
    """An operand in the computation dtype, as promote="same" casts it (Python numbers stay weak, but
    an integer past an integer dtype's range, which is wrapped as CPU converts it)."""
    return _cast_operands(x, np.dtype(dtype))


def _trunc_div_int(a, b):
    return lax.div(*jnp.broadcast_arrays(*_same(a, b)))


def _same(a, b):
    dt = jnp.result_type(a, b)
    return jnp.asarray(a, dt), jnp.asarray(b, dt)


def floor_div_int(a, b):
    a, b = jnp.broadcast_arrays(*_same(a, b))
    q = lax.div(a, b)
    r = lax.rem(a, b)
    fix = (r != 0) & ((a < 0) != (b < 0))
    return jnp.where(fix, q - 1, q)


def float_rem(a, b):
    """C's fmod (the sign of a) on every platform. XLA's GPU and TPU backends compute a float rem as
    a - trunc(a / b) * b, NaN for a finite a and an infinite b, where C's fmod (and XLA:CPU) give a."""
    r = lax.rem(a, b)
    if not is_float(r):
        return r
    return jnp.where(jnp.isinf(b) & jnp.isfinite(a), a, r)


def floor_div_float(a, b):
    """ATen's div_floor_floating, exactly."""
    a, b = jnp.broadcast_arrays(*_same(a, b))
    one = jnp.asarray(1, a.dtype)
    mod = float_rem(a, b)
    d = (a - mod) / b
    d = jnp.where((mod != 0) & ((b < 0) != (mod < 0)), d - one, d)
    fl = jnp.floor(d)
    fl = jnp.where(d - fl > jnp.asarray(0.5, a.dtype), fl + one, fl)
    zero = copy_sign(jnp.zeros_like(a), a / b)
    out = jnp.where(d != 0, fl, zero)
    return jnp.where(b == 0, a / b, out)


def _floor_div(a, b):
    if is_bool(a) and is_bool(b):
        a, b = a.astype(jnp.int8), b.astype(jnp.int8)
    if is_float(a) or is_float(b):
        return floor_div_float(a, b)
    return floor_div_int(a, b)


def _half_div_mode(a, b, rounding_mode, half):
    """torch's CPU kernels for bfloat16/float16 round every intermediate result (trunc(a / b) and
    div_floor_floating in Vectorized<half> arithmetic): the same roundings, to the same answer."""
    f32 = jnp.float32
    r = lambda x: x.astype(half).astype(f32)  # noqa: E731
    a, b = jnp.broadcast_arrays(jnp.asarray(a).astype(f32), jnp.asarray(b).astype(f32))
    if rounding_mode == "trunc":
        return jnp.trunc(r(a / b))
    mod = r(float_rem(a, b))
    div = r(r(a - mod) / b)
    div = jnp.where((mod != 0) & ((b < 0) != (mod < 0)), r(div - 1), div)
    fl = r(jnp.floor(div))
    fl = jnp.where(r(div - fl) > 0.5, r(fl + 1), fl)
    out = jnp.where(div != 0, fl, copy_sign(jnp.zeros_like(a), r(a / b)))
    return jnp.where(b == 0, r(a / b), out)


@lowers("aten.div.Tensor_mode", "aten.div.Scalar_mode")
def div_mode(self, other, *, rounding_mode=None):
    out_dtype = torch_promote(self, other, result=True)
    if rounding_mode is not None and out_dtype in (jnp.bfloat16, jnp.float16) and jnp.size(other) != 1:
        return _half_div_mode(self, other, rounding_mode, out_dtype)    # by one number: in float32, below
    compute = torch_promote(self, other)
    self, other = _cast_to(self, compute), _cast_to(other, compute)
    if rounding_mode is not None and is_float(self) and jnp.size(other) == 1 and jnp.ndim(self):
        # XLA turns a / broadcast(b) into a * broadcast(1 / b), one ulp off CPU's quotient, which trunc and
        # floor make one integer off (2.25 / 0.001 truncated: 2249): a full divisor it cannot rewrite
        other = lax.optimization_barrier(jnp.broadcast_to(other, jnp.shape(self)))
    if rounding_mode is None:
        if not is_float(self):
            self, other = as_float(self), as_float(other)
        return jnp.true_divide(self, other)
    if rounding_mode == "trunc":
        if is_float(self):
            return finite_rounding(jnp.trunc)(self / other)
        if is_bool(self):
            self, other = self.astype(jnp.int8), jnp.asarray(other, jnp.int8)
        return _trunc_div_int(self, other)
    if rounding_mode == "floor":
        return _floor_div(self, other)
    raise ValueError(f"div: unknown rounding_mode {rounding_mode!r}")


@lowers("aten.floor_divide.default", "aten.floor_divide.Scalar", promote="same")
def floor_divide(self, other):
    return _floor_div(self, other)


def remainder_(a, b):
    a, b = jnp.broadcast_arrays(*_same(a, b))
    r = float_rem(a, b)
    fix = (r != 0) & ((r < 0) != (b < 0))
    return jnp.where(fix, r + b, r)


@lowers("aten.remainder.Tensor", "aten.remainder.Scalar", "aten.remainder.Scalar_Tensor", promote="same", common_first=True)
def remainder(self, other):
    return remainder_(self, other)


@lowers("aten.fmod.Tensor", "aten.fmod.Scalar", promote="same", common_first=True)
def fmod(self, other):
    return float_rem(*jnp.broadcast_arrays(*_same(self, other)))


def int_pow(base, exp):
    """ATen's powi: exact integer power (wrapping), negative exponents as torch."""
    base, exp = jnp.broadcast_arrays(*_same(base, exp))
    dt = base.dtype
    one, zero = jnp.ones((), dt), jnp.zeros((), dt)
    bits = jnp.iinfo(dt).bits
    e = jnp.where(exp < 0, zero, exp)

    def body(_, carry):
        acc, b, e = carry
        acc = jnp.where((e & one) != 0, acc * b, acc)
        return acc, b * b, lax.shift_right_logical(e, one)

    acc, _, _ = lax.fori_loop(0, bits, body, (jnp.ones_like(base), base, e))
    if jnp.issubdtype(dt, jnp.signedinteger):
        neg = jnp.where(base == 1, one, jnp.where(base == -1, jnp.where((exp & one) != 0, -one, one), zero))
        acc = jnp.where(exp < 0, neg, acc)
    return acc


def real_pow(x, y):
    """C's pow for real floats on every platform, from XLA's pow of a finite positive |x| with a
    finite exponent only: accelerators' pow implementations get special cases wrong that the CPU's
    gets right (XLA:TPU gave NaN for 0 ** -0.0 on the fourth TPU run, and for inf ** 1 in float64 on
    the fifth; JAX's issue 6042 was 0 ** 0 there). Decided here: the limits (|x| zero or infinite,
    or y infinite: inf where y > 0 and |x| > 1 agree, else 0), the sign of a negative base with an
    odd integer exponent, NaN for a finite negative base with a finite fractional exponent,
    x ** 0 == 1 ** y == 1 and (-1) ** inf == 1; -0.0 is negative (1/x < 0) without a bitcast, which
    XLA:TPU's float64 does not give IEEE's bits for."""
    x, y = jnp.broadcast_arrays(*_same(x, y))
    ax = jnp.abs(x)
    limit = (ax == 0) | jnp.isinf(ax) | jnp.isinf(y)
    out = lax.pow(jnp.where(limit, jnp.ones_like(ax), ax), y)
    out = jnp.where(limit, jnp.where((y > 0) == (ax > 1), jnp.asarray(jnp.inf, out.dtype), jnp.zeros_like(out)), out)
    finite_y = jnp.isfinite(y)
    integral = finite_y & (jnp.floor(y) == y)
    odd = integral & (lax.rem(jnp.where(integral, y, 0), jnp.asarray(2, y.dtype)) != 0)
    negative = (x < 0) | ((x == 0) & (1 / x < 0))
    out = jnp.where(negative & odd, -out, out)
    nan = jnp.asarray(jnp.nan, out.dtype)
    out = jnp.where(((x < 0) & jnp.isfinite(x) & finite_y & ~integral) | jnp.isnan(x) | jnp.isnan(y), nan, out)
    one = jnp.asarray(1, out.dtype)
    return jnp.where((y == 0) | (x == 1) | ((ax == 1) & jnp.isinf(y)), one, out)


def pow_(base, exp):
    if is_bool(base) and is_bool(exp):
        return jnp.logical_or(base, jnp.logical_not(exp))
    if not is_float(base) and not is_float(exp):
        return int_pow(base, exp)
    if jnp.issubdtype(jnp.result_type(base, exp), jnp.floating):
        return real_pow(base, exp)
    return jnp.power(base, exp)


@lowers("aten.pow.Tensor_Tensor", "aten.pow.Scalar", promote="same", common_first=True)
def pow_rule(self, exponent):
    return pow_(self, exponent)


# ATen's fast paths for a scalar exponent of a float tensor: x ** 0.5 is sqrt (so (-inf) ** 0.5 is NaN, not
# inf), -0.5 rsqrt, 2 / 3 / -2 exact products. Such an exponent stays a constant of the graph
# (capture/record.py's kept_exponent reads this table), so XLA compiles the one path it selects
POW_FAST = {2: lambda x: x * x, 3: lambda x: x * x * x, -2: lambda x: 1 / (x * x), 0.5: jnp.sqrt, -0.5: lax.rsqrt}


@lowers("aten.pow.Tensor_Scalar", promote="same", common_first=True)
def pow_tensor_scalar(self, exponent):
    constant = isinstance(exponent, (int, float))
    if is_float(self) and constant and exponent in POW_FAST:
        return POW_FAST[exponent](self)
    out = pow_(self, exponent)
    if is_float(out) and not constant:      # a lifted exponent is traced: every fast path, then select
        for e, fast in POW_FAST.items():
            out = jnp.where(exponent == e, fast(self), out)
    return out


@lowers("aten.neg.default")
def neg(x):
    return -x


@lowers("aten.abs.default")
def abs_(x):
    return x if is_bool(x) else jnp.abs(x)


@lowers("aten.sign.default", "aten.sgn.default")
def sign(x):
    if is_bool(x):
        return x
    if jnp.iscomplexobj(x):       # sgn: x / |x|, 0 at 0
        mag = jnp.abs(x)
        return jnp.where(mag == 0, jnp.zeros_like(x), x / jnp.where(mag == 0, 1, mag).astype(x.dtype))
    if is_float(x):
        return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)
    return jnp.sign(x)


# Float math ---------------------------------------------------------------------------------

def _unary(name, fn):
    def rule(x):
        return fn(x)
    rule.__name__ = rule.__qualname__ = name.split(".")[1]
    lowers(name, promote="float")(rule)


_unary("aten.exp.default", jnp.exp)
_unary("aten.exp2.default", jnp.exp2)
_unary("aten.expm1.default", jnp.expm1)
_unary("aten.log.default", jnp.log)
_unary("aten.log2.default", jnp.log2)
_unary("aten.log10.default", jnp.log10)
_unary("aten.log1p.default", jnp.log1p)
_unary("aten.sqrt.default", jnp.sqrt)
_unary("aten.rsqrt.default", lax.rsqrt)
_unary("aten.reciprocal.default", jnp.reciprocal)
_unary("aten.sin.default", jnp.sin)
_unary("aten.cos.default", jnp.cos)
_unary("aten.tan.default", jnp.tan)
_unary("aten.asin.default", jnp.arcsin)
_unary("aten.acos.default", jnp.arccos)
_unary("aten.atan.default", jnp.arctan)
_unary("aten.sinh.default", jnp.sinh)
_unary("aten.cosh.default", jnp.cosh)
_unary("aten.tanh.default", jnp.tanh)
_unary("aten.asinh.default", jnp.arcsinh)
_unary("aten.acosh.default", jnp.arccosh)
_unary("aten.atanh.default", jnp.arctanh)
_unary("aten.erf.default", lax.erf)
_unary("aten.erfc.default", lax.erfc)
_unary("aten.erfinv.default", lax.erf_inv)
_unary("aten.sigmoid.default", jax.nn.sigmoid)
_unary("aten.deg2rad.default", jnp.deg2rad)
_unary("aten.rad2deg.default", jnp.rad2deg)


@lowers("aten.lgamma.default", promote="float")
def lgamma(x):
    # lax.lgamma gives inf at the poles already; -inf -> inf as torch
    return jnp.where(x == -jnp.inf, jnp.asarray(jnp.inf, x.dtype), lax.lgamma(x))


@lowers("aten.digamma.default", promote="float")
def digamma(x):
    # digamma(inf) = inf: XLA:TPU's float64 gave NaN there (the fifth TPU run)
    out = jnp.where(x == jnp.inf, jnp.asarray(jnp.inf, x.dtype), lax.digamma(x))
    pole = jnp.where(sign_bit(x), jnp.asarray(jnp.inf, x.dtype), jnp.asarray(-jnp.inf, x.dtype))
    out = jnp.where(x == 0, pole, out)
    return jnp.where((x < 0) & (x == jnp.floor(x)), jnp.asarray(jnp.nan, x.dtype), out)


@lowers("aten.sinc.default", promote="float")
def sinc(x):
    # torch's definition, sin(pi x) / (pi x) and 1 at 0: NaN at +-inf (jnp.sinc gives 0 there from jax 0.12)
    px = jnp.pi * x
    return jnp.where(x == 0, jnp.ones_like(x), jnp.sin(px) / jnp.where(x == 0, jnp.ones_like(px), px))


@lowers("aten.atan2.default", promote="float", common_first=True)
def atan2(self, other):
    return jnp.arctan2(self, other)


@lowers("aten.hypot.default", promote="same", common_first=True)
def hypot(self, other):
    return jnp.hypot(self, other)


@lowers("aten.copysign.Tensor", "aten.copysign.Scalar", promote="float")
def copysign(self, other):
    return copy_sign(*_same(self, other))


@lowers("aten.nextafter.default", promote="result", avoid=BITS_AVOID)
def nextafter(self, other):
    return jnp.nextafter(self, other)


def complex_logaddexp(x, y):
    """ATen's complex log-add-exp: the larger real part plus log1p(exp(min - max)) (principal log)."""
    x, y = jnp.broadcast_arrays(x, y)
    swap = jnp.real(y) > jnp.real(x)
    mx, mn = jnp.where(swap, y, x), jnp.where(swap, x, y)
    out = mx + jnp.log1p(jnp.exp(mn - mx))
    nan = jnp.isnan(jnp.real(x)) | jnp.isnan(jnp.imag(x)) | jnp.isnan(jnp.real(y)) | jnp.isnan(jnp.imag(y))
    out = jnp.where(jnp.real(mn) == -jnp.inf, mx, out)
    return jnp.where(nan, jnp.asarray(complex(jnp.nan, jnp.nan), out.dtype), out)


@lowers("aten.logaddexp.default", promote="same", common_first=True)
def logaddexp(self, other):
    if jnp.iscomplexobj(self) or jnp.iscomplexobj(other):
        return complex_logaddexp(self, other)
    return jnp.logaddexp(self, other)


@lowers("aten.logaddexp2.default", promote="same", common_first=True)
def logaddexp2(self, other):
    return jnp.logaddexp2(self, other)


def xlogy_(x, y):
    x, y = jnp.broadcast_arrays(*_same(x, y))
    out = jnp.where(x == 0, jnp.zeros_like(x), x * jnp.log(y))
    return jnp.where(jnp.isnan(y), jnp.full_like(x, jnp.nan), out)


@lowers("aten.xlogy.Tensor", "aten.xlogy.Scalar_Self", "aten.xlogy.Scalar_Other", promote="float", common_first=True)
def xlogy(self, other):
    return xlogy_(self, other)


@lowers("aten.special_xlog1py.default", promote="float", common_first=True)
def xlog1py(self, other):
    x, y = jnp.broadcast_arrays(*_same(self, other))
    out = jnp.where(x == 0, jnp.zeros_like(x), x * jnp.log1p(y))
    return jnp.where(jnp.isnan(y), jnp.full_like(x, jnp.nan), out)


@lowers("aten.logit.default")
def logit(x, eps=None):
    """As CPU: clamped to eps and 1 - eps in the input's dtype, eps rounded first (a float16 1 - 1e-4 is 1:
    logit gives inf there); in 16-bit floats 1 - x and x / (1 - x) are rounded, each, before the log."""
    dt = x.dtype if is_float(x) else default_float()
    half = dt in (jnp.float16, jnp.bfloat16)
    compute = jnp.float32 if half else dt
    x = x.astype(dt)
    if eps is not None:
        lo = jnp.asarray(eps, compute).astype(dt)
        hi = (1 - lo.astype(compute)).astype(dt)
        clamped = jnp.where(x < lo, lo, jnp.where(x > hi, hi, x))     # CPU's order: eps > 0.5 gives lo below it
        x = jnp.where(lo >= 0, clamped, x)
    x = x.astype(compute)
    r = (lambda v: v.astype(dt).astype(compute)) if half else (lambda v: v)  # noqa: E731
    return jnp.log(r(x / r(1 - x)))


# Rounding -----------------------------------------------------------------------------------

def finite_rounding(fn):
    """floor, ceil, trunc or round of a float with infinities and NaN passed through as they are:
    XLA:TPU's emulated float64 rounded an infinity to NaN (a float64 division by zero truncated, the
    fifth TPU run)."""
    def rule(x):
        return jnp.where(jnp.isfinite(x), fn(x), x) if is_float(x) else x
    return rule


lowers("aten.floor.default", promote="same")(finite_rounding(jnp.floor))
lowers("aten.ceil.default", promote="same")(finite_rounding(jnp.ceil))
lowers("aten.trunc.default", promote="same")(finite_rounding(jnp.trunc))
lowers("aten.round.default", promote="same")(finite_rounding(jnp.round))


@lowers("aten.round.decimals", promote="same")
def round_decimals(x, *, decimals=0):
    if not is_float(x):
        return x
    decimals = int(decimals)
    ten = jnp.asarray(10.0 ** (-decimals if decimals < 0 else decimals), x.dtype)
    round_ = finite_rounding(jnp.round)
    if decimals < 0:
        return round_(x / ten) * ten
    return round_(x * ten) / ten


@lowers("aten.frac.default", promote="same")
def frac(x):
    return x - finite_rounding(jnp.trunc)(x)


# Min / max ----------------------------------------------------------------------------------

@lowers("aten.maximum.default", promote="same")
def maximum(self, other):
    return nan_max(self, other)


@lowers("aten.minimum.default", promote="same")
def minimum(self, other):
    return nan_min(self, other)


@lowers("aten.fmax.default", promote="same")
def fmax(self, other):
    return jnp.fmax(self, other) if is_float(self) else jnp.maximum(self, other)


@lowers("aten.fmin.default", promote="same")
def fmin(self, other):
    return jnp.fmin(self, other) if is_float(self) else jnp.minimum(self, other)


def clamp_(x, lo, hi):
    if lo is not None:
        x = nan_max(x, lo)
    if hi is not None:
        x = nan_min(x, hi)
    return x


@lowers("aten.clamp.default", "aten.clamp.Tensor", promote="same", saturate=True)
def clamp(self, min=None, max=None):
    return clamp_(self, min, max)


@lowers("aten.clamp_min.default", "aten.clamp_min.Tensor", promote="same", saturate=True)
def clamp_min(self, min):
    return nan_max(self, min)


@lowers("aten.clamp_max.default", "aten.clamp_max.Tensor", promote="same", saturate=True)
def clamp_max(self, max):
    return nan_min(self, max)
