"""Report tests read what a cell compiled: every test starts with an empty executable cache, and
Compile events carry their HLO texts and analyses (as they do while the notebook extension is loaded)."""

import pytest

import xlanb
from xlanb import hooks


@pytest.fixture(autouse=True)
def empty_compiled_cache():
    xlanb.runtime_state().cache.clear()
    with hooks.recording_texts():
        yield
