"""A rule that XLA cannot compile on a platform (registry `avoid`) runs there as the CPU fallback, with
the reason in the Fallback event and the report; elsewhere it is compiled as usual. SVD avoids XLA:TPU,
whose compiler aborts the process on it (lower/rules/linalg.py); the CPU here stands in for it."""

import dataclasses

import pytest
import torch

import xlanb
from xlanb import events
from xlanb.lower import registry

SVD = "aten._linalg_svd.default"


@pytest.fixture
def svd_avoids_this_platform(monkeypatch):
    rule = registry.lookup(SVD)
    platform = xlanb.runtime_state().jax_device().platform
    monkeypatch.setitem(registry.LOWERINGS, SVD, dataclasses.replace(rule, avoid=((platform, "a test says so"),)))
    return platform


def test_svd_avoids_xla_tpu_only():
    rule = registry.lookup(SVD)
    assert rule.avoided_on("tpu") and rule.avoided_on("cpu") is None and rule.avoided_on("gpu") is None
    assert registry.rule_on(SVD, "tpu") is None and registry.rule_on(SVD, "cpu") is rule


def test_an_avoided_rule_runs_on_the_cpu_with_its_reason(svd_avoids_this_platform):
    a = torch.randn(5, 3)
    mark = xlanb.hooks.mark()
    u, s, vh = torch.linalg.svd(a.to("xla"), full_matrices=False)
    got = (u * s) @ vh
    torch.testing.assert_close(got.cpu(), a)
    torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a))
    fallbacks = [e for e in xlanb.hooks.since(mark) if isinstance(e, events.Fallback)]
    assert [e.op for e in fallbacks] == ["aten::_linalg_svd"] and fallbacks[0].reason == "a test says so"
    compiles = [e for e in xlanb.hooks.since(mark) if isinstance(e, events.Compile)]
    assert any(SVD in e.fallback_ops for e in compiles)
    assert "aten::_linalg_svd" in xlanb.metrics.executed_fallback_ops()


def test_without_avoid_the_rule_is_compiled():
    platform = xlanb.runtime_state().jax_device().platform
    if registry.lookup(SVD).avoided_on(platform):
        pytest.skip(f"SVD avoids {platform}: the CPU computes it there")
    a = torch.randn(5, 3)
    mark = xlanb.hooks.mark()
    s = torch.linalg.svdvals(a.to("xla")).cpu()
    torch.testing.assert_close(s, torch.linalg.svdvals(a))
    assert not [e for e in xlanb.hooks.since(mark) if isinstance(e, events.Fallback)]


SOLVE = "aten._linalg_solve_ex.default"


def test_a_dtype_avoid_holds_for_that_dtype_only():
    rule = registry.lookup(SOLVE)
    assert rule.avoided_on("tpu", frozenset({"float64"})) and rule.avoided_on("tpu", frozenset({"float32"})) is None
    assert rule.avoided_on("cpu", frozenset({"float64"})) is None and rule.avoided_on("tpu") is None


@pytest.mark.parametrize("name", ["aten.mm.default", "aten.bmm.default", "aten.addmm.default", "aten.baddbmm.default",
                                  "aten.addbmm.default", "aten.mv.default", "aten.addmv.default", "aten.dot.default",
                                  "aten.vdot.default", "aten._foreach_mm.default", "aten._addmm_activation.default"])
def test_int64_products_avoid_a_tpu_only(name):
    """XLA:TPU has no 64-bit integer dot (the fourth TPU run): the CPU computes them there."""
    rule = registry.lookup(name)
    assert rule.avoided_on("tpu", frozenset({"int64"}))
    assert rule.avoided_on("tpu", frozenset({"int32"})) is None and rule.avoided_on("tpu", frozenset({"float32"})) is None
    assert rule.avoided_on("cpu", frozenset({"int64"})) is None and rule.avoided_on("gpu", frozenset({"int64"})) is None


@pytest.fixture
def solve_avoids_float64_here(monkeypatch):
    rule = registry.lookup(SOLVE)
    platform = xlanb.runtime_state().jax_device().platform
    monkeypatch.setitem(registry.LOWERINGS, SOLVE,
                        dataclasses.replace(rule, avoid=((f"{platform}:float64", "a test says so"),)))


def test_a_float64_solve_runs_on_the_cpu_and_a_float32_one_is_compiled(solve_avoids_float64_here):
    g = torch.Generator().manual_seed(0)
    for dtype, expected in ((torch.float64, ["aten::_linalg_solve_ex"]), (torch.float32, [])):
        a = torch.randn(4, 4, generator=g, dtype=dtype) + 4 * torch.eye(4, dtype=dtype)
        b = torch.randn(4, 2, generator=g, dtype=dtype)
        mark = xlanb.hooks.mark()
        x = torch.linalg.solve(a.to("xla"), b.to("xla")).cpu()
        torch.testing.assert_close(x, torch.linalg.solve(a, b))
        fallbacks = [e for e in xlanb.hooks.since(mark) if isinstance(e, events.Fallback)]
        assert [e.op for e in fallbacks] == expected, dtype
        compiles = [e for e in xlanb.hooks.since(mark) if isinstance(e, events.Compile)]
        assert (SOLVE in compiles[-1].fallback_ops) == bool(expected)
