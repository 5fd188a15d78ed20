"""Report tests read what a cell compiled, so every test starts with an empty executable cache."""

import pytest

from xlanb.runtime.cache import compiled_cache


@pytest.fixture(autouse=True)
def empty_compiled_cache():
    compiled_cache.clear()
