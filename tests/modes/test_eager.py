"""Eager mode: every op compiled once per op shape, cached, and run at once."""

import pytest
import torch

import xlanb
from helpers import assert_close, compiles, counter, eager_compiles, eager_executes, executes


@pytest.fixture
def eager():
    with xlanb.eager_mode_context(True):
        yield


def test_eager_mode_context_yields_previous_and_restores():
    assert not xlanb.is_eager_mode()
    with xlanb.eager_mode_context(True) as previous:
        assert previous is False and xlanb.is_eager_mode()
        with xlanb.eager_mode_context(False) as inner_previous:
            assert inner_previous is True and not xlanb.is_eager_mode()
        assert xlanb.is_eager_mode()
    with pytest.raises(ValueError):
        with xlanb.eager_mode_context(True):
            raise ValueError("boom")
    assert not xlanb.is_eager_mode()
    xlanb.eager_mode(True)
    assert xlanb.is_eager_mode()
    xlanb.eager_mode(False)


def test_logsumexp_twice_compiles_once_executes_twice(eager):
    t = torch.randn(5, 5, device="xla")
    xlanb.metrics.clear_all()
    a = torch.logsumexp(t, 0)
    b = torch.logsumexp(t, 0)
    assert eager_compiles() == 1
    assert eager_executes() == 2
    assert counter("CachedCompile") == 1
    assert compiles() == 0 and executes() == 0
    assert_close(b.cpu(), torch.logsumexp(t.cpu(), 0))


def test_new_scalar_does_not_recompile(eager):
    t = torch.randn(5, 5, device="xla")
    xlanb.metrics.clear_all()
    a = t + 2.5
    b = t + 3.5
    assert eager_compiles() == 1 and eager_executes() == 2
    assert_close(b.cpu(), t.cpu() + 3.5)


def test_in_place_op_is_one_compile_and_one_execute(eager):
    t = torch.randn(5, 5, device="xla")
    xlanb.metrics.clear_all()
    t *= 5
    assert eager_compiles() == 1 and eager_executes() == 1


@pytest.mark.parametrize("op", ["topk", "svd", "max.dim"])
def test_multi_output_ops_compile_once_for_all_outputs(eager, op):
    x = torch.randn(5, 3, device="xla")
    xlanb.metrics.clear_all()
    if op == "topk":
        values, indices = torch.topk(x, 2, dim=0)
        assert_close(values.cpu(), torch.topk(x.cpu(), 2, dim=0).values)
    elif op == "svd":
        u, s, v = torch.svd(x)
        u, s, v = u.cpu(), s.cpu(), v.cpu()        # transfers only
        assert_close((u * s) @ v.T, x.cpu(), rtol=1e-4, atol=1e-4)
    else:
        values, indices = torch.max(x, 0)
        assert indices.cpu().tolist() == torch.max(x.cpu(), 0).indices.tolist()
    assert eager_compiles() == 1 and eager_executes() == 1


def test_batch_norm_outputs_and_running_stats_compile_once(eager):
    bn = torch.nn.BatchNorm1d(3).to("xla")
    x = torch.randn(5, 3, device="xla")
    xlanb.metrics.clear_all()
    bn(x)
    names = [e.name for e in xlanb.runtime_state().log.all() if isinstance(e, xlanb.events.Compile)]
    assert names.count("aten.native_batch_norm.default") == 1


def test_value_access_compiles_nothing(eager):
    t = torch.randn(3, 3, device="xla")
    s = t.sum()
    xlanb.metrics.clear_all()
    print(t)
    s.item()
    t[1].tolist()
    assert eager_compiles() == 0 and eager_executes() == 0
    assert xlanb.metrics.metric_data("TransferFromDeviceTime")[0] == 3


def test_sync_in_eager_mode_does_no_work(eager):
    t = torch.randn(3, device="xla") * 2
    xlanb.metrics.clear_all()
    xlanb.sync()
    assert xlanb.metrics.metric_data("CompileTime") is None
    assert xlanb.metrics.metric_data("ExecuteTime") is None


def test_eager_random_draws_differ_without_recompiling(eager):
    torch.randn(4, device="xla")
    xlanb.metrics.clear_all()
    a = torch.randn(4, device="xla").cpu()
    b = torch.randn(4, device="xla").cpu()
    assert not torch.equal(a, b)
    assert eager_compiles() == 0


def test_repeated_op_replays_its_executable_with_exact_counters(eager):
    """The eager fast path: the second `x * s` on same-typed inputs builds no graph, yet every
    launch is counted (one compile, N executions, N-1 cache hits) and every value is right."""
    x = torch.arange(6.0, device="xla")
    y = torch.ones(6, device="xla")
    base_compiles, base_runs = eager_compiles(), eager_executes()
    outs = [x * s for s in (2.5, 3.5, 4.5)] + [x + y, x + y, x + x, x + x, x.neg(), x.neg()]
    assert eager_compiles() - base_compiles == 4           # mul (scalar), add, add aliased, neg
    assert eager_executes() - base_runs == 9
    expected = [torch.arange(6.0) * s for s in (2.5, 3.5, 4.5)] + [torch.arange(6.0) + 1] * 2 \
        + [torch.arange(6.0) * 2] * 2 + [-torch.arange(6.0)] * 2
    for got, want in zip(outs, expected):
        assert_close(got.cpu(), want)
    assert xlanb.runtime_state().pending == []


def test_an_op_on_a_view_of_a_computed_tensor_is_one_launch_on_the_base(eager, monkeypatch):
    """x.t() + 1 in eager mode: the view is computed inside the op's executable, whose input is x's
    buffer; the second time on same-typed inputs replays it (no graph built). The values follow the
    base as it changes (an in-place write, a new base), and views that differ in any argument, in the
    base's layout or in the other operand get executables of their own."""
    from xlanb.runtime import executor
    built = []
    new_graph = executor.new_graph
    monkeypatch.setattr(executor, "new_graph", lambda roots, name, *rest: built.append(name) or new_graph(roots, name, *rest))
    base = torch.arange(12.0).reshape(3, 4)
    x = base.to("xla")
    y = torch.full((4, 3), 2.0).to("xla")
    cases = [
        (lambda t: t.t() + 0.5, lambda t: t.t() + 0.5),
        (lambda t: t[1] * 3.0, lambda t: t[1] * 3.0),
        (lambda t: t[:, 1:3].neg(), lambda t: t[:, 1:3].neg()),
        (lambda t: t[:, 0:2].neg(), lambda t: t[:, 0:2].neg()),          # another slice: its own executable
        (lambda t: t.t() * t.t(), lambda t: t.t() * t.t()),            # both operands views: a graph each time
        (lambda t: t.t() - y, lambda t: t.t() - torch.full((4, 3), 2.0)),
        (lambda t: t[0] + t, lambda t: t[0] + t),                       # the view and its own base
        (lambda t: torch.tanh(t.t()), lambda t: torch.tanh(t.t())),
    ]
    for i, (run, reference) in enumerate(cases):
        before = eager_compiles()
        first = run(x)
        compiled = eager_compiles() - before
        built.clear()
        second = run(x)
        assert eager_compiles() - before == compiled          # the second time compiles nothing
        assert len(built) == (1 if i == 4 else 0), i         # and builds no graph: the fast path
        assert_close(first.cpu(), reference(base))
        assert_close(second.cpu(), reference(base))
    x.mul_(2)                                            # the base's next value: the views read it
    base = base * 2
    assert_close((x.t() + 0.5).cpu(), base.t() + 0.5)
    assert_close((x[1] * 3.0).cpu(), base[1] * 3.0)
    runs = eager_executes()
    z = x[2] * 3.0
    assert eager_executes() - runs == 1                  # one launch: the select inside the mul's executable
    assert_close(z.cpu(), base[2] * 3.0)
    w = torch.arange(12.0).reshape(4, 3).to("xla").t()     # a base of another shape, a view of the same shape
    assert_close((w + 0.5).cpu(), torch.arange(12.0).reshape(4, 3).t() + 0.5)
    assert xlanb.runtime_state().pending == []


def test_an_op_with_constant_arguments_replays_its_executable(eager, monkeypatch):
    """x.sum(dim=0), softmax(x, 1), x.flip([0]) in eager mode: the second call on a same-typed tensor
    with the same constants replays the executable (no graph built); other constants, or a dtype given
    by keyword, get executables of their own; values are CPU's, refusals CPU's."""
    from xlanb.runtime import executor
    built = []
    new_graph = executor.new_graph
    monkeypatch.setattr(executor, "new_graph", lambda roots, name, *rest: built.append(name) or new_graph(roots, name, *rest))
    base = torch.randn(6, 5)
    x = base.to("xla")
    cases = [lambda t: t.sum(dim=0), lambda t: t.sum(dim=1), lambda t: t.mean(1, keepdim=True), lambda t: t.sum(),
             lambda t: torch.softmax(t, 1), lambda t: t.cumsum(0), lambda t: t.argmax(1), lambda t: t.flip([0]),
             lambda t: t.amax((0, 1)), lambda t: torch.tril(t, -1), lambda t: t.roll(2, 0), lambda t: t.repeat(2, 1),
             lambda t: t.sum(0, dtype=torch.float64)]
    for i, op in enumerate(cases):
        before = eager_compiles()
        first = op(x)
        compiled = eager_compiles() - before
        built.clear()
        runs = eager_executes()
        second = op(x)
        assert eager_compiles() - before == compiled, i      # the second time compiles nothing
        assert eager_executes() - runs == 1, i
        assert len(built) == (1 if i == 12 else 0), i        # and builds no graph (a keyword: the generic path)
        assert_close(first.cpu(), op(base))
        assert_close(second.cpu(), op(base))
    x.add_(1)                                                 # the next value of the same tensor: replayed on it
    assert_close(x.sum(dim=0).cpu(), (base + 1).sum(dim=0))
    with pytest.raises(IndexError) as xla_error:
        x.sum(dim=2)
    with pytest.raises(IndexError) as cpu_error:
        base.sum(dim=2)
    assert str(xla_error.value) == str(cpu_error.value)
    i = torch.arange(6).to("xla")                             # another dtype: its own executable, CPU's result dtype
    assert i.sum(dim=0).cpu().item() == 15 and i.sum(dim=0).dtype == torch.arange(6).sum(dim=0).dtype
    assert xlanb.runtime_state().pending == []


def test_an_in_place_op_replays_its_write_by_key(eager, monkeypatch):
    """`self.op_(other)` in eager mode: the second time on same-typed values is one launch of the
    remembered executable (no graph built), on a tensor's own value and through a view into its base,
    with a number, another tensor or self as the other operand. Values, aliasing views and torch's
    checks stay CPU's."""
    from xlanb.runtime import executor
    built = []
    new_graph = executor.new_graph
    monkeypatch.setattr(executor, "new_graph", lambda roots, name, *rest: built.append(name) or new_graph(roots, name, *rest))
    cases = [
        lambda t, y, y2: t.mul_(1.5),
        lambda t, y, y2: t.add_(y),
        lambda t, y, y2: t.mul_(t),
        lambda t, y, y2: t.neg_(),
        lambda t, y, y2: t[1].mul_(0.5),                 # through a view into the base
        lambda t, y, y2: t.t().add_(2.0),
        lambda t, y, y2: t[:, 1:3].sub_(y2),
        lambda t, y, y2: t[2].add_(y),
        lambda t, y, y2: (lambda v: v.mul_(v))(t[2]),     # a view and itself
    ]
    for own in (False, True):
        for i, op in enumerate(cases):
            cpu = (torch.arange(12.0).reshape(3, 4), torch.full((4,), 0.5), torch.tensor([1.0, -2.0]))
            xla = tuple(t.to("xla") for t in cpu)
            view = None if own else xla[0][0]            # x's value through its storage, seen by a view
            op(*xla)
            op(*cpu)
            built.clear()
            runs = eager_executes()
            result = op(*xla)
            expected = op(*cpu)
            assert built == [] and eager_executes() - runs == 1, (own, i)       # one launch, no graph
            assert_close(xla[0].cpu(), cpu[0])
            assert_close(result.cpu(), expected)
            if view is not None:
                assert_close(view.cpu(), cpu[0][0])
    ints = torch.arange(4).to("xla")
    ints.add_(1)
    ints.add_(1)
    with pytest.raises(RuntimeError) as raised:          # a verdict of the op's types: raised every time
        ints.mul_(0.5)
    with pytest.raises(type(raised.value), match=str(raised.value)[:40]):
        torch.arange(4).mul_(0.5)
    assert ints.cpu().tolist() == [2, 3, 4, 5]
    base = torch.zeros(3).to("xla")
    base.add_(1.0)
    wide = base.expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        wide.add_(1.0)                                   # internal overlap: refused as on the CPU
    assert base.cpu().tolist() == [1.0, 1.0, 1.0]
    assert xlanb.runtime_state().pending == []


def test_fast_path_follows_the_cache_through_eviction_and_reset(eager):
    from xlanb._config import override
    x = torch.arange(4.0, device="xla")
    with override(cache_size=1):
        a = x * 2.5
        b = x.neg()                                      # evicts the mul graph
        before = eager_compiles()
        c = x * 3.5                                      # fast key known, executable gone: compile again
        assert eager_compiles() == before + 1
    assert_close(c.cpu(), torch.arange(4.0) * 3.5)
    assert_close(a.cpu() + b.cpu(), torch.arange(4.0) * 1.5)
    xlanb.reset()
    assert xlanb.runtime_state().eager_ops == {}
    xlanb.eager_mode(True)
    before = eager_compiles()
    d = x * 4.5
    assert eager_compiles() == before + 1                 # a fresh runtime compiles again
    assert_close(d.cpu(), torch.arange(4.0) * 4.5)


def test_moving_tensors_to_the_device_compiles_nothing(eager):
    """`.to("xla")` and `torch.tensor(..., device="xla")` make an empty tensor and upload into it: the
    empty one runs nothing (capture/factories.py), so a new shape costs no executable."""
    xlanb.metrics.clear_all()
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Linear(7, 3)).to("xla")
    made = [torch.tensor([1.5] * n, device="xla") for n in range(2, 6)]
    assert eager_compiles() == 0 and compiles() == 0 and eager_executes() == 0
    assert_close(made[-1].cpu(), torch.full((5,), 1.5))
    assert_close(model[0].weight.cpu(), model[0].weight.detach().cpu())


def test_an_empty_tensor_runs_within_what_reads_it(eager):
    xlanb.metrics.clear_all()
    zeros = torch.empty(4, 3, device="xla").zero_()     # the fill's executable only
    assert eager_compiles() == 1 and eager_executes() == 1
    empty = torch.empty(6, device="xla")
    out = torch.empty(6, device="xla")
    torch.add(empty * 0, 2.0, out=out)
    assert_close(out.cpu(), torch.full((6,), 2.0))
    assert_close(zeros.cpu(), torch.zeros(4, 3))
    assert empty.cpu().shape == (6,) and empty.dtype == torch.float32


def test_small_exact_factories_are_made_on_the_host(eager):
    """Fills, identities and integer ranges up to VERDICT_ELEMENTS are made by torch on the CPU and
    uploaded (capture/factories.py): CPU's values, no executable; a float range, a larger fill and a
    random draw still run on the device."""
    xlanb.metrics.clear_all()
    made = {"arange": (torch.arange(3, 40, 4, device="xla"), torch.arange(3, 40, 4)),
            "zeros": (torch.zeros(5, 2, dtype=torch.int8, device="xla"), torch.zeros(5, 2, dtype=torch.int8)),
            "ones": (torch.ones(3, dtype=torch.bfloat16, device="xla"), torch.ones(3, dtype=torch.bfloat16)),
            "full": (torch.full((2, 3), -2.5, device="xla"), torch.full((2, 3), -2.5)),
            "eye": (torch.eye(3, 4, device="xla"), torch.eye(3, 4)),
            "scalar": (torch.scalar_tensor(7, dtype=torch.int64, device="xla"), torch.scalar_tensor(7, dtype=torch.int64))}
    assert eager_compiles() == 0
    for name, (got, want) in made.items():
        assert got.dtype == want.dtype, name
        assert_close(got.cpu(), want, rtol=0, atol=0)
    xlanb.metrics.clear_all()
    torch.arange(0.0, 1.0, 0.125, device="xla")
    torch.zeros(64, 65, device="xla")
    torch.rand(3, device="xla")
    assert eager_compiles() == 3
