"""NaN through wide reductions: each rule that takes a max or a min over many elements, on inputs wide
enough to reach XLA's vectorized CPU reduction (which drops a NaN past a few thousand elements; the
small inputs of the other rule tests never meet it), gives CPU's values: NaN where CPU's kernel
propagates it, a number where CPU's kernel passes over it (cdist's p=inf, embedding_bag's max after the
bag's first row, the margin losses' `z > 0`)."""

import pytest
import torch
import torch.nn.functional as F

import xlanb

XLA = "xla"
NAN, INF = float("nan"), float("inf")
WIDE = 5000         # past the width where XLA's CPU max/min reduction is vectorized (4096 here)


def _wide(dtype, *, at=(1, 7)):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, WIDE, generator=g).to(dtype)
    x[at] = NAN
    return x


def _same(f, *inputs):
    want = f(*inputs)
    got = f(*[t.to(XLA) for t in inputs])
    want = want if isinstance(want, (tuple, list)) else (want,)
    got = got if isinstance(got, (tuple, list)) else (got,)
    for w, g in zip(want, got):
        torch.testing.assert_close(g.cpu(), w, equal_nan=True, atol=1e-3, rtol=1e-3)


CASES = {
    "max": lambda x: x.max(),
    "min": lambda x: x.min(),
    "amax": lambda x: x.amax(1),
    "amin": lambda x: x.amin(1),
    "aminmax": lambda x: torch.aminmax(x, dim=1),
    "max.dim": lambda x: x.max(1),
    "min.dim": lambda x: x.min(1),
    "norm inf": lambda x: torch.linalg.vector_norm(x, INF),
    "norm -inf": lambda x: torch.linalg.vector_norm(x, -INF, dim=1),
    "torch.norm inf": lambda x: torch.norm(x, INF, dim=1),
    "foreach_norm inf": lambda x: torch._foreach_norm([x, x[0]], INF),
    "total norm inf": lambda x: torch.nn.utils.get_total_norm([x.float()], INF),
    "normalize inf": lambda x: F.normalize(x.float(), p=INF, dim=1),
    "renorm inf": lambda x: torch.renorm(x.float(), INF, 0, 1.0),
    "pairwise inf": lambda x: F.pairwise_distance(x.float(), x.float().flip(1), p=INF),
    "cdist inf": lambda x: torch.cdist(x.float(), x.float().flip(1), p=INF),
    "pdist inf": lambda x: F.pdist(x.float(), p=INF),
    "cdist 0": lambda x: torch.cdist(x.float(), x.float().flip(1), p=0),
    "adaptive_max_pool1d": lambda x: F.adaptive_max_pool1d(x.float().view(1, 3, WIDE), 3, return_indices=True),
    "adaptive_max_pool2d": lambda x: F.adaptive_max_pool2d(x.float().view(1, 3, 50, 100), 1, return_indices=True),
    "max_pool1d wide kernel": lambda x: F.max_pool1d(x.float().view(1, 3, WIDE), WIDE, return_indices=True),
    "logsumexp": lambda x: x.float().logsumexp(1),
    "softmax": lambda x: x.float().softmax(1),
    "cummax": lambda x: x.cummax(1),
    "kthvalue": lambda x: x.float().kthvalue(WIDE - 1, 1).values,
    "multi_margin_loss": lambda x: F.multi_margin_loss(x.float(), torch.tensor([0, 1, 2], device=x.device),
                                                       reduction="none"),
    "multi_margin_loss p=2": lambda x: F.multi_margin_loss(x.float(), torch.tensor([7, 3, 2], device=x.device),
                                                           p=2, reduction="none"),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_wide_reduction_with_nan_as_cpu(case, dtype):
    _same(CASES[case], _wide(dtype))


@pytest.mark.parametrize("at", [(1, 0), (1, 7), (1, WIDE - 1)], ids=["first", "inside", "last"])
def test_wide_reduction_nan_anywhere(at):
    _same(lambda x: (x.max(), x.amin(1), torch.linalg.vector_norm(x, INF, dim=1)), _wide(torch.float32, at=at))


def test_margin_loss_gradient_passes_over_nan_as_cpu():
    x = torch.tensor([[NAN, 1.0, 2.0], [1.0, NAN, 2.0], [1.0, 2.0, 0.0]])
    target = torch.tensor([0, 2, 2])
    grads = []
    for device in ("cpu", XLA):
        xd = x.to(device).detach().requires_grad_()
        F.multi_margin_loss(xd, target.to(device)).backward()
        grads.append(xd.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0], equal_nan=True)
    _same(lambda x: F.multilabel_margin_loss(x, torch.tensor([[0, -1, 0], [1, -1, 0], [2, -1, 0]], device=x.device),
                                             reduction="none"), x)


@pytest.mark.parametrize("bag", [[NAN, 1.0, 2.0], [1.0, NAN, 2.0], [3.0, NAN, 2.0], [1.0, 2.0, NAN],
                                 [-INF, NAN, -INF], [NAN, NAN, NAN]],
                         ids=["first", "second", "second-smaller", "last", "minus-inf", "all"])
def test_embedding_bag_max_keeps_a_leading_nan_only(bag):
    """CPU's kernel keeps a row when it is greater than the best so far: the bag's first row is kept
    even when NaN, a later NaN never is."""
    weight = torch.tensor(bag).view(3, 1).repeat(1, 2)
    weight[:, 1] = torch.tensor([0.5, -1.0, 0.25])          # a column without NaN beside it
    def f(w):
        idx = torch.arange(3, device=w.device)
        out, _, _, max_indices = torch.ops.aten._embedding_bag(w, idx, torch.tensor([0], device=w.device), mode=2)
        return out, max_indices
    _same(f, weight)


def test_wide_embedding_bag_max_as_cpu():
    _same(lambda w: F.embedding_bag(torch.arange(WIDE, device=w.device).view(1, WIDE), w.float().view(WIDE, 3),
                                    mode="max"), _wide(torch.float32))


def test_debug_nans_finds_a_nan_in_wide_half_precision_outputs():
    """debug_nans' flag sums 16-bit outputs in float32 (a max may drop the NaN)."""
    for dtype in (torch.bfloat16, torch.float16):
        x = torch.ones(WIDE, dtype=dtype)
        x[WIDE // 3] = -1
        with xlanb.config.override(debug_nans=True):
            y = torch.sqrt(x.to(XLA))
            with pytest.raises(FloatingPointError, match="aten.sqrt.default"):
                xlanb.sync(wait=True)
        assert torch.isnan(y.cpu()).sum() == 1
