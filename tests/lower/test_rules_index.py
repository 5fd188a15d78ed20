import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702

import pytest
import torch

import rulecheck
from rulecheck import check, run_rule  # noqa: F401


ck = check    # rulecheck lifts only Scalar-typed numbers, as capture does


def rnd(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(sum(shape) * 7 + len(shape) + seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dtype.is_floating_point:
        return torch.randint(-50, 50, shape, generator=g).to(dtype)
    if dtype == torch.bfloat16:     # small integers: exact in bf16 whatever the summation order
        return torch.randint(-8, 8, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def idx(high, *shape, dtype=torch.int64, seed=0, unique=False):
    g = torch.Generator().manual_seed(high * 13 + sum(shape) + seed)
    if unique:
        return torch.randperm(high, generator=g)[:shape[0]].to(dtype)
    return torch.randint(0, high, shape, generator=g).to(dtype)


DTYPES = [torch.float32, torch.int64, torch.bool, torch.bfloat16]
F_I = [torch.float32, torch.int64]
F_BF = [torch.float32, torch.bfloat16]


# gather / scatter ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_gather(dtype):
    x = rnd(4, 5, dtype=dtype)
    ck("aten.gather.default", x, 0, idx(4, 3, 5))
    ck("aten.gather.default", x, 1, idx(5, 4, 7))
    ck("aten.gather.default", x, -1, idx(5, 2, 3, dtype=torch.int32))    # index smaller than x
    ck("aten.gather.default", x, 0, torch.empty(0, 5, dtype=torch.int64))
    ck("aten.gather.default", rnd(dtype=dtype), 0, torch.tensor(0))
    ck("aten.gather.default", rnd(6, dtype=dtype), 0, torch.tensor(3))


def _unique_rows(high, rows, cols, seed=0):
    """Index (rows, cols) along dim 0 with no duplicate within a column (deterministic scatter)."""
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(high, generator=g)[:rows] for _ in range(cols)], 1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter(dtype):
    x = rnd(5, 4, dtype=dtype)
    index = _unique_rows(5, 3, 4)
    ck("aten.scatter.src", x, 0, index, rnd(3, 4, dtype=dtype, seed=1))
    ck("aten.scatter.src", x, 0, index[:, :2], rnd(4, 6, dtype=dtype, seed=1))   # src larger than index
    ck("aten.scatter.src", x, -1, _unique_rows(4, 2, 5).t(), rnd(5, 2, dtype=dtype, seed=2))
    ck("aten.scatter.value", x, 0, index, 3)
    ck("aten.scatter.value", x, 1, _unique_rows(4, 2, 5).t().to(torch.int32), 0)
    ck("aten.scatter.src", rnd(dtype=dtype), 0, torch.tensor(0), rnd(dtype=dtype, seed=3))
    ck("aten.scatter.src", x, 0, torch.empty(0, 4, dtype=torch.int64), rnd(3, 4, dtype=dtype))


@pytest.mark.parametrize("dtype", F_I + [torch.bfloat16])
def test_scatter_accumulate(dtype):
    x = rnd(5, 4, dtype=dtype)
    index = idx(5, 6, 4)                       # duplicates
    src = rnd(6, 4, dtype=dtype, seed=1)
    ck("aten.scatter_add.default", x, 0, index, src)
    ck("aten.scatter_add.default", x, 1, idx(4, 5, 3), src)
    ck("aten.scatter.reduce", x, 0, index, src, reduce="add")
    ck("aten.scatter.reduce", x, 0, index, src, reduce="multiply", atol=1e-4, rtol=1e-4)
    ck("aten.scatter.value_reduce", x, 0, index, 2, reduce="multiply")
    ck("aten.scatter.value_reduce", x, 0, index, 3, reduce="add")


def test_scatter_add_bool():
    x = rnd(4, dtype=torch.bool)
    ck("aten.scatter_add.default", x, 0, idx(4, 6), rnd(6, dtype=torch.bool, seed=1))


@pytest.mark.parametrize("dtype,reduce", [(d, r) for d in F_I for r in ["sum", "prod", "mean", "amax", "amin"]]
                         + [(torch.bfloat16, "sum"), (torch.bfloat16, "amin")])
def test_scatter_reduce(dtype, reduce):
    x = rnd(5, 3, dtype=dtype)
    index = idx(5, 7, 3)                      # duplicates, and some rows never hit
    src = rnd(7, 3, dtype=dtype, seed=1)
    tol = dict(atol=1e-4, rtol=1e-4) if reduce in ("prod", "mean") and dtype != torch.int64 else {}
    if dtype == torch.bfloat16 and reduce == "mean":
        tol = dict(atol=1e-2, rtol=1e-2)
    ck("aten.scatter_reduce.two", x, 0, index, src, reduce, **tol)
    ck("aten.scatter_reduce.two", x, 0, index, src, reduce, include_self=False, **tol)
    ck("aten.scatter_reduce.two", x, -1, idx(3, 5, 2), src, reduce, include_self=False, **tol)


def test_scatter_reduce_amax_bool():
    x = rnd(4, dtype=torch.bool)
    ck("aten.scatter_reduce.two", x, 0, idx(4, 6), rnd(6, dtype=torch.bool, seed=1), "amax")
    ck("aten.scatter_reduce.two", x, 0, idx(4, 6), rnd(6, dtype=torch.bool, seed=1), "amin",
       include_self=False)


# Advanced indexing ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_index(dtype):
    x = rnd(4, 5, 6, dtype=dtype)
    i = torch.tensor([0, 3, -1, 2])
    ck("aten.index.Tensor", x, [i])
    ck("aten.index.Tensor", x, [None, torch.tensor([[1, -2], [4, 0]], dtype=torch.int32)])
    ck("aten.index.Tensor", x, [i, torch.tensor([1, 2, 3, 4])])                 # adjacent: in place
    ck("aten.index.Tensor", x, [None, torch.tensor([1, 2]), torch.tensor([[0], [5]])])
    ck("aten.index.Tensor", x, [torch.tensor([1, 2]), None, torch.tensor([[0], [5]])])   # separated: front
    ck("aten.index.Tensor", x, [i, torch.tensor(1), i])
    ck("aten.index.Tensor", x, [torch.tensor(2)])
    ck("aten.index.Tensor", x, [None, None, torch.tensor([], dtype=torch.int64)])
    ck("aten._unsafe_index.Tensor", x, [None, torch.tensor([4, 0])])


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_put(dtype):
    x = rnd(4, 5, 6, dtype=dtype)
    rows = torch.tensor([3, 0, -2])
    ck("aten.index_put.default", x, [rows], rnd(3, 5, 6, dtype=dtype, seed=1))
    ck("aten.index_put.default", x, [rows], rnd(6, dtype=dtype, seed=1))                 # broadcast values
    ck("aten.index_put.default", x, [None, torch.tensor([1, 4]), torch.tensor([[0], [5]])],
       rnd(4, 2, 2, dtype=dtype, seed=2))
    ck("aten.index_put.default", x, [torch.tensor([1, 2]), None, torch.tensor([[0], [5]])],
       rnd(2, 2, 5, dtype=dtype, seed=3))
    ck("aten.index_put.default", x, [rows, torch.tensor([1, 2, 0])], rnd(dtype=dtype, seed=4))
    ck("aten._index_put_impl.default", x, [None, torch.tensor([2, 3], dtype=torch.int32)],
       rnd(4, 2, 6, dtype=dtype, seed=5))
    ck("aten._unsafe_index_put.default", x, [rows], rnd(3, 5, 6, dtype=dtype, seed=1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_put_accumulate(dtype):
    x = rnd(4, 5, dtype=dtype)
    rows = torch.tensor([1, 3, 1, -3, 0])       # duplicates accumulate
    ck("aten.index_put.default", x, [rows], rnd(5, 5, dtype=dtype, seed=1), True)
    ck("aten.index_put.default", x, [rows, torch.tensor([0, 1, 0, 2, 4])], rnd(5, dtype=dtype, seed=2), True)
    ck("aten._index_put_impl.default", x, [None, torch.tensor([2, 2])], rnd(4, 2, dtype=dtype, seed=3), True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select_take(dtype):
    x = rnd(4, 5, dtype=dtype)
    ck("aten.index_select.default", x, 0, torch.tensor([3, 0, 0, 2]))
    ck("aten.index_select.default", x, -1, torch.tensor([4, 1], dtype=torch.int32))
    ck("aten.index_select.default", x, 1, torch.tensor(2))
    ck("aten.index_select.default", x, 1, torch.tensor([], dtype=torch.int64))
    ck("aten.index_select.default", rnd(dtype=dtype), 0, torch.tensor([0]))
    ck("aten.take.default", x, torch.tensor([[0, 19], [-1, 7]]))
    ck("aten.take.default", x, torch.tensor(5))
    ck("aten.take_along_dim.default", x, idx(5, 4, 3), 1)
    ck("aten.take_along_dim.default", x, idx(4, 2, 1), 0)             # broadcast over dim 1
    ck("aten.take_along_dim.default", rnd(1, 5, dtype=dtype), idx(5, 3, 2), -1)
    ck("aten.take_along_dim.default", x, idx(20, 7))


@pytest.mark.parametrize("dtype", F_I + [torch.bfloat16])
def test_index_add_copy_fill(dtype):
    x = rnd(5, 4, dtype=dtype)
    index = torch.tensor([4, 0, 4, 2])
    src = rnd(4, 4, dtype=dtype, seed=1)
    ck("aten.index_add.default", x, 0, index, src)
    ck("aten.index_add.default", x, 0, index, src, alpha=3)
    ck("aten.index_add.default", x, -1, torch.tensor([1, 1, 3], dtype=torch.int32), rnd(5, 3, dtype=dtype),
       alpha=-1)
    ck("aten.index_add.default", rnd(dtype=dtype), 0, torch.tensor([0]), rnd(dtype=dtype, seed=2))
    ck("aten.index_copy.default", x, 0, torch.tensor([4, 1, 2]), rnd(3, 4, dtype=dtype, seed=3))
    ck("aten.index_copy.default", x, 1, torch.tensor([3, 0]), rnd(5, 2, dtype=dtype, seed=4))
    ck("aten.index_copy.default", rnd(dtype=dtype), 0, torch.tensor([0]), rnd(dtype=dtype, seed=2))
    ck("aten.index_fill.int_Scalar", x, 1, torch.tensor([0, 3, 3]), 7)
    ck("aten.index_fill.int_Scalar", x, 0, torch.tensor([-1]), 0)
    ck("aten.index_fill.int_Tensor", x, -1, torch.tensor([2]), rnd(dtype=dtype, seed=5))
    ck("aten.index_fill.int_Scalar", rnd(dtype=dtype), 0, torch.tensor([0]), 3)


def test_index_add_float_alpha():
    ck("aten.index_add.default", rnd(5, 4), 0, torch.tensor([4, 0, 4]), rnd(3, 4, seed=1), alpha=0.25)
    ck("aten.index_copy.default", rnd(5, dtype=torch.bool), 0, torch.tensor([0, 3]), rnd(2, dtype=torch.bool))
    ck("aten.index_fill.int_Scalar", rnd(3, 2, dtype=torch.bool), 0, torch.tensor([1]), True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_masked_scatter(dtype):
    x = rnd(3, 4, dtype=dtype)
    mask = rnd(3, 4, dtype=torch.bool, seed=1)
    ck("aten.masked_scatter.default", x, mask, rnd(12, dtype=dtype, seed=2))
    ck("aten.masked_scatter.default", x, mask, rnd(4, 5, dtype=dtype, seed=2))
    ck("aten.masked_scatter.default", x, torch.tensor([True, False, False, True]), rnd(6, dtype=dtype, seed=3))
    ck("aten.masked_scatter.default", rnd(4, dtype=dtype), torch.tensor([[True, False, True, True], [False] * 4]),
       rnd(3, dtype=dtype, seed=4))
    ck("aten.masked_scatter.default", x, torch.zeros(3, 4, dtype=torch.bool), torch.empty(0, dtype=dtype))


@pytest.mark.parametrize("dtype", F_I)
def test_put(dtype):
    x = rnd(3, 4, dtype=dtype)
    ck("aten.put.default", x, torch.tensor([0, 11, -2, 5]), rnd(4, dtype=dtype, seed=1))
    ck("aten.put.default", x, torch.tensor([[1, 1], [5, 2]]), rnd(2, 2, dtype=dtype, seed=2), True)


# Sorted search --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32])
def test_searchsorted_bucketize(dtype):
    seq = torch.sort(rnd(10, dtype=dtype)).values
    seq[3] = seq[4]                                      # ties decide left/right
    values = torch.cat([rnd(3, 4, dtype=dtype, seed=1).reshape(-1), seq[:3]]).reshape(3, 5)
    ck("aten.searchsorted.Tensor", seq, values)
    ck("aten.searchsorted.Tensor", seq, values, right=True)
    ck("aten.searchsorted.Tensor", seq, values, side="right", out_int32=True)
    ck("aten.searchsorted.Tensor", seq, values, side="left")
    rows = torch.sort(rnd(3, 6, dtype=dtype, seed=2), -1).values
    ck("aten.searchsorted.Tensor", rows, values, right=True)
    perm = torch.argsort(rnd(10, dtype=dtype, seed=3))
    shuffled = torch.empty_like(seq)
    shuffled[perm] = seq
    ck("aten.searchsorted.Tensor", shuffled, values, sorter=perm)
    ck("aten.searchsorted.Scalar", seq, 3)
    ck("aten.searchsorted.Scalar", seq, 0.5, right=True)
    ck("aten.bucketize.Tensor", values, seq)
    ck("aten.bucketize.Tensor", values, seq, right=True, out_int32=True)
    ck("aten.bucketize.Scalar", 7, seq)


def test_searchsorted_scalar_promotes():
    seq = torch.tensor([1, 3, 5, 7])
    ck("aten.searchsorted.Scalar", seq, 3.5)
    ck("aten.bucketize.Scalar", 4.5, seq, right=True)
    ck("aten.searchsorted.Tensor", seq, torch.tensor([2.5, 3.0, 6.5]))
    ck("aten.searchsorted.Tensor", seq, torch.tensor([[3, 0], [9, 7]]), right=True)
    ck("aten.bucketize.Tensor", torch.tensor([[3, 0], [9, 7]]), seq)
