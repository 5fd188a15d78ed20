"""torch_xla's Mesh rules and HybridMesh, `_global_tensor_from_cpu_shards`, and the torch_xla
metric names that xlanb's events answer (on 8 CPU devices, in a subprocess)."""

import pytest

from conftest import PROGRAMS, result_of, run_python

ALL = ",".join(str(i) for i in range(8))


@pytest.fixture(scope="module")
def result():
    return result_of(run_python(str(PROGRAMS / "mesh_checks.py"), devices=8))


def test_a_broken_mesh_is_an_assertion_error_that_is_also_a_value_error(result):
    errors = result["errors"]
    assert all(e[:3] == ["MeshError", True, True] for e in errors.values()), errors
    assert errors["subset"][3] == "Number of device IDs (4) must match the global number of devices (8)"
    assert errors["names_length"][3] == "Number of axis names (3) must match mesh dimensions (2)"
    assert errors["names_repeat"][3] == "Axis names must be unique, got"
    assert errors["size"][3] == "Number of device IDs (8) must match mesh size (16)"
    assert errors["repeat_ids"][3] == "Device IDs must be unique, got"
    assert errors["ids_too_big"][3] == "Device IDs must be less than mesh size (8), got"


def test_an_unnamed_mesh_keeps_axis_names_none_and_shards_by_axis_index(result):
    names, shape, ids = result["unnamed"]
    assert names is None and shape == [[0, 2], [1, 4]] and ids == list(range(8))
    assert result["unnamed_spec"] == f"{{devices=[2,4]{ALL}}}"


def test_hybrid_mesh_lays_each_slice_out_by_coordinates(result):
    assert result["hybrid_cpu"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert result["hybrid_tpu"] == [[[1, 2, 3, 0], [5, 6, 7, 4]], ["dcn", "ici"]]


def test_global_tensor_from_cpu_shards(result):
    assert result["tiled"] == [list(map(float, range(16))), f"{{devices=[8]{ALL}}}"]
    assert result["trimmed"] == [list(map(float, range(12))), f"{{devices=[8]{ALL}}}"]     # uneven: padded shards
    assert result["partial"] == [[0, 1]]
    assert result["replicated"] == [[7], "{replicated}"]
    assert result["bad_shards"] == ["_global_tensor_from_cpu_shards"] * 4


def test_load_local_shards_writes_edited_shards_back(result):
    assert result["loaded"] == [[-float(i) for i in range(16)], f"{{devices=[8]{ALL}}}"]
    assert result["load_refused"] == ["set_local_shards"] * 2


def test_torch_xla_metric_names_from_xlanb_events(result):
    assert result["outbound"] == [1, 16 * 8 * 4]
    assert result["tensor_to_data"]
    assert result["alias"] == [1, 1]
    assert result["replicated_time"] >= 1
    assert result["inbound"] == [1, 16 * 8 * 4]
    assert result["counter"] == 3
