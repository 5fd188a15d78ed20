import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702
from rulecheck import check, run_rule  # noqa: E402,F401

import pytest  # noqa: E402
import torch  # noqa: E402

from test_rules_nn_helpers import ncheck, nrun, op  # noqa: E402

A = 1e-4


@pytest.mark.parametrize("shape", [(4, 3, 5, 2), (6, 3)])
def test_native_batch_norm_training_and_backward(shape):
    x = torch.randn(shape) * 2 + 1
    w, b = torch.randn(3), torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    ncheck("aten._native_batch_norm_legit.no_stats", x, None, None, True, 0.1, 1e-5, atol=A)
    ncheck("aten._native_batch_norm_legit.no_stats", x, w, None, True, 0.1, 1e-5, atol=A)
    ncheck("aten._native_batch_norm_legit_functional.default", x, w, b, rm, rv, True, 0.1, 1e-5, atol=A)
    out, mean, invstd = op("aten.native_batch_norm.default")(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    g = torch.randn(shape)
    ncheck("aten.native_batch_norm_backward.default", g, x, w, rm, rv, mean, invstd, True, 1e-5,
           [True, True, True], atol=A)
    ncheck("aten.native_batch_norm_backward.default", g, x, None, None, None, mean, invstd, True, 1e-5,
           [True, False, True], atol=A)


def test_native_batch_norm_updates_stats_like_eager():
    """_legit_functional returns what the in-place kernel writes into running_mean/var."""
    x, rm, rv = torch.randn(5, 3, 4), torch.randn(3), torch.rand(3) + 0.5
    rm2, rv2 = rm.clone(), rv.clone()
    e = op("aten.native_batch_norm.default")(x, None, None, rm2, rv2, True, 0.3, 1e-5)
    got = nrun("aten._native_batch_norm_legit_functional.default", x, None, None, rm, rv, True, 0.3, 1e-5)
    for g, want in zip(got, list(e) + [rm2, rv2]):
        torch.testing.assert_close(g, want, atol=A, rtol=1e-5)


def test_native_batch_norm_has_no_rule():
    """A functional rule would drop the in-place running-stat update (capture decomposes it)."""
    from xlanb.lower.registry import has_rule
    assert not has_rule("aten.native_batch_norm.default")


def test_native_batch_norm_eval_and_backward():
    x, w, b = torch.randn(4, 3, 5), torch.randn(3), torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    expect = op("aten.native_batch_norm.default")(x, w, b, rm, rv, False, 0.1, 1e-5)[0]
    out, mean, invstd = nrun("aten._native_batch_norm_legit_no_training.default", x, w, b, rm, rv, 0.1, 1e-5)
    # CPU returns empty save_mean/invstd in eval; the meta kernel (what the driver follows) (C,)
    torch.testing.assert_close(out, expect, atol=A, rtol=1e-5)
    torch.testing.assert_close(mean, rm)
    torch.testing.assert_close(invstd, 1 / torch.sqrt(rv + 1e-5))
    out = nrun("aten._native_batch_norm_legit_functional.default", x, w, b, rm, rv, False, 0.1, 1e-5)
    torch.testing.assert_close(out[0], expect, atol=A, rtol=1e-5)
    torch.testing.assert_close(out[3], rm)
    g = torch.randn(4, 3, 5)
    ncheck("aten.native_batch_norm_backward.default", g, x, w, rm, rv, None, None, False, 1e-5,
           [True, True, True], atol=A)


def test_native_batch_norm_float64_and_half():
    x = torch.randn(4, 2, 3, dtype=torch.float64)
    w = torch.randn(2, dtype=torch.float64)
    ncheck("aten._native_batch_norm_legit.no_stats", x, w, None, True, 0.1, 1e-5, atol=1e-10)
    xh = torch.randn(4, 2, 3).half()
    out, mean, invstd = nrun("aten._native_batch_norm_legit.no_stats", xh, None, None, True, 0.1, 1e-5)
    e = op("aten.native_batch_norm.default")(xh, None, None, None, None, True, 0.1, 1e-5)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out, e[0], atol=2e-3, rtol=1e-3)
    torch.testing.assert_close(invstd.float(), e[2].float(), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("shape,norm", [((2, 3, 8), [8]), ((4, 3, 5), [3, 5])])
def test_native_layer_norm_and_backward(shape, norm):
    x = torch.randn(shape) * 3 + 1
    w, b = torch.randn(norm), torch.randn(norm)
    ncheck("aten.native_layer_norm.default", x, norm, w, b, 1e-5, atol=A)
    ncheck("aten.native_layer_norm.default", x, norm, None, None, 1e-5, atol=A)
    _, mean, rstd = op("aten.native_layer_norm.default")(x, norm, w, b, 1e-5)
    g = torch.randn(shape)
    ncheck("aten.native_layer_norm_backward.default", g, x, norm, mean, rstd, w, b, [True, True, True], atol=A)
    ncheck("aten.native_layer_norm_backward.default", g, x, norm, mean, rstd, w, None, [True, False, False],
           atol=A)


def test_native_layer_norm_float64():
    x = torch.randn(3, 6, dtype=torch.float64)
    ncheck("aten.native_layer_norm.default", x, [6], torch.randn(6, dtype=torch.float64), None, 1e-5, atol=1e-10)


def test_native_group_norm_and_backward():
    x = torch.randn(2, 6, 3, 4) * 2 + 0.5
    w, b = torch.randn(6), torch.randn(6)
    ncheck("aten.native_group_norm.default", x, w, b, 2, 6, 12, 3, 1e-5, atol=A)
    _, mean, rstd = op("aten.native_group_norm.default")(x, w, b, 2, 6, 12, 3, 1e-5)
    g = torch.randn(x.shape)
    ncheck("aten.native_group_norm_backward.default", g, x, mean, rstd, w, 2, 6, 12, 3, [True, True, True],
           atol=A)
    ncheck("aten.native_group_norm_backward.default", g, x, mean, rstd, w, 2, 6, 12, 3, [True, False, False],
           atol=A)
