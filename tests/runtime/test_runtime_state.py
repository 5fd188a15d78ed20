"""The Runtime object and the config: every setting is read where it is used, `xlanb.reset()`
gives a fresh runtime, and nothing the runtime keeps (cache, event log) outgrows its bounds."""

import dataclasses
import gc
import os
import weakref

import pytest
import torch

import xlanb
from helpers import assert_close, compiles, counter, same_values
from xlanb import events, hooks
from xlanb._config import Config, config, override
from xlanb.runtime.cache import persistent_cache
from xlanb.runtime.cache import CompiledCache
from xlanb.state import Runtime, runtime_state


def compile_events() -> list[events.Compile]:
    return [e for e in runtime_state().log.all() if isinstance(e, events.Compile)]


def last_compiled():
    """The Compiled object of the latest compile (read from the cache by its digest)."""
    digest = compile_events()[-1].key
    (compiled,) = [c for c in runtime_state().cache._entries.values() if c.digest == digest]
    return compiled


# --- 1. every config field is overridable at run time, and the new value is used -------------

def test_every_config_field_has_a_test_here():
    tested = {"cache_size", "cache_dir", "persistent_cache", "device_name", "platform", "debug", "report",
              "max_frames", "special_scalars", "memory_warning", "slow_compile",   # these two: tests/notebook
              "tracebacks",                                                          # tests/capture/test_tracebacks.py
              "debug_nans",                                                          # tests/runtime/test_debug_nans.py
              "compile_effort",                                                      # tests/runtime/test_compile_effort.py
              "host_memory_reuse"}                                                   # tests/runtime/test_host_memory.py
    assert {f.name for f in dataclasses.fields(Config)} == tested


def test_cache_size_bounds_the_lru_and_evicts_the_oldest_graph():
    with override(cache_size=2):
        for n in range(1, 6):
            y = torch.ones(n, device="xla") * 2.5
            xlanb.sync()
        assert len(runtime_state().cache) == 2
        assert compiles() == 5 and counter("UncachedCompile") == 5
        y = torch.ones(1, device="xla") * 2.5        # the first graph was evicted
        xlanb.sync()
        assert compiles() == 6 and counter("UncachedCompile") == 6
        y = torch.ones(5, device="xla") * 2.5        # still cached
        xlanb.sync()
        assert compiles() == 6
    assert y.cpu().tolist() == [2.5] * 5


@pytest.fixture
def restore_persistent_cache():
    yield
    persistent_cache.enable()          # point JAX back at the configured cache (off the tmp dirs)


def _files(directory) -> list[str]:
    return [f for _, _, names in os.walk(directory) for f in names]


def test_persistent_cache_and_cache_dir_are_read_at_each_compile(tmp_path, restore_persistent_cache):
    on, off = tmp_path / "on", tmp_path / "off"
    with override(persistent_cache=True, cache_dir=str(on)):
        y = torch.ones(3, 7, 11, device="xla") * 2.5      # a shape no other test compiles
        xlanb.sync()
        assert persistent_cache.directory() == str(on)
    assert _files(on), "a compile with the persistent cache on writes into cache_dir"
    with override(persistent_cache=False, cache_dir=str(off)):
        z = torch.ones(3, 7, 13, device="xla") * 2.5
        xlanb.sync()
        assert persistent_cache.directory() is None
    assert not off.exists() or _files(off) == []
    assert y.cpu().sum().item() == 2.5 * 231 and z.cpu().sum().item() == 2.5 * 273


def test_device_name_cannot_change_after_import():
    with pytest.raises(ValueError, match="cannot change after xlanb is imported") as error:
        with override(device_name="other"):
            pass
    assert "XLANB_DEVICE_NAME" in str(error.value)
    assert config().device_name == xlanb.device().type
    with override(device_name=xlanb.device().type) as cfg:      # the same name is fine
        assert cfg.device_name == xlanb.device().type


def test_platform_is_read_at_each_upload():
    with override(platform="cpu"):
        x = torch.arange(3.0).to("xla")
        assert (x * 2).cpu().tolist() == [0.0, 2.0, 4.0]
    with override(platform="no_such_backend"):
        with pytest.raises(Exception, match="no_such_backend"):
            torch.ones(2).to("xla")
    assert torch.ones(2).to("xla").cpu().tolist() == [1.0, 1.0]    # the default platform again


def test_debug_level_is_read_at_each_compile(capsys):
    with override(debug=1):
        y = torch.ones(2, 9, device="xla") * 2.5
        xlanb.sync()
    assert "xlanb: compile sync" in capsys.readouterr().err
    with override(debug=0):
        y = torch.ones(3, 9, device="xla") * 2.5
        xlanb.sync()
    assert capsys.readouterr().err == ""
    assert compiles() == 2 and y.cpu().shape == (3, 9)


def test_report_style_is_a_plain_value_read_at_use():
    before = config().report
    with override(report="compact"):
        assert config().report == "compact"
        assert runtime_state().config.report == "compact"
    assert config().report == before
    with pytest.raises(ValueError, match="report must be"):
        with override(report="loud"):
            pass


def _inner(t):
    return t.cpu()


def _middle(t):
    return _inner(t)


def _outer(t):
    return _middle(t)


def _value_sync() -> events.Sync:
    return [e for e in runtime_state().log.all() if isinstance(e, events.Sync) and e.kind == "value"][-1]


def test_max_frames_is_read_at_each_forced_execution():
    x = torch.ones(3).to("xla")
    with override(max_frames=1):
        _outer(x * 3.5)
    assert len(_value_sync().frames) == 1
    with override(max_frames=8):
        _outer(x * 4.5)
    frames = _value_sync().frames
    assert [f.function for f in frames[:3]] == ["_inner", "_middle", "_outer"]
    assert 3 < len(frames) <= 8


def _mul_one_scalars(x) -> int:
    """Lifted scalars in the graph of `x * 1` (compiled afresh) and its result checked."""
    runtime_state().cache.clear()
    y = x * 1
    xlanb.sync()
    assert_close(y.cpu(), x.cpu())
    return compile_events()[-1].scalars


def test_special_scalars_is_read_at_each_op():
    x = torch.randn(5).to("xla")
    assert _mul_one_scalars(x) == 0                     # default: 1 is baked into the graph
    with override(special_scalars=False):
        assert _mul_one_scalars(x) == 1                 # lifted as a graph input
    assert _mul_one_scalars(x) == 0                     # baked again: not frozen by the op's memo
    with override(special_scalars=False):
        assert _mul_one_scalars(x) == 1


def test_without_special_scalars_0_and_1_share_one_graph_with_other_ints():
    x = torch.randn(5).to("xla")
    with override(special_scalars=False):
        for s in (1, 0, -1, 7):
            y = x * s
            xlanb.sync()
            assert_close(y.cpu(), x.cpu() * s)
        y = x.clamp(-1, 1)
        xlanb.sync()
        assert_close(y.cpu(), x.cpu().clamp(-1, 1))
    assert compiles() == 2
    assert [e.scalars for e in compile_events()] == [1, 2]
    for s in (1, 0, -1):                                # by default each its own constant
        y = x * s
        xlanb.sync()
    assert compiles() == 5
    assert [e.scalars for e in compile_events()][2:] == [0, 0, 0]


# --- 2. xlanb.reset() gives a fresh runtime ---------------------------------------------------

# set once (or owned by whoever subscribed or opened them) and kept by reset()
SURVIVORS = {"log", "device", "lock", "_jax_devices", "host_memory", "several_devices", "location_namer", "want_texts",
             "module_hooks", "global_mesh", "op_listener", "tensor_listener",
             "manual_used"}


def _reset_fields() -> set[str]:
    bare = Runtime.__new__(Runtime)
    bare._fresh()
    return set(vars(bare))


def _plain(v):
    if isinstance(v, CompiledCache):
        return ("cache", len(v._entries), len(v._cleared))
    if isinstance(v, weakref.WeakSet):
        return ("weakset", len(v))
    return v


def test_every_runtime_field_is_reset_or_a_known_survivor():
    assert set(vars(Runtime())) - _reset_fields() == SURVIVORS


def test_reset_gives_a_fresh_runtime_in_place():
    rt = runtime_state()
    seen = []
    rt.subscribe(seen.append)
    try:
        x = torch.ones(4).to("xla")
        a = x * 2.5
        xlanb.sync()
        b = x.exp()
        xlanb.sync()
        with xlanb.compile(name="n", max_different_graphs=1):
            c = x * 3.5
        noise = torch.randn(4, device="xla")           # an RNG draw
        noise.cpu()
        a.add_(1.0)                                     # an overwritten buffer, pending
        pending = x + 5.5
        xlanb.eager_mode(True)
        assert len(rt.cache) > 0 and rt.log.all() and xlanb.metrics.counter_names()
        assert rt.pending and rt.detectors and rt.history and rt.rng is not None and rt.overwritten
        assert xlanb.is_eager_mode()

        xlanb.reset()

        assert xlanb.runtime_state() is rt
        assert len(rt.cache) == 0
        assert rt.log.all() == []
        assert xlanb.metrics.counter_names() == [] and xlanb.metrics.metric_names() == []
        assert not xlanb.is_eager_mode()
        assert rt.pending == [] and hooks.status()["pending_nodes"] == 0
        assert rt.detectors == {} and rt.history == {}
        fresh = Runtime()
        for name in sorted(set(vars(fresh)) - SURVIVORS):
            assert _plain(getattr(rt, name)) == _plain(getattr(fresh, name)), name
        for name in ("eager", "graph_name", "allow_execution", "track_locations", "compile_scope", "observer",
                     "pending", "deferred", "outstanding", "counters", "metrics"):
            assert getattr(rt, name) == getattr(fresh, name), name

        seen.clear()
        y = torch.ones(4).to("xla") * 2.5               # the runtime works, and the listener still hears
        xlanb.sync()
        assert any(isinstance(e, events.Compile) for e in seen)
        assert compiles() == 1 and counter("MarkStep") == 1
        assert y.cpu().tolist() == [2.5] * 4
        assert torch.randn(3, device="xla").cpu().shape == (3,)
        assert same_values(b.cpu(), x.cpu().exp())       # computed values are kept
        del pending, c, noise
    finally:
        rt.unsubscribe(seen.append)


def test_reset_forgets_the_graph_limit_of_a_decorated_function():
    @xlanb.compile(max_different_graphs=1)
    def step(x):
        return x * 2
    step(torch.ones(3, device="xla"))
    with pytest.raises(RuntimeError, match="Maximum number of different graphs allowed per function exceeded: 1"):
        step(torch.ones(4, device="xla"))
    xlanb.reset()
    step(torch.ones(4, device="xla"))          # a fresh runtime: this is the function's first graph
    with pytest.raises(RuntimeError, match="exceeded: 1"):
        step(torch.ones(5, device="xla"))


def test_reset_waits_for_launched_work(monkeypatch):
    import xlanb.state
    waited = []
    real = xlanb.state.jax.block_until_ready
    monkeypatch.setattr(xlanb.state.jax, "block_until_ready", lambda xs: (waited.append(len(xs)), real(xs))[1])
    x = torch.ones(64, 64, device="xla")
    y = x @ x
    xlanb.sync()
    launched = len(runtime_state().outstanding)
    assert launched >= 1
    xlanb.reset()
    assert waited == [launched]                   # reset blocked on every launch before clearing
    assert runtime_state().outstanding == []
    assert y.cpu().sum().item() == 64 * 64 * 64


def test_reset_keeps_an_open_recording_texts_scope():
    rt = runtime_state()
    with hooks.recording_texts():
        xlanb.reset()
        y = torch.ones(2, 3, device="xla") * 2.5
        xlanb.sync()
        assert compile_events()[-1].stablehlo != ""     # whoever asked for texts still gets them
    assert rt.want_texts == 0
    y = torch.ones(3, 3, device="xla") * 2.5
    xlanb.sync()
    assert compile_events()[-1].stablehlo == ""         # and no one gets them after the scope


# --- 3. executables are bounded by the cache size; events are plain data ----------------------

def test_executables_are_bounded_by_the_cache_size():
    refs = []
    with override(cache_size=2):
        for i in range(50):
            y = torch.ones(i + 1, device="xla") * 2
            xlanb.sync()
            refs.append(weakref.ref(last_compiled()))
    del y
    xlanb.wait()
    gc.collect()
    alive = [r() for r in refs if r() is not None]
    assert len(alive) <= 2
    assert len(runtime_state().cache) == 2
    assert len(compile_events()) == 50


def _plain_data_problems(value, path: str) -> list[str]:
    t = type(value)
    if t in (int, float, str, bool, type(None)) or value is type(None):
        return []
    if t is tuple:
        return [p for i, v in enumerate(value) for p in _plain_data_problems(v, f"{path}[{i}]")]
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and t.__module__ == events.__name__:
        return [p for f in dataclasses.fields(value)
                for p in _plain_data_problems(getattr(value, f.name), f"{path}.{f.name}")]
    return [f"{path}: {t.__module__}.{t.__qualname__}"]


def test_events_hold_only_plain_data():
    x = torch.randn(4, 4).to("xla")
    with hooks.recording_texts(), hooks.recording_locations():
        for n in (4, 5):
            with xlanb.compile(name="step"):
                y = (torch.ones(n, n, device="xla") * 2.5).sum()
        y.item()                                        # a forced execution: a value Sync with frames
    p = x * 3.5
    hooks.snapshot_pending({"p": p})                    # a PendingSnapshot naming a variable
    xlanb.sync()
    log = runtime_state().log.all()
    kinds = {type(e).__name__ for e in log}
    assert {"Compile", "Execute", "Transfer", "Sync", "PendingSnapshot"} <= kinds
    assert any(isinstance(e, events.Compile) and e.recompile is not None and e.stablehlo for e in log)
    problems = [p for i, e in enumerate(log) for p in _plain_data_problems(e, f"log[{i}]")]
    assert problems == []


def test_plain_data_check_rejects_live_objects():
    assert _plain_data_problems(events.Change("op", 0, "a", "b"), "e") == []
    assert _plain_data_problems((1, torch.ones(1)), "e") == ["e[1]: torch.Tensor"]
    assert _plain_data_problems([1], "e") == ["e: builtins.list"]
