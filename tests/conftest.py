"""Every test starts from a fresh runtime (`xlanb.reset()`): lazy mode, nothing pending,
caches, event log and counters empty."""

import os
import sys

import jax
import pytest

sys.path.insert(0, os.path.dirname(__file__))     # tests/helpers.py, tests/lower/rulecheck.py

import xlanb  # noqa: E402
import xlanb.runtime.executor  # noqa: E402,F401

# One process at a time holds an accelerator chip (a TPU's): the Python processes tests start (a fresh
# interpreter that imports xlanb) run on the CPU instead, while this one keeps the chip. JAX read its
# platforms when this process imported it, so the variable reaches the children alone.
if xlanb.runtime_state().jax_device().platform != "cpu":
    os.environ["JAX_PLATFORMS"] = "cpu"


# A graph's lowering computes nothing: an XLA compile while executor._lower runs is a rule that
# evaluated JAX eagerly on concrete values, which compiles an executable per op and shape (view_scatter's
# index arrays did: 49 compiles, ~200 ms, for a graph of four writes through views). Checked in every test.
_LOWERING = sys.modules["xlanb.runtime.executor"]._lower.__code__
_compiled_while_lowering: list = []


def _on_compile(event: str, duration: float, **kwargs) -> None:
    if event != "/jax/core/compile/backend_compile_duration":
        return
    f = sys._getframe(1)
    while f is not None:
        if f.f_code is _LOWERING:
            _compiled_while_lowering.append(duration)
            return
        f = f.f_back


jax.monitoring.register_event_duration_secs_listener(_on_compile)


@pytest.fixture(autouse=True)
def fresh_runtime():
    xlanb.reset()
    _compiled_while_lowering.clear()
    yield
    xlanb.reset()
    assert not _compiled_while_lowering, (
        f"{len(_compiled_while_lowering)} XLA compiles ran inside a graph's lowering: a lowering rule "
        "evaluated JAX eagerly (compute such values with numpy or torch on the host)")
