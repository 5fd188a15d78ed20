"""The graph key, lifted scalars, the executable cache and value access."""

import torch

import xlanb
from helpers import assert_close, compiles, counter, executes
from xlanb._config import override


def xla(t):
    return t.to("xla")


def test_aliasing_is_part_of_the_key():
    p, q = xla(torch.randn(3)), xla(torch.randn(3))
    a = p + p
    xlanb.sync()
    b = p + q
    xlanb.sync()
    assert compiles() == 2
    c = q + p        # same program as p + q on other tensors: one graph
    xlanb.sync()
    assert compiles() == 2
    assert_close(a.cpu(), p.cpu() * 2)
    assert_close(c.cpu(), b.cpu())


def test_new_float_scalars_do_not_recompile():
    p = xla(torch.randn(3))
    xlanb.sync()
    for s in (2.5, 3.5, 4.5):
        r = p * s
        xlanb.sync()
    assert compiles() == 1
    assert executes() == 3
    assert counter("CachedCompile") == 2
    assert_close(r.cpu(), p.cpu() * 4.5)


def test_special_scalars_are_baked():
    p = xla(torch.randn(3))
    for s in (2, 3):      # ints are lifted too
        r = p * s
        xlanb.sync()
    assert compiles() == 1
    for s in (1, 0, -1):  # 0 and +-1 are constants: each its own graph
        r = p * s
        xlanb.sync()
    assert compiles() == 4
    assert_close(r.cpu(), -p.cpu())


def test_shapes_4_5_4_compile_twice():
    for n in (4, 5, 4):
        z = torch.zeros(n, device="xla") + 2.5
        xlanb.sync()
    assert compiles() == 2
    assert executes() == 3
    assert z.cpu().tolist() == [2.5] * 4


def test_cache_of_size_one_recompiles_evicted_graphs():
    x = xla(torch.arange(4.0))
    with override(cache_size=1):
        for _ in range(2):
            a = x * 3.0
            xlanb.sync()
            b = x.exp()
            xlanb.sync()
    assert compiles() == 4
    assert_close(a.cpu(), torch.arange(4.0) * 3)
    assert_close(b.cpu(), torch.arange(4.0).exp())


def test_item_twice_compiles_and_executes_once():
    x = xla(torch.arange(6.0))
    l = (x * 2).sum()
    assert l.item() == 30.0
    assert l.item() == 30.0
    assert compiles() == 1
    assert executes() == 1
    assert counter("aten::_local_scalar_dense") == 2
    xlanb.sync()              # the value is kept: nothing left to run
    assert executes() == 1


def test_value_access_cuts_the_graph_and_keeps_the_value():
    x = xla(torch.ones(3))
    w = x * 3
    w2 = w + 1
    assert w.cpu().tolist() == [3.0, 3.0, 3.0]
    xlanb.sync()              # w2 is computed from w's kept value
    assert w2.cpu().tolist() == [4.0, 4.0, 4.0]
    assert compiles() == 2


def test_empty_sync_counts_a_mark_step_only():
    xlanb.sync()
    assert counter("MarkStep") == 1
    assert compiles() == 0 and executes() == 0


def test_in_place_updates_donate_the_old_buffer():
    p = xla(torch.zeros(4))
    for _ in range(3):
        p.add_(1.5)
        xlanb.sync()
    assert counter("InputOutputAliasCount") == 3
    assert p.cpu().tolist() == [4.5] * 4


def test_sync_wait_and_wait():
    x = xla(torch.randn(64, 64))
    y = x @ x
    xlanb.sync(wait=True)
    z = y + 1
    xlanb.sync()
    xlanb.wait()
    assert_close(z.cpu(), x.cpu() @ x.cpu() + 1, rtol=1e-4, atol=1e-4)


def last_compile():
    return [e for e in xlanb.runtime_state().log.all() if isinstance(e, xlanb.events.Compile)][-1]


def test_equal_lifted_scalars_share_one_input():
    """A 1000-op chain of `x * 1.0001 + 0.5` passes 2 numbers, not 1000 (the program XLA compiles
    is then the size of JAX's with the constants baked in)."""
    x0 = torch.rand(8, 8)
    x = xla(x0)
    for _ in range(500):
        x = x * 1.0001 + 0.5
    xlanb.sync()
    assert last_compile().scalars == 2
    expected = x0
    for _ in range(500):
        expected = expected * 1.0001 + 0.5
    assert_close(x.cpu(), expected)


def test_scalars_that_become_equal_compile_once_more_and_are_explained():
    x = xla(torch.ones(4))

    def step(a, b):
        return (x * a + b).cpu()
    assert step(2.5, 3.5).tolist() == [6.0] * 4
    assert step(4.5, 5.5).tolist() == [10.0] * 4          # new values, same sharing: no compile
    assert compiles() == 1
    assert step(2.5, 2.5).tolist() == [5.0] * 4           # equal now: one slot for both
    assert compiles() == 2
    assert "scalars: 2 -> 1" in xlanb.debug.explain_recompiles()
    assert step(7.5, 1.5).tolist() == [9.0] * 4           # apart again: the first graph, cached
    assert compiles() == 2


def test_zero_and_negative_zero_are_not_merged():
    with override(special_scalars=False):
        x = xla(torch.ones(2))
        y = (x * 0.0).cpu(), (x * -0.0).cpu()
        z = xla(torch.ones(2))
        both = torch.stack([z * 0.0, z * -0.0]).cpu()
    assert torch.equal(both.signbit(), torch.tensor([[False, False], [True, True]]))
    assert y[1].signbit().all()


def test_a_rule_is_traced_once_per_kind_of_node():
    """Lowering replays one traced jaxpr for every node of the same rule, input types and constants."""
    from xlanb.lower import to_jax
    to_jax._RULE_JAXPRS.clear()
    x0 = torch.rand(8, 8)
    x, expected = xla(x0), x0
    for _ in range(50):
        x, expected = x * 1.0001 + 0.5, expected * 1.0001 + 0.5
    xlanb.sync()
    assert len(to_jax._RULE_JAXPRS) == 2          # one mul kind, one add kind
    assert_close(x.cpu(), expected)
    a, b = torch.rand(8, 8), torch.rand(8, 8)
    y = xla(a).sum(0) + xla(b).sum(1)
    xlanb.sync()
    assert len(to_jax._RULE_JAXPRS) == 5          # sum over dim 0 and over dim 1 differ; one more add
    assert_close(y.cpu(), a.sum(0) + b.sum(1))


def test_a_foreach_op_makes_one_memo_entry_per_kind_of_element():
    """A foreach op's elements go through the rules' memo one by one: six tensors of two shapes are
    two kinds of element; the node itself is a third entry; taking its outputs adds none."""
    from xlanb.lower import to_jax
    to_jax._RULE_JAXPRS.clear()
    cpu = [torch.rand(3, 4) for _ in range(3)] + [torch.rand(5) for _ in range(3)]
    out = torch._foreach_mul([xla(t) for t in cpu], 2.5)
    xlanb.sync()
    assert len(to_jax._RULE_JAXPRS) == 3
    for got, t in zip(out, cpu):
        assert_close(got.cpu(), t * 2.5)


def test_the_rules_memo_tells_numbers_of_other_types_and_signs_apart():
    """A memo key holds the call's constants: 1, 1.0 and True, 0.0 and -0.0, a list and a tuple are
    different keys, and joining gives back each one's type."""
    from xlanb.lower.tree import join, split
    values = [1, 1.0, True, 0.0, -0.0, [2, 3], (2, 3)]
    skeletons = [split(v, []) for v in values]
    assert len(set(skeletons)) == len(values)
    for v, sk in zip(values, skeletons):
        back = join(sk, [])
        assert type(back) is type(v) and repr(back) == repr(v)


def test_a_value_read_keeps_every_live_tensor_its_graph_computed():
    x = xla(torch.ones(3))
    a = x * 2
    b = a + 1
    s = b.sum()
    assert s.item() == 9.0
    assert counter("ValueReadExtraOutputs") == 2          # a and b came out of the same graph
    runs = executes()
    xlanb.sync()                                          # nothing is left pending
    assert executes() == runs
    assert a.cpu().tolist() == [2.0] * 3 and b.cpu().tolist() == [3.0] * 3
    assert executes() == runs                             # kept values: no graph ran


def test_a_decode_loop_reading_one_value_per_step_compiles_one_graph_of_fixed_size():
    """As HF generate() does: state grows by one step per token and a stopping check reads one value."""
    state = xla(torch.zeros(4))
    for _ in range(6):
        state = state + 1
        done = bool((state.sum() > 1000).item())
        assert not done
    compile_events = [e for e in xlanb.runtime_state().log.all() if isinstance(e, xlanb.events.Compile)]
    assert len(compile_events) == 1                       # the same graph every step: no recompiles
    assert state.cpu().tolist() == [6.0] * 4
    assert compiles() == 1


def test_the_cache_shrinks_before_the_process_runs_out_of_memory_maps(monkeypatch):
    """Each XLA CPU executable holds ~12 memory maps; past vm.max_map_count Linux kills the process in a
    compile (a graph per shape, 2048 cached, did): the cache counts maps and keeps fewer executables."""
    import warnings
    from xlanb.runtime import cache as policy
    import pytest
    if policy._max_map_count() is None:
        pytest.skip("no /proc/sys/vm/max_map_count: not Linux")
    if xlanb.runtime_state().jax_device().platform != "cpu":
        pytest.skip("an accelerator's executables hold no host memory maps (XLA:CPU's JIT code does)")
    start = policy._map_count()
    fake_limit = int((start + 1000) / policy.CompiledCache.MAP_BUDGET)   # 1000 maps more than now: ~80 graphs
    monkeypatch.setattr(policy, "_max_map_count", lambda: fake_limit)
    monkeypatch.setattr(policy.CompiledCache, "MAP_CHECK_EVERY", 8)
    cache = xlanb.runtime_state().cache
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 201):
            x = torch.arange(n, dtype=torch.float32, device="xla")
            assert (x * 2 + 1).sum().item() == n * n       # one new graph per n
    said = [str(w.message) for w in caught if "vm.max_map_count" in str(w.message)]
    assert len(said) == 1 and f"Linux allows {fake_limit}" in said[0] and "sysctl -w vm.max_map_count" in said[0]
    assert len(cache) == cache.limit < 200
    assert policy._map_count() <= fake_limit * policy.CompiledCache.MAP_BUDGET + 200
    x = torch.arange(3, dtype=torch.float32, device="xla")   # an evicted graph compiles again and is right
    assert (x * 2 + 1).sum().item() == 9.0


def test_every_path_puts_into_the_executable_cache_through_one_function(monkeypatch):
    """Lazy syncs, eager ops (first and fast path), value reads, get_sharding, a replayed function,
    torch.compile and the optimized-HLO look all compile through `executor.executable`."""
    import sys
    from xlanb.runtime.cache import CompiledCache
    put = CompiledCache.put
    callers = []

    def recording_put(self, key, compiled):
        frame = sys._getframe(1)
        callers.append((frame.f_globals["__name__"], frame.f_code.co_name))
        return put(self, key, compiled)
    monkeypatch.setattr(CompiledCache, "put", recording_put)

    x = xla(torch.randn(4, 3))
    (x * 3).sum().item()                                  # a value read
    y = torch.tanh(x) + 1
    xlanb.sync()                                          # a lazy sync
    with xlanb.eager_mode_context(True):
        for _ in range(2):                                # the first eager op, then the fast path
            z = torch.sin(x) * 2
    xlanb.spmd.get_sharding(x @ x.T)                      # compiled to ask the partitioner
    xlanb.debug.hlo_text(x - 5, stage="optimized")

    @xlanb.compile(replay=True)
    def step(t):
        return (t * y).sum()
    for _ in range(3):
        step(x).item()
    compiled_fn = torch.compile(lambda t: torch.cos(t) * 4, backend="xlanb")
    compiled_fn(x).cpu()
    assert z.cpu().shape == (4, 3) and step.replayed == 1
    assert len(callers) >= 6
    assert set(callers) == {("xlanb.runtime.executor", "executable")}


def test_a_graph_is_built_from_its_arguments():
    """ir/graph.py's build_graph reads no setting: the settings and the donation rule are passed in,
    and the key carries them (runtime/executor.new_graph passes those in force)."""
    from xlanb.capture.tensor import base_node
    from xlanb.ir.graph import Settings, build_graph
    from xlanb.runtime import executor
    a, b = torch.ones(3, device="xla"), torch.ones(3, device="xla")
    xlanb.sync()
    y = a * b + a
    root, inputs = base_node(y), [base_node(a), base_node(b)]
    plain = build_graph([root], "g")
    assert (plain.key.donate, plain.key.matmul_precision, plain.key.compile_effort, plain.key.platform) == \
        ((), "highest", "default", "")
    built = build_graph([root], "g", Settings("medium", "fast", "cpu"), donatable=lambda n: n is inputs[1])
    assert built.inputs == inputs
    assert (built.key.donate, built.key.matmul_precision, built.key.compile_effort, built.key.platform) == \
        ((1,), "medium", "fast", "cpu")
    with override(compile_effort="fast"):
        assert executor.new_graph([root], "g").key.compile_effort == "fast"
    checked = build_graph([root], "g", Settings(nan_check=True), donatable=lambda n: True)
    assert (checked.key.nan_check, checked.key.donate) == (True, ())      # the checked graph donates nothing
    with override(debug_nans=True):
        assert executor.new_graph([root], "g", donatable=lambda n: True).key == checked.key
    assert executor.new_graph([root], "g").key == plain.key
    assert y.cpu().tolist() == [2.0, 2.0, 2.0]


def test_a_cache_key_hash_covers_every_field_and_is_computed_once():
    """CacheKey hashes its fields once (a W3 key walks ~1000 entries); a key differing in any one field
    hashes differently, so a field added to the key and left out of the hash is caught here."""
    import dataclasses
    from xlanb.ir.graph import CacheKey
    base = CacheKey(entries=((("aten.add.Tensor",), (0, 1)),), roots=(0,), scalars=(float,))
    other = {"entries": (), "roots": (7,), "scalars": (int,), "scalar_uses": (0,), "donate": (0,),
             "shardings": ("s",), "recycled": ("m",), "matmul_precision": "medium", "nan_check": True,
             "compile_effort": "fast", "platform": "cpu"}
    assert set(other) == {f.name for f in dataclasses.fields(CacheKey)}
    for name, value in other.items():
        changed = dataclasses.replace(base, **{name: value})
        assert changed != base and hash(changed) != hash(base), name
    assert hash(base) == hash(dataclasses.replace(base)) and base.__dict__["_hash"] == hash(base)


def test_lowering_runs_with_the_garbage_collector_paused(monkeypatch):
    """Lowering's many short-lived objects are freed by reference counts, not by collector passes
    (runtime/executor.collector_paused); the collector is left as it was found, on or off."""
    import gc

    from xlanb.runtime import executor
    seen = []
    build = executor.build_function

    def watching(graph):
        seen.append(gc.isenabled())
        return build(graph)
    monkeypatch.setattr(executor, "build_function", watching)
    p = xla(torch.randn(3))
    for scale, collector in ((3.0, True), (5, False)):      # a new graph each time (int 5: another key)
        (gc.enable if collector else gc.disable)()
        try:
            r = p * torch.tensor(scale).to("xla") if collector else p.neg() * scale
            xlanb.sync()
            assert gc.isenabled() is collector
        finally:
            gc.enable()
    assert seen and not any(seen)
    assert_close(r.cpu(), -p.cpu() * 5)
