"""capture/nosympy.py: the stand-ins that keep sympy out of a first step give torch's own answers.

Each stand-in is compared with the installed torch's function on the same arguments: plain values
(answered by the stand-in), symbolic ones and bad ones (handed to torch's function)."""

import itertools
import json
import random
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import _prims_common as utils

from xlanb.capture import nosympy

VALUES = (True, False, 0, 1, 5, 2.5, None, "s", (1, 2))
SIZES = ((1, 1), (1, 2), (True, 1), ((1, 2), (1, 2)), ([1, 2], (1, 2)), ((1, 2), (1, 2, 3)),
         ((1, (2, 3)), (1, (2, 3))), ((1, (2, 3)), (1, (2, 4))), (1, (1,)), ((1,), 1), (2.0, 2), ((), []))


def outcome(fn, *args):
    try:
        value = fn(*args)
    except Exception as e:          # noqa: BLE001 - the error's type is the answer compared
        return "raises", type(e)
    return value, type(value)


def real(name):
    fn = getattr(nosympy._real(), name, None)
    if fn is None:
        pytest.skip(f"this torch's symbolic_shapes has no {name}")
    return fn


@pytest.mark.filterwarnings("ignore:guard_size_oblivious will be removed:FutureWarning")
@pytest.mark.parametrize("name", sorted(set(nosympy.ANSWERS) - {"sym_eq", "sym_and", "sym_or", "expect_true", "_advise_is_bounded"}))
def test_a_one_argument_answer_is_torchs(name):
    mine, theirs = nosympy.ANSWERS[name], real(name)
    for v in VALUES:
        assert outcome(mine, v) == outcome(theirs, v), (name, v)


@pytest.mark.parametrize("name", ["sym_and", "sym_or"])
def test_a_joined_answer_is_torchs(name):
    mine, theirs = nosympy.ANSWERS[name], real(name)
    for n in (1, 2, 3):
        for args in itertools.product((True, False), repeat=n):
            assert outcome(mine, *args) == outcome(theirs, *args), args
    for args in ((True, 1), (1, True), (None,), (2, 3)):
        assert outcome(mine, *args) == outcome(theirs, *args), args


def test_sym_eq_and_expect_true_answer_as_torchs():
    for x, y in SIZES:
        assert outcome(nosympy.sym_eq, x, y) == outcome(real("sym_eq"), x, y), (x, y)
    for v in VALUES:
        assert outcome(nosympy.expect_true, v) == outcome(real("expect_true"), v), v
    for a, bound in ((3, 5), (True, 1), (3, None), (2.5, 3)):
        assert outcome(nosympy._advise_is_bounded, a, bound) == outcome(real("_advise_is_bounded"), a, bound)


def test_a_symbolic_value_gets_the_real_functions_answer():
    shapes = nosympy._real()
    if not hasattr(shapes.ShapeEnv, "create_unbacked_symint"):
        pytest.skip("this torch's ShapeEnv makes no unbacked SymInt")
    size = shapes.ShapeEnv().create_unbacked_symint()
    if hasattr(shapes, "has_guarding_hint"):
        assert nosympy.has_guarding_hint(size) is shapes.has_guarding_hint(size) is False
    assert nosympy.ANSWERS["guard_or_false"](size == 3) is shapes.guard_or_false(size == 3) is False
    assert nosympy.ANSWERS["guard_or_true"](size == 3) is True
    assert nosympy.is_nested_int(size) is False


def test_the_real_module_takes_the_stand_ins_place_when_a_name_it_lacks_is_read():
    """In a fresh process: a step leaves the stand-in in place; dynamo's import (torch.compile with
    dynamic shapes) reads ShapeEnv, and from then on the real module is the one torch sees."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import json, sys, torch, xlanb
        name = "torch.fx.experimental.symbolic_shapes"
        x = torch.ones(3, 4, device="xla")
        y = (torch.nn.functional.linear(x, torch.ones(2, 4, device="xla")) * 2).sum().item()
        before = type(sys.modules[name]).__name__, "sympy" in sys.modules
        stand_in = sys.modules[name]
        fn = torch.compile(lambda t: (t * 2).sum(), backend="eager", dynamic=True)
        sums = [fn(torch.ones(n)).item() for n in (3, 5)]
        import torch.fx.experimental.symbolic_shapes as shapes
        stand_in.xlanb_test_flag = 7                  # a reference kept to the stand-in forwards
        print(json.dumps({"y": y, "before": before, "sums": sums,
                          "real": shapes is sys.modules[name] is torch.fx.experimental.symbolic_shapes
                                  and hasattr(shapes, "ShapeEnv") and type(shapes).__name__ == "module",
                          "forwards": [stand_in.guard_or_false is shapes.guard_or_false,
                                       stand_in.ShapeEnv is shapes.ShapeEnv, shapes.xlanb_test_flag]}))
    """)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"y": 48.0, "before": ["_StandIn", False], "sums": [6.0, 10.0], "real": True,
                   "forwards": [True, True, 7]}


# elementwise_dtypes -------------------------------------------------------------------------

DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128)
ARGS = ([torch.empty((), dtype=d, device="meta") for d in DTYPES]
        + [torch.empty(2, dtype=d, device="meta") for d in DTYPES] + [True, 3, 2.5, 1j, None])
KINDS = tuple(utils.ELEMENTWISE_TYPE_PROMOTION_KIND)


def promotions(args):
    original = utils.elementwise_dtypes.__wrapped__
    for kind in KINDS:
        plain = tuple(a for a in args if a is not None)
        mine = outcome(lambda: nosympy._by_kind(nosympy._result_dtype(plain), kind))
        assert mine == outcome(lambda: original(*args, type_promotion_kind=kind)), (args, kind)


def test_the_promotion_rule_is_torchs_on_every_pair_and_kind():
    for pair in itertools.product(ARGS, repeat=2):
        promotions(pair)


def test_the_promotion_rule_is_torchs_on_triples_and_another_default_dtype():
    rng = random.Random(0)
    triples = [tuple(rng.choice(ARGS) for _ in range(3)) for _ in range(400)]
    previous = torch.get_default_dtype()
    try:
        for default in (torch.float32, torch.float64):
            torch.set_default_dtype(default)
            for args in triples + [(), (None,), (2, 3), (True,)]:
                promotions(args)
    finally:
        torch.set_default_dtype(previous)


def test_every_module_that_imported_the_name_uses_the_stand_in():
    installed = utils.elementwise_dtypes
    assert installed.__wrapped__ is not None
    holders = [m for m in list(sys.modules.values()) if getattr(m, "__dict__", {}).get("elementwise_dtypes")
               is installed.__wrapped__]
    assert holders == []
    assert sys.modules["torch._meta_registrations"].elementwise_dtypes is installed


def test_other_arguments_get_torchs_answer_and_error():
    original = utils.elementwise_dtypes.__wrapped__
    kind = utils.ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
    for args in (("x",), (torch.empty(2), object())):
        assert outcome(lambda: utils.elementwise_dtypes(*args, type_promotion_kind=kind)) == \
            outcome(lambda: original(*args, type_promotion_kind=kind)) == ("raises", ValueError)
