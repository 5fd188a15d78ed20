"""The OpInfo suite: a fast subset by default, every op with --ops-full (or OPS_FULL=1)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))      # harness.py, compare.py, skips.py


def pytest_addoption(parser):
    parser.addoption("--ops-full", action="store_true", default=False,
                     help="run every OpInfo of torch's op_db (all dtypes), not just the default subset")
    parser.addoption("--ops-samples", type=int, default=None,
                     help="samples per op, dtype and direction (default: 2 for the subset, 4 for --ops-full)")


def ops_full(config) -> bool:
    return bool(config.getoption("--ops-full")) or os.environ.get("OPS_FULL", "") not in ("", "0")


def pytest_generate_tests(metafunc):
    if "opinfo_case" not in metafunc.fixturenames:
        return
    import test_opinfo
    full = ops_full(metafunc.config)
    cases = test_opinfo.cases(full)
    metafunc.parametrize("opinfo_case", cases, ids=[c.id for c in cases])


import pytest  # noqa: E402

import xlanb  # noqa: E402


@pytest.fixture(autouse=True)
def _flat_memory():
    """The full sweep emits hundreds of thousands of events: keep the log empty between samples."""
    yield
    xlanb.runtime_state().log.clear()
