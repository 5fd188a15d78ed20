"""Every test starts from a fresh runtime (`xlanb.reset()`): lazy mode, nothing pending,
caches, event log and counters empty."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))     # tests/helpers.py, tests/lower/rulecheck.py

import xlanb  # noqa: E402
from helpers import compiled_while_lowering  # noqa: E402

# One process at a time holds an accelerator chip (a TPU's): the Python processes tests start (a fresh
# interpreter that imports xlanb) run on the CPU instead, while this one keeps the chip. JAX read its
# platforms when this process imported it, so the variable reaches the children alone.
if xlanb.runtime_state().jax_device().platform != "cpu":
    os.environ["JAX_PLATFORMS"] = "cpu"


@pytest.fixture(autouse=True)
def fresh_runtime():
    xlanb.reset()
    compiled_while_lowering.clear()
    yield
    xlanb.reset()
    assert not compiled_while_lowering, (
        f"{len(compiled_while_lowering)} XLA compiles ran inside a graph's lowering: a lowering rule "
        "evaluated JAX eagerly (compute such values with numpy or torch on the host): tests/helpers.py")
