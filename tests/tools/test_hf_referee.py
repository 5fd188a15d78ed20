"""tools/hf_referee.py: an architecture nobody here wrote, trained on xla and on CPU, compared tensor by
tensor; the comparison names a tensor that differs."""

import importlib.util
import os

import pytest
import torch

pytest.importorskip("transformers", reason="transformers (requirements-dev.txt) is not installed")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("hf_referee", os.path.join(ROOT, "tools", "hf_referee.py"))
hf_referee = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hf_referee)


def test_an_architecture_trains_as_on_cpu():
    result = hf_referee.run_one("distilbert", "lazy")
    assert result["status"] == "pass", result["failed"]
    # the losses, a gradient per parameter and the state dict's entries
    names = len(dict(hf_referee.build("distilbert")[0].named_parameters()))
    assert result["compared"] > 2 * names


def test_a_tensor_that_differs_is_named(monkeypatch):
    """The xla copy gets one weight off by 1e-3: the report names it (and its gradient and loss follow)."""
    twin = hf_referee.twin

    def perturbed(model):
        copy = twin(model)
        with torch.no_grad():
            copy.classifier.bias.add_(1e-3)
        return copy
    monkeypatch.setattr(hf_referee, "twin", perturbed)
    result = hf_referee.run_one("distilbert", "eager")
    assert result["status"] == "mismatch"
    assert "classifier.bias" in result["failed"]


def test_compare_introduces_nothing_in_a_model_computed_as_on_cpu():
    """Gemma2's RMSNorm backward multiplies differences under the tolerance past it: compare named its
    mul as introduced (1.2e-4 relative) until an op's own values were judged on the xla op's inputs."""
    result = hf_referee.run_one("gemma2", "compare")
    assert result["status"] == "pass", result["failed"]
    assert result["statuses"]["introduced"] == 0 and result["statuses"]["inherited"] > 0
    assert result["statuses"]["ok"] > 400

