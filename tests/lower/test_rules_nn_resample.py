import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702
from rulecheck import check, run_rule  # noqa: E402,F401

import pytest  # noqa: E402
import torch  # noqa: E402

from test_rules_nn_helpers import ncheck, op  # noqa: E402

A = 1e-5


@pytest.mark.parametrize("size,scales", [([8, 5], (None, None)), ([7, 3], (None, None)), ([9, 12], (2.3, 3.0))])
def test_upsample_nearest2d_and_backward(size, scales):
    x = torch.randn(2, 3, 4, 5)
    for name in ("upsample_nearest2d", "_upsample_nearest_exact2d"):
        ncheck(f"aten.{name}.default", x, size, *scales)
        g = torch.randn(2, 3, *size)
        ncheck(f"aten.{name}_backward.default", g, size, list(x.shape), *scales, atol=A)


def test_upsample_nearest_1d_3d_vec_and_uint8():
    x = torch.randn(2, 3, 5)
    ncheck("aten.upsample_nearest1d.default", x, [12])
    ncheck("aten.upsample_nearest1d_backward.default", torch.randn(2, 3, 12), [12], [2, 3, 5], atol=A)
    x3 = torch.randn(1, 2, 3, 4, 2)
    ncheck("aten.upsample_nearest3d.default", x3, [5, 8, 3])
    ncheck("aten.upsample_nearest2d.vec", torch.randn(1, 2, 3, 4), None, [1.7, 2.5])
    ncheck("aten.upsample_nearest2d.default", torch.randint(0, 255, (1, 1, 3, 3), dtype=torch.uint8), [5, 7])


@pytest.mark.parametrize("align", [False, True])
def test_upsample_bilinear2d_and_backward(align):
    x = torch.randn(2, 3, 4, 5)
    cases = [([8, 10], (None, None)), ([3, 7], (None, None))]
    cases.append(([1, 1], (None, None)) if align else ([9, 11], (2.3, 2.5)))
    for size, scales in cases:
        ncheck("aten.upsample_bilinear2d.default", x, size, align, *scales, atol=A)
        g = torch.randn(2, 3, *size)
        ncheck("aten.upsample_bilinear2d_backward.default", g, size, list(x.shape), align, *scales, atol=A)
    ncheck("aten.upsample_bilinear2d.vec", x, None, align, [1.5, 2.0], atol=A)
    ncheck("aten.upsample_bilinear2d.default", x.double(), [7, 3], align, atol=1e-12)


@pytest.mark.parametrize("align", [False, True])
def test_upsample_linear_trilinear_bicubic(align):
    x = torch.randn(1, 2, 6)
    ncheck("aten.upsample_linear1d.default", x, [11], align, atol=A)
    ncheck("aten.upsample_linear1d_backward.default", torch.randn(1, 2, 11), [11], [1, 2, 6], align, atol=A)
    x3 = torch.randn(1, 2, 3, 4, 5)
    ncheck("aten.upsample_trilinear3d.default", x3, [5, 3, 8], align, atol=A)
    x2 = torch.randn(2, 2, 5, 4)
    ncheck("aten.upsample_bicubic2d.default", x2, [9, 3], align, atol=A)
    ncheck("aten.upsample_bicubic2d_backward.default", torch.randn(2, 2, 9, 3), [9, 3], [2, 2, 5, 4], align,
           atol=A)


@pytest.mark.parametrize("mode,padding,align", [(0, 0, False), (0, 2, True), (1, 1, False), (2, 2, True)])
def test_grid_sampler_2d_and_backward(mode, padding, align):
    torch.manual_seed(mode)
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64)
    grid = torch.rand(2, 4, 7, 2, dtype=torch.float64) * 2.6 - 1.3
    ncheck("aten.grid_sampler_2d.default", x, grid, mode, padding, align, atol=1e-10)
    g = torch.randn(2, 3, 4, 7, dtype=torch.float64)
    ncheck("aten.grid_sampler_2d_backward.default", g, x, grid, mode, padding, align, [True, mode != 1],
           atol=1e-8)
