"""`%xla_compat` turns the compat layer on (and off) in a notebook kernel."""

import sys

import pytest
from IPython.core.error import UsageError

import xlanb


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext xlanb", store_history=False)
    yield ip
    ip.run_cell("%unload_ext xlanb", store_history=False)
    xlanb.compat.uninstall()
    xlanb.runtime_state().eager = False


def test_xla_compat_installs_and_off_uninstalls(shell, capsys):
    shell.run_line_magic("xla_compat", "")
    assert "xlanb.compat: torch_xla's modules now resolve to xlanb" in capsys.readouterr().out
    result = shell.run_cell("import torch_xla.core.xla_model as xm\ndevice = str(xm.xla_device())")
    assert result.error_in_exec is None and shell.user_ns["device"] == "xla:0"
    shell.run_line_magic("xla_compat", "off")
    assert "torch_xla" not in sys.modules


def test_xla_compat_rejects_other_arguments(shell):
    with pytest.raises(UsageError, match="%xla_compat takes on or off, got 'maybe'"):
        shell.run_line_magic("xla_compat", "maybe")


def test_unloading_the_extension_removes_the_magic(shell):
    shell.run_cell("%unload_ext xlanb", store_history=False)
    assert "xla_compat" not in shell.magics_manager.magics["line"]
    shell.run_cell("%load_ext xlanb", store_history=False)
