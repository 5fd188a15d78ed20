"""torch_xla's names on one process, with torch_xla's values and semantics (docs/torch_xla.md)."""

import io
import warnings

import jax
import pytest
import torch

import xlanb
from xlanb.capture.tensor import base_node
from helpers import assert_close

pytestmark = pytest.mark.usefixtures("compat")


def test_devices_and_ordinals_on_one_process():
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr
    assert torch_xla.device() == torch.device("xla:0") == xm.xla_device() == torch_xla.device(0) == xm.xla_device(0)
    assert torch_xla.devices() == [torch.device("xla:0")] and torch_xla.device_count() == 1
    assert xm.get_xla_supported_devices() == ["xla:0"]
    assert (xr.world_size(), xr.global_ordinal(), xr.local_ordinal(), xm.get_ordinal(), xm.get_local_ordinal()) == \
        (1, 0, 0, 0, 0)
    assert xm.xrt_world_size() == 1 and xm.is_master_ordinal() and xm.is_master_ordinal(local=False)
    assert xr.device_type() == "CPU" and xm.xla_device_hw(torch_xla.device()) == "CPU"
    assert xr.global_runtime_device_count() == len(jax.devices()) == 1
    assert xr.addressable_runtime_device_count() == 1 and xr.process_index() == 0 and xr.process_count() == 1
    assert torch_xla.real_devices() == ["CPU:0"]
    with pytest.raises(IndexError, match=r"Device index 1 out of range in \['xla:0'\]"):
        torch_xla.device(1)


def test_master_print_prints_on_the_master(capsys):
    import torch_xla.core.xla_model as xm
    xm.master_print("hello", 3)
    assert capsys.readouterr().out == "hello 3\n"


def test_mark_step_and_sync_count_mark_steps_and_launch_the_pending_graph():
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    met.clear_all()
    x = torch.arange(4.0, device="xla") * 3
    xm.mark_step()
    assert base_node(x).buffer is not None
    torch_xla.sync(wait=True)
    assert met.counter_value("MarkStep") == 2
    assert met.metric_data("ExecuteTime")[0] == 1 and met.metric_data("CompileTime")[0] == 1
    assert met.counter_value("UncachedCompile") == 1 and met.counter_value("CachedCompile") is None
    xm.wait_device_ops()
    assert x.cpu().tolist() == [0.0, 3.0, 6.0, 9.0]


def test_metrics_module_is_xlanbs_with_torch_xla_names():
    import torch_xla.debug.metrics as met
    y = torch.ones(3).to("xla") + 1
    xlanb.sync()
    y = y * 2
    xlanb.sync()
    assert {"CompileTime", "ExecuteTime", "TransferToDeviceTime"} <= set(met.metric_names())
    assert {"UncachedCompile", "MarkStep"} <= set(met.counter_names())
    assert met.counter_value("MarkStep") == 2 and met.counter_value("UncachedCompile") == 2
    assert "Counter: MarkStep\n  Value: 2" in met.metrics_report()
    assert "Metric: CompileTime" in met.short_metrics_report()
    met.clear_counters()
    assert met.counter_value("MarkStep") is None and met.metric_data("CompileTime") is not None
    met.clear_all()
    assert met.metric_data("CompileTime") is None and met.executed_fallback_ops() == []


def test_per_op_counters_and_tracing_time_in_torch_xla_words():
    import torch_xla.debug.metrics as met
    x = torch.ones(3).to("xla")
    met.clear_all()
    x += 2                                   # in place: counted as its functional op, as torch_xla does
    y = x * x + 1
    z = torch.relu(y)
    xlanb.sync()
    assert met.counter_value("xla::add") == 2 and met.counter_value("xla::mul") == 1
    assert met.counter_value("xla::relu") == 1 and met.counter_value("xla::add_") is None
    count, total, samples = met.metric_data("LazyTracing")
    assert count == 4 and len(samples) == 4 and total == sum(v for _, v in samples) and min(v for _, v in samples) > 0
    assert met.counter_value("CreateCompileHandles") == met.counter_value("UncachedCompile") == 1
    assert "Counter: xla::mul\n  Value: 1" in met.metrics_report()
    met.clear_counters()
    assert "xla::add" not in met.metrics_report()
    assert z.cpu().tolist() == [10.0, 10.0, 10.0]


def test_without_compat_no_op_is_counted_or_timed(compat):
    import xlanb.compat
    from xlanb.capture import dispatch
    from xlanb.capture.tensor import LazyTensor
    xlanb.compat.uninstall()
    try:
        assert LazyTensor.__torch_dispatch__.__func__ is dispatch.dispatch
        xlanb.metrics.clear_all()
        torch.ones(2, device="xla") + 1
        assert xlanb.metrics.counter_value("xla::add") is None and xlanb.metrics.metric_data("LazyTracing") is None
    finally:
        xlanb.compat.install()
    assert LazyTensor.__torch_dispatch__.__func__ is dispatch._listened_dispatch


@pytest.mark.timeout(60)     # a count waiting on its own thread's lock would hang
def test_xla_tensors_made_and_freed_are_counted_in_torch_xla_words():
    import gc

    import torch_xla
    import torch_xla.debug.metrics as met
    met.clear_all()
    t = torch.tensor(2077, device=torch_xla.device())       # one upload: one tensor (torch_xla's count)
    assert met.counter_value("CreateXlaTensor") == 1 and met.counter_value("DestroyXlaTensor") is None
    torch_xla._XLAC._xla_increment_counter("CreateXlaTensor", 3)
    assert met.counter_value("CreateXlaTensor") == 4
    met.clear_all()
    u = t * 2                                 # an op's output
    v = u.view(1)                             # a view is a tensor of its own
    assert met.counter_value("CreateXlaTensor") == 2
    del u, v
    assert met.counter_value("DestroyXlaTensor") == 2
    cycle = [torch.ones(2, device="xla")]     # freed by a collection run while the metrics lock is held:
    cycle.append(cycle)                       # the count must not wait for the lock its own thread holds
    del cycle
    with xlanb.runtime_state().lock:
        gc.collect()
    assert met.counter_value("DestroyXlaTensor") == 3
    assert t.item() == 2077


def test_without_compat_no_tensor_is_counted(compat):
    import xlanb.compat
    xlanb.compat.uninstall()
    try:
        xlanb.metrics.clear_all()
        x = torch.ones(2, device="xla") + 1
        del x
        assert xlanb.metrics.counter_value("CreateXlaTensor") is None
        assert xlanb.metrics.counter_value("DestroyXlaTensor") is None
    finally:
        xlanb.compat.install()


def test_step_closures_run_after_the_step_executed_in_the_order_added():
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    seen = []
    loss = (torch.arange(3.0, device="xla") * 2).sum()
    xm.add_step_closure(lambda t: seen.append(("first", base_node(t).buffer is not None, t.item())), args=(loss,))
    xm.add_step_closure(lambda: seen.append(("second", met.metric_data("ExecuteTime")[0])))
    xm.add_step_closure(lambda a, b: seen.append(("third", a + b)), args=(1, 2))
    assert seen == []                       # nothing runs before the step
    xm.mark_step()
    assert seen == [("first", True, 6.0), ("second", 1), ("third", 3)]
    assert met.metric_data("ExecuteTime")[0] == 1       # the closure's read ran nothing more
    torch_xla.sync()
    assert len(seen) == 3                   # closures run once


def test_a_closure_added_by_a_closure_runs_at_the_next_step():
    import torch_xla.core.xla_model as xm
    seen = []
    xm.add_step_closure(lambda: xm.add_step_closure(lambda: seen.append("inner")) or seen.append("outer"))
    xm.mark_step()
    assert seen == ["outer"]
    xm.mark_step()
    assert seen == ["outer", "inner"]


def test_async_step_closures_run_in_order_off_the_main_thread():
    import threading

    import torch_xla.core.xla_model as xm
    from xlanb.compat.steps import wait_async_closures
    seen = []
    for i in range(5):
        xm.add_step_closure(lambda i=i: seen.append((i, threading.current_thread().name)), run_async=True)
    xm.mark_step()
    wait_async_closures()
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
    assert all(name.startswith("xla_step_closures") for _, name in seen)


def test_reset_forgets_queued_step_closures_and_an_async_error():
    import torch_xla.core.xla_model as xm
    from xlanb.compat.steps import wait_async_closures
    seen = []
    xm.add_step_closure(lambda: seen.append("queued before reset"))
    xm.add_step_closure(lambda: seen.append("async before reset"), run_async=True)
    xlanb.reset()
    xm.mark_step()
    wait_async_closures()
    assert seen == []

    def fail():
        raise ValueError("closure failed")
    xm.add_step_closure(fail, run_async=True)
    xm.mark_step()
    wait_async_closures()
    xlanb.reset()                           # its error belonged to the runtime before the reset
    xm.add_step_closure(lambda: seen.append("after"))
    xm.mark_step()
    assert seen == ["after"]


def test_torch_xla_compile_traces_one_graph_and_runs_closures():
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    seen = []

    @torch_xla.compile
    def f(x):
        xm.add_step_closure(lambda: seen.append("done"))
        return (x + 1).relu() * 2

    x = torch.tensor([-3.0, 0.5, 2.0], device="xla")
    met.clear_all()
    out = f(x)
    assert seen == ["done"] and base_node(out).buffer is not None
    assert out.cpu().tolist() == [0.0, 3.0, 6.0]
    assert met.metric_data("CompileTime")[0] == 1
    compiled = torch_xla.compile(lambda x: x * 5, full_graph=True, name="times5")
    assert compiled(x).cpu().tolist() == [-15.0, 2.5, 10.0]
    with torch_xla.step():
        y = x * x
    assert base_node(y).buffer is not None and y.cpu().tolist() == [9.0, 0.25, 4.0]
    with torch_xla.compile(name="ctx"):
        z = x - 1
    assert base_node(z).buffer is not None
    with pytest.raises(NotImplementedError, match="custom_compile_options"):
        torch_xla.compile(lambda x: x, custom_compile_options={"xla_foo": 1})


def test_eager_mode_from_torch_xla_experimental():
    import torch_xla.experimental as exp
    assert not exp.is_eager_mode()
    exp.eager_mode(True)
    try:
        assert exp.is_eager_mode() and xlanb.is_eager_mode()
        t = torch.ones(2, device="xla") * 4
        assert base_node(t).buffer is not None           # run at once
        with exp.eager_mode_context(False) as previous:
            assert previous is True and not exp.is_eager_mode()
    finally:
        exp.eager_mode(False)


def _train(steps_fn, device, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    torch.manual_seed(1)
    data = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(3)]
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        steps_fn(opt)
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_optimizer_step_with_barrier_matches_cpu_and_marks_the_step():
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    met.clear_all()
    returned = []
    losses, params = _train(lambda opt: returned.append(xm.optimizer_step(opt, barrier=True)), "xla")
    cpu_losses, cpu_params = _train(lambda opt: opt.step(), "cpu")
    assert returned == [None, None, None] and met.counter_value("MarkStep") == 3
    assert_close(losses, cpu_losses, rtol=1e-5, atol=1e-6)
    for p, q in zip(params, cpu_params):
        assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_optimizer_step_passes_optimizer_args():
    import torch_xla.core.xla_model as xm
    p = torch.nn.Parameter(torch.ones(2, device="xla"))
    opt = torch.optim.SGD([p], lr=0.5)
    p.sum().backward()
    assert xm.optimizer_step(opt, optimizer_args={"closure": lambda: 7.0}) == 7.0
    assert p.detach().cpu().tolist() == [0.5, 0.5]


def test_optimization_barrier_puts_one_barrier_over_the_tensors_and_keeps_their_values():
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    a, b = torch.ones(2, device="xla") * 3, torch.arange(3.0, device="xla") + 1
    cpu = torch.zeros(2)
    assert xm.optimization_barrier_([a, b, cpu]) is None
    c = a * 2
    text = xlanb.debug.hlo_text(c, b, stage="stablehlo")
    assert text.count("stablehlo.optimization_barrier") == 1
    barrier = next(line for line in text.splitlines() if "optimization_barrier" in line)
    assert "tensor<2xf32>, tensor<3xf32>" in barrier
    assert c.cpu().tolist() == [6.0, 6.0] and b.cpu().tolist() == [1.0, 2.0, 3.0] and cpu.tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="takes a list of tensors"):
        xm.optimization_barrier_([a, 1.0])
    with xlanb.eager_mode_context(True):
        t = torch.randn(3, 3, device="xla")
        xlanb.wait()
        met.clear_all()
        xm.optimization_barrier_([t])              # eager: runs at once, as one op
        assert met.metric_data("EagerOpCompileTime")[0] == 1 and met.metric_data("EagerOpExecuteTime")[0] == 1


def test_rng_state_is_an_int_that_restores_the_stream():
    import torch_xla
    import torch_xla.core.xla_model as xm
    xm.set_rng_state(1234)
    assert xm.get_rng_state() == 1234
    first = torch.rand(4, device="xla").cpu()
    state = xm.get_rng_state()
    assert isinstance(state, int) and state != 1234
    second = torch.rand(4, device="xla").cpu()
    xm.set_rng_state(state)
    assert_close(torch.rand(4, device="xla").cpu(), second, rtol=0, atol=0)
    torch_xla.manual_seed(1234)
    assert_close(torch.rand(4, device="xla").cpu(), first, rtol=0, atol=0)


def test_save_writes_cpu_copies(tmp_path):
    import torch_xla.core.xla_model as xm
    model = torch.nn.Linear(3, 2).to("xla")
    path = tmp_path / "model.pt"
    xm.save({"state": model.state_dict(), "step": 3, "t": [torch.arange(3, device="xla")]}, str(path))
    loaded = torch.load(path)
    assert loaded["step"] == 3 and loaded["t"][0].device.type == "cpu" and loaded["t"][0].tolist() == [0, 1, 2]
    assert all(v.device.type == "cpu" for v in loaded["state"].values())
    assert_close(loaded["state"]["weight"], model.weight.detach().cpu())
    buf = io.BytesIO()
    xm.save(torch.ones(2, device="xla"), buf, master_only=False)
    buf.seek(0)
    assert torch.load(buf).tolist() == [1.0, 1.0]


def test_one_replica_collectives_rendezvous_and_mesh_reduce():
    import torch_xla.core.xla_model as xm
    t = torch.tensor([1.0, 2.0], device="xla")
    out = xm.all_reduce(xm.REDUCE_SUM, t)
    assert out is not t and out.cpu().tolist() == [1.0, 2.0]
    ts = [t]
    assert xm.all_reduce(xm.REDUCE_SUM, ts, scale=0.5) is ts and t.cpu().tolist() == [1.0, 2.0]
    assert xm.all_gather(t).cpu().tolist() == [1.0, 2.0]
    assert xm.reduce_scatter(xm.REDUCE_SUM, t, 2.0, 0, 1).cpu().tolist() == [2.0, 4.0]
    assert xm.rendezvous("tag", b"abc") == [b"abc"] and xm.rendezvous("empty") == [b""]
    assert xm.mesh_reduce("acc", 0.75, lambda xs: sum(xs) / len(xs)) == 0.75
    assert xm.mesh_reduce("t", torch.ones(2, device="xla"), lambda xs: xs[0].device.type) == "cpu"
    with pytest.raises(ValueError, match="reduce_type must be one of"):
        xm.all_reduce("avg", t)


def test_xmp_spawn_with_one_process_runs_in_place(monkeypatch):
    monkeypatch.delenv("CPU_NUM_DEVICES", raising=False)
    import torch_xla
    import torch_xla.distributed.xla_multiprocessing as xmp
    calls = []
    assert xmp.spawn(lambda i, a, b: calls.append((i, a, b)), args=(1, "x"), nprocs=1) is None
    xmp.spawn(lambda i: calls.append(i))
    torch_xla.launch(lambda i, a: calls.append((i, a)), args=("l",))
    assert calls == [(0, 1, "x"), 0, (0, "l")]


def test_runtime_cache_spmd_switch_and_counts(tmp_path):
    import torch_xla.runtime as xr
    from xlanb._config import config, override
    with override():
        xr.initialize_cache(str(tmp_path / "cache"), readonly=False)
        assert config().cache_dir == str(tmp_path / "cache") and config().persistent_cache
    from xlanb.compat import sharding
    sharding._warned_use_spmd.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xr.use_spmd()
        xr.use_spmd()
    assert [str(w.message) for w in caught] == [
        "xr.use_spmd() is a no-op under xlanb: tensors are sharded by xs.mark_sharding, with no global SPMD mode; "
        "xla:0 stays the one device."]
    assert xr.is_spmd()
    torch.ones(2, device="xla").add(1).cpu()
    assert xr.get_num_cached_compilation_graph() == len(xlanb.runtime_state().cache) >= 1


def test_utils_sample_generator_and_getenv_as(monkeypatch):
    import torch_xla.utils.utils as xu
    data = (torch.zeros(2), torch.ones(2))
    gen = xu.SampleGenerator(data, 3)
    assert len(gen) == 3 and [d is data for d in gen] == [True, True, True] and len(list(gen)) == 3
    monkeypatch.setenv("XLA_TEST_FLAG", "0")
    monkeypatch.setenv("XLA_TEST_INT", "12")
    assert xu.getenv_as("XLA_TEST_FLAG", bool, True) is False
    assert xu.getenv_as("XLA_TEST_INT", int) == 12 and xu.getenv_as("XLA_TEST_UNSET", int, 5) == 5
    assert xu.getenv_as("XLA_TEST_INT", str) == "12"


def test_profiler_traces_time_their_block_and_step_trace_syncs():
    import torch_xla.debug.metrics as met
    import torch_xla.debug.profiler as xp
    met.clear_all()
    with xp.Trace("forward") as trace:
        x = torch.ones(3, device="xla") * 2
    assert trace.ns > 0 and base_node(x).buffer is None
    with xp.StepTrace("train", step_num=0):
        y = x + 1
    assert base_node(y).buffer is not None and met.counter_value("MarkStep") == 1
    assert xp.get_tracer_marked_step()
    xp.set_tracer_marked_step(False)

    @xp.trace_me("scoped")
    def f(a):
        return a * 3
    assert f(2) == 6


def test_mp_device_loader_syncs_each_step_and_uploads_batches():
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    import torch_xla.distributed.parallel_loader as pl
    batches = [(torch.full((2, 3), float(i)), torch.tensor([i, i])) for i in range(3)]
    loader = pl.MpDeviceLoader(batches, torch_xla.device())
    assert len(loader) == 3
    met.clear_all()
    seen, order = [], []
    for x, y in loader:
        assert x.device == torch.device("xla:0") and y.device == torch.device("xla:0")
        total = (x.sum() + y.sum()) * 1
        xm.add_step_closure(lambda t: order.append(t.item()), args=(total,))
        seen.append(x[0, 0].item())
    assert seen == [0.0, 1.0, 2.0] and order == [0.0, 8.0, 16.0]
    assert met.counter_value("MarkStep") == 5      # before each batch, and once more at the end (as torch_xla)
    per_device = pl.ParallelLoader(batches, [torch_xla.device()]).per_device_loader(torch_xla.device())
    assert [x[0, 0].item() for x, _ in per_device] == [0.0, 1.0, 2.0]


def test_xla_debugging_entry_points():
    import torch_xla
    cpu = torch.randn(5)
    assert "Not a XLATensor" in torch_xla._XLAC._get_xla_tensor_debug_info(cpu)
    t1 = cpu.to("xla")
    t2 = t1 + 5
    info = torch_xla._XLAC._get_xla_tensor_debug_info(t2)
    assert "XLA Shape: f32[5]" in info and "aten::add" in info and "XLAData: None" in info
    text = torch_xla._XLAC._get_xla_tensors_text([t2])
    assert text == xlanb.debug.ir_text(t2) and "aten::add.Tensor" in text
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([t2])
    assert hlo.startswith("HloModule") and " add(" in hlo
    torch_xla.sync()
    info = torch_xla._XLAC._get_xla_tensor_debug_info(t2)
    assert "XLAData: None" not in info and "Data Shape: f32[5]" in info and "IR: None" in info
    assert torch_xla._XLAC._get_xla_sharding_spec(t2) == ""
    a, b = torch_xla._XLAC._xla_get_tensor_id(t1), torch_xla._XLAC._xla_get_tensor_id(t2)
    assert a != b and torch_xla._XLAC._xla_get_tensor_id(t1) == a
    assert torch_xla._XLAC._xla_get_tensor_id(t1.detach()) == a        # an alias names the same storage
    assert torch_xla._XLAC._xla_get_default_device() == "xla:0"


def test_an_async_closure_that_raises_fails_the_next_sync_and_stops_the_ones_after_it():
    import torch_xla
    import torch_xla.core.xla_model as xm
    from xlanb.compat.steps import wait_async_closures
    ran = []

    def fail():
        raise ValueError("closure failed")
    xm.add_step_closure(fail, run_async=True)
    xm.add_step_closure(lambda: ran.append("after"), run_async=True)
    torch_xla.sync()
    wait_async_closures()
    assert ran == []
    xm.add_step_closure(lambda: ran.append("next"), run_async=True)
    with pytest.raises(RuntimeError, match="an asynchronous step closure raised ValueError: closure failed"):
        torch_xla.sync()
    torch_xla.sync()                           # the error is raised once
    wait_async_closures()
    assert ran == []


def test_training_script_helpers():
    import torch_xla.core.xla_env_vars as xenv
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.spmd as xs
    import torch_xla.test.test_utils as test_utils
    from torch_xla._internal import tpu
    tracker = xm.RateTracker()
    tracker.add(64)
    assert tracker.rate() > 0 and tracker.global_rate() > 0
    model = torch.nn.Linear(2, 2).to("xla")
    before = model.weight.detach().cpu()
    xm.broadcast_master_param(model)           # one replica: nothing changes
    assert_close(model.weight.detach().cpu(), before)
    assert test_utils.get_summary_writer("/tmp/unused") is None
    test_utils.write_to_summary(None, 0, {"a": 1.0})
    moved = xm.send_cpu_data_to_device([torch.ones(2), {"k": torch.zeros(1)}], "xla")
    assert moved[0].device.type == "xla" and moved[1]["k"].device.type == "xla"
    assert xenv.PJRT_DEVICE == "PJRT_DEVICE" and tpu.version() == 0 and tpu.num_available_chips() == 0
    import torch_xla.distributed.spmd.xla_sharding as xla_sharding
    assert xla_sharding.MarkShardingFunction is xs.MarkShardingFunction


def test_print_training_update_prints_torch_xlas_line(capsys):
    import torch_xla.test.test_utils as test_utils
    test_utils.print_training_update("xla:0", 20, 0.123456, 10.0, 5.5, epoch=1)
    out = capsys.readouterr().out
    assert out.startswith("| Training Device=xla:0 Epoch=1 Step=20 Loss=0.12346 Rate=10.00 GlobalRate=5.50 Time=")


def test_compiling_a_function_again_shares_its_graph_limit(compat):
    """torch_xla counts a function's graphs per function: a second torch_xla.compile of the same
    function sees the graphs the first traced, and the cache does not keep the function alive."""
    import gc
    import weakref

    import torch_xla

    def double(x):
        return x + x

    torch_xla.compile(double, max_different_graphs=1)(torch.ones(4, device="xla"))
    with pytest.raises(RuntimeError, match="Maximum number of different graphs allowed per function exceeded: 1"):
        torch_xla.compile(double, max_different_graphs=1)(torch.ones(3, device="xla"))
    ref = weakref.ref(double)
    del double
    gc.collect()
    assert ref() is None


def test_a_step_whose_body_raises_still_syncs_what_it_traced(compat):
    """torch_xla.step() / compile sync before the body and, in a `finally`, after it: a body that
    raises still runs the graph it traced (xlanb.compile leaves it pending)."""
    import torch_xla
    import torch_xla.debug.metrics as met

    met.clear_all()
    kept = []
    with pytest.raises(RuntimeError, match="expected"):
        with torch_xla.step():
            kept.append(torch.ones(3, device="xla") * 2)
            raise RuntimeError("expected")
    assert met.counter_value("MarkStep") == 2
    assert base_node(kept[0]).buffer is not None

    def fails(x):
        kept.append(x + 1)
        raise ValueError("expected")
    with pytest.raises(ValueError, match="expected"):
        torch_xla.compile(fails)(torch.ones(2, device="xla"))
    assert base_node(kept[1]).buffer is not None


def _linear_twins(device):
    torch.manual_seed(0)
    x = torch.randn(2, 5, 3).to(device).requires_grad_()
    w = torch.randn(4, 3).to(device).requires_grad_()
    b = torch.randn(4).to(device).requires_grad_()
    return x, w, b


@pytest.mark.parametrize("with_bias", [True, False])
def test_xla_patched_linear_gives_linears_values_and_gradients(with_bias):
    from torch_xla.distributed.spmd.xla_sharding import XLAPatchedLinear
    results = {}
    for device, fn in (("cpu", torch.nn.functional.linear), ("xla", XLAPatchedLinear.apply)):
        x, w, b = _linear_twins(device)
        y = fn(x, w, b if with_bias else None)
        (y * torch.arange(4.0, device=device)).sum().backward()
        results[device] = [y.detach().cpu(), x.grad.cpu(), w.grad.cpu()] + ([b.grad.cpu()] if with_bias else [])
        assert with_bias or b.grad is None
    for cpu, xla in zip(results["cpu"], results["xla"]):
        assert_close(xla, cpu)


def test_apply_xla_patch_to_nn_linear_keeps_the_parameters_and_the_values():
    import torch_xla.distributed.spmd.xla_sharding as xs
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(),
                                torch.nn.Sequential(torch.nn.Linear(4, 2, bias=False)))
    x = torch.randn(5, 3)
    expected = model(x)
    model = model.to("xla")
    params = [p for p in model.parameters()]
    assert xs.apply_xla_patch_to_nn_linear(model) is model
    assert isinstance(model[0], xs.EinsumLinear) and isinstance(model[2][0], xs.EinsumLinear)
    assert all(a is b for a, b in zip(model.parameters(), params, strict=True))     # the same tensors
    assert model[2][0].bias is None
    assert_close(model(x.to("xla")).cpu(), expected)


def test_apply_backward_optimization_barrier_puts_a_barrier_in_the_backward_and_keeps_the_gradients():
    import torch_xla.distributed.spmd.xla_sharding as xs
    grads = {}
    for device in ("cpu", "xla"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)).to(device)
        if device == "xla":
            xs.apply_backward_optimization_barrier(model[1])
        model(torch.ones(2, 3, device=device)).sum().backward()
        if device == "xla":
            text = xlanb.debug.hlo_text(model[0].weight.grad, stage="stablehlo")
            assert text.count("stablehlo.optimization_barrier") == 1
        grads[device] = [p.grad.cpu() for p in model.parameters()]
    for cpu, xla in zip(grads["cpu"], grads["xla"]):
        assert_close(xla, cpu)
