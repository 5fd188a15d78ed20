"""SPMD on 8 CPU devices (each program runs in a subprocess with
--xla_force_host_platform_device_count=8; this process keeps its one device)."""

import jax
import pytest

from spmd_programs import run_program

from xlanb.report.schema import REPORT_SCHEMA_VERSION

TOL = 1e-5


def test_this_process_keeps_one_device():
    assert len(jax.devices()) == 1


def test_data_parallel_mlp_over_8_devices_matches_one_device():
    r = run_program("dp_mlp")
    assert r["devices"] == 8
    assert r["loss_diff"] <= TOL and r["param_diff"] <= TOL
    assert r["compiles_after_step2"] == 0
    assert r["weight_sharding"] == "replicated on mesh data=8"
    assert r["grad_none"]


def test_2x4_mesh_sharded_linear_forward_backward_and_report():
    r = run_program("linear_2x4")
    assert r["forward_vs_plain"] <= TOL and r["grads_vs_plain"] <= 1e-5 * 4    # sums of 8 products
    assert r["forward_vs_cpu"] <= TOL and r["grads_vs_cpu"] <= 1e-5 * 4
    assert r["weight_sharding"] == "('model', None) on mesh data=2 model=4"
    assert r["y_sharding"] == "('data', 'model') on mesh data=2 model=4"       # after propagation
    # a matmul over a sharded contraction dimension: partial sums, then one all-reduce
    assert r["hlo_has_all_reduce"]
    assert r["report_graphs"] == 1 and r["version"] == REPORT_SCHEMA_VERSION
    assert r["report_inputs"] == ["(None, 'model') on mesh data=2 model=4", "('model', None) on mesh data=2 model=4"]
    assert r["report_outputs"] == ["replicated on mesh data=2 model=4"]
    assert r["report_collectives"] == ["all-reduce"] and r["collective_bytes"] == [16 * 24 * 4]
    assert r["collective_groups"] == ["{{0,1,2,3},{4,5,6,7}}"]        # the 'model' rows of the 2x4 mesh
    assert r["svg"] and r["text_has_all_reduce"]
    assert r["matmul_diff"] <= 1e-4
    d = r["distributed"]
    assert d["both"] == "('data', 'model') on mesh data=2 model=4"
    assert d["second"] == "('model', None) on mesh data=2 model=4"
    assert d["module"] == ["('model', None) on mesh data=2 model=4", "one device",
                           "('model', None) on mesh data=2 model=4", "one device"]


def test_fsdp_transformer_adamw_parity_and_no_recompiles_after_step_2():
    r = run_program("fsdp_gpt")
    assert r["loss_diff"] <= TOL and r["param_diff"] <= TOL
    assert r["compiles_after_step2"] == 0
    assert r["sharded_params"] == r["params"] == 26
    assert r["qkv_plan"] == ["fsdp", None]
    assert r["qkv_sharding"] == "('fsdp', None) on mesh fsdp=8"
    assert r["exp_avg_sharding"] == "('fsdp', None) on mesh fsdp=8"      # AdamW state follows its parameter
    assert r["tied"]


def test_changed_input_sharding_recompiles_once_and_is_explained():
    r = run_program("sharding_recompile")
    assert r["counts"] == [0, 0, 1, 1]          # same sharding: hit; new: one compile; back: hit
    assert ("input 0 sharding: ('data', None) on mesh data=8 -> (None, 'data') on mesh data=8"
            in r["explained"])
    assert r["pending_spec"] == r["computed_spec"] == "('data', None) on mesh data=8"
    assert r["sync_compiles_after_get_sharding"] == 0
    assert r["cleared"] and r["w_cleared"] and r["back_one_device"]
    assert r["back_value"] <= 1e-6          # relative to the sum of |terms|: float32 rounding
    assert r["eager_spec"] == "('data', None) on mesh data=8" and r["eager_ok"]
    assert r["kept_spec"] == "('data', None) on mesh data=8" and r["kept_value"]     # in-place writes keep it


def test_bad_shardings_name_the_tensor_spec_and_mesh_at_the_users_line():
    r = run_program("bad_input")
    e = r["errors"]
    assert e["unknown_axis"]["message"].startswith(
        "mark_sharding(weights: f32[10,6], ('batch', None), mesh data=2 model=4): 'batch' is not an axis")
    assert "the partition spec has 3 entries but the tensor has 2 dimensions" in e["too_long"]["message"]
    assert e["pending_extra_axis"]["message"].startswith("mark_sharding(pending: f32[10,6], (None, 'model', 'data')")
    assert e["too_big"]["message"].startswith("Mesh: mesh_shape (4, 4) needs 16 devices but 8 are present")
    assert "--xla_force_host_platform_device_count=16" in e["too_big"]["message"]
    assert e["cpu_tensor"]["type"] == "TypeError" and "Move it first" in e["cpu_tensor"]["message"]
    assert "f32[] with no dimension to split over mesh axis 'data'" in e["loader_scalar"]["message"]
    assert "data_axis 'batch' is not an axis" in e["loader_axis"]["message"]
    for label in ("unknown_axis", "too_long", "pending_extra_axis", "too_big", "loader_scalar"):
        assert e[label]["type"] == "ValueError"
    for label, err in e.items():                 # raised at the user's line
        assert err["line"].startswith(f'attempt("{label}"'), label
    assert r["pending_kept"] and r["weights_one_device"] and r["pending_one_device"]


@pytest.mark.parametrize("where", ["one", "mesh"])
def test_device_loader_uploads_ahead_and_trains_the_same(where, loader_result):
    r = loader_result["results"][where]
    assert r["param_diff"] == 0.0 and r["loss_diff"] == 0.0
    assert len(r["order"]) == 4
    for step in r["order"]:                      # batch N+1's upload was issued before step N's loss was read
        assert step["upload_next"] < step["read"]
    expected = "one device" if where == "one" else "('data', None) on mesh data=8"
    assert r["specs"] == [expected] * 5
    assert r["waits"] == 5
    assert r["report_loader"]["steps"] == 5 and r["report_loader"]["uploads"] == 5
    assert len(r["report_loader"]["wait_ms"]) == 5


def test_device_loader_uploads_batch_n_plus_1_before_step_n_runs(loader_result):
    assert loader_result["stream"] == [["upload", 0], ["upload", 1], ["execute", None], ["upload", 2],
                                       ["execute", None], ["upload", 3], ["execute", None], ["upload", 4],
                                       ["execute", None], ["execute", None]]


@pytest.fixture(scope="module")
def loader_result():
    return run_program("loader")


def test_a_replayed_data_parallel_step_equals_tracing_and_guards_its_shardings():
    r = run_program("replay_dp")
    assert r["replayed"] == 3 and r["losses_equal"]       # momentum buffers are made in call 1 and r["param_diff"] == 0.0
    assert r["compiles_after_step2"] == 0
    (miss,) = r["misses"]
    assert miss == "replay guard failed: argument 0 sharding ('data', None) -> (None, None)"


def test_uneven_shards_are_padded_and_compute_as_on_cpu():
    r = run_program("uneven")
    spec = "('model', None) on mesh data=2 model=4"
    for where in ("computed", "inplace"):          # 9 rows over 4: buffers of 12 rows, shards of 3
        assert r[where] == {"buffer": [12, 6], "shards": [[3, 6]], "spec": spec}, where
    assert r["computed_value"] and r["padding_zero"] and r["rows"] and r["inplace_value"]
    assert r["picture_devices"] == [0, 1, 2, 4, 5, 6]      # devices 3 and 7 hold padding only: no tile
    assert r["matmul"] <= 1e-5 and r["sum"] <= 1e-5
    assert r["pending"] == {"buffer": [10, 8], "shards": [[5, 2]], "spec": "('data', 'model') on mesh data=2 model=4"}
    assert r["pending_value"]
    assert r["recompiles"] == 0
    assert r["grad"] <= 1e-5 and r["bias_grad"] <= 1e-5
    assert r["loader"] == {"buffer": [6, 3], "shards": [[3, 3]], "spec": "('data', None) on mesh data=2 model=4"}
    assert r["loader_value"]
    assert r["cleared"] == [9, 6] and r["cleared_value"]


def test_set_local_shards_replaces_each_tile_and_keeps_the_sharding():
    r = run_program("local_shards")
    # device d of the 2x4 mesh holds tile (d // 4, d % 4) of 2x2
    assert r["value"] == [[float((row // 2) * 4 + col // 2) for col in range(8)] for row in range(4)]
    assert r["sharding"] == "('data', 'model') on mesh data=2 model=4"
    assert r["errors"] == ["set_local_shards"] * 3
    assert r["subclass"] == "('axis_0', None) on mesh axis_0=8"


def test_manual_sharding_runs_each_devices_shard_as_cpu_computes_it():
    r = run_program("manual")
    spec = "('data', 'model') on mesh data=2 model=4"
    for mode in ("lazy", "eager"):
        m = r[mode]
        assert m["shard_shape"] == [4, 2] and m["x_spec"] == m["y_spec"] == spec, mode
        assert m["value"] and m["tile_sums"] and m["outside"] and m["after_sync"], mode
        assert m["sync_other_computed"] and m["sync_manual_pending"], mode
        assert m["read"].startswith("RuntimeError: ") and "disable_manual_sharding(t, mesh" in m["read"], mode
        assert m["compiles_second_time"] == 0, mode
    e = r["errors"]
    assert "does not divide" in e["uneven"] and "no sharding over a mesh" in e["unsharded"]
    assert "not manually sharded" in e["not_manual"] and "is [4, 1], but the tensor is f32[4,2]" in e["shape"]
    assert "carry no gradient" in e["grad"] and e["mark"].startswith("mark_sharding: the tensor is manually sharded")


def test_mark_sharding_under_aot_function_and_torch_compile():
    r = run_program("traced")
    assert r["graphs"] == [1, 1]                   # forward: the output's constraint; backward: the gradient's
    assert r["y_spec"] == r["grad_spec"] == "('x', None) on mesh x=8"
    assert r["y"] <= 1e-6 and r["grad"] <= 1e-6
    assert r["compiled_spec"] == "('x', None) on mesh x=8" and r["compiled"] <= 1e-6
    assert r["compiled_fallbacks"] == [] and r["cpu_copy"]
    assert "'y' is not an axis of the mesh" in r["bad"]
