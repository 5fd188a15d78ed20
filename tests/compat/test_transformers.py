"""Libraries that look for torch_xla: transformers' Trainer takes its torch_xla path on xlanb, and
save_pretrained / from_pretrained round-trip a model on the xla device."""

import importlib.util

import pytest

from conftest import PROGRAMS, result_of, run_python

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")


@pytest.mark.skipif(importlib.util.find_spec("accelerate") is None, reason="the Trainer needs accelerate")
def test_trainer_on_the_torch_xla_path_matches_the_trainer_on_cpu(tmp_path):
    xla = result_of(run_python(str(PROGRAMS / "hf_trainer.py"), str(tmp_path / "xla"), "--xla", timeout=600))
    cpu = result_of(run_python(str(PROGRAMS / "hf_trainer.py"), str(tmp_path / "cpu"), timeout=600))
    assert xla["device"] == "xla:0" and cpu["device"] == "cpu"
    assert len(xla["losses"]) == len(cpu["losses"]) == 8
    assert xla["losses"] == pytest.approx(cpu["losses"], rel=1e-5, abs=1e-6)


def test_save_pretrained_round_trips_a_model_on_the_xla_device(tmp_path):
    r = result_of(run_python(str(PROGRAMS / "hf_save.py"), str(tmp_path / "model"), timeout=600))
    assert r["same"] and r["tied"]
    assert r["loss_cpu"] == pytest.approx(r["loss"], rel=1e-5) and r["loss_xla"] == pytest.approx(r["loss"], rel=1e-5)
