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
