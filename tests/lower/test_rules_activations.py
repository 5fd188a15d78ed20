import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702

import pytest
import torch

from helpers import inside_float64_emulation
from rulecheck import check

nan, inf = float("nan"), float("inf")
_g = torch.Generator().manual_seed(0)

SPECIAL = [-25.0, -3.0, -2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.5, 3.0, 25.0, nan, inf, -inf, 30.0]
X = torch.cat([torch.tensor(SPECIAL), torch.randn(8, generator=_g) * 3]).reshape(4, 6)
G = torch.randn(4, 6, generator=_g)
X64, G64 = X.double(), G.double()
XB, GB = X.bfloat16(), G.bfloat16()
XI = torch.tensor([[-3, -1, 0, 1, 2, 5], [4, -4, 3, -3, 0, 7]])
TOL = dict(atol=1e-5, rtol=1e-5)
BTOL = dict(atol=1e-2, rtol=1e-2)


def both(name, *args, **kwargs):
    """float32 and bfloat16 versions of the same call (tensors converted)."""
    check(name, *args, **TOL, **kwargs)
    bargs = [a.bfloat16() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    check(name, *bargs, **BTOL, **kwargs)


UNARY = ["relu", "silu", "mish", "hardsigmoid", "hardswish", "softplus", "celu", "hardshrink", "softshrink"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op):
    both(f"aten.{op}.default", X)
    check(f"aten.{op}.default", inside_float64_emulation(X64, bound=10), rtol=1e-12, atol=1e-12)


def test_relu_hardtanh_int():
    check("aten.relu.default", XI)
    check("aten.hardtanh.default", XI)
    check("aten.hardtanh.default", XI, -2, 3)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    # torch's vectorised float32 erf gives gelu(inf) = NaN (float64: inf); we give inf
    x = X.clamp(-30, 30)
    both("aten.gelu.default", x, approximate=approximate)
    both("aten.gelu_backward.default", G, x, approximate=approximate)
    check("aten.gelu_backward.default", G64, inside_float64_emulation(X64, bound=10), approximate=approximate,
          rtol=1e-12, atol=1e-12)


def test_scalar_hyperparameters():
    both("aten.elu.default", X)
    both("aten.elu.default", X, 1.5, 1.0507, 2.5)
    both("aten.leaky_relu.default", X)
    both("aten.leaky_relu.default", X, 0.2)
    both("aten.hardtanh.default", X, -2.5, 0.5)
    both("aten.softplus.default", X, 2.5, 10)
    both("aten.celu.default", X, 2.5)
    both("aten.threshold.default", X, 0.5, -7.5)
    check("aten.threshold.default", XI, 2, 100)
    both("aten.softshrink.default", X, 1.5)
    both("aten.hardshrink.default", X, 2.5)


def test_backward_ops():
    both("aten.silu_backward.default", G, X)
    both("aten.mish_backward.default", G, X)
    both("aten.hardsigmoid_backward.default", G, X)
    both("aten.hardswish_backward.default", G, X, nan_in_nan_out=True)   # CPUs disagree at NaN
    both("aten.softplus_backward.default", G, X, 1, 20)
    both("aten.softplus_backward.default", G, X, 2.5, 4.5)
    for is_result in (False, True):
        both("aten.elu_backward.default", G, 1.5, 1.0507, 2.5, is_result, X, nan_in_nan_out=True)
        both("aten.leaky_relu_backward.default", G, X, 0.2, is_result)
    # NaN inputs: torch's vectorised kernels give 0, its scalar tail (small bfloat16) gives grad
    check("aten.hardtanh_backward.default", G, X, -2.5, 0.5)
    both("aten.hardtanh_backward.default", G, torch.where(X.isnan(), 0.25, X), -2.5, 0.5)
    both("aten.threshold_backward.default", G, X, 0.5)
    check("aten.threshold_backward.default", XI, XI, 0)
    y = torch.sigmoid(X)
    both("aten.sigmoid_backward.default", G, y)
    both("aten.tanh_backward.default", G, torch.tanh(X))
    check("aten.softshrink_backward.default", G, X, 0.5)
    both("aten.softshrink_backward.default", G, torch.where(X.isnan(), 0.25, X), 0.5)
    check("aten.hardshrink_backward.default", G, X, 2.5)
    both("aten.hardshrink_backward.default", G, torch.where(X.isnan(), 0.25, X), 2.5)
    p = torch.tensor([-0.5, 0.0, 0.05, 0.3, 0.5, 0.7, 0.95, 1.0, 1.5, nan, 0.2, 0.8])
    g = torch.randn(12, generator=_g)
    check("aten.logit_backward.default", g, p, **TOL)
    check("aten.logit_backward.default", g, p, 0.1, **TOL)
    check("aten.logit_backward.default", g, p, None, **TOL)


def test_bfloat16_comparisons():
    # some kernels compare a Scalar with bfloat16 inputs in float32, others in bfloat16
    x = torch.tensor([0.1, -0.1, 0.2, 0.0999] * 10, dtype=torch.bfloat16)
    g = torch.ones_like(x)
    check("aten.threshold.default", x, 0.1, 5.0)
    check("aten.threshold_backward.default", g, x, 0.1)
    check("aten.hardshrink.default", x, 0.1)
    check("aten.hardshrink_backward.default", g, x, 0.1)
    check("aten.softshrink.default", x, 0.1)
    check("aten.softshrink_backward.default", g, x, 0.1)
    check("aten.hardtanh_backward.default", g, x, 0.1, 0.2)


def test_log_sigmoid():
    out, buf = torch.ops.aten.log_sigmoid_forward(X)
    both("aten.log_sigmoid_forward.default", X)
    both("aten.log_sigmoid_backward.default", G, X, buf)


def test_glu_prelu():
    x = torch.randn(3, 4, 6, generator=_g)
    both("aten.glu.default", x)
    both("aten.glu.default", x, 1)
    both("aten.glu_backward.default", torch.randn(3, 4, 3, generator=_g), x, -1)
    both("aten.glu_backward.default", torch.randn(3, 2, 6, generator=_g), x, 1)
    w = torch.tensor([0.25, -0.5, 2.0, 0.1]).reshape(1, 4, 1)
    both("aten._prelu_kernel.default", x, w)
    out = torch.ops.aten._prelu_kernel_backward(torch.ones_like(x), x, w)
    both("aten._prelu_kernel_backward.default", torch.randn(3, 4, 6, generator=_g), x, w)
    assert out[1].shape == x.shape


SM = torch.cat([torch.randn(3, 5, generator=_g) * 4, torch.tensor([[-inf, 0.0, 1.0, -inf, 2.0]]),
                torch.full((1, 5), -inf), torch.tensor([[1.0, inf, 0.0, 2.0, 3.0]])])


@pytest.mark.parametrize("op", ["_softmax", "_log_softmax"])
def test_softmax(op):
    name = f"aten.{op}.default"
    for dim in (0, 1, -1):
        check(name, SM, dim, False, **TOL)
    x = torch.randn(2, 3, 4, generator=_g)
    check(name, x, 2, False, **TOL)
    check(name, x, -2, False, **TOL)
    check(name, x.double(), 1, False, rtol=1e-12, atol=1e-12)
    check(name, x.bfloat16(), 1, False, **BTOL)
    check(name, torch.tensor(2.5), 0, False)
    check(name, torch.empty(0, 3), 1, False)
    check(name, torch.empty(2, 0), 1, False)


def test_safe_softmax():
    for dim in (0, 1):
        check("aten._safe_softmax.default", SM, dim, **TOL)
    check("aten._safe_softmax.default", SM.bfloat16(), 1, **BTOL)
    check("aten._safe_softmax.default", SM.bfloat16(), 1, torch.float32, **TOL)
    check("aten._safe_softmax.default", SM, -1, torch.float64, **TOL)


@pytest.mark.parametrize("op", ["_softmax_backward_data", "_log_softmax_backward_data"])
def test_softmax_backward(op):
    x = torch.randn(3, 4, 5, generator=_g)
    g = torch.randn(3, 4, 5, generator=_g)
    fwd = torch.softmax if op == "_softmax_backward_data" else torch.log_softmax
    for dim in (1, 2, -1):
        y = fwd(x, dim)
        check(f"aten.{op}.default", g, y, dim, torch.float32, **TOL)
    yb = fwd(x.bfloat16(), 0)
    check(f"aten.{op}.default", g.bfloat16(), yb, 0, torch.bfloat16, **BTOL)
    yf = fwd(x.bfloat16(), 0, dtype=torch.float32)
    check(f"aten.{op}.default", g, yf, 0, torch.bfloat16, **TOL)
    check(f"aten.{op}.default", g.double(), fwd(x.double(), 1), 1, torch.float64, rtol=1e-12, atol=1e-12)
