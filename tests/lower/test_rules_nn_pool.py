import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702
from rulecheck import check, run_rule  # noqa: E402,F401

import pytest  # noqa: E402
import torch  # noqa: E402

from test_rules_nn_helpers import ncheck, op  # noqa: E402

A = 1e-4
MAX2D = [
    # kernel, stride, padding, dilation, ceil_mode, input shape
    ([3, 3], [2, 2], [1, 1], [1, 1], False, (2, 3, 9, 8)),
    ([2, 3], [], [0, 1], [1, 1], True, (1, 2, 7, 9)),
    ([3, 2], [2, 1], [1, 0], [2, 1], True, (3, 8, 7)),
    # more taps than TAPS_AS_SLICES: the windows are gathered (a slice per tap compiled for minutes)
    ([9, 9], [3, 2], [4, 1], [1, 2], True, (2, 3, 30, 31)),
    ([1, 700], [], [0, 0], [1, 1], False, (1, 2, 3, 700)),
]


@pytest.mark.parametrize("case", MAX2D)
def test_max_pool2d_with_indices_and_backward(case):
    k, s, p, d, ceil, shape = case
    x = torch.randn(shape)
    ncheck("aten.max_pool2d_with_indices.default", x, k, s, p, d, ceil)
    out, idx = op("aten.max_pool2d_with_indices.default")(x, k, s, p, d, ceil)
    g = torch.randn(out.shape)
    ncheck("aten.max_pool2d_with_indices_backward.default", g, x, k, s, p, d, ceil, idx, atol=A)


def test_max_pool2d_wide_kernel_nan_and_ties():
    x = torch.zeros(2, 1, 12, 12)
    x[0, 0, 3, 4] = float("nan")
    x[1, 0, 5, :] = 1.0                     # ties: the first index, as CPU
    ncheck("aten.max_pool2d_with_indices.default", x, [12, 12], [], [0, 0], [1, 1], False)


def test_max_pool2d_ties_nan_inf_and_float64():
    x = torch.zeros(1, 1, 5, 5, dtype=torch.float64)
    x[0, 0, 1, 1] = float("nan")
    x[0, 0, 1, 2] = float("nan")
    x[0, 0, 4, :] = -float("inf")
    ncheck("aten.max_pool2d_with_indices.default", x, [2, 2], [1, 1], [1, 1], [1, 1], False)
    xi = torch.randint(-5, 5, (2, 2, 6, 6))
    ncheck("aten.max_pool2d_with_indices.default", xi, [3, 3], [2, 2], [1, 1], [1, 1], True)


def test_max_pool3d_with_indices_and_backward():
    x = torch.randn(2, 2, 5, 6, 7)
    args = ([2, 3, 2], [2, 2, 1], [1, 1, 0], [1, 1, 2], True)
    ncheck("aten.max_pool3d_with_indices.default", x, *args)
    out, idx = op("aten.max_pool3d_with_indices.default")(x, *args)
    ncheck("aten.max_pool3d_with_indices_backward.default", torch.randn(out.shape), x, *args, idx, atol=A)


AVG2D = [
    # kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, shape
    ([3, 3], [2, 2], [1, 1], False, True, None, (2, 3, 9, 8)),
    ([3, 2], [2, 2], [1, 1], True, False, None, (1, 2, 8, 7)),
    ([2, 2], [], [0, 0], True, True, None, (3, 7, 5)),
    ([3, 3], [2, 1], [1, 0], True, True, 5, (1, 2, 8, 6)),
]


@pytest.mark.parametrize("case", AVG2D)
def test_avg_pool2d_and_backward(case):
    *args, shape = case
    x = torch.randn(shape)
    ncheck("aten.avg_pool2d.default", x, *args, atol=A)
    out = op("aten.avg_pool2d.default")(x, *args)
    ncheck("aten.avg_pool2d_backward.default", torch.randn(out.shape), x, *args, atol=A)


def test_avg_pool3d_and_backward():
    x = torch.randn(2, 2, 5, 6, 7, dtype=torch.float64)
    for args in (([2, 3, 2], [2, 2, 1], [1, 1, 0], True, False, None),
                 ([3, 3, 3], [2, 2, 2], [1, 1, 1], False, True, 7)):
        ncheck("aten.avg_pool3d.default", x, *args, atol=1e-10)
        out = op("aten.avg_pool3d.default")(x, *args)
        ncheck("aten.avg_pool3d_backward.default", torch.randn(out.shape, dtype=x.dtype), x, *args, atol=1e-10)


@pytest.mark.parametrize("shape,out", [((2, 3, 8, 6), [4, 3]), ((2, 7, 9), [3, 4]), ((1, 2, 5, 7), [7, 1])])
def test_adaptive_avg_pool2d_and_backward(shape, out):
    x = torch.randn(shape)
    ncheck("aten._adaptive_avg_pool2d.default", x, out, atol=A)
    y = op("aten._adaptive_avg_pool2d.default")(x, out)
    ncheck("aten._adaptive_avg_pool2d_backward.default", torch.randn(y.shape), x, atol=A)


def test_adaptive_avg_pool3d_and_backward():
    x = torch.randn(1, 2, 5, 6, 7)
    ncheck("aten._adaptive_avg_pool3d.default", x, [2, 3, 4], atol=A)
    y = op("aten._adaptive_avg_pool3d.default")(x, [2, 3, 4])
    ncheck("aten._adaptive_avg_pool3d_backward.default", torch.randn(y.shape), x, atol=A)


@pytest.mark.parametrize("shape,out", [((2, 3, 8, 6), [4, 3]), ((2, 7, 9), [3, 4]), ((1, 2, 5, 7), [7, 9])])
def test_adaptive_max_pool2d_and_backward(shape, out):
    x = torch.randn(shape)
    ncheck("aten.adaptive_max_pool2d.default", x, out)
    y, idx = op("aten.adaptive_max_pool2d.default")(x, out)
    ncheck("aten.adaptive_max_pool2d_backward.default", torch.randn(y.shape), x, idx, atol=A)


def test_adaptive_max_pool3d_and_backward():
    x = torch.randn(1, 2, 5, 6, 7)
    ncheck("aten.adaptive_max_pool3d.default", x, [2, 3, 4])
    y, idx = op("aten.adaptive_max_pool3d.default")(x, [2, 3, 4])
    ncheck("aten.adaptive_max_pool3d_backward.default", torch.randn(y.shape), x, idx, atol=A)
