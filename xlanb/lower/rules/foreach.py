"""Lowering rules: the functional `_foreach_*` ops, one per-tensor rule per list element.

`_foreach_add.List(self, other, alpha)` computes `aten.add.Tensor(self[i], other[i], alpha=alpha)`
for every i, and so on. The per-tensor rule is looked up when the graph is traced (so it
picks up whatever pointwise.py registers), and each element is promoted on its own, as
torch's foreach ops do (the driver's promotion would mix all elements together). An
element whose per-tensor op has no rule runs on torch CPU through the fallback.
Outputs are a list, one array per element; the driver casts each to torch's dtype.
(`_foreach_mm` lives in linalg.py.)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax._src.lax.lax import _convert_element_type

from xlanb.lower import fallback
from xlanb.lower.dtypes import to_jax_dtype, to_torch_dtype
from xlanb.lower.registry import lookup, lowers
from xlanb.lower.to_jax import _promotion_from_examples, promote_operands, traced_once

_HALF = (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))


class S:
    """Marks a Scalar operand (a Python number or a lifted, weakly typed 0-d array)."""
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


def _example(x):
    """torch-side stand-in of one operand, as the driver builds them (to_jax._operand_examples)."""
    if isinstance(x, S):
        v = x.v
        if isinstance(v, jax.Array):
            k = v.dtype
            if jnp.issubdtype(k, jnp.complexfloating):
                return complex(2)
            if jnp.issubdtype(k, jnp.floating):
                return 2.0
            if k == np.dtype(np.bool_):
                return None
            return 2
        if type(v) in (int, float, complex):
            return v
        return None
    if isinstance(x, jax.Array):
        return torch.empty(x.shape, dtype=to_torch_dtype(x.dtype), device="meta")
    if type(x) in (int, float, complex):
        return x
    return None


def _unwrap(x):
    return x.v if isinstance(x, S) else x


def _meta_arg(x):
    if isinstance(x, S):
        x = x.v
    if isinstance(x, jax.Array):
        if x.weak_type and x.ndim == 0:     # a lifted scalar: torch wants a Python number
            return _example(S(x))
        return torch.empty(x.shape, dtype=to_torch_dtype(x.dtype), device="meta")
    return x


def apply(name: str, *args, **kwargs):
    """One element: the per-tensor rule `name` on these operands (Scalars wrapped in S),
    with the driver's promotion for that element alone."""
    rule = lookup(name)
    if rule is None:
        op = fallback.aten_op(name)
        a = [_unwrap(x) for x in args]
        kw = {k: _unwrap(v) for k, v in kwargs.items()}
        meta = op(*[_meta_arg(x) for x in args], **{k: _meta_arg(v) for k, v in kwargs.items()})
        return fallback.lower_fallback(op, name, a, kw, meta)
    a = [_unwrap(x) for x in args]
    kw = {k: _unwrap(v) for k, v in kwargs.items()}
    if rule.promote:
        examples = [e for e in (_example(x) for x in list(args) + list(kwargs.values())) if e is not None]
        dtype, first = _promotion_from_examples(rule, examples)
        if dtype is not None:
            a, kw = promote_operands(rule, a, kw, dtype, first=first)
    if rule.rng:
        raise TypeError(f"xlanb: {name} needs a PRNG key")
    # through the rules' memo: a list's elements mostly repeat a few shapes (W7's AdamW: 52
    # parameters, 9 shapes), and each kind is traced to a jaxpr once, later elements replay it
    # (the step lowered in 0.24-0.32 -> 0.18 s)
    return traced_once(rule.fn, (rule.fn, name), tuple(a), kw)


def _scalar_of(t, i):
    """Element i of a 1-D tensor of scalars, as torch turns it into a Scalar (.item())."""
    v = t[i]
    k = v.dtype
    if jnp.issubdtype(k, jnp.complexfloating):
        return S(_convert_element_type(v, np.dtype(np.complex128), weak_type=True))
    if jnp.issubdtype(k, jnp.floating):
        return S(_convert_element_type(v, np.dtype(np.float64), weak_type=True))
    if k == np.dtype(np.bool_):
        return S(_convert_element_type(v, np.dtype(np.int64), weak_type=True))
    return S(_convert_element_type(v, np.dtype(np.int64), weak_type=True))


# Unary ----------------------------------------------------------------------------------

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
          "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign",
          "sin", "sinh", "sqrt", "tan", "tanh", "trunc")


def _unary(op):
    def rule(self):
        return [apply(op, x) for x in self]
    return rule


for _name in _UNARY:
    lowers(f"aten._foreach_{_name}.default")(_unary(f"aten.{_name}.default"))


@lowers("aten._foreach_zero.default")
def foreach_zero(self):
    return [jnp.zeros_like(x) for x in self]


@lowers("aten._foreach_clone.default")
def foreach_clone(self, *, memory_format=None):
    return [apply("aten.clone.default", x, memory_format=memory_format) for x in self]


@lowers("aten._foreach_copy.default")
def foreach_copy(self, src, non_blocking=False):
    return [apply("aten.copy.default", x, y, non_blocking) for x, y in zip(self, src)]


@lowers("aten._foreach_max.default")
def foreach_max(self):
    return [apply("aten.max.default", x) for x in self]


@lowers("aten._foreach_norm.Scalar")
def foreach_norm(self, ord=2, dtype=None):
    return [apply("aten.linalg_vector_norm.default", x, S(ord), None, False, dtype=dtype) for x in self]


@lowers("aten._foreach_powsum.Scalar")
def foreach_powsum(self, ord=2, dtype=None):
    """sum(|x| ** ord) per tensor (the norm before its root)."""
    out = []
    for x in self:
        dt = to_jax_dtype(dtype) if dtype is not None else x.dtype
        acc = np.dtype(np.float32) if np.dtype(dt) in _HALF or np.dtype(x.dtype) in _HALF else dt
        a = jnp.abs(x).astype(acc)
        out.append(jnp.sum(a ** ord if not (isinstance(ord, (int, float)) and ord == 1) else a).astype(dt))
    return out


# Binary ---------------------------------------------------------------------------------

def _binary(list_op, scalar_op=None, tensor_op=None, alpha=False):
    """Registers .List / .Scalar / .ScalarList / .Tensor overloads of one foreach packet."""
    def by_list(self, other, *, alpha=1):
        kw = {"alpha": S(alpha)} if not (isinstance(alpha, int) and alpha == 1) else {}
        return [apply(list_op, x, y, **kw) for x, y in zip(self, other)]

    def by_list_plain(self, other):
        return [apply(list_op, x, y) for x, y in zip(self, other)]

    def by_scalar(self, scalar):
        return [apply(scalar_op, x, S(scalar)) for x in self]

    def by_scalars(self, scalars):
        return [apply(scalar_op, x, S(s)) for x, s in zip(self, scalars)]

    def by_tensor(self, other, *, alpha=1):
        kw = {"alpha": S(alpha)} if not (isinstance(alpha, int) and alpha == 1) else {}
        return [apply(tensor_op, x, other, **kw) for x in self]

    def by_tensor_plain(self, other):
        return [apply(tensor_op, x, other) for x in self]

    return (by_list if alpha else by_list_plain), by_scalar, by_scalars, (by_tensor if alpha else by_tensor_plain)


def _register_binary(packet, list_op, scalar_op, tensor_op=None, alpha=False):
    by_list, by_scalar, by_scalars, by_tensor = _binary(list_op, scalar_op, tensor_op, alpha)
    lowers(f"aten._foreach_{packet}.List")(by_list)
    lowers(f"aten._foreach_{packet}.Scalar")(by_scalar)
    lowers(f"aten._foreach_{packet}.ScalarList")(by_scalars)
    if tensor_op is not None:
        lowers(f"aten._foreach_{packet}.Tensor")(by_tensor)


_register_binary("add", "aten.add.Tensor", "aten.add.Tensor", "aten.add.Tensor", alpha=True)
_register_binary("sub", "aten.sub.Tensor", "aten.sub.Tensor", alpha=True)
_register_binary("mul", "aten.mul.Tensor", "aten.mul.Tensor", "aten.mul.Tensor")
_register_binary("div", "aten.div.Tensor", "aten.div.Tensor", "aten.div.Tensor")
_register_binary("clamp_max", "aten.clamp_max.Tensor", "aten.clamp_max.default")
_register_binary("clamp_min", "aten.clamp_min.Tensor", "aten.clamp_min.default")
# torch computes maximum/minimum with a Scalar as clamp_min/clamp_max
_register_binary("maximum", "aten.maximum.default", "aten.clamp_min.default")
_register_binary("minimum", "aten.minimum.default", "aten.clamp_max.default")
_register_binary("pow", "aten.pow.Tensor_Tensor", "aten.pow.Tensor_Scalar")


@lowers("aten._foreach_pow.ScalarAndTensor")
def foreach_pow_scalar_and_tensor(self, exponent):
    return [apply("aten.pow.Scalar", S(self), e) for e in exponent]


# addcdiv / addcmul / lerp -------------------------------------------------------------------

def _pointwise3(op):
    def by_scalar(self, tensor1, tensor2, value=1):
        return [apply(op, x, a, b, value=S(value)) for x, a, b in zip(self, tensor1, tensor2)]

    def by_scalars(self, tensor1, tensor2, scalars):
        return [apply(op, x, a, b, value=S(s)) for x, a, b, s in zip(self, tensor1, tensor2, scalars)]

    def by_tensor(self, tensor1, tensor2, scalars):
        return [apply(op, x, a, b, value=_scalar_of(scalars, i))
                for i, (x, a, b) in enumerate(zip(self, tensor1, tensor2))]

    return by_scalar, by_scalars, by_tensor


for _packet in ("addcdiv", "addcmul"):
    _s, _sl, _t = _pointwise3(f"aten.{_packet}.default")
    lowers(f"aten._foreach_{_packet}.Scalar")(_s)
    lowers(f"aten._foreach_{_packet}.ScalarList")(_sl)
    lowers(f"aten._foreach_{_packet}.Tensor")(_t)


@lowers("aten._foreach_lerp.List")
def foreach_lerp_list(self, tensors1, weights):
    return [apply("aten.lerp.Tensor", x, e, w) for x, e, w in zip(self, tensors1, weights)]


@lowers("aten._foreach_lerp.Scalar")
def foreach_lerp_scalar(self, tensors1, weight):
    return [apply("aten.lerp.Scalar", x, e, S(weight)) for x, e in zip(self, tensors1)]


@lowers("aten._foreach_lerp.ScalarList")
def foreach_lerp_scalars(self, tensors1, weight):
    return [apply("aten.lerp.Scalar", x, e, S(w)) for x, e, w in zip(self, tensors1, weight)]
