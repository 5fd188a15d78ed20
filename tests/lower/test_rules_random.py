import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702
from rulecheck import RELEASES, TORCH, exists, run_rule  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from xlanb.lower.dtypes import numpy_to_torch, torch_to_numpy  # noqa: E402
from xlanb.lower.registry import lookup  # noqa: E402

aten = torch.ops.aten


N = 50_000


def draw(name, *args, seed=1, **kwargs):
    """One sample from the rule (through rulecheck.run_rule)."""
    return run_rule(name, *args, rng_seed=seed, **kwargs)


class Draws:
    """Collects rule calls and runs them in one jax.jit (one compile instead of one each:
    sampling code compiles slowly on CPU). Each call gets its own key."""

    def __init__(self, seed=1):
        self.seed, self.calls = seed, []

    def __call__(self, name, *args, **kwargs):
        self.calls.append((name, args, kwargs))
        return len(self.calls) - 1

    def run(self):
        tensors = []

        def slot(a):
            if isinstance(a, torch.Tensor):
                tensors.append(a)
                return ("tensor", len(tensors) - 1)
            return a

        calls = [(lookup(n), [slot(a) for a in args], kwargs) for n, args, kwargs in self.calls]
        assert all(r is not None and r.rng for r, _, _ in calls)

        def fn(key, *arrays):
            fill = lambda a: arrays[a[1]] if isinstance(a, tuple) and a[:1] == ("tensor",) else a  # noqa: E731
            return [rule.fn(jax.random.fold_in(key, i), *[fill(a) for a in args], **kwargs)
                    for i, (rule, args, kwargs) in enumerate(calls)]

        with jax.enable_x64(True):
            outs = jax.jit(fn)(jax.random.key(self.seed), *[jnp.asarray(torch_to_numpy(t)) for t in tensors])
            return [numpy_to_torch(np.asarray(o)) for o in outs]


def f64(x):
    return x.to(torch.float64)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_dtypes(dtype):
    x = torch.empty(N, dtype=dtype)
    d = Draws()
    ids = [d("aten.normal_functional.default", x, 2.0, 3.0), d("aten.uniform.default", x, -2.0, 6.0),
           d("aten.bernoulli.p", x, 0.3), d("aten.rand.default", [N], dtype=dtype),
           d("aten.exponential.default", x, 2.0), d("aten.randn_like.default", x)]
    normal, uniform, bern, rand, expo, randn = d.run()
    for s in (normal, uniform, bern, rand, expo, randn):
        assert s.dtype == dtype and s.shape == x.shape
    assert abs(f64(normal).mean() - 2.0) < 0.1 and abs(f64(normal).std() - 3.0) < 0.1
    assert (uniform >= -2).all() and (uniform <= 6).all() and abs(f64(uniform).mean() - 2) < 0.1
    assert abs(f64(bern).mean() - 0.3) < 0.01 and set(bern.unique().tolist()) == {0.0, 1.0}
    assert (rand >= 0).all() and (rand <= 1).all() and abs(f64(rand).mean() - 0.5) < 0.01
    assert (expo >= 0).all() and abs(f64(expo).mean() - 0.5) < 0.02
    assert abs(f64(randn).std() - 1) < 0.03
    assert len(ids) == 6


def test_normal_family():
    x = torch.empty(N)
    mean = torch.tensor([-5.0, 0.0, 5.0]).repeat(N // 3)
    std = torch.tensor([0.5, 2.0], dtype=torch.float64).repeat(N // 2)
    d = Draws()
    d("aten.normal_functional.default", x, 2.0, 3.0)
    d("aten.normal.Tensor_float", mean, 0.5)
    d("aten.normal.float_Tensor", 1.0, std)
    d("aten.normal.Tensor_Tensor", torch.full((N // 4, 1), 3.0), torch.ones(4))
    d("aten.normal.float_float", -1.0, 2.0, [N])
    d("aten.randn.default", [N // 10, 10], dtype=torch.float16)
    d("aten.randn_like.default", x, dtype=torch.float64)
    d("aten.log_normal.default", x, 0.5, 0.25)
    d("aten.normal.float_float", 0.0, 1.0, [7])
    d("aten.normal_functional.default", x)
    s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 = d.run()
    assert s1.dtype == torch.float32 and s1.shape == x.shape
    assert abs(f64(s1).mean() - 2.0) < 0.05 and abs(f64(s1).std() - 3.0) < 0.05
    assert s2.shape == mean.shape
    torch.testing.assert_close(f64(s2).view(-1, 3).mean(0), torch.tensor([-5.0, 0, 5], dtype=torch.float64),
                               atol=0.03, rtol=0)
    assert s3.dtype == torch.float64 and s3.shape == std.shape
    torch.testing.assert_close(s3.view(-1, 2).std(0), torch.tensor([0.5, 2.0], dtype=torch.float64), atol=0.05, rtol=0)
    assert s4.shape == (N // 4, 4) and abs(f64(s4).mean() - 3) < 0.03 and abs(f64(s4).std() - 1) < 0.03
    assert s5.dtype == torch.float32 and abs(f64(s5).mean() + 1) < 0.05 and abs(f64(s5).std() - 2) < 0.05
    assert s6.shape == (N // 10, 10) and s6.dtype == torch.float16 and abs(f64(s6).std() - 1) < 0.02
    assert s7.dtype == torch.float64 and abs(s7.mean()) < 0.02 and abs(s7.std() - 1) < 0.02
    assert (s8 > 0).all() and abs(f64(s8).log().mean() - 0.5) < 0.01 and abs(f64(s8).log().std() - 0.25) < 0.01
    assert s9.dtype == torch.float32 and s9.shape == (7,)
    assert abs(f64(s10).mean()) < 0.02 and abs(f64(s10).std() - 1) < 0.02
    # different calls got different keys
    assert not torch.equal(s1[:100], s10[:100])


def test_uniform_family():
    x = torch.empty(N)
    d = Draws()
    d("aten.uniform.default", x)
    d("aten.rand_like.default", x, dtype=torch.float64)
    d("aten.exponential.default", x, 4.0)
    d("aten.geometric.default", x, 0.25)
    d("aten.cauchy.default", x, 1.5, 2.0)
    d("aten.rand.default", [3])
    d("aten.rand_like.default", torch.empty(3, dtype=torch.bfloat16))
    uni, rl, expo, geo, cau, r3, rbf = d.run()
    assert (uni >= 0).all() and (uni < 1).all() and abs(f64(uni).mean() - 0.5) < 0.01
    assert abs(f64(uni).var() - 1 / 12) < 0.01
    assert rl.dtype == torch.float64 and (rl >= 0).all() and (rl < 1).all() and abs(rl.mean() - 0.5) < 0.01
    assert (expo >= 0).all() and abs(f64(expo).mean() - 0.25) < 0.01
    assert (geo >= 1).all() and (geo == geo.round()).all() and abs(f64(geo).mean() - 4) < 0.1
    q = torch.quantile(f64(cau), torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    torch.testing.assert_close(q, torch.tensor([-0.5, 1.5, 3.5], dtype=torch.float64), atol=0.1, rtol=0)
    assert r3.dtype == torch.float32 and rbf.dtype == torch.bfloat16


def test_bernoulli():
    p = torch.tensor([0.0, 0.2, 0.9, 1.0]).repeat(N // 4)
    d = Draws()
    d("aten.bernoulli.default", p)
    d("aten.bernoulli.p", torch.empty(N, dtype=torch.int64), 0.3)
    d("aten.bernoulli.p", torch.empty(N, dtype=torch.bool), 0.3)
    d("aten.bernoulli.Tensor", torch.empty(N, dtype=torch.float16), torch.tensor([0.1, 0.7]).repeat(N // 2))
    d("aten.bernoulli.Tensor", torch.empty(N // 4, 4), torch.tensor([0.5]))    # broadcast p
    b, bi, bb, bt, bbc = d.run()
    assert b.dtype == torch.float32 and set(b.unique().tolist()) <= {0.0, 1.0}
    torch.testing.assert_close(f64(b).view(-1, 4).mean(0), torch.tensor([0.0, 0.2, 0.9, 1.0], dtype=torch.float64),
                               atol=0.01, rtol=0)
    for s, dtype in ((bi, torch.int64), (bb, torch.bool)):
        assert s.dtype == dtype and s.shape == (N,) and abs(f64(s).mean() - 0.3) < 0.01
    assert bt.dtype == torch.float16
    torch.testing.assert_close(f64(bt).view(-1, 2).mean(0), torch.tensor([0.1, 0.7], dtype=torch.float64),
                               atol=0.01, rtol=0)
    assert bbc.shape == (N // 4, 4) and abs(f64(bbc).mean() - 0.5) < 0.01


RANGES = [(torch.float32, 2 ** 24), (torch.float64, 2 ** 53), (torch.float16, 2 ** 11), (torch.bfloat16, 2 ** 8),
          (torch.int8, 127), (torch.uint8, 255), (torch.int16, 2 ** 15 - 1), (torch.int32, 2 ** 31 - 1),
          (torch.int64, 2 ** 63 - 1), (torch.bool, 1)]


def test_random_default():
    d = Draws()
    for dtype, _ in RANGES:
        d("aten.random.default", torch.empty(N, dtype=dtype))
    for s, (dtype, hi) in zip(d.run(), RANGES):
        assert s.dtype == dtype and s.shape == (N,)
        v = s if dtype == torch.int64 else s.to(torch.float64)
        assert v.min() >= 0 and v.max() <= hi, dtype
        if hi < 2 ** 20:
            assert abs(f64(s).mean() - hi / 2) < 0.02 * hi + 0.01, dtype
            if hi < 300:
                assert v.max() == hi, dtype
        else:
            assert v.max() > hi // 2, dtype


def test_random_from_to():
    d = Draws()
    cases = [torch.float32, torch.int8, torch.uint8, torch.int64]
    for dtype in cases:
        x = torch.empty(N // 5, dtype=dtype)
        d("aten.random.to", x, 7)
        d("aten.random.from", x, 3 if dtype == torch.uint8 else -4, 9)
        d("aten.random.from", x, 5, None)
    d("aten.random.from", torch.empty(N, dtype=torch.int64), -2 ** 63, None)
    d("aten.random.from", torch.empty(N, dtype=torch.int64), -2 ** 40, 2 ** 40)
    outs = d.run()
    for i, dtype in enumerate(cases):
        to7, fr, open_ = outs[3 * i: 3 * i + 3]
        assert to7.dtype == dtype and set(to7.tolist()) == set(range(7))
        assert set(fr.tolist()) == set(range(3 if dtype == torch.uint8 else -4, 9))
        hi = {torch.float32: 2 ** 24, torch.int8: 127, torch.uint8: 255, torch.int64: 2 ** 63 - 1}[dtype]
        v = open_ if dtype == torch.int64 else f64(open_)
        assert (v >= 5).all() and (v <= hi).all() and v.max() > hi * 0.9
    full, wide = outs[-2:]
    assert abs((full < 0).double().mean() - 0.5) < 0.02
    assert full.max() > 2 ** 62 and full.min() < -2 ** 62
    assert wide.min() >= -2 ** 40 and wide.max() < 2 ** 40 and wide.max() > 2 ** 39


def test_randint_randperm():
    x = torch.empty(3, N // 3, dtype=torch.int32)
    d = Draws()
    d("aten.randint.default", 10, [N])
    d("aten.randint.low", -3, 4, [4, N // 4], dtype=torch.float32)
    d("aten.randint_like.default", x, 5)
    d("aten.randint_like.low_dtype", x, 10, 12, dtype=torch.int64)
    d("aten.randint_like.Tensor", x, torch.tensor(6))
    d("aten.randperm.default", 1000, dtype=torch.int32)
    d("aten.randperm.default", 0)
    ri, rl, rlike, rlow, rt, perm, empty = d.run()
    assert ri.dtype == torch.int64 and set(ri.tolist()) == set(range(10))
    assert rl.dtype == torch.float32 and rl.shape == (4, N // 4) and set(rl.flatten().tolist()) == set(range(-3, 4))
    assert rlike.dtype == torch.int32 and rlike.shape == x.shape and set(rlike.flatten().tolist()) == set(range(5))
    assert rlow.dtype == torch.int64 and set(rlow.flatten().tolist()) == {10, 11}
    assert rt.dtype == torch.int32 and set(rt.flatten().tolist()) == set(range(6))
    assert perm.dtype == torch.int32 and sorted(perm.tolist()) == list(range(1000))
    assert perm.tolist() != list(range(1000))
    assert empty.shape == (0,) and empty.dtype == torch.int64


def test_multinomial():
    p = torch.tensor([0.1, 0.0, 0.6, 0.3])
    d = Draws()
    d("aten.multinomial.default", p, N, True)
    d("aten.multinomial.default", torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 5.0]]), 1000, True)
    d("aten.multinomial.default", torch.tensor([[1.0, 2.0, 0.0, 4.0, 3.0]] * 3000), 4)
    d("aten.multinomial.default", torch.tensor([1.0, 2.0, 0.0, 4.0, 3.0], dtype=torch.float64), 4)
    s, s2, s3, s4 = d.run()
    assert s.dtype == torch.int64 and s.shape == (N,)
    torch.testing.assert_close(torch.bincount(s, minlength=4).double() / N, f64(p), atol=0.01, rtol=0)
    assert s2.shape == (2, 1000) and set(s2[0].tolist()) == {0, 1} and set(s2[1].tolist()) == {2}
    # without replacement: distinct picks, never a zero-probability one; the first pick follows p
    assert s3.shape == (3000, 4)
    assert all(len(set(row)) == 4 and 2 not in row for row in s3.tolist())
    freq = torch.bincount(s3[:, 0], minlength=5).double() / 3000
    torch.testing.assert_close(freq, torch.tensor([0.1, 0.2, 0.0, 0.4, 0.3], dtype=torch.float64), atol=0.03, rtol=0)
    assert s4.shape == (4,) and sorted(s4.tolist()) == [0, 1, 3, 4]


def test_other_distributions():
    d = Draws()
    d("aten.poisson.default", torch.tensor([0.5, 4.0, 20.0]).repeat(N // 3))
    d("aten._standard_gamma.default", torch.tensor([0.5, 3.0]).repeat(N // 2))
    d("aten.binomial.default", torch.full((N,), 10.0), torch.full((N,), 0.3))
    d("aten._sample_dirichlet.default", torch.tensor([[1.0, 2.0, 3.0]] * 1000))
    po, ga, bi, di = d.run()
    assert po.dtype == torch.float32 and (po == po.round()).all()
    torch.testing.assert_close(f64(po).view(-1, 3).mean(0), torch.tensor([0.5, 4.0, 20.0], dtype=torch.float64),
                               atol=0.1, rtol=0)
    assert (ga > 0).all()
    torch.testing.assert_close(f64(ga).view(-1, 2).mean(0), torch.tensor([0.5, 3.0], dtype=torch.float64),
                               atol=0.05, rtol=0)
    assert (bi >= 0).all() and (bi <= 10).all() and (bi == bi.round()).all() and abs(f64(bi).mean() - 3) < 0.05
    torch.testing.assert_close(di.sum(-1), torch.ones(1000), atol=1e-5, rtol=0)
    torch.testing.assert_close(f64(di).mean(0), torch.tensor([1 / 6, 2 / 6, 3 / 6], dtype=torch.float64),
                               atol=0.02, rtol=0)


@pytest.mark.parametrize("name,args,kwargs", [
    ("aten.normal_functional.default", (torch.empty(64),), {}),
    ("aten.randint.low", (-100, 100, [64]), {}),
])
def test_reproducible(name, args, kwargs):
    a = draw(name, *args, seed=3, **kwargs)
    b = draw(name, *args, seed=3, **kwargs)
    c = draw(name, *args, seed=4, **kwargs)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_every_overload_exists():
    """Every ATen rule names an overload of this torch, or one rulecheck.RELEASES says it lacks."""
    from xlanb.lower.registry import LOWERINGS
    assert len([n for n, r in LOWERINGS.items() if r.rng and r.fn.__module__.endswith(".random")]) > 30
    names = [n for n in LOWERINGS if n.startswith("aten.") and n.count(".") == 2]
    for n in names:
        if n in RELEASES:                        # an overload some supported torch releases lack
            first, gone = RELEASES[n]
            assert exists(n) == ((first is None or TORCH >= first) and (gone is None or TORCH < gone)), n
        else:
            assert exists(n), n
