"""Checks one lowering rule against torch on CPU, the way the lowering driver calls it.

    check("aten.add.Tensor", torch.randn(3), 2.5, alpha=2)

The rule runs under jax.jit with x64 enabled; tensors become jax arrays, non-special
Python numbers become weakly typed traced scalars (as lifted scalars are), promotion
and the final dtype cast follow xlanb.lower.to_jax. The result must match torch's
(values, dtype, shape) within `atol`/`rtol`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax._src.lax.lax import _convert_element_type

from xlanb.ir.node import Scalar, lift
from xlanb.lower.dtypes import numpy_to_torch, to_jax_dtype, torch_to_numpy
from xlanb.lower.registry import lookup
from xlanb.lower.to_jax import _cast_operands, _cast_out, _promotion_from_examples


def _leaves(x, out):
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _leaves(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _leaves(y, out)
    return out


def _to_jax_args(x, tensors, scalars, liftable=True):
    """Replace tensors by ("t", i) and liftable numbers by ("s", j) placeholders.

    Only numbers in Scalar-typed (or Tensor-typed) schema slots are lifted, as capture does.
    """
    if isinstance(x, torch.Tensor):
        tensors.append(x)
        return ("t", len(tensors) - 1)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_jax_args(y, tensors, scalars, liftable) for y in x)
    lifted = lift(x) if liftable and type(x) in (int, float) else x
    if type(lifted) is Scalar:
        scalars.append(x)
        return ("s", len(scalars) - 1)
    return x


def _liftable_slots(op):
    """(positional liftable flags, keyword liftable names) from the op's schema."""
    if op is None:
        return None, None
    kinds = {"Tensor", "Optional[Tensor]", "number", "Optional[number]", "List[number]"}
    args = op._schema.arguments
    positional = [str(a.type) in kinds for a in args if not a.kwarg_only]
    keyword = {a.name for a in args if a.kwarg_only and str(a.type) in kinds}
    return positional, keyword


def _template(op, args, kwargs, tensors, scalars):
    positional, keyword = _liftable_slots(op)
    targs = tuple(_to_jax_args(a, tensors, scalars, positional is None or (i < len(positional) and positional[i]))
                  for i, a in enumerate(args))
    tkwargs = {k: _to_jax_args(v, tensors, scalars, keyword is None or k in keyword) for k, v in kwargs.items()}
    return targs, tkwargs


def _fill(x, arrays, scalar_values):
    if isinstance(x, tuple) and len(x) == 2 and x[0] == "t" and isinstance(x[1], int):
        return arrays[x[1]]
    if isinstance(x, tuple) and len(x) == 2 and x[0] == "s" and isinstance(x[1], int):
        return scalar_values[x[1]]
    if isinstance(x, (list, tuple)):
        return type(x)(_fill(y, arrays, scalar_values) for y in x)
    if isinstance(x, dict):
        return {k: _fill(v, arrays, scalar_values) for k, v in x.items()}
    return x


def run_rule(name: str, *args, rng_seed: int | None = None, **kwargs):
    """The rule's outputs as torch CPU tensors (a tensor, or a tuple)."""
    rule = lookup(name)
    assert rule is not None, f"no rule registered for {name}"
    op = _op(name)
    expected = op(*args, **kwargs) if op is not None and not rule.rng else None
    tensors, scalars = [], []
    template = _template(op, args, kwargs, tensors, scalars)
    promote_to = None
    if rule.promote:
        examples = [a for a in _leaves(args, []) + _leaves(kwargs, [])]
        examples += [s for s in scalars]
        promote_to = _promotion_from_examples(rule, examples)

    def fn(*flat):
        arrays = list(flat[:len(tensors)])
        svals = [_convert_element_type(v, np.dtype(np.float64 if isinstance(s, float) else np.int64),
                                       weak_type=True)
                 for v, s in zip(flat[len(tensors):], scalars)]
        a, kw = _fill(template, arrays, svals)
        if promote_to is not None:
            a = _cast_operands(a, promote_to)
            kw = {k: _cast_operands(v, promote_to) for k, v in kw.items()}
        if rule.rng:
            return rule.fn(jax.random.key(rng_seed or 0), *a, **kw)
        return rule.fn(*a, **kw)

    with jax.enable_x64(True):
        inputs = [jnp.asarray(torch_to_numpy(t)) for t in tensors]
        inputs += [np.float64(s) if isinstance(s, float) else np.int64(s) for s in scalars]
        out = jax.jit(fn)(*inputs)
        if expected is not None:
            out = _cast_out(out, _dtypes_of(expected), name)
        return _to_torch(out)


def _dtypes_of(x):
    if isinstance(x, torch.Tensor):
        return to_jax_dtype(x.dtype)
    return tuple(to_jax_dtype(t.dtype) if isinstance(t, torch.Tensor) else None for t in x)


def _to_torch(x):
    if isinstance(x, (tuple, list)):
        return tuple(_to_torch(y) for y in x)
    if x is None:
        return None
    return numpy_to_torch(np.asarray(x))


def _op(name: str):
    ns, packet, overload = name.split(".")
    if ns != "aten":
        return None
    return getattr(getattr(torch.ops.aten, packet), overload)


def check(name: str, *args, atol: float = 1e-5, rtol: float = 1.3e-6, equal_nan: bool = True, **kwargs):
    """Asserts that the rule for `name` gives torch's result on these arguments."""
    expected = _op(name)(*args, **kwargs)
    got = run_rule(name, *args, **kwargs)
    if isinstance(expected, torch.Tensor):
        expected, got = (expected,), (got,)
    assert len(got) == len(expected), f"{name}: {len(got)} outputs, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        if not isinstance(e, torch.Tensor):
            continue
        assert g.dtype == e.dtype, f"{name} output {i}: dtype {g.dtype}, expected {e.dtype}"
        assert g.shape == e.shape, f"{name} output {i}: shape {tuple(g.shape)}, expected {tuple(e.shape)}"
        torch.testing.assert_close(g, e, atol=atol, rtol=rtol, equal_nan=equal_nan,
                                   msg=lambda m: f"{name} output {i}: {m}")
