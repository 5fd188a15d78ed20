"""torch_xla scripts run unchanged under `python -m xlanb.compat`, against the same script on torch
CPU: the introduction's training step, and `xmp.spawn` data parallelism over 2 processes against
one process on the doubled batch."""

import pytest

from conftest import PROGRAMS, result_of, run_python


def test_intro_training_step_matches_torch_cpu_with_no_recompile_after_step_2():
    xla = result_of(run_python("-m", "xlanb.compat", str(PROGRAMS / "intro_train.py")))
    cpu = result_of(run_python("-m", "xlanb.compat", str(PROGRAMS / "intro_train.py"), "--cpu"))
    assert xla["steps"] == cpu["steps"] == [0, 1, 2, 3, 4]          # closures in order, one per step
    assert xla["losses"] == pytest.approx(cpu["losses"], rel=1e-5, abs=1e-6)
    assert xla["weight"] == pytest.approx(cpu["weight"], rel=1e-5, abs=1e-6)
    assert xla["compiles"] == 2 and cpu["compiles"] == 0      # steps 1 and 2 (momentum appears), then cached


@pytest.fixture(scope="module")
def spawned():
    """(one process on the whole batch, two processes on half each)."""
    one = result_of(run_python("-m", "xlanb.compat", str(PROGRAMS / "spawn_train.py"), "1"))
    two = result_of(run_python("-m", "xlanb.compat", str(PROGRAMS / "spawn_train.py"), "2", timeout=600))
    return one, two


def test_spawn_two_processes_train_to_the_parameters_of_one_on_the_doubled_batch(spawned):
    one, two = spawned
    assert (one["world_size"], one["ordinal"], one["master"]) == (1, 0, True)
    assert (two["world_size"], two["ordinal"], two["master"]) == (2, 0, True)
    for p, q in zip(one["params"], two["params"]):
        assert p == pytest.approx(q, rel=1e-5, abs=1e-6)


def test_launch_starts_as_many_replicas_as_cpu_num_devices(spawned):
    launched = result_of(run_python("-m", "xlanb.compat", str(PROGRAMS / "spawn_train.py"), "launch",
                                    env_extra={"CPU_NUM_DEVICES": "2"}, timeout=600))
    assert launched["world_size"] == 2
    assert launched["params"] == spawned[1]["params"]


def test_replica_collectives_across_two_processes(spawned):
    c = spawned[1]["collectives"]        # replica 0 holds [1, 2, 3, 4], replica 1 twice that
    assert c["sum"] == [3.0, 6.0, 9.0, 12.0] and c["mean"] == [1.5, 3.0, 4.5, 6.0] and c["max"] == [2.0, 4.0, 6.0, 8.0]
    assert c["gather"] == [[1.0, 2.0], [3.0, 4.0], [2.0, 4.0], [6.0, 8.0]]
    assert c["scatter"] == [3.0, 6.0]                       # replica 0's half of the sum
    assert c["inplace"] == [[3.0, 6.0, 9.0, 12.0], [1, 3]]   # a list is reduced in place, int64 too
    assert c["rendezvous"] == ["from 0", "from 1"] and c["mesh_reduce"] == 1
    assert c["broadcast"] == [5.0, 5.0]


def test_one_replica_collectives_are_torch_xlas_identities(spawned):
    c = spawned[0]["collectives"]
    assert c["sum"] == c["mean"] == c["max"] == c["scatter"] == [1.0, 2.0, 3.0, 4.0]
    assert c["gather"] == [[1.0, 2.0], [3.0, 4.0]] and c["inplace"] == [[1.0, 2.0, 3.0, 4.0], [0, 1]]
    assert c["rendezvous"] == ["from 0"] and c["mesh_reduce"] == 0 and c["broadcast"] == [5.0, 5.0]


def test_a_failing_replica_raises_in_the_parent_with_its_error():
    r = result_of(run_python("-m", "xlanb.compat", str(PROGRAMS / "spawn_fail.py"), timeout=600))
    assert r["type"] == "ProcessExitedException"
    assert r["error"].startswith("xmp.spawn: process 1 exited with code 1:")
    assert "ValueError: replica 1 fails on purpose" in r["error"]
