import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702
from rulecheck import check, run_rule  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from xlanb.lower import registry  # noqa: E402
from xlanb.lower.rules import foreach  # noqa: E402

aten = torch.ops.aten
g = torch.Generator().manual_seed(0)


def rn(*shape, dtype=torch.float32, lo=-2.0, hi=2.0):
    x = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
    return x.to(dtype) if dtype.is_floating_point else x.round().to(dtype)


def floats(lo=-2.0, hi=2.0):
    """A list with mixed float dtypes and shapes (0-d included)."""
    return [rn(3, lo=lo, hi=hi), rn(2, 2, dtype=torch.float64, lo=lo, hi=hi),
            rn(4, dtype=torch.bfloat16, lo=lo, hi=hi), rn(dtype=torch.float32, lo=lo, hi=hi)]


def like(xs, lo=-2.0, hi=2.0):
    return [rn(*x.shape, dtype=x.dtype, lo=lo, hi=hi) for x in xs]


TOL = dict(atol=2e-2, rtol=1e-2)     # bfloat16 elements


def functional_foreach_names():
    names = sorted({s.name.split("::")[1] for s in torch._C._jit_get_all_schemas()
                    if s.name.startswith("aten::_foreach_") and not s.name.endswith("_")})
    out = []
    for n in names:
        packet = getattr(aten, n)
        for o in packet.overloads():
            if not getattr(packet, o)._schema.is_mutable:
                out.append(f"aten.{n}.{o}")
    return out


def test_every_functional_foreach_has_a_rule():
    missing = [n for n in functional_foreach_names() if not registry.has_rule(n)]
    assert not missing, missing


DOMAIN = {"acos": (-0.9, 0.9), "asin": (-0.9, 0.9), "log": (0.1, 3), "log10": (0.1, 3), "log2": (0.1, 3),
          "log1p": (-0.5, 3), "sqrt": (0.1, 3), "rsqrt": (0.1, 3), "reciprocal": (0.5, 3), "lgamma": (0.1, 3),
          "tan": (-1.2, 1.2)}


@pytest.mark.parametrize("name", foreach._UNARY)
def test_unary(name):
    lo, hi = DOMAIN.get(name, (-2.0, 2.0))
    xs = floats(lo, hi)
    check(f"aten._foreach_{name}.default", xs, **TOL)


def test_unary_integer_elements():
    xs = [rn(3, dtype=torch.int64), rn(2, dtype=torch.int32)]
    for name in ("abs", "neg", "sign", "ceil", "round", "exp", "sqrt", "sigmoid"):
        if name == "sqrt":
            xs = [x.abs() for x in xs]
        check(f"aten._foreach_{name}.default", xs, atol=1e-5, rtol=1e-5)


def test_zero_clone_copy_max_norm():
    xs = floats()
    check("aten._foreach_zero.default", xs)
    check("aten._foreach_copy.default", xs, like(xs))
    check("aten._foreach_copy.default", [torch.zeros(3), torch.zeros(2, dtype=torch.int32)],
          [torch.tensor(2.5, dtype=torch.float64), torch.tensor([1.7, -2.2])])      # cast and broadcast
    check("aten._foreach_max.default", xs + [rn(5, dtype=torch.int64)])
    for ord in (2, 1, 3.0, float("inf"), 0):
        check("aten._foreach_norm.Scalar", xs, ord, **TOL)
    check("aten._foreach_norm.Scalar", xs, 2, torch.float64, atol=1e-5, rtol=1e-5)


def test_clone():
    check("aten._foreach_clone.default", floats())


def test_powsum():
    xs = floats()
    for ord in (2, 1, 3.0, 0):
        check("aten._foreach_powsum.Scalar", xs, ord, **TOL)
    check("aten._foreach_powsum.Scalar", xs, 2, torch.float32, atol=1e-4, rtol=1e-4)


BINARY = ["add", "sub", "mul", "div", "clamp_max", "clamp_min", "maximum", "minimum", "pow"]


@pytest.mark.parametrize("packet", BINARY)
def test_binary(packet):
    lo = 0.5 if packet == "pow" else -2.0
    xs = floats(lo, 2.0)
    ys = like(xs, lo, 2.0)
    if packet in ("add", "sub"):
        check(f"aten._foreach_{packet}.List", xs, ys, **TOL)
        check(f"aten._foreach_{packet}.List", xs, ys, alpha=2.5, **TOL)      # lifted alpha
        check(f"aten._foreach_{packet}.List", xs, ys, alpha=-1, **TOL)
    else:
        check(f"aten._foreach_{packet}.List", xs, ys, **TOL)
    for s in (1.5, 2, 1, -1, 0.0):
        if packet == "pow" and s in (-1,):
            continue
        check(f"aten._foreach_{packet}.Scalar", xs, s, **TOL)
    check(f"aten._foreach_{packet}.ScalarList", xs, [1.5, 2, -0.5, 1], **TOL)
    if packet in ("add", "mul", "div"):
        other = torch.tensor(1.75)
        check(f"aten._foreach_{packet}.Tensor", xs, other, **TOL)
        if packet == "add":
            check("aten._foreach_add.Tensor", xs, torch.tensor(0.5, dtype=torch.float64), alpha=3.0, **TOL)


def test_per_element_promotion():
    # each element promotes on its own, as the per-tensor op does
    ints = [rn(3, dtype=torch.int64), rn(2, 2, dtype=torch.int32), rn(3, dtype=torch.uint8, lo=0, hi=9),
            rn(2, dtype=torch.float16)]
    check("aten._foreach_add.Scalar", ints, 2.5, atol=1e-3, rtol=1e-3)
    check("aten._foreach_add.Scalar", ints, 3)
    check("aten._foreach_mul.ScalarList", ints, [2, 0.5, 3, 2.0], atol=1e-3, rtol=1e-3)
    check("aten._foreach_div.Scalar", ints, 4, atol=1e-3, rtol=1e-3)
    check("aten._foreach_div.List", ints, [x.abs() + 1 for x in ints], atol=1e-3, rtol=1e-3)
    check("aten._foreach_add.List", ints, [rn(3), rn(2, 2, dtype=torch.int64), rn(3, dtype=torch.bfloat16),
                                           rn(2, dtype=torch.float64)], alpha=2, atol=1e-2, rtol=1e-2)
    check("aten._foreach_add.Tensor", ints, torch.tensor(0.5), atol=1e-3, rtol=1e-3)
    check("aten._foreach_mul.Tensor", ints, torch.tensor(3), atol=1e-3, rtol=1e-3)
    check("aten._foreach_pow.Scalar", ints[:2], 2)
    check("aten._foreach_maximum.Scalar", ints, 1.5, atol=1e-3, rtol=1e-3)
    check("aten._foreach_clamp_min.List", ints[:2], [rn(3, dtype=torch.float32), rn(2, 2, dtype=torch.int64)])


def test_pow_scalar_and_tensor():
    xs = floats(-1.0, 2.0)
    check("aten._foreach_pow.ScalarAndTensor", 2.5, xs, **TOL)
    check("aten._foreach_pow.ScalarAndTensor", 2, xs, **TOL)
    check("aten._foreach_pow.ScalarAndTensor", 3, [rn(3, dtype=torch.int64, lo=0, hi=4)])


@pytest.mark.parametrize("packet", ["addcdiv", "addcmul"])
def test_addcdiv_addcmul(packet):
    xs = floats()
    t1 = like(xs)
    t2 = like(xs, 0.5, 2.0)
    check(f"aten._foreach_{packet}.Scalar", xs, t1, t2, **TOL)
    check(f"aten._foreach_{packet}.Scalar", xs, t1, t2, 0.25, **TOL)
    check(f"aten._foreach_{packet}.Scalar", xs, t1, t2, -1, **TOL)
    check(f"aten._foreach_{packet}.ScalarList", xs, t1, t2, [0.5, -2.0, 3, 1], **TOL)
    check(f"aten._foreach_{packet}.Tensor", xs, t1, t2, torch.tensor([0.5, -2.0, 3.0, 1.0]), **TOL)
    check(f"aten._foreach_{packet}.Tensor", xs, t1, t2, torch.tensor([0.5, -2.0, 3.0, 1.0], dtype=torch.float64),
          **TOL)
    if packet == "addcmul":
        ints = [rn(3, dtype=torch.int64), rn(2, dtype=torch.int32)]
        check("aten._foreach_addcmul.Scalar", ints, like(ints), like(ints), 2)
        check("aten._foreach_addcmul.Tensor", ints, like(ints), like(ints), torch.tensor([2, -3]))


def test_lerp():
    xs = floats()
    ends = like(xs)
    check("aten._foreach_lerp.List", xs, ends, like(xs, 0.0, 1.0), **TOL)
    check("aten._foreach_lerp.Scalar", xs, ends, 0.3, **TOL)
    check("aten._foreach_lerp.Scalar", xs, ends, 1, **TOL)
    check("aten._foreach_lerp.ScalarList", xs, ends, [0.3, 0.9, 1, 0.5], **TOL)


def test_adam_step_like():
    """The foreach calls an Adam step makes (torch.optim with foreach=True)."""
    params = [rn(4, 3), rn(5), rn(2, 2, 2)]
    grads, m, v = like(params), like(params), [x.abs() for x in like(params)]
    check("aten._foreach_lerp.Scalar", m, grads, 0.1)
    check("aten._foreach_mul.Scalar", v, 0.999)
    check("aten._foreach_addcmul.Scalar", v, grads, grads, 0.001)
    denom = [x.sqrt() / 0.9 + 1e-8 for x in v]
    check("aten._foreach_sqrt.default", v)
    check("aten._foreach_div.ScalarList", v, [0.9, 0.8, 0.7])
    check("aten._foreach_add.Scalar", v, 1e-8)
    check("aten._foreach_addcdiv.ScalarList", params, m, denom, [-1e-3, -2e-3, -3e-3], atol=1e-6, rtol=1e-5)
    check("aten._foreach_addcdiv.Tensor", params, m, denom, torch.tensor([-1e-3, -2e-3, -3e-3]),
          atol=1e-6, rtol=1e-5)


def test_missing_per_tensor_rule_falls_back(monkeypatch):
    """An element whose per-tensor op has no rule runs on torch CPU (pure_callback)."""
    monkeypatch.delitem(registry.LOWERINGS, "aten.lgamma.default", raising=False)
    monkeypatch.delitem(registry.LOWERINGS, "aten.addcmul.default", raising=False)
    monkeypatch.delitem(registry.LOWERINGS, "aten.add.Tensor", raising=False)
    xs = floats(0.1, 3.0)
    check("aten._foreach_lgamma.default", xs, **TOL)
    check("aten._foreach_addcmul.Scalar", xs, like(xs), like(xs), 2.5, **TOL)
    check("aten._foreach_addcmul.Tensor", xs, like(xs), like(xs), torch.tensor([0.5, -2.0, 3.0, 1.0]), **TOL)
    check("aten._foreach_add.List", xs, like(xs), alpha=0.5, **TOL)
    check("aten._foreach_add.Tensor", xs, torch.tensor(2.0), **TOL)


def test_single_element():
    check("aten._foreach_add.Scalar", [rn(3)], 2.5)
    out = run_rule("aten._foreach_exp.default", [rn(2)])
    assert isinstance(out, tuple) and len(out) == 1
