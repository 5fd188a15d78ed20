import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702

import pytest
import torch

from rulecheck import check

from reduce_inputs import BTOL, TOL, XB, XBF, XI, XN, X, generator, inf, nan  # noqa: E402

_g = generator()

DIMS = [None, [0], [2], [-1, 0], []]


@pytest.mark.parametrize("op", ["sum.dim_IntList", "mean.dim", "nansum.default"])
def test_sum_mean(op):
    name = "aten." + op
    inputs = [(X, TOL), (XN, TOL), (XBF, BTOL), (X.double(), TOL)]
    if op != "mean.dim":
        inputs += [(XI, {}), (XB, {}), (XI.int(), {})]
    for i, (x, tol) in enumerate(inputs):
        dims = DIMS[i % len(DIMS)], DIMS[(i + 2) % len(DIMS)]
        for j, dim in enumerate(dims):
            check(name, x, dim, bool(j), **tol)
    check(name, X, [1], False, dtype=torch.float64, **TOL)
    if op != "mean.dim":
        check(name, XI, [1], True, dtype=torch.float32)
    check(name, torch.tensor(2.5), [0], True)
    check(name, torch.empty(3, 0), [1], False)


def test_full_reductions():
    for x, tol in [(X, TOL), (XI, {}), (XB, {}), (XBF, BTOL), (XN, TOL)]:
        for op in ("sum.default", "prod.default", "max.default", "min.default", "any.default", "all.default"):
            if op == "prod.default":
                x = x[:1, :2]            # keep products in range
            check("aten." + op, x, **tol)
    check("aten.mean.default", X, **TOL)
    check("aten.mean.default", XBF, **BTOL)
    check("aten.mean.default", XI, dtype=torch.float64)
    check("aten.sum.default", XI, dtype=torch.float32)
    check("aten.sum.default", torch.empty(0))
    check("aten.prod.default", torch.empty(0, 2))
    check("aten.mean.default", torch.empty(0))
    check("aten.sum.default", torch.tensor(3))


def test_prod_dim():
    small = torch.randint(-3, 4, (3, 4, 5), generator=_g)
    check("aten.prod.dim_int", X, 1, **TOL)
    check("aten.prod.dim_int", small, 2, True)
    check("aten.prod.dim_int", small > 0, -1)
    check("aten.prod.dim_int", XBF, 0, **BTOL)
    check("aten.prod.dim_int", small, 1, dtype=torch.float64)


@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_amin(op):
    name = f"aten.{op}.default"
    for x in (X, XN, XI, XB, XBF):
        check(name, x, [1])
    check(name, XN, [0, 2], True)
    check(name, XN)
    check(name, XN, [])
    check(name, torch.tensor(-1.5), [0])


@pytest.mark.parametrize("op", ["max.dim", "min.dim"])
def test_max_min_dim(op):
    name = "aten." + op
    for x in (X, XN, XI, XBF):
        check(name, x, 1)
    check(name, XN, 2, True)
    check(name, XN, -1)
    check(name, XB, 0)
    ties = torch.tensor([[1.0, 3.0, 3.0, 0.0, 0.0], [nan, 1.0, nan, 9.0, -9.0]])
    check(name, ties, 1)             # first occurrence; first NaN
    check(name, ties.long().clamp(min=-5), 1)
    check(name, torch.tensor(2.5), 0)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin(op):
    name = f"aten.{op}.default"
    ties = torch.tensor([[1.0, 3.0, 3.0, 0.0, 0.0], [nan, 1.0, nan, 9.0, -9.0]])
    for x in (X, XN, XI, XBF, ties):
        check(name, x)
        check(name, x, 1)
    check(name, X, 2, True)
    check(name, X, None, True)
    check(name, X, -1)
    check(name, torch.tensor(2.5))


def test_any_all():
    for op in ("any", "all"):
        for x in (XB, XI, XN, XI.to(torch.uint8)):
            check(f"aten.{op}.dim", x, 1)
            check(f"aten.{op}.dims", x, [0, 2], True)
        check(f"aten.{op}.dims", XB, None)
        check(f"aten.{op}.dims", XI, [])      # [] reduces nothing here
        check(f"aten.{op}.dim", torch.tensor(True), 0)
        check(f"aten.{op}.default", torch.empty(0, dtype=torch.bool))
        check(f"aten.{op}.default", XI.to(torch.uint8))


def test_count_nonzero():
    check("aten.count_nonzero.default", XI)
    check("aten.count_nonzero.default", XN, 1)
    check("aten.count_nonzero.dim_IntList", XB, [0, 2])
    check("aten.count_nonzero.dim_IntList", XI, [])


@pytest.mark.parametrize("op", ["var", "std", "var_mean", "std_mean"])
def test_moments(op):
    name = f"aten.{op}.correction"
    check(name, X, **TOL)
    check(name, X, [1], **TOL)
    check(name, X, [0, 2], correction=0, keepdim=True, **TOL)
    check(name, X, [-1], correction=2.5, **TOL)
    check(name, X, [0], correction=3, **TOL)          # more correction than elements: inf
    check(name, X.double(), [1], correction=1, **TOL)
    check(name, XBF, [1], **BTOL)
    # (no inf here: torch's Welford mean of a row with inf is NaN or inf depending on position)
    check(name, torch.where(XN.isinf(), 0.5, XN), [2], **TOL)
    check(name, torch.tensor(2.0), **TOL)                 # N - correction = 0: NaN


def test_logsumexp():
    xs = torch.tensor([[-inf, -inf, -inf], [1.0, inf, 2.0], [-inf, 0.0, 3.0], [nan, 1.0, 2.0]])
    check("aten.logsumexp.default", X, [1], **TOL)
    check("aten.logsumexp.default", X, [0, 2], True, **TOL)
    check("aten.logsumexp.default", xs, [1], **TOL)
    check("aten.logsumexp.default", XI, [1], **TOL)
    check("aten.logsumexp.default", XBF, [-1], **BTOL)
    check("aten.logsumexp.default", torch.empty(2, 0), [1])


def test_vector_norm():
    name = "aten.linalg_vector_norm.default"
    for ord in (2, 1, 0, -1, 3.5, inf, -inf, 0.5, 2.0):
        check(name, X, ord, **TOL)
    check(name, X, 2, [1], **TOL)
    check(name, X, 2, [1], True, **TOL)                # constant (unlifted) order
    check(name, X, 3, [0, 2], True, **TOL)
    check(name, X, inf, [-1], **TOL)
    check(name, XBF, 2, [1], **BTOL)
    check(name, XBF, 2, dtype=torch.float32, **TOL)
    check(name, X, 2, dtype=torch.float64, **TOL)
    check(name, XN, 2, [2], **TOL)
    check(name, torch.empty(0, 3), 2, [0], **TOL)
    check("aten.norm.Scalar", X, **TOL)
    check("aten.norm.Scalar", X, 3, **TOL)
    check("aten.norm.ScalarOpt_dim", X, None, [1], **TOL)
    check("aten.norm.ScalarOpt_dim", X, 1, [1, 2], True, **TOL)
    check("aten.norm.ScalarOpt_dtype", X, 2.5, dtype=torch.float64, **TOL)
    check("aten.norm.ScalarOpt_dim_dtype", XBF, inf, [0], False, dtype=torch.float32, **TOL)


def test_scans():
    for dim in (0, 2, -1):
        check("aten.cumsum.default", X, dim, **TOL)
        check("aten.cumprod.default", X, dim, **TOL)
    check("aten.cumsum.default", XI, 1)
    check("aten.cumsum.default", XB, 1)
    check("aten.cumsum.default", XBF, 1, **BTOL)
    check("aten.cumsum.default", XI, 1, dtype=torch.float32)
    check("aten.cumsum.default", XN, 1, **TOL)
    check("aten.cumprod.default", torch.randint(-3, 4, (4, 8), generator=_g), 1)
    check("aten.cumprod.default", XB, 1)
    check("aten.cumsum.default", torch.tensor(3), 0)
    check("aten.cumsum.default", torch.empty(0, 3), 0)
    check("aten.logcumsumexp.default", X, 1, **TOL)
    check("aten.logcumsumexp.default", torch.tensor([-inf, -inf, 1.0, inf, 2.0]), 0, **TOL)


def test_aminmax():
    check("aten.aminmax.default", X)
    check("aten.aminmax.default", XN, dim=1)
    check("aten.aminmax.default", XI, dim=2, keepdim=True)
    check("aten.aminmax.default", X, keepdim=True)
    check("aten.aminmax.default", torch.tensor(2.0), dim=0)


def test_registered_names_are_aten_overloads():
    from xlanb.lower.registry import LOWERINGS, lookup
    lookup("aten.sum.default")
    mine = [n for n, r in LOWERINGS.items()
            if r.fn.__module__.rsplit(".", 1)[-1] in ("pointwise", "pointwise_logic", "activations", "reduce", "reduce_sort")]
    assert len(mine) > 200
    for name in mine:
        _, packet, overload = name.split(".")
        op = getattr(getattr(torch.ops.aten, packet), overload)
        assert str(op) == name
        assert not op._schema.is_mutable, name
