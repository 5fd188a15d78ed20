"""Shapes: with dynamic=False each new shape is captured and compiled once and old shapes stay
cached; symbolic shapes (mark_dynamic, or dynamo's automatic dynamic shapes) give right results
through the op-by-op replay, one lazy graph per concrete shape."""

import torch

import xlanb
from nets import compiles, executions, of_type
from xlanb import events, hooks
from helpers import assert_close


def f(x):
    return (x * 2).sin().sum(0)


def test_static_shapes_compile_once_per_shape_and_keep_old_shapes():
    compiled = torch.compile(f, backend="xlanb", dynamic=False)
    inputs = {n: torch.randn(n, 3) for n in (4, 5, 6)}
    per_call = []
    for n in (4, 5, 4, 6, 5, 4):
        mark = hooks.mark()
        out = compiled(inputs[n].to("xla"))
        assert_close(out.cpu(), f(inputs[n]))
        log = hooks.since(mark)
        per_call.append((compiles(log), len(of_type(log, events.DynamoGraph))))
    assert per_call == [(1, 1), (1, 1), (0, 0), (1, 1), (0, 0), (0, 0)]
    recompiles = [e for e in xlanb.runtime_state().log.all() if isinstance(e, events.DynamoBreak)]
    assert recompiles and all(e.kind == "recompile" for e in recompiles)
    assert "size mismatch" in recompiles[0].reason and recompiles[0].location == f"test_shapes.py:{f.__code__.co_firstlineno}"


def test_automatic_dynamic_shapes_replay_with_right_results():
    compiled = torch.compile(f, backend="xlanb")          # dynamic=None: dynamo goes symbolic on the 2nd shape
    for n in (4, 5, 7, 5):
        x = torch.randn(n, 3)
        mark = hooks.mark()
        assert_close(compiled(x.to("xla")).cpu(), f(x))
        graphs = of_type(hooks.since(mark), events.DynamoGraph)
        if n == 5 and graphs:
            assert graphs[0].path == "replay" and "symbolic" in graphs[0].reason


def test_mark_dynamic_works_through_the_replay():
    compiled = torch.compile(f, backend="xlanb")
    shapes_compiled = []
    for n in (4, 6, 4):
        x = torch.randn(n, 3)
        dev = x.to("xla")
        torch._dynamo.mark_dynamic(dev, 0)
        mark = hooks.mark()
        assert_close(compiled(dev).cpu(), f(x))
        log = hooks.since(mark)
        shapes_compiled.append(compiles(log))
        assert executions(log) == 1
    assert shapes_compiled == [1, 1, 0]                  # one lazy graph per concrete shape, cached
    graphs = [e for e in xlanb.runtime_state().log.all() if isinstance(e, events.DynamoGraph)]
    assert [g.path for g in graphs] == ["replay"]
    assert xlanb.metrics.counter_value("DynamoGraphReplayed") == 1
