"""Every test starts from a fresh runtime (`xlanb.reset()`): lazy mode, nothing pending,
caches, event log and counters empty."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))     # tests/helpers.py, tests/lower/rulecheck.py

import xlanb  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_runtime():
    xlanb.reset()
    yield
    xlanb.reset()
