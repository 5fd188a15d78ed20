"""A Python number converted to the tensor's dtype with CPU's check (`fill_(300)` on int8: "value cannot
be converted to type int8_t without overflow") raises CPU's error on xla too, also after the same
signature ran with a number in range (a lifted number's range is in the verdict caches' keys:
capture/nodes.py's scalar_class), on tensors past the verdict's stand-in size, and in factories whose
result is large (capture/factories.py's _large_verdict)."""

import math

import pytest
import torch
import torch.nn.functional as F

from xlanb.capture.nodes import scalar_class


def _index(t):
    return torch.tensor([0], device=t.device)


OPS = {
    "fill_": lambda t, v: t.clone().fill_(v),
    "masked_fill": lambda t, v: t.masked_fill(t == t, v),
    "masked_fill_": lambda t, v: t.clone().masked_fill_(t == t, v),
    "index_fill": lambda t, v: t.index_fill(0, _index(t), v),
    "scatter value": lambda t, v: t.scatter(0, _index(t), v),
    "full_like": lambda t, v: torch.full_like(t, v),
    "new_full": lambda t, v: t.new_full(t.shape, v),
    "full": lambda t, v: torch.full(t.shape, v, dtype=t.dtype, device=t.device),
    "clamp max": lambda t, v: t.clamp(max=v),
    "clamp_min": lambda t, v: t.clamp_min(v),
    "threshold": lambda t, v: F.threshold(t, 1, v),
    "add alpha": lambda t, v: t.add(t, alpha=v),
    "addcmul value": lambda t, v: t.addcmul(t, t, value=v),
    "fill_diagonal_": lambda t, v: t.clone().view(2, -1).fill_diagonal_(v),
}
FLOAT_ONLY = {
    "hardtanh": lambda t, v: F.hardtanh(t, -1, v),
    "pow": lambda t, v: t.pow(v),
}
# (dtype, a number in range, one past it)
DTYPES = [(torch.int8, 5, 300), (torch.uint8, 5, -1), (torch.int16, 5, 40000), (torch.float16, 5.0, 1e5),
          (torch.int8, 5.0, 200.0)]


def _outcome(op, device, dtype, n, v):
    t = torch.ones(n, dtype=dtype, device=device)
    try:
        return "ok", op(t, v).cpu().flatten()[:4].tolist()
    except RuntimeError as e:
        return type(e).__name__, str(e)


def _cases():
    for name in sorted(OPS):
        for dtype, good, bad in DTYPES:
            yield name, OPS[name], dtype, good, bad
    for name in sorted(FLOAT_ONLY):
        yield name, FLOAT_ONLY[name], torch.float16, 5.0, 1e5
    # a number whose reciprocal passes float32's range: celu computes 1 / alpha as a float
    yield "celu alpha", lambda t, v: F.celu(t, v), torch.float32, 0.5, 1e-40


@pytest.mark.parametrize("n", [4, 5000], ids=["small", "past the stand-in size"])
@pytest.mark.parametrize("name,op,dtype,good,bad", list(_cases()), ids=lambda x: x if isinstance(x, str) else None)
def test_a_number_past_the_dtype_raises_cpu_error_after_the_signature_ran_in_range(name, op, dtype, good, bad, n):
    if n == 5000 and name == "fill_diagonal_":
        pytest.skip("fill_diagonal_ needs a 2-d shape: the small case covers it")
    cpu = _outcome(op, "cpu", dtype, n, bad)
    assert _outcome(op, "xla", dtype, n, good) == _outcome(op, "cpu", dtype, n, good)   # the signature's first call
    xla = _outcome(op, "xla", dtype, n, bad)
    assert xla == cpu
    assert _outcome(op, "xla", dtype, n, good) == _outcome(op, "cpu", dtype, n, good)   # and after: still computed


FACTORIES = {
    "full int8": lambda d, n: torch.full((n,), 300, dtype=torch.int8, device=d),
    "full float16": lambda d, n: torch.full((n, 2), 7e4, dtype=torch.float16, device=d),
    "linspace int8": lambda d, n: torch.linspace(0, 1e6, n, dtype=torch.int8, device=d),
    "randperm float16": lambda d, n: torch.randperm(n, dtype=torch.float16, device=d),
    "randperm int8": lambda d, n: torch.randperm(n, dtype=torch.int8, device=d),
    "randint int8": lambda d, n: torch.randint(0, 300, (n,), dtype=torch.int8, device=d),
    "randint int8 from": lambda d, n: torch.randint(-200, 10, (n,), dtype=torch.int8, device=d),
    "random_ from >= to": lambda d, n: torch.empty(n, device=d).random_(5, 2),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_large_factory_result_gets_cpus_verdict(name):
    n = 5000                                   # past VERDICT_ELEMENTS: the call is not made on CPU at this size
    with pytest.raises(RuntimeError) as cpu:
        FACTORIES[name]("cpu", n)
    with pytest.raises(type(cpu.value)) as xla:
        FACTORIES[name]("xla", n).cpu()
    assert str(xla.value) == str(cpu.value)


def test_randperm_past_float32s_integers_raises_without_making_the_permutation_on_cpu():
    n = 2 ** 24 + 2
    with pytest.raises(RuntimeError) as cpu:
        torch.randperm(n, dtype=torch.float32)
    with pytest.raises(RuntimeError) as xla:
        torch.randperm(n, dtype=torch.float32, device="xla")
    assert str(xla.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.float32])
def test_a_large_randperm_in_range_is_a_permutation(dtype):
    p = torch.randperm(5000, dtype=dtype, device="xla").cpu()
    assert p.dtype == dtype
    if dtype is torch.bfloat16:            # CPU computes it in bfloat16 too, rounding: only the dtype and size
        assert p.shape == (5000,)
    else:
        assert torch.equal(p.sort().values, torch.arange(5000, dtype=dtype))


def test_large_factories_in_range_compute_cpus_values():
    assert torch.equal(torch.full((5000,), 100, dtype=torch.int8, device="xla").cpu(),
                       torch.full((5000,), 100, dtype=torch.int8))
    assert torch.equal(torch.linspace(0, 100, 5000, dtype=torch.int8, device="xla").cpu(),
                       torch.linspace(0, 100, 5000, dtype=torch.int8))


DTYPE_RANGES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
                torch.float32]


@pytest.mark.parametrize("dtype", DTYPE_RANGES, ids=str)
def test_numbers_either_side_of_a_dtypes_range_are_in_different_classes(dtype):
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    top, bottom = float(info.max), float(info.min)
    above, below = math.nextafter(top, math.inf), math.nextafter(bottom, -math.inf)
    assert scalar_class(top) != scalar_class(above)
    assert scalar_class(bottom) != scalar_class(below)
    if not dtype.is_floating_point and dtype is not torch.int64:
        assert scalar_class(int(info.max)) != scalar_class(int(info.max) + 1)
        assert scalar_class(int(info.min)) != scalar_class(int(info.min) - 1)
    assert scalar_class(float("inf")) != scalar_class(1e308)
    assert scalar_class(float("nan")) != scalar_class(0.0)


def test_how_an_ops_numbers_compare_is_part_of_its_signature():
    """histc checks max > min: the order of two lifted numbers, which their ranges do not tell."""
    t = torch.tensor([0.5, 1.5, 2.5, 3.5])
    assert torch.equal(torch.histc(t.to("xla"), 4, 0.0, 4.0).cpu(), torch.histc(t, 4, 0.0, 4.0))
    with pytest.raises(RuntimeError) as cpu:
        torch.histc(t, 4, 5.0, 2.0)
    with pytest.raises(RuntimeError) as xla:
        torch.histc(t.to("xla"), 4, 5.0, 2.0).cpu()
    assert str(xla.value) == str(cpu.value)
