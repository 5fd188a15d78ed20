"""Shared helpers for the nn rule tests (no tests here).

The driver lifts only schema `number` arguments: `int`, `int[]`, `float` hyperparameters
(stride, kernel_size, eps, p, ...) arrive as Python constants, and nn rules rely on that
(shapes, branches on p / beta / reduction). `ncheck`/`nrun` mark those arguments static
(int/float subclasses that rulecheck never lifts), so the tests keep checking exactly that
contract whatever rulecheck's own lifting does.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import torch  # noqa: E402

from rulecheck import check, run_rule  # noqa: E402,F401

_NUMBER = ("number", "Optional[number]", "List[number]")


class SInt(int):
    """An int constant (schema int / int[] / SymInt): rulecheck must not lift it."""


class SFloat(float):
    """A float constant (schema float): rulecheck must not lift it."""


def static(x):
    if type(x) is int:
        return SInt(x)
    if type(x) is float:
        return SFloat(x)
    if type(x) in (list, tuple):
        return type(x)(static(y) for y in x)
    return x


def _op(name):
    _, packet, overload = name.split(".")
    return getattr(getattr(torch.ops.aten, packet), overload)


def schema_args(name, args, kwargs):
    schema = _op(name)._schema
    positional = [a for a in schema.arguments if not a.kwarg_only]
    by_name = {a.name: a for a in schema.arguments}
    args = tuple(a if str(positional[i].type) in _NUMBER else static(a) for i, a in enumerate(args))
    kwargs = {k: (v if str(by_name[k].type) in _NUMBER else static(v)) for k, v in kwargs.items()}
    return args, kwargs


def ncheck(name, *args, atol=1e-5, rtol=1.3e-6, **kwargs):
    args, kwargs = schema_args(name, args, kwargs)
    check(name, *args, atol=atol, rtol=rtol, **kwargs)


def nrun(name, *args, rng_seed=None, **kwargs):
    args, kwargs = schema_args(name, args, kwargs)
    return run_rule(name, *args, rng_seed=rng_seed, **kwargs)


def op(name):
    return _op(name)
