import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702

import pytest
import torch

from rulecheck import check, run_rule

from reduce_inputs import XB, XBF, XI, XN, X, generator, inf, nan  # noqa: E402

_g = generator()


# Sorting ------------------------------------------------------------------------------------

def test_sort():
    xs = torch.tensor([[1.0, nan, -inf, 0.0, 7.0, inf], [3.0, 2.0, -1.0, nan, 5.0, -7.0]])
    for desc in (False, True):
        for x in (X, XI, XBF, xs):
            check("aten.sort.default", x, 1, desc)
        check("aten.sort.default", X, 0, desc)
        check("aten.sort.stable", X, stable=True, dim=2, descending=desc)
        ties = torch.tensor([1.0, 0.0, 1.0, -0.0, nan, 1.0, 0.0, nan] * 3)
        check("aten.sort.stable", ties, stable=True, descending=desc)
        check("aten.sort.stable", ties > 0.5, stable=True, descending=desc)
        check("aten.sort.stable", torch.tensor([3, 1, 3, 1, 2, 2, 3]), stable=True, descending=desc)
    check("aten.sort.default", torch.tensor(2.0))
    check("aten.sort.default", torch.empty(0, 3), 0)


def test_topk():
    for largest in (True, False):
        check("aten.topk.default", X, 3, -1, largest)
        check("aten.topk.default", X, 2, 1, largest)
        check("aten.topk.default", XI.float().unique()[:20].reshape(4, 5), 1, 0, largest)
        check("aten.topk.default", torch.tensor([1.0, nan, 2.0, nan, -3.0]), 3, 0, largest)
        check("aten.topk.default", XBF, 2, 2, largest)
    check("aten.topk.default", X, 0)
    check("aten.topk.default", X, 5, 2)
    # sorted=False leaves the order to the implementation: compare as sets
    vals, idx = run_rule("aten.topk.default", X, 3, -1, True, False)
    ref = torch.topk(X, 3, sorted=False)
    torch.testing.assert_close(vals.sort(-1).values, ref.values.sort(-1).values)
    assert idx.dtype == torch.int64


def test_kthvalue_median():
    for k in (1, 3, 5):
        check("aten.kthvalue.default", X, k)
    check("aten.kthvalue.default", X, 2, 1, True)
    check("aten.kthvalue.default", torch.tensor([3.0, nan, 1.0, 2.0]), 4)
    rows = torch.tensor([[1.0, nan, 3.0, nan, 0.0], [nan] * 5, [4.0, 2.0, 9.0, -1.0, 5.0], [2.0, 1.0, 3.0, 0.5, 7.0]])
    for op in ("median", "nanmedian"):
        check(f"aten.{op}.dim", rows, 1)
        check(f"aten.{op}.dim", X, 0, True)
        check(f"aten.{op}.dim", torch.tensor(2.5), 0)
        check(f"aten.{op}.default", X)
        check(f"aten.{op}.default", rows)
        check(f"aten.{op}.default", torch.tensor([4, 1, 3, 2]))
        check(f"aten.{op}.default", torch.empty(0))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin(op):
    name = f"aten.{op}.default"
    ties = torch.tensor([[1.0, 1.0, nan, 2.0, nan, 0.0, 5.0], [3.0, -1.0, -1.0, 3.0, 4.0, 4.0, -2.0]])
    check(name, ties, 1)
    check(name, XN, 1)
    check(name, XI, 0)
    check(name, torch.randint(0, 3, (3, 9), generator=_g), 1)
    check(name, XB, -1)
    check(name, torch.tensor(2.0), 0)
