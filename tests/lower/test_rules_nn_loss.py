import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702
from rulecheck import check, run_rule  # noqa: E402,F401

import pytest  # noqa: E402
import torch  # noqa: E402

from test_rules_nn_helpers import ncheck, op  # noqa: E402

A = 1e-5


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_loss_forward_backward(reduction):
    x = torch.randn(6, 5).log_softmax(1)
    t = torch.tensor([0, 4, -100, 2, 2, 1])
    w = torch.rand(5)
    for weight in (None, w):
        ncheck("aten.nll_loss_forward.default", x, t, weight, reduction, -100, atol=A)
        out, total = op("aten.nll_loss_forward.default")(x, t, weight, reduction, -100)
        g = torch.randn(out.shape)
        ncheck("aten.nll_loss_backward.default", g, x, t, weight, reduction, -100, total, atol=A)


def test_nll_loss_ignore_index_and_unbatched():
    x = torch.randn(4, 3, dtype=torch.float64).log_softmax(1)
    t = torch.tensor([1, 1, 0, 2])
    ncheck("aten.nll_loss_forward.default", x, t, None, 1, 1, atol=1e-12)
    ncheck("aten.nll_loss_forward.default", x, torch.full((4,), 1), None, 1, 1)   # all ignored: nan
    ncheck("aten.nll_loss_forward.default", x[0], torch.tensor(2), None, 1, -100)
    total = op("aten.nll_loss_forward.default")(x, t, None, 1, 1)[1]
    ncheck("aten.nll_loss_backward.default", torch.tensor(1.5, dtype=torch.float64), x, t, None, 1, 1, total)
    ninf = torch.full((2, 3), -float("inf"))
    ninf[:, 2] = 0
    ncheck("aten.nll_loss_forward.default", ninf, torch.tensor([2, -100]), None, 1, -100)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_loss2d_forward_backward(reduction):
    x = torch.randn(2, 4, 3, 5).log_softmax(1)
    t = torch.randint(0, 4, (2, 3, 5))
    t[0, 1, 1] = -100
    w = torch.rand(4)
    ncheck("aten.nll_loss2d_forward.default", x, t, w, reduction, -100, atol=A)
    out, total = op("aten.nll_loss2d_forward.default")(x, t, w, reduction, -100)
    ncheck("aten.nll_loss2d_backward.default", torch.randn(out.shape), x, t, w, reduction, -100, total, atol=A)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_regression_losses(reduction):
    x, t = torch.randn(3, 4) * 2, torch.randn(3, 4)
    g = torch.randn(3, 4) if reduction == 0 else torch.tensor(0.7)
    ncheck("aten.mse_loss.default", x, t, reduction, atol=A)
    ncheck("aten.mse_loss_backward.default", g, x, t, reduction, atol=A)
    for beta in ((1.0, 0.5, 0.0) if reduction == 1 else (0.5,)):
        ncheck("aten.smooth_l1_loss.default", x, t, reduction, beta, atol=A)
        ncheck("aten.smooth_l1_loss_backward.default", g, x, t, reduction, beta, atol=A)
    for delta in ((1.0, 0.3) if reduction == 1 else (0.3,)):
        ncheck("aten.huber_loss.default", x, t, reduction, delta, atol=A)
        ncheck("aten.huber_loss_backward.default", g, x, t, reduction, delta, atol=A)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_classification_losses(reduction):
    p, y = torch.rand(3, 4) * 0.98 + 0.01, torch.rand(3, 4)
    w = torch.rand(3, 4)
    g = torch.randn(3, 4) if reduction == 0 else torch.tensor(0.7)
    for weight in ((None, w) if reduction == 1 else (w,)):
        ncheck("aten.binary_cross_entropy.default", p, y, weight, reduction, atol=A)
        ncheck("aten.binary_cross_entropy_backward.default", g, p, y, weight, reduction, atol=A)
    logits = torch.randn(3, 4) * 3
    ncheck("aten.binary_cross_entropy_with_logits.default", logits, y, None, None, reduction, atol=A)
    ncheck("aten.binary_cross_entropy_with_logits.default", logits, y, w, torch.rand(4) * 2, reduction, atol=A)
    sign = torch.randint(0, 2, (3, 4)).float() * 2 - 1
    ncheck("aten.soft_margin_loss.default", logits, sign, reduction, atol=A)
    ncheck("aten.soft_margin_loss_backward.default", g, logits, sign, reduction, atol=A)


def test_bce_edges_float64():
    p = torch.tensor([0.0, 1.0, 0.5, 1e-50], dtype=torch.float64)
    y = torch.tensor([0.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    ncheck("aten.binary_cross_entropy.default", p, y, None, 0)
    ncheck("aten.binary_cross_entropy.default", torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.0]), None, 0)
