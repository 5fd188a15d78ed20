"""An eager op's graph is compiled on the CPU with XLA's elemental emitters (runtime/stages.py's
`_CPU_OP_GRAPH`: ~10 ms less a compile, the same bits); a traced graph, and an eager graph of more
than `executor.OP_GRAPH_NODES` ops, with its fusion emitters."""

import jax
import pytest
import torch

import xlanb
from xlanb.runtime import executor, stages

_EMITTERS = "xla_cpu_use_fusion_emitters"


def _xla_knows_the_option() -> bool:
    try:
        jax.jit(lambda a: a + 1).lower(1.0).compile(compiler_options={_EMITTERS: False})
    except jax.errors.JaxRuntimeError:          # jax 0.12's XLA has no such option
        return False
    return True


on_cpu = pytest.mark.skipif(jax.default_backend() != "cpu" or not _xla_knows_the_option(),
                            reason="an option of XLA's CPU backend that this jaxlib's XLA does not have")


def _ops(x):
    return torch.nn.functional.gelu(x).tanh().softmax(-1)


@on_cpu
def test_an_eager_ops_graph_takes_the_elemental_emitters_and_gives_the_same_bits(spy, monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    x = torch.randn(16, 256)
    with xlanb.eager_mode_context(True):
        eager = _ops(x.to("xla")).cpu()
    ops = len(spy)
    assert ops >= 3 and all(options.get(_EMITTERS) is False for options in spy)
    lazy = _ops(x.to("xla")).cpu()                      # one traced graph of the same ops
    assert len(spy) == ops + 1 and _EMITTERS not in spy[-1]
    torch.testing.assert_close(eager, lazy, rtol=0, atol=0)     # each op alone, compiled either way: the same bits
    torch.testing.assert_close(lazy, _ops(x), rtol=2e-6, atol=1e-6)


@on_cpu
def test_the_options_follow_the_graph_and_the_users_flags(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert stages.compile_options("default", op_graph=True)[_EMITTERS] is False
    assert _EMITTERS not in stages.compile_options("default")
    monkeypatch.setenv("XLA_FLAGS", f"--{_EMITTERS}=true")       # a user's XLA_FLAGS decides it
    assert _EMITTERS not in stages.compile_options("default", op_graph=True)


@on_cpu
def test_a_larger_eager_graph_keeps_the_fusion_emitters(spy, monkeypatch):
    """An eager graph of many ops (a foreach update) compiles slower with the elemental emitters (W7's
    eager first step: 2.7-3.3 -> 3.8-4.6 s over its 42 graphs of more than 2 ops, when the optimizer's
    foreach ops still ran one by one)."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    params = [torch.randn(8, 8).to("xla") for _ in range(6)]      # a foreach op and its 6 outputs: 7 nodes
    grads = [torch.randn(8, 8).to("xla") for _ in range(6)]
    xlanb.sync(wait=True)
    with xlanb.eager_mode_context(True):
        del spy[:]
        mark = xlanb.hooks.mark()
        torch._foreach_addcmul_(params, grads, grads, value=0.5)
        params[0].mul_(2)
        xlanb.sync(wait=True)
    compiles = [e for e in xlanb.hooks.since(mark) if isinstance(e, xlanb.events.Compile)]
    assert len(compiles) == len(spy)
    elemental = [options.get(_EMITTERS) is False for options in spy]
    assert elemental == [e.eager and e.nodes <= executor.OP_GRAPH_NODES for e in compiles]
    assert any(elemental) and not all(elemental)
