import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702
from rulecheck import check, run_rule  # noqa: E402,F401

import pytest  # noqa: E402
import torch  # noqa: E402

from test_rules_nn_helpers import ncheck  # noqa: E402

A = 1e-4
CASES = [
    # (x shape, w shape, stride, padding, dilation, transposed, output_padding, groups)
    ((2, 4, 9), (6, 2, 3), [2], [1], [1], False, [0], 2),
    ((2, 3, 7, 8), (4, 3, 3, 2), [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    ((1, 4, 9, 7), (4, 1, 3, 3), [2, 1], [1, 2], [2, 1], False, [0, 0], 4),
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), [1, 2, 1], [1, 0, 1], [1, 1, 2], False, [0, 0, 0], 1),
    ((2, 4, 5, 6), (4, 3, 3, 3), [2, 2], [1, 0], [1, 1], True, [1, 0], 2),
    ((1, 3, 6), (3, 2, 4), [3], [2], [2], True, [1], 1),
    ((1, 2, 3, 4, 3), (2, 2, 2, 2, 3), [2, 1, 2], [0, 1, 1], [1, 1, 1], True, [1, 0, 0], 1),
]


@pytest.mark.parametrize("case", CASES)
def test_convolution_and_backward(case):
    xs, ws, stride, pad, dil, tr, opad, g = case
    torch.manual_seed(0)
    x, w = torch.randn(xs), torch.randn(ws)
    cout = ws[1] * g if tr else ws[0]
    b = torch.randn(cout)
    ncheck("aten.convolution.default", x, w, b, stride, pad, dil, tr, opad, g, atol=A)
    out = torch.ops.aten.convolution.default(x, w, None, stride, pad, dil, tr, opad, g)
    go = torch.randn(out.shape)
    ncheck("aten.convolution_backward.default", go, x, w, [cout], stride, pad, dil, tr, opad, g,
           [True, True, True], atol=A)
    ncheck("aten.convolution_backward.default", go, x, w, None, stride, pad, dil, tr, opad, g,
           [True, False, False], atol=A)


def test_convolution_float64_and_no_bias():
    x, w = torch.randn(2, 3, 6, 6, dtype=torch.float64), torch.randn(5, 3, 3, 3, dtype=torch.float64)
    ncheck("aten.convolution.default", x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1, atol=1e-10)
    go = torch.randn(2, 5, 3, 3, dtype=torch.float64)
    ncheck("aten.convolution_backward.default", go, x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1,
           [False, True, False], atol=1e-10)


def test_im2col_col2im():
    x = torch.randn(2, 3, 6, 7)
    ncheck("aten.im2col.default", x, [2, 3], [1, 2], [1, 0], [2, 1])
    cols = torch.randn(2, 3 * 6, 21)
    ncheck("aten.col2im.default", cols, [5, 7], [2, 3], [1, 1], [1, 1], [2, 1], atol=1e-5)
    ncheck("aten.im2col.default", torch.randn(3, 5, 5), [3, 3], [1, 1], [1, 1], [1, 1])


def test_convolution_bfloat16():
    x, w = torch.randn(1, 3, 6, 6).bfloat16(), torch.randn(4, 3, 3, 3).bfloat16()
    ncheck("aten.convolution.default", x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, atol=0.1, rtol=0.02)
