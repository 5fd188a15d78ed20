"""%xla_selfcheck: the table of `python -m xlanb.selfcheck` in a cell; its help; bad arguments."""

import pytest
from IPython.core.error import UsageError

import xlanb
from xlanb import selfcheck


@pytest.fixture
def cheap_checks(monkeypatch):
    """The quick rows only (tests/runtime/test_selfcheck.py runs them all in a subprocess)."""
    keep = ("versions", "devices", "eager op", "device memory")
    monkeypatch.setattr(selfcheck, "CHECKS", [(n, f) for n, f in selfcheck.CHECKS if n in keep])


def test_selfcheck_prints_the_table_and_keeps_the_cells_eager(cell, cheap_checks):
    c = cell("%xla_selfcheck")
    assert c.error is None, c.stderr
    lines = c.stdout.splitlines()
    assert lines[0].split() == ["check", "result", "detail"]
    assert [line.split()[0] for line in lines[2:6]] == ["versions", "devices", "eager", "device"]
    assert "xlanb selfcheck: " in lines[-1] and lines[-1].endswith(": OK")
    assert xlanb.is_eager_mode()                      # cells run eagerly after it, as before


def test_selfcheck_has_help_and_rejects_other_arguments(cell):
    assert "does xlanb work on this machine" in cell("%xla_selfcheck?").stdout
    c = cell("%xla_selfcheck --fast")
    assert isinstance(c.error, UsageError) and str(c.error) == "%xla_selfcheck takes --quick or --full, got '--fast'"
