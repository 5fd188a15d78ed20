"""Keeping sympy unimported until something symbolic needs it (about 0.4 s of a first step).

Every meta kernel xlanb runs to infer a shape reaches one of two of torch's Python paths that
import sympy, only to answer questions whose answer, for plain ints and bools, is the value
itself:

`torch.fx.experimental.symbolic_shapes` (imports sympy; 0.38 s) is imported inside
`torch._check` (for `expect_true(cond)`), `torch._check_is_size` (`_advise_is_size`), and inside torch's reference ops and meta kernels for
`guard_or_false`, `sym_eq`, `is_nested_int` and a few more (torch 2.13 deprecates
`guard_size_oblivious` with a FutureWarning and only imports it there; the stand-in answers
without the warning, as the torch versions that still call it did). `install()` puts a stand-in module
under that name (when nothing imported the real one yet) that holds those functions: each gives
the real function's answer when its arguments are plain bools and ints (no SymInt or SymBool can
exist before the real module is imported; a stand-in handed one still asks the real function),
and every other name read from the stand-in imports the real module, which then takes its place
in `sys.modules` (torch.compile's first import of dynamo does so).

torch's elementwise type promotion, `torch._prims_common.elementwise_dtypes`, runs inside the
Python meta kernels of many ops (the first a `Linear` meets is `addmm`'s, through the
decomposition wrapper `pw_cast_for_opmath`), and it imports sympy on each call only to ask
whether an argument is a `sympy.Basic`. While sympy is not imported, no argument can be one.

`install()` puts `elementwise_dtypes` below in its place (in `torch._prims_common` and in every
module that imported the name): while sympy is unimported and every argument is a tensor, a
plain Python number or None, it answers by the rule torch's function documents (the highest
Python type kind among the arguments, then the highest dtype of that kind, tensors of one or
more dimensions first, then the promotion kind's computation and result dtypes), built from
torch's own dtype helpers. Every other call (sympy imported, a SymInt, a numpy scalar, a bad
argument) goes to torch's function, which also makes torch's errors. Private torch API, written
against torch 2.9-2.15; tests/capture/test_nosympy.py compares the two answers on every
promotion kind over tensors and numbers of every dtype, and tests/runtime/test_imports.py fails
if a first training step imports sympy again.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import operator
import sys
import threading
import types

import torch
from torch import _prims_common as utils

_SYMBOLIC = "torch.fx.experimental.symbolic_shapes"


def install() -> bool:
    """Both stand-ins, once per process; False when either could not be put in place."""
    shapes = _install_symbolic_shapes()
    dtypes = _install_elementwise_dtypes()
    return shapes and dtypes


# --- torch.fx.experimental.symbolic_shapes ---------------------------------------------------

_lock = threading.RLock()


def _real() -> types.ModuleType:
    """The real symbolic_shapes module, imported in the stand-in's place on first need."""
    with _lock:
        module = sys.modules.get(_SYMBOLIC)
        if isinstance(module, _StandIn):
            del sys.modules[_SYMBOLIC]
            try:
                real = importlib.import_module(_SYMBOLIC)
            except BaseException:
                sys.modules[_SYMBOLIC] = module
                raise
            for name in ANSWERS:        # from now on the stand-in only forwards to the real module
                vars(module).pop(name, None)
            return real
        return module if module is not None else importlib.import_module(_SYMBOLIC)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


class _StandIn(types.ModuleType):
    """`torch.fx.experimental.symbolic_shapes` until a name other than the plain-value answers
    below is read from it; after that, a forwarder to the real module for whoever kept a
    reference to it (reads and writes of every name go to the real module)."""

    def __getattr__(self, name):
        if _dunder(name):
            raise AttributeError(name)
        return getattr(_real(), name)

    def __setattr__(self, name, value):
        real = sys.modules.get(_SYMBOLIC)
        if _dunder(name) or real is None or real is self:
            super().__setattr__(name, value)
        else:
            setattr(real, name, value)


def _real_answer(name: str, *args):
    return getattr(_real(), name)(*args)


def _is_bool(a) -> bool:
    return type(a) is bool


def _is_number(a) -> bool:
    return type(a) in (bool, int, float)


def _as_is(name: str, plain=_is_bool):
    """A function that answers a plain value with itself (`guard_or_false(True)` is True)."""
    def answer(a):
        return a if plain(a) else _real_answer(name, a)
    answer.__name__ = answer.__qualname__ = name
    return answer


def expect_true(a, skip=0):
    return a if type(a) is bool else _real_answer("expect_true", a, skip + 1)


def has_guarding_hint(a):
    return True if _is_number(a) else _real_answer("has_guarding_hint", a)


def is_nested_int(s):
    return False if _is_number(s) else _real_answer("is_nested_int", s)


def _advise_is_size(a):
    return None if type(a) in (bool, int) else _real_answer("_advise_is_size", a)


def _advise_is_bounded(a, upper_bound):
    return None if type(a) in (bool, int) else _real_answer("_advise_is_bounded", a, upper_bound)


def _joined(name: str, join):
    def answer(x, *others):
        if not (_is_bool(x) and all(map(_is_bool, others))):
            return _real_answer(name, x, *others)
        return functools.reduce(join, others, x)
    answer.__name__ = answer.__qualname__ = name
    return answer


def _plain_sizes(x) -> bool:
    if isinstance(x, (tuple, list)):
        return all(map(_plain_sizes, x))
    return type(x) in (bool, int)


def sym_eq(x, y):
    if not (_plain_sizes(x) and _plain_sizes(y)) or isinstance(x, (tuple, list)) != isinstance(y, (tuple, list)):
        return _real_answer("sym_eq", x, y)
    if isinstance(x, (tuple, list)):
        return len(x) == len(y) and functools.reduce(operator.and_, map(sym_eq, x, y), True)
    return x == y


ANSWERS = {f.__name__: f for f in (
    _as_is("guard_or_false"), _as_is("guard_or_true"), _as_is("guard_size_oblivious"),
    _as_is("statically_known_true"), _as_is("guarding_hint_or_throw", lambda a: type(a) in (bool, int)),
    expect_true, has_guarding_hint, is_nested_int, sym_eq, _advise_is_size, _advise_is_bounded,
    _joined("sym_and", operator.and_), _joined("sym_or", operator.or_))}


def _install_symbolic_shapes() -> bool:
    if _SYMBOLIC in sys.modules:
        return isinstance(sys.modules[_SYMBOLIC], _StandIn)
    spec = importlib.util.find_spec(_SYMBOLIC)
    if spec is None:
        return False
    stand_in = _StandIn(_SYMBOLIC, "xlanb's stand-in for torch's symbolic_shapes (xlanb/capture/nosympy.py)")
    stand_in.__spec__, stand_in.__loader__, stand_in.__file__ = spec, spec.loader, spec.origin
    stand_in.__package__ = _SYMBOLIC.rpartition(".")[0]
    vars(stand_in).update(ANSWERS)
    sys.modules[_SYMBOLIC] = stand_in
    setattr(sys.modules[stand_in.__package__], "symbolic_shapes", stand_in)
    return True


# --- torch._prims_common.elementwise_dtypes ---------------------------------------------------

_KINDS = (bool, int, float, complex)          # Python type kinds, lowest first
_NUMBERS = frozenset(_KINDS)


def _plain(args) -> bool:
    return all(type(a) in _NUMBERS or isinstance(a, torch.Tensor) for a in args)


def _highest_dtype(args, keep, as_complex=False):
    """The highest dtype among the tensors whose dtype `keep` accepts, those with one or more
    dimensions first (None when there is none)."""
    best = {True: None, False: None}          # keyed by "has one or more dimensions"
    for a in args:
        if isinstance(a, torch.Tensor) and keep(a.dtype):
            dtype = a.dtype
            if as_complex and utils.is_float_dtype(dtype):
                dtype = utils.corresponding_complex_dtype(dtype)
            best[a.ndim > 0] = utils.get_higher_dtype(best[a.ndim > 0], dtype)
    return best[True] if best[True] is not None else best[False]


def _result_dtype(args) -> torch.dtype:
    kinds = [utils.dtype_to_type(a.dtype) if isinstance(a, torch.Tensor) else type(a) for a in args]
    kind = max(kinds, key=_KINDS.index, default=bool)
    default = torch.get_default_dtype()
    if kind is float:
        return _highest_dtype(args, utils.is_float_dtype) or default
    if kind is complex:
        found = _highest_dtype(args, lambda d: utils.is_float_dtype(d) or utils.is_complex_dtype(d), True)
        return found or utils.corresponding_complex_dtype(default)
    if kind is int:
        return _highest_dtype(args, utils.is_integer_dtype) or torch.long
    return torch.bool


def _by_kind(result: torch.dtype, promotion) -> tuple[torch.dtype, torch.dtype]:
    Kind = utils.ELEMENTWISE_TYPE_PROMOTION_KIND
    compute = utils.get_computation_dtype
    if promotion is Kind.NO_OPMATH:
        return result, result
    if promotion is Kind.INT_TO_FLOAT and (utils.is_integer_dtype(result) or utils.is_boolean_dtype(result)):
        result = torch.get_default_dtype()
    elif promotion is Kind.COMPLEX_TO_FLOAT and utils.is_complex_dtype(result):
        return compute(result), utils.corresponding_real_dtype(result)
    elif promotion is Kind.BOOL_TO_LONG and utils.is_boolean_dtype(result):
        return torch.long, torch.long
    elif promotion is Kind.ALWAYS_BOOL:
        return compute(result), torch.bool
    return compute(result), result


def _install_elementwise_dtypes() -> bool:
    original = getattr(utils, "elementwise_dtypes", None)
    if original is None or getattr(original, "__wrapped__", None) is not None:
        return False
    Kind = utils.ELEMENTWISE_TYPE_PROMOTION_KIND
    known = frozenset(Kind)

    def elementwise_dtypes(*_args, type_promotion_kind):
        args = tuple(a for a in _args if a is not None)
        if "sympy" in sys.modules or type_promotion_kind not in known or not _plain(args):
            return original(*_args, type_promotion_kind=type_promotion_kind)
        return _by_kind(_result_dtype(args), type_promotion_kind)

    elementwise_dtypes.__wrapped__ = original
    elementwise_dtypes.__doc__ = original.__doc__
    for module in list(sys.modules.values()):       # the modules that imported the name
        if getattr(module, "__dict__", {}).get("elementwise_dtypes") is original:
            module.elementwise_dtypes = elementwise_dtypes
    return True
