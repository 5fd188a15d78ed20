"""Inputs shared by the reduction and sorting rule tests: float (no ties), with NaN and inf,
int64, bool and bfloat16, and the tolerances they are compared with."""

import torch

nan, inf = float("nan"), float("inf")
_g = torch.Generator().manual_seed(0)

X = torch.randn(3, 4, 5, generator=_g)            # no ties: indices are well defined
XN = X.clone()
XN[0, 1, 2] = nan
XN[2, 3, 0] = nan
XN[1, 0, :] = inf
XI = torch.randint(-50, 50, (3, 4, 5), generator=_g)
XB = XI > 10
XBF = X.bfloat16()
TOL = dict(atol=1e-5, rtol=1e-5)
BTOL = dict(atol=2e-2, rtol=2e-2)
_STATE = _g.get_state()


def generator() -> torch.Generator:
    """A generator in the state the inputs above left it: each test file draws the same values."""
    g = torch.Generator()
    g.set_state(_STATE.clone())
    return g
