"""The runtime's lowerings share one MLIR context per thread (runtime/ir_context.py); JAX's own
lowerings get what JAX's make_ir_context gives."""

import threading

import jax
import numpy as np
import pytest
import torch

import xlanb
from helpers import assert_close
from xlanb.runtime import executor, ir_context

pytestmark = pytest.mark.skipif(not ir_context.hooked(), reason="this JAX has no make_ir_context to hook, or its "
                                "make_ir_context shares a thread's context itself (jax 0.12)")


def _context(i: int):
    return jax.jit(lambda x: x + i).lower(np.ones(3 + i, np.float32)).compiler_ir("stablehlo").context


def test_lowerings_inside_share_a_context_and_jax_own_ask_jax(monkeypatch):
    monkeypatch.setattr(ir_context, "ROTATE", 10 ** 9)     # no replacement between the two
    made = []
    fresh = ir_context._make_fresh
    monkeypatch.setattr(ir_context, "_make_fresh", lambda *a, **k: made.append(1) or fresh(*a, **k))
    with ir_context.shared_context():
        _context(0)                 # the thread's context is made at most here
        asked = len(made)
        first, second = _context(1), _context(2)
    assert first is second and len(made) == asked
    _context(3), _context(4)
    assert len(made) == asked + 2           # outside, each lowering asks JAX's make_ir_context


def test_a_thread_gets_its_own_context_and_a_used_one_is_replaced(monkeypatch):
    monkeypatch.setattr(ir_context, "ROTATE", 2)
    found = {}

    def lower(name):
        with ir_context.shared_context():
            found[name] = [_context(k) for k in range(3)]
    worker = threading.Thread(target=lower, args=("thread",))
    worker.start()
    worker.join()
    lower("main")
    here = found["main"]
    assert here[0] is here[1] and here[2] is not here[1]           # replaced after two lowerings
    assert not set(map(id, found["thread"])) & set(map(id, here))


def test_graphs_lowered_in_one_context_compute_their_own_values(monkeypatch):
    monkeypatch.setattr(ir_context, "ROTATE", 10 ** 9)
    seen = []
    lower = executor.lower_graph

    def recording(graph):
        lowered = lower(graph)
        seen.append(lowered.jax_lowered.compiler_ir("stablehlo").context)
        return lowered
    executor.lower_graph = recording
    try:
        a, b = torch.rand(4, 5), torch.rand(5, 3)
        x = a.to("xla")
        y = (x @ b.to("xla")).tanh()
        xlanb.sync()
        z = (x * 2).sum(0)
        xlanb.sync()
    finally:
        executor.lower_graph = lower
    assert len(seen) == 2 and seen[0] is seen[1]
    assert_close(y.cpu(), (a @ b).tanh())
    assert_close(z.cpu(), (a * 2).sum(0))
