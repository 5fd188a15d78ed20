"""Every test starts from a clean runtime: lazy mode, nothing pending, counters at zero."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))     # tests/helpers.py, tests/lower/rulecheck.py

import xlanb  # noqa: E402
from xlanb.capture.state import state  # noqa: E402
from xlanb.ir.explain import explainer  # noqa: E402
from xlanb.runtime.cache import compiled_cache  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_runtime():
    state.pending.clear()
    state.deferred.clear()
    state.eager = False
    state.graph_name = "sync"
    xlanb.metrics.clear_all()
    explainer.clear()
    compiled_cache.clear()      # compile counts must not depend on earlier tests
    yield
    state.eager = False
    state.pending.clear()
    state.deferred.clear()
