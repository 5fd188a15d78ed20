"""Other ways in: an op with no lowering inside an FX graph, eager mode, compiled autograd, and a
lazy-mode step with the XLANB_CACHE_SIZE environment variable set to 1."""

import copy
import os
import subprocess
import sys
import textwrap

import torch
import torch.nn as nn
import torch.nn.functional as F

import xlanb
from custom_ops import FALLBACK_COUNTER, scale_shift
from nets import executions, mlp, of_type
from xlanb import events, hooks
from helpers import assert_close


def test_an_op_without_lowering_runs_on_cpu_inside_the_step():
    def f(x):
        return scale_shift(x.sin(), 2.0).cos()
    x = torch.randn(5)
    compiled = torch.compile(f, backend="xlanb")
    mark = hooks.mark()
    out = compiled(x.to("xla"))
    (graph,) = of_type(hooks.since(mark), events.DynamoGraph)
    assert graph.path == "macro" and graph.fallback_ops == ("xlanb_test.scale_shift.default",)
    assert_close(out.cpu(), f(x))
    assert xlanb.metrics.counter_value(FALLBACK_COUNTER) == 1


def test_eager_mode_results_and_one_executable_for_the_call():
    torch.manual_seed(0)
    model, x = mlp(), torch.randn(4, 20)
    dev = copy.deepcopy(model).to("xla")
    compiled = torch.compile(dev, backend="xlanb")
    with xlanb.eager_mode_context(True), torch.no_grad():
        xd = x.to("xla")
        mark = hooks.mark()
        out = compiled(xd)                  # runs now, as one graph (not an eager op)
        ran = [e for e in hooks.since(mark) if isinstance(e, events.Execute)]
        assert len(ran) == 1 and not ran[0].eager
        assert xlanb.runtime_state().pending == []
        assert_close(out.cpu(), model(x), rtol=1e-5, atol=1e-5)
        assert executions(hooks.since(mark)) == 1


def test_compiled_autograd_captures_backward_and_keeps_one_executable():
    torch.manual_seed(0)
    cpu = mlp()
    dev = copy.deepcopy(cpu).to("xla")
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (cpu, dev)]

    def step(model, opt, x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    batches = [(torch.randn(8, 20), torch.randint(0, 5, (8,))) for _ in range(4)]
    with torch._dynamo.config.patch(compiled_autograd=True):
        compiled = torch.compile(step, backend="xlanb")
        runs = []
        for x, y in batches:
            expected = step(cpu, opts[0], x, y)
            xd, yd = x.to("xla"), y.to("xla")
            xlanb.sync()
            mark = hooks.mark()
            loss = compiled(dev, opts[1], xd, yd)
            xlanb.sync()
            runs.append(executions(hooks.since(mark)))
            assert_close(loss.cpu(), expected, rtol=1e-4, atol=1e-5)
    assert runs == [1] * len(batches)
    for a, b in zip(dev.parameters(), cpu.parameters()):
        assert_close(a.detach().cpu(), b.detach(), rtol=1e-4, atol=1e-5)


def test_cache_size_1_from_the_environment(tmp_path):
    script = tmp_path / "alternate.py"
    script.write_text(textwrap.dedent("""
        import torch, xlanb
        f1 = torch.compile(lambda a: torch.cos(a) + 1, backend="xlanb")
        f2 = torch.compile(lambda a: torch.sin(a) * 2, backend="xlanb")
        x = torch.randn(8)
        xd = x.to("xla")
        for f, g in ((f1, lambda a: torch.cos(a) + 1), (f2, lambda a: torch.sin(a) * 2)) * 2:
            torch.testing.assert_close(f(xd).cpu(), g(x))
        assert xlanb.runtime_state().config.cache_size == 1
        print("compiles", xlanb.metrics.counter_value("UncachedCompile"))
    """))
    env = {**os.environ, "XLANB_CACHE_SIZE": "1", "XLANB_PERSISTENT_CACHE": "0",
           "PYTHONPATH": os.pathsep.join(p for p in (os.path.dirname(os.path.dirname(xlanb.__file__)),
                                                      os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "compiles 4" in out.stdout          # each call compiled again: evicted, never an error


def test_module_scopes_do_not_break_a_compiled_module():
    """The notebook records module scopes by wrapping nn.Module.__call__; dynamo traces a module
    call through it. A compiled model is still one FX graph with no graph break, equals CPU, says
    nothing about global hooks, and the wrapper still names modules outside torch.compile."""
    import warnings

    torch.manual_seed(0)
    model, x = mlp(), torch.randn(4, 20)
    dev = copy.deepcopy(model).to("xla")
    with hooks.recording_modules(), warnings.catch_warnings(record=True) as caught:
        compiled = torch.compile(dev, backend="xlanb")
        mark = hooks.mark()
        out = compiled(x.to("xla"))
        found = hooks.since(mark)
        assert len(of_type(found, events.DynamoGraph)) == 1 and of_type(found, events.DynamoBreak) == []
        assert_close(out.cpu(), model(x))
        with hooks.recording_texts():
            mark = hooks.mark()
            y = dev(x.to("xla")).sum()
            xlanb.sync()
        (compile_event,) = of_type(hooks.since(mark), events.Compile)
    assert not [w for w in caught if "global hooks" in str(w.message)]
    assert "0" in {line.scope for line in compile_event.ir if not line.is_input}     # mlp's first Linear


def test_module_scopes_do_not_break_a_compiled_function_that_calls_a_module():
    """dynamo inlines the scope wrapper of nn.Module.__call__ when a compiled function calls a
    module (the module is not the compiled object): still one graph, no break, CPU's values."""
    torch.manual_seed(0)
    model, x = mlp(), torch.randn(4, 20)
    dev = copy.deepcopy(model).to("xla")
    with hooks.recording_modules():
        compiled = torch.compile(lambda inp: dev(inp) * 2, backend="xlanb")
        mark = hooks.mark()
        out = compiled(x.to("xla"))
        found = hooks.since(mark)
        assert len(of_type(found, events.DynamoGraph)) == 1 and of_type(found, events.DynamoBreak) == []
    assert_close(out.cpu(), model(x) * 2)
