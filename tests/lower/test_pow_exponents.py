"""A scalar exponent that selects the algorithm of CPU's pow kernel (2, 3, -2, 0.5, -0.5: ATen's fast
paths x * x, x * x * x, 1 / (x * x), sqrt, rsqrt) stays a constant of the graph, so XLA compiles only
that algorithm (no `power` in the program); any other exponent is lifted, so a new value does not
recompile. Values are compared with the installed torch's own kernels (bit for bit where the platform
computes as the CPU does: helpers.assert_close)."""

import pytest
import torch

import xlanb
from xlanb import events, hooks
from xlanb.state import runtime_state
from helpers import assert_close, compiles

FAST = (2, 3, -2, 0.5, -0.5, 2.0, 3.0, -2.0)


def _stablehlo(run) -> str:
    log = runtime_state().log
    before = len([e for e in log.all() if isinstance(e, events.Compile)])
    with hooks.recording_texts():
        run()
    (compiled,) = [e for e in log.all() if isinstance(e, events.Compile)][before:]
    return compiled.stablehlo


def _values(dtype):
    torch.manual_seed(0)
    x = (torch.randn(257) * 3).to(dtype)
    x[:4] = torch.tensor([0.0, -0.0, float("inf"), float("-inf")]).to(dtype)
    return x


@pytest.mark.parametrize("exponent", FAST)
def test_a_fast_path_exponent_is_a_constant_and_computes_no_power(exponent):
    x = _values(torch.float32).abs().to("xla")
    text = _stablehlo(lambda: (x ** exponent).cpu())
    assert "stablehlo.power" not in text
    assert "stablehlo.power" in _stablehlo(lambda: (x ** 1.5).cpu())       # the lifted exponent's graph


# bfloat16 is left out: torch 2.13's CPU kernel rounds x * x to bfloat16 before the next product
# (x ** 3, x ** -2), where the rule computes in float32 and rounds once, as CPU does for float16
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("exponent", [2, 3, -2, 2.0, 3.0, -2.0])
def test_products_give_cpus_values(dtype, exponent):
    x = _values(dtype)
    want = x ** exponent
    got = (x.to("xla") ** exponent).cpu()
    assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    inplace = x.to("xla")
    inplace.pow_(exponent)
    assert_close(inplace.cpu(), want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("exponent", [0.5, -0.5, 1.5])
def test_roots_and_other_exponents_agree_with_cpu(exponent):
    x = _values(torch.float32).abs()
    assert_close((x.to("xla") ** exponent).cpu(), x ** exponent, equal_nan=True)


def test_other_exponents_are_lifted_and_fast_ones_compile_their_own_graph():
    x = _values(torch.float32).abs().to("xla")
    (x ** 2.5).cpu()
    before = compiles()
    assert_close((x ** 2.7).cpu(), x.cpu() ** 2.7)
    assert compiles() == before                                       # 2.7 is a graph input, as 2.5 was
    (x ** 3.0).cpu()
    assert compiles() == before + 1                                   # 3.0 is a constant: its own graph
    (x ** 3.0).cpu()
    assert compiles() == before + 1


def test_an_integer_tensor_keeps_integer_powers():
    x = torch.arange(-5, 6)
    for exponent in (2, 3):
        got = (x.to("xla") ** exponent).cpu()
        assert got.dtype == torch.int64
        assert torch.equal(got, x ** exponent)
    assert_close((x.to("xla") ** 2.0).cpu(), x ** 2.0, rtol=0, atol=0)


def test_eager_in_place_pow_with_a_fast_then_another_exponent():
    """The eager in-place path keys an executable by the number's kind: a fast path's exponent is a
    constant of its graph, so a later exponent of the same kind must not be served that graph."""
    x = _values(torch.float32).abs()
    with xlanb.eager_mode_context(True):
        t = x.to("xla")
        want = x.clone()
        for exponent in (3.0, 1.5, 3.0, 1.25, 2.0):
            t.pow_(exponent)
            want.pow_(exponent)
            assert_close(t.cpu(), want, equal_nan=True)


def test_eager_in_place_pow_takes_the_fast_path(monkeypatch):
    """After its first call, `t.pow_(e)` on computed values is one launch on the eager fast path,
    for a fast path's exponent (a constant of the executable) and for another (lifted) alike."""
    from xlanb.capture import realize
    launched = []
    launch = realize.eager_launch

    def counting(*args):
        out = launch(*args)
        launched.append(out is not None)
        return out

    monkeypatch.setattr(realize, "eager_launch", counting)
    x = _values(torch.float32).abs()
    with xlanb.eager_mode_context(True):
        for exponent in (2.0, 1.5):
            t, want = x.to("xla"), x.clone()
            for _ in range(3):
                t.pow_(exponent)
                want.pow_(exponent)
            assert_close(t.cpu(), want, equal_nan=True)
    assert launched == [False, True, True] * 2
