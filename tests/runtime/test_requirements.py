"""`import xlanb` on a torch, jax or Python older than it serves stops with one sentence naming the
releases that work and the pip line; the releases it serves pass, local version tags included."""

import pytest

from xlanb import _requirements


@pytest.mark.parametrize("torch_v, jax_v", [("2.9.0+cu128", "0.10.2"), ("2.15.0", "0.12.0.1"), ("2.13.0+cpu", "0.10.2"),
                                             ("2.16.0.dev20261201+cpu", "0.13.0rc1")])
def test_served_releases_import(torch_v, jax_v):
    _requirements.check(torch_v, jax_v, (3, 11))


@pytest.mark.parametrize("torch_v, jax_v, python, named", [
    ("2.8.0+cu126", "0.10.2", (3, 11), "torch 2.8.0+cu126"),
    ("2.13.0", "0.9.2", (3, 12), "jax 0.9.2"),
    ("2.13.0", "0.10.2", (3, 10), "Python 3.10"),
])
def test_an_older_release_stops_the_import_with_one_sentence(torch_v, jax_v, python, named):
    with pytest.raises(ImportError) as info:
        _requirements.check(torch_v, jax_v, python)
    text = str(info.value)
    assert named in text
    assert "torch >= 2.9, jax >= 0.10 and Python >= 3.11" in text
    assert "pip install" in text and text.count(". ") == 0


def test_pyproject_declares_the_same_floors():
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml")
    if not os.path.exists(path):
        pytest.skip("pyproject.toml is not beside the tests (the tests run from an installed wheel)")
    text = open(path).read()
    assert '"torch>=2.9"' in text and '"jax>=0.10"' in text and 'requires-python = ">=3.11"' in text
