"""`torch_xla.distributed.spmd` on 8 CPU devices (in a subprocess: XLA_FLAGS must be set before jax
starts): torch_xla's sharding text for 1-D, 2-D, replicated, partially replicated and tupled specs."""

import pytest

from conftest import PROGRAMS, result_of, run_python

ALL = ",".join(str(i) for i in range(8))


@pytest.fixture(scope="module")
def result():
    return result_of(run_python(str(PROGRAMS / "sharding_text.py"), devices=8))


def test_tiled_specs_list_their_devices(result):
    assert result["devices"] == 8
    assert result["1x8"] == result["xt_spec"] == f"{{devices=[1,8]{ALL}}}"
    assert result["1d"] == f"{{devices=[8]{ALL}}}"
    assert result["flipped"] == "{devices=[1,8]7,6,5,4,3,2,1,0}"
    assert result["xt_type"] == 3                 # ShardingType.TILED
    assert result["xt_is_t"]


def test_replicated_and_partially_replicated_specs(result):
    assert result["replicated"] == "{replicated}" and result["replicated_type"] == 0
    assert result["replicated_indices"] == [True] * 8
    assert result["partial"] == f"{{devices=[2,1,4]{ALL} last_tile_dim_replicate}}" and result["partial_type"] == 5
    assert result["tupled"] == "{devices=[1,8]0,4,1,5,2,6,3,7}"


def test_local_shards_hold_each_devices_tile(result):
    assert result["shards"] == [[f"CPU:{i}", [[0, 16], [i, i + 1]], 0, [16, 1]] for i in range(8)]
    assert result["shards_equal"] and result["pending_value"]


def test_clear_sharding_global_mesh_and_1d_mesh(result):
    assert result["cleared"] == ""
    assert result["global_mesh_none"] and result["global_mesh"]
    assert result["1d_mesh"] == [["data"], None, 8]          # unnamed, as torch_xla keeps it


def test_mp_device_loader_input_sharding_splits_the_batch(result):
    assert result["loader"] == [f"{{devices=[8,1]{ALL}}}"] * 2


def test_a_sharded_tensor_computes_as_its_tensor(result):
    assert result["ops"] == ["XLAShardedTensor", "XLAShardedTensor", True, True]
    assert result["inplace"]


def test_spmd_fully_sharded_data_parallel_shards_parameters_and_trains_as_cpu(result):
    assert result["fsdp_weight_spec"] == f"{{devices=[8,1]{ALL}}}"          # Linear(8, 32).weight: 32 rows
    assert result["fsdp_losses"] == pytest.approx(result["cpu_losses"], rel=1e-5, abs=1e-6)


def test_visualize_sharding_prints_and_returns_the_tile_picture(result):
    shown, printed = result["visual"]
    assert printed == shown + "\n"
    assert shown.splitlines()[0] == "f32[16] ('data',) on mesh data=8"
    assert "|dev 0 |dev 1 |dev 2 |dev 3 |dev 4 |dev 5 |dev 6 |dev 7 |" in shown


def test_uneven_shards_are_zero_padded_local_shards(result):
    assert result["uneven_spec"] == f"{{devices=[8]{ALL}}}"
    spans = [[min(2 * i, 9), min(2 * i + 2, 9)] for i in range(8)]      # 2 a device, the last holds padding only
    assert [s[0] for s in result["uneven_shards"]] == spans
    for i, ((start, stop), data, unpadded) in enumerate(result["uneven_shards"]):
        assert data == [float(v) if v < 9 else 0.0 for v in (2 * i, 2 * i + 1)]
        assert unpadded == [float(v) for v in range(start, stop)]
    assert result["uneven_value"]


def test_one_op_sharding_made_per_spec(result):
    assert result["op_shardings"] == [1, 1, 2]


def test_minibatch_loader_refuses_a_batch_that_does_not_divide(result):
    assert result["minibatch"] == ("When minibatch is configured, the per-host batch size must be divisible by local "
                                   "runtime device count. Per host input data shape = torch.Size([7, 2]), "
                                   "local_runtime_device_count = 8")


def test_manual_sharding_in_torch_xla_words(result):
    m = result["manual"]
    assert m["shard_shape"] == [8, 1] and m["spec"] == "{manual}" and m["type"] == 4     # ShardingType.MANUAL
    assert m["e2e"] == [[8, 8], True]
    assert m["api"] == [[4, 2], True, "{devices=[2,4]0,1,2,3,4,5,6,7}"]
    assert m["mark_device_data"] == "RuntimeError"
