"""xlanb.compile: named graphs, full-graph enforcement, graph limits, state restored."""

import sys

import pytest
import torch

import xlanb
from custom_ops import FALLBACK_COUNTER, scale_shift
from helpers import assert_close, compiles, counter, eager_compiles, executes
from xlanb.state import runtime_state


def test_compiled_function_in_eager_mode_counts_as_one_graph():
    with xlanb.eager_mode_context(True):
        t = torch.randn(4, device="xla")
        xlanb.metrics.clear_all()

        @xlanb.compile
        def f(x):
            return torch.cos(torch.sin(x))
        r = f(t)
        assert compiles() == 1 and executes() == 1
        assert xlanb.metrics.metric_data("EagerOpCompileTime") is None
        r2 = f(t)
        assert executes() == 2 and counter("CachedCompile") == 1
        assert xlanb.is_eager_mode()
        assert_close(r2.cpu(), t.cpu().sin().cos())


def test_compile_in_lazy_mode_flushes_pending_work_first():
    t = torch.randn(4, device="xla")
    xlanb.sync()
    xlanb.metrics.clear_all()
    pending = t * 2

    @xlanb.compile(name="toy_program")
    def f(x):
        return x + 1
    f(t)
    assert compiles() == 2 and executes() == 2
    assert counter("MarkStep") == 2
    names = [e.name for e in xlanb.runtime_state().log.all() if isinstance(e, xlanb.events.Compile)][-2:]
    assert names == ["toy_program_clear_pending", "toy_program"]
    xlanb.metrics.clear_all()
    f(t)
    assert executes() == 1 and compiles() == 0
    assert pending.cpu().tolist() == (t.cpu() * 2).tolist()


def test_nested_and_repeated_compiled_calls():
    @xlanb.compile
    def c(x):
        return x * 3.0
    t = torch.ones(2, device="xla")
    xlanb.sync()
    xlanb.metrics.clear_all()
    r = c(c(t))
    assert executes() == 2
    assert r.cpu().tolist() == [9.0, 9.0]

    @xlanb.compile
    def outer(x):
        return c(x) + 1          # inline: part of outer's graph
    xlanb.metrics.clear_all()
    r = outer(t)
    assert executes() == 1 and compiles() == 1
    assert r.cpu().tolist() == [4.0, 4.0]


def test_context_manager_form():
    t = torch.ones(3, device="xla")
    with xlanb.compile(name="block") as scope:
        y = t * 2 + 1
    assert scope.name == "block"
    assert y.cpu().tolist() == [3.0] * 3
    assert runtime_state().graph_name == "sync"


def test_full_graph_violation_names_the_users_line():
    @xlanb.compile(full_graph=True)
    def step(x):
        y = x * 2
        if y.sum() > 0:            # forces execution: not allowed
            return y
        return -y
    t = torch.ones(3, device="xla")
    with pytest.raises(RuntimeError, match="^Unexpected execution happens inside the compiled function") as e:
        step(t)
    err = str(e.value)
    assert "Unexpected Execution Analysis" in err and "Graph Name: step" in err
    assert "test_compile.py" in str(e.value) and "step" in str(e.value)
    frame_lines = [ln.strip() for ln in err.splitlines() if ln.strip().startswith("step (")]
    assert frame_lines and "test_compile.py" in frame_lines[0] and "if y.sum() > 0" in frame_lines[0]
    assert runtime_state().allow_execution and runtime_state().compile_scope is None


def test_full_graph_false_allows_execution():
    @xlanb.compile(full_graph=False)
    def step(x):
        y = x * 2
        return y if y.sum() > 0 else -y
    assert step(torch.ones(2, device="xla")).cpu().tolist() == [2.0, 2.0]


def test_full_graph_rejects_cpu_fallback_ops():
    @xlanb.compile(full_graph=True)
    def step(x):
        return scale_shift(x, 2.0)
    with pytest.raises(RuntimeError, match="Unexpected execution"):
        step(torch.ones(2, device="xla"))


def test_max_graphs_raises_before_compiling_with_got_and_expected():
    line = sys._getframe().f_lineno + 4          # the line of `x + x`

    @xlanb.compile(max_different_graphs=1)
    def f(x):
        return x + x
    f(torch.zeros(10, device="xla"))
    f(torch.zeros(10, device="xla"))
    five = torch.zeros(5, device="xla")
    xlanb.sync()
    before = compiles()
    with pytest.raises(RuntimeError) as e:
        f(five)
    text = str(e.value)
    assert text.startswith("Maximum number of different graphs allowed per function exceeded: 1")
    assert "\nGot: [] aten::add, xla_shape=f32[5]{0}, dynamic_dims: ()\n" in text          # torch_xla's words
    assert "\nExpected: [] aten::add, xla_shape=f32[10]{0}, dynamic_dims: ()\n" in text
    assert text.endswith(f"Where: got aten.add.Tensor at test_compile.py:{line}; "
                         f"expected aten.add.Tensor at test_compile.py:{line}")
    assert compiles() == before
    f(torch.zeros(10, device="xla"))     # a seen graph never raises


def test_max_graphs_allows_n_distinct_graphs():
    @xlanb.compile(max_different_graphs=2)
    def f(x, mode):
        return x * 2 if mode else x - 1
    x = torch.ones(3, device="xla")
    f(x, True)
    f(x, False)
    f(x, True)
    with pytest.raises(RuntimeError, match="exceeded: 2"):
        f(torch.ones(4, device="xla"), True)


def test_state_restored_after_exception_and_interrupt():
    for error in (ValueError, KeyboardInterrupt):
        @xlanb.compile(full_graph=True, max_different_graphs=3)
        def body(x):
            y = x * 5
            raise error("stop")
        with xlanb.eager_mode_context(True):
            with pytest.raises(error):
                body(torch.ones(2, device="xla"))
            assert xlanb.is_eager_mode()
        assert runtime_state().graph_name == "sync"
        assert runtime_state().allow_execution and runtime_state().compile_scope is None and runtime_state().observer is None


def test_recompile_explanation_names_shape_change_and_op():
    @xlanb.compile(name="step")
    def step(x, double):
        return x * 2 if double else x + 1
    step(torch.ones(4, 4, device="xla"), True)
    step(torch.ones(5, 5, device="xla"), True)
    step(torch.ones(5, 5, device="xla"), False)
    text = xlanb.debug.explain_recompiles()
    assert "input 0: f32[4,4] -> f32[5,5]" in text
    assert "aten.mul.Tensor -> aten.add.Tensor" in text
    assert "test_compile.py" in text


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_different_graphs must be >= 1"):
        xlanb.compile(max_different_graphs=0)
    with pytest.raises(TypeError):
        xlanb.compile(42)
