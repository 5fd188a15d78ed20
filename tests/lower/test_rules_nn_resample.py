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


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_uint8_bilinear_and_bicubic_match_cpu_bit_for_bit(mode):
    """CPU resamples uint8 images in integers (int16 fixed-point weights, rounded and clamped to uint8
    after each separable pass): xla gives the same bytes for downscales, upscales, both at once,
    given scales, align_corners, channels-last and 1 to 8 channels (CPU's two kernels, <= 4 and > 4)."""
    import random

    import torch.nn.functional as F

    import xlanb  # noqa: F401
    rng = random.Random(mode)
    torch.manual_seed(len(mode))
    for _ in range(40):
        c, h, w = rng.choice([1, 3, 4, 5, 8]), rng.randint(4, 17), rng.randint(4, 17)
        x = torch.randint(0, 256, (rng.randint(1, 2), c, h, w), dtype=torch.uint8)
        if rng.random() < 0.3:
            x = x.contiguous(memory_format=torch.channels_last)
        if rng.random() < 0.5:
            kw = dict(size=(rng.randint(1, 26), rng.randint(2, 26)))
        else:
            kw = dict(scale_factor=(rng.choice([0.3, 0.7, 1.0, 1.3, 2.5]), rng.choice([0.6, 1.0, 1.5, 4.0])))
        align = rng.random() < 0.5
        expected = F.interpolate(x, mode=mode, align_corners=align, **kw)
        if expected.shape[-1] == 1:
            continue                # see test_uint8_resampling_to_width_1 below
        got = F.interpolate(x.to("xla"), mode=mode, align_corners=align, **kw).cpu()
        assert torch.equal(got, expected), (tuple(x.shape), kw, align)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_uint8_resampling_to_width_1_gives_cpus_result_for_up_to_4_channels(mode):
    """CPU's > 4-channel uint8 kernel gives every output row the first row's weights when the output
    is 1 wide (docs/torch_suites.md); xla gives, for any number of channels, what CPU's <= 4-channel
    kernel gives. The height 4 -> 7 (not align_corners) has weights that are not exact in binary."""
    import torch.nn.functional as F

    import xlanb  # noqa: F401
    torch.manual_seed(0)
    kw = dict(size=(7, 1), mode=mode, align_corners=False)
    for c in (3, 5):
        x = torch.randint(0, 256, (1, c, 4, 5), dtype=torch.uint8)
        got = F.interpolate(x.to("xla"), **kw).cpu()
        by_4_channels = torch.cat([F.interpolate(x[:, i:i + 4], **kw) for i in range(0, c, 4)], 1)
        assert torch.equal(got, by_4_channels), (c, got, by_4_channels)
