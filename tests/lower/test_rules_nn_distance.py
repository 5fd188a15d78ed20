import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702
from rulecheck import check, run_rule  # noqa: E402,F401

import pytest  # noqa: E402
import torch  # noqa: E402

from helpers import FLOAT64_EMULATED  # noqa: E402
from test_rules_nn_helpers import ncheck, op  # noqa: E402

# The inf-norm backward gives the gradient to the element whose |difference| equals the distance
# passed in, bit for bit. These tests pass the CPU's distance, which no difference computed in
# emulated float64 equals (XLA:TPU: 40-50% of the gradient elsewhere on the fourth and fifth runs).
INF_BACKWARD_COMPARABLE = not FLOAT64_EMULATED


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 0.5, 3.0, float("inf")])
def test_cdist_forward_backward(p):
    x1 = torch.randn(2, 5, 3, dtype=torch.float64)
    x2 = torch.randn(2, 4, 3, dtype=torch.float64)
    x2[0, 1] = x1[0, 2]                        # a zero distance
    ncheck("aten._cdist_forward.default", x1, x2, p, None, atol=1e-10)
    d = op("aten._cdist_forward.default")(x1, x2, p, None)
    g = torch.randn(d.shape, dtype=torch.float64)
    if p != float("inf") or INF_BACKWARD_COMPARABLE:
        ncheck("aten._cdist_backward.default", g, x1, x2, p, d, atol=1e-10)


def test_cdist_mm_path_and_pdist():
    x1, x2 = torch.randn(30, 4), torch.randn(7, 4)
    ncheck("aten._cdist_forward.default", x1, x2, 2.0, None, atol=1e-4)
    ncheck("aten._cdist_forward.default", x1, x2, 2.0, 2, atol=1e-5)
    x = torch.randn(6, 3, dtype=torch.float64)
    for p in (1.0, 2.0, 3.0, float("inf")):
        ncheck("aten._pdist_forward.default", x, p, atol=1e-10)
        d = op("aten._pdist_forward.default")(x, p)
        if p != float("inf") or INF_BACKWARD_COMPARABLE:
            ncheck("aten._pdist_backward.default", torch.randn(d.shape, dtype=torch.float64), x, p, d, atol=1e-10)
