"""torch.compile(backend="xlanb") inference: results equal CPU, repeated calls compile nothing, an
evicted executable is compiled again (torch_xla's openxla backend crashes there), and an input
with pending IR needs no sync of its own."""

import copy

import torch

import xlanb
from models.test_training_parity import TinyGPT
from nets import CNN, compiles, executions, mlp, of_type
from xlanb import events, hooks
from helpers import assert_close


def run_compiled(model, *inputs):
    dev = copy.deepcopy(model).to("xla")
    compiled = torch.compile(dev, backend="xlanb")
    with torch.no_grad():
        out = compiled(*[t.to("xla") for t in inputs])
    return out, compiled


def test_mlp_equals_cpu_and_repeats_compile_nothing():
    torch.manual_seed(0)
    model, x = mlp(), torch.randn(16, 20)
    with torch.no_grad():
        expected = model(x)
    mark = hooks.mark()
    out, compiled = run_compiled(model, x)
    assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)
    first = hooks.since(mark)
    assert [e.path for e in of_type(first, events.DynamoGraph)] == ["macro"]
    assert compiles(first) == 1
    mark = hooks.mark()
    for _ in range(3):
        with torch.no_grad():
            out = compiled(x.to("xla"))
        assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)
    again = hooks.since(mark)
    assert compiles(again) == 0 and executions(again) == 3
    assert of_type(again, events.DynamoGraph) == []


def test_cnn_equals_cpu_in_eval_mode():
    torch.manual_seed(0)
    model, x = CNN().eval(), torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        expected = model(x)
    out, _ = run_compiled(model, x)
    assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-5)


def test_batchnorm_train_mode_updates_running_stats_lazily():
    """An input mutation kept in the graph (BatchNorm's running stats) is written back lazily."""
    torch.manual_seed(0)
    model, x = CNN().train(), torch.randn(4, 3, 8, 8)
    dev = copy.deepcopy(model).to("xla")
    compiled = torch.compile(dev, backend="xlanb")
    with torch.no_grad():
        expected = model(x)
        mark = hooks.mark()
        out = compiled(x.to("xla"))
        assert executions(hooks.since(mark)) == 0          # nothing ran yet
    xlanb.sync()
    assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-5)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert_close(getattr(dev.bn1, name).cpu(), getattr(model.bn1, name), rtol=1e-4, atol=1e-6)


def test_transformer_equals_cpu():
    torch.manual_seed(0)
    model, idx = TinyGPT().eval(), torch.randint(0, 64, (2, 16))
    with torch.no_grad():
        expected = model(idx)
    out, _ = run_compiled(model, idx)
    assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-5)


def test_cache_size_1_with_two_alternating_functions_recompiles_instead_of_failing():
    x, y = torch.randn(8), torch.randn(8)

    def f1(a, b):
        return torch.cos(a) + torch.sin(b)

    def f2(a, b):
        return a * b - 1.5
    c1, c2 = torch.compile(f1, backend="xlanb"), torch.compile(f2, backend="xlanb")
    xa, xb = x.to("xla"), y.to("xla")
    xlanb.sync()
    with xlanb._config.override(cache_size=1):
        mark = hooks.mark()
        for c, f in ((c1, f1), (c2, f2), (c1, f1), (c2, f2)):
            assert_close(c(xa, xb).cpu(), f(x, y))
        log = hooks.since(mark)
    assert compiles(log) == 4                  # each call found the other's executable in the one slot
    recompiled = [e.recompile for e in of_type(log, events.Compile) if e.recompile is not None]
    assert any("evicted" in str(change) for r in recompiled for change in r.changes), recompiled
    assert len(of_type(log, events.DynamoGraph)) == 2    # dynamo captured each function once


def test_pending_input_needs_no_extra_sync():
    x = torch.randn(6, 6)
    dev = x.to("xla")
    xlanb.sync()
    compiled = torch.compile(lambda a: torch.cos(a) + torch.sin(a), backend="xlanb")
    mark = hooks.mark()
    pending = dev * 2 + 1                     # pending IR, not computed
    out = compiled(pending)
    assert executions(hooks.since(mark)) == 0           # neither the input nor the call ran anything
    assert_close(out.cpu(), torch.cos(x * 2 + 1) + torch.sin(x * 2 + 1))
    log = hooks.since(mark)
    assert executions(log) == 1 and compiles(log) == 1  # one graph: the pending input and the FX graph
    syncs = of_type(log, events.Sync)
    assert [s.kind for s in syncs] == ["value"]


def test_repeat_calls_after_reset_and_clear_compile_again_from_the_kept_program():
    compiled = torch.compile(lambda a: (a @ a).relu().sum(), backend="xlanb")
    x = torch.randn(5, 5)
    expected = (x @ x).relu().sum()
    assert_close(compiled(x.to("xla")).cpu(), expected)
    xlanb.runtime_state().cache.clear()
    mark = hooks.mark()
    assert_close(compiled(x.to("xla")).cpu(), expected)
    log = hooks.since(mark)
    assert compiles(log) == 1 and of_type(log, events.DynamoGraph) == []


def test_a_value_read_inside_the_compiled_function_breaks_the_graph_and_runs_what_is_pending():
    def f(x):
        y = x.cos()
        if y.sum() > 0:                 # data-dependent Python: a graph break and a value read
            return y * 2
        return y - 1
    compiled = torch.compile(f, backend="xlanb")
    for x in (torch.full((5,), 0.5), torch.full((5,), 3.0)):
        mark = hooks.mark()
        out = compiled(x.to("xla"))
        log = hooks.since(mark)
        assert [s.kind for s in of_type(log, events.Sync)] == ["value"]
        assert_close(out.cpu(), f(x))
    breaks = [e for e in xlanb.runtime_state().log.all() if isinstance(e, events.DynamoBreak)]
    # one break, at the branch: dynamo compiled none of the runtime's (or JAX's) frames that ran there
    assert [(e.kind, e.location) for e in breaks] == [("graph_break", f"test_inference.py:{f.__code__.co_firstlineno + 2}")]
    assert breaks[0].reason.startswith("Data-dependent branching")
