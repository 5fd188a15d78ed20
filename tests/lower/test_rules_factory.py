import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702
import rulecheck  # noqa: E402
from rulecheck import check, run_rule  # noqa: E402

import contextlib  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

aten = torch.ops.aten


def check_c(name, *args, constant=False, **kwargs):
    """check(); with `constant`, no argument is lifted."""
    with rulecheck.constant_args() if constant else contextlib.nullcontext():
        return check(name, *args, **kwargs)


def run_c(name, *args, constant=False, **kwargs):
    with rulecheck.constant_args() if constant else contextlib.nullcontext():
        return run_rule(name, *args, **kwargs)


DTYPES = [None, torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32,
          torch.uint8, torch.bool]


ULPS = {None: dict(atol=1e-6, rtol=3e-7), torch.float32: dict(atol=1e-6, rtol=3e-7),
        torch.float64: dict(atol=1e-14, rtol=1e-15), torch.bfloat16: dict(atol=1e-2, rtol=1e-2),
        torch.float16: dict(atol=1e-2, rtol=1e-2)}


def check_f(name, *args, **kwargs):
    """A tensor-less factory, as capture records it: every number is a constant."""
    return check_c(name, *args, constant=True, **kwargs)


@pytest.mark.parametrize("args", [(5,), (0,), (7.5,), (2, 9), (1.5, 4), (-3, 10, 3), (10, -3, -2),
                                  (0, 1, 0.1), (0.5, 5, 1.5), (-2.5, 3, 1.0), (1, 2.5, 0.1)])
@pytest.mark.parametrize("dtype", [None, torch.float32, torch.float64, torch.int64, torch.int32, torch.bfloat16])
def test_arange(args, dtype):
    name = {1: "aten.arange.default", 2: "aten.arange.start", 3: "aten.arange.start_step"}[len(args)]
    if dtype is not None and not dtype.is_floating_point and len(args) == 3 and int(args[2]) == 0:
        pytest.skip("torch: step truncates to 0")
    # torch's vectorized CPU kernel rounds base + i * step per SIMD chunk: allow an ulp or two
    check_f(name, *args, dtype=dtype, **ULPS.get(dtype, dict(atol=0, rtol=0)))


def test_arange_ignores_factory_kwargs():
    check_f("aten.arange.start_step", 0, 10, 2, dtype=torch.float32, layout=torch.strided,
            device=torch.device("cpu"), pin_memory=False)
    check_f("aten.arange.default", 6, dtype=None, device=torch.device("cpu"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_full_zeros_ones_eye(dtype):
    integral = dtype is not None and not dtype.is_floating_point
    for v in (2.5, 3, True, -1, 0, 1e10, -7):
        if (integral and dtype != torch.bool or dtype == torch.float16) and isinstance(v, float):
            v = 9
        if dtype == torch.uint8 and v in (-1, -7):
            continue
        check_f("aten.full.default", [2, 3], v, dtype=dtype)
    check_f("aten.zeros.default", [2, 0, 3], dtype=dtype)
    check_f("aten.ones.default", [4], dtype=dtype, layout=torch.strided, pin_memory=False)
    check_f("aten.eye.default", 4, dtype=dtype)
    check_f("aten.eye.m", 3, 5, dtype=dtype)
    check_f("aten.scalar_tensor.default", 3 if integral else 1.5, dtype=dtype)
    e = aten.empty_permuted.default([2, 3], [1, 0], dtype=dtype)
    got = run_c("aten.empty_permuted.default", [2, 3], [1, 0], dtype=dtype, constant=True)
    assert got.shape == e.shape and got.dtype == e.dtype


def test_lifted_fill_values():
    # a Scalar fill value arrives lifted (a weak 0-d array) when the op goes through dispatch
    check("aten.full_like.default", torch.zeros(2, 3), 2.5)
    got = run_rule("aten.full.default", [2, 2], 2.5)
    assert got.dtype == torch.float32 and (got == 2.5).all()
    for v, dtype in [(7, None), (7, torch.float16), (2.7, torch.int32), (1e-3, torch.bool), (4.25, torch.float64),
                     (-2.5, None), (3.5, torch.bfloat16)]:
        check("aten.full.default", [3], v, dtype=dtype)
        check("aten.scalar_tensor.default", v, dtype=dtype)
    check_f("aten.scalar_tensor.default", 3)
    check_f("aten.scalar_tensor.default", True)


@pytest.mark.parametrize("dtype", [None, torch.float32, torch.float64, torch.int64, torch.int32, torch.bfloat16,
                                   torch.float16])
def test_linspace_logspace(dtype):
    halfp = dtype in (torch.bfloat16, torch.float16)
    exact = ULPS.get(dtype, dict(atol=0, rtol=0))
    for start, end, steps in [(0, 10, 7), (-3.3, 10.1, 6), (1, 1, 4), (2.0, -5.0, 1), (0, 1, 0), (0.0, 1.0, 11),
                              (-1.5, 7.25, 100)]:
        check_f("aten.linspace.default", start, end, steps, dtype=dtype, **exact)
        tol = dict(atol=1e-1, rtol=1e-2) if halfp else dict(atol=1e-3, rtol=1e-6)
        if dtype in (torch.int64, torch.int32):
            tol = dict(atol=1, rtol=0)       # pow then truncation: one ulp can move the last digit
        check_f("aten.logspace.default", start / 4, end / 4, steps, dtype=dtype, **tol)
        check_f("aten.logspace.default", start / 4, end / 4, steps, 2.0, dtype=dtype, **tol)
    if dtype is None or dtype.is_floating_point:
        close = dict(atol=1e-2, rtol=1e-2) if halfp else dict(atol=1e-6, rtol=1e-6)
        check("aten.linspace.default", -2.5, 3.75, 9, dtype=dtype, **close)         # lifted start/end
        check("aten.linspace.Tensor_Tensor", torch.tensor(-1.0), torch.tensor(4.0), 5, dtype=dtype, **exact)
        check("aten.linspace.Tensor_Scalar", torch.tensor(-1.0), 4.5, 5, dtype=dtype, **exact)
        check("aten.linspace.Scalar_Tensor", -1.0, torch.tensor(4.5), 5, dtype=dtype, **exact)
        tol = dict(atol=1e-1, rtol=1e-2) if halfp else dict(atol=1e-4, rtol=1e-5)
        check("aten.logspace.Scalar_Tensor", -1.0, torch.tensor(2.0), 5, dtype=dtype, **tol)
        check("aten.logspace.Tensor_Tensor", torch.tensor(-1.0), torch.tensor(2.0), 5, 3.0, dtype=dtype, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
def test_like_and_new(dtype):
    x = torch.ones(2, 3, dtype=dtype)
    for out_dtype in (None, torch.float64, torch.int64):
        check("aten.zeros_like.default", x, dtype=out_dtype)
        check("aten.ones_like.default", x, dtype=out_dtype, memory_format=torch.preserve_format)
        check("aten.full_like.default", x, 1, dtype=out_dtype)
        check("aten.full_like.default", x, 0, dtype=out_dtype)
        check("aten.new_zeros.default", x, [4, 1], dtype=out_dtype)
        check("aten.new_ones.default", x, [5], dtype=out_dtype)
        check("aten.new_full.default", x, [2, 2], True, dtype=out_dtype)
        for name, args in [("aten.empty_like.default", ()), ("aten.new_empty.default", ([3, 2],)),
                           ("aten.new_empty_strided.default", ([3, 2], [2, 1]))]:
            e = getattr(aten, name.split(".")[1]).default(x, *args, dtype=out_dtype)
            got = run_c(name, x, *args, dtype=out_dtype)
            assert got.shape == e.shape and got.dtype == e.dtype
    if dtype != torch.bool:
        check("aten.full_like.default", x, 3)          # lifted fill values
        check("aten.new_full.default", x, [2, 3], 7)
    if dtype.is_floating_point:
        check("aten.full_like.default", x, -2.5)
        check("aten.full_like.default", x, float("inf"))
        check("aten.new_full.default", x, [1, 2], float("nan"))


@pytest.mark.parametrize("row,col,offset", [(4, 4, 0), (3, 5, 1), (5, 3, -2), (4, 6, -10), (4, 6, 10), (0, 3, 0)])
def test_tril_triu_indices(row, col, offset):
    check_f("aten.tril_indices.default", row, col, offset)
    check_f("aten.triu_indices.default", row, col, offset)
    check_f("aten.tril_indices.default", row, col, offset, dtype=torch.int32)
