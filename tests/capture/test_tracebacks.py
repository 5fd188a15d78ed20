"""A user's mistake in an op shows a traceback that ends at the user's line, as on CPU: xlanb's frames
(and torch's meta kernels it ran) are left out, unless full tracebacks are asked for."""

import re
import subprocess
import sys
import textwrap
import traceback

import pytest
import torch

import xlanb
from xlanb._config import override
from helpers import same_values

SCRIPT = """\
import torch, xlanb
a = torch.ones(3, 4, device="{d}")

def project(b):
    return a @ b

c = project(torch.ones(5, 6, device="{d}"))
"""


def _run_script(tmp_path, device, **env):
    import os
    path = tmp_path / "user_script.py"
    path.write_text(SCRIPT.format(d=device))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("XLANB_")}
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env={**environ, **env})


def _frames(stderr: str) -> list[str]:
    return [line.strip() for line in stderr.splitlines() if line.strip().startswith("File ")]


def test_a_script_error_ends_at_the_users_line_as_on_cpu(tmp_path):
    xla, cpu = _run_script(tmp_path, "xla"), _run_script(tmp_path, "cpu")
    assert xla.returncode == cpu.returncode == 1
    assert _frames(xla.stderr) == _frames(cpu.stderr)
    assert _frames(xla.stderr)[-1].endswith("line 5, in project")
    last = cpu.stderr.strip().splitlines()[-1]            # torch's own words (2.15: "mm: mat1 and mat2 ...")
    assert last.startswith("RuntimeError: ") and "mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)" in last
    assert xla.stderr.strip().splitlines()[-1] == last
    assert "xlanb" not in xla.stderr.replace("import torch, xlanb", "")


def test_full_tracebacks_show_xlanbs_frames(tmp_path):
    full = _run_script(tmp_path, "xla", XLANB_TRACEBACKS="full")
    assert any("xlanb/capture/dispatch.py" in f for f in _frames(full.stderr))
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: ") and "mat1 and mat2 shapes cannot be multiplied" in last


def _error_of(fn):
    try:
        fn()
    except Exception as error:      # noqa: BLE001 - the test inspects it
        return error
    raise AssertionError("no error")


def test_index_errors_and_debug_level(tmp_path):
    a = torch.zeros(5, 5, device="xla")

    def assign():
        a[[0, 1], [0, 1, 2]] = 7

    error = _error_of(assign)
    files = [f.filename for f in traceback.extract_tb(error.__traceback__)]
    assert isinstance(error, IndexError) and files[-1] == __file__
    assert not any("xlanb" in f for f in files)
    with override(debug=1):
        files = [f.filename for f in traceback.extract_tb(_error_of(assign).__traceback__)]
    assert any("xlanb" in f for f in files)                          # %xla_debug 1 shows them
    assert torch.equal(a.cpu(), torch.zeros(5, 5))                   # nothing left unreadable


def test_an_error_that_is_not_torchs_verdict_says_how_to_see_the_frames(monkeypatch):
    op = torch.ops.aten.tanh.default
    torch.ones(2, device="xla").tanh()                              # the op's handler is chosen

    def broken(func, args, kwargs):
        return {}["internal"]

    monkeypatch.setattr(op, "_xlanb", broken)
    error = _error_of(lambda: torch.ones(2, device="xla").tanh())
    monkeypatch.undo()
    assert isinstance(error, KeyError)
    assert error.__notes__ == ["xlanb: its own frames are left out of this traceback; XLANB_TRACEBACKS=full or "
                               "%xla_debug 1 shows them"]
    assert not any("xlanb" in f.filename for f in traceback.extract_tb(error.__traceback__))
    assert same_values(torch.ones(2, device="xla").tanh().cpu(), torch.ones(2).tanh())


def test_a_notebook_error_ends_at_the_cell_line():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    shell = InteractiveShell.instance()
    code = textwrap.dedent("""\
        import torch
        w = torch.ones(3, 4, device="xla")
        y = w @ torch.ones(5, 6, device="xla")
        """)
    with capture_output() as cap:
        result = shell.run_cell(code, store_history=True)
    assert isinstance(result.error_in_exec, RuntimeError)
    out = re.sub(r"\x1b\[[0-9;]*m", "", cap.stdout + cap.stderr)      # without IPython's colours
    assert "mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)" in out
    assert "y = w @ torch.ones(5, 6" in out
    assert "dispatch.py" not in out and "record.py" not in out and "handlers.py" not in out


def test_bad_tracebacks_setting_is_refused():
    with pytest.raises(ValueError, match="tracebacks must be 'user' or 'full', got 'none'"):
        with override(tracebacks="none"):
            pass
    assert xlanb.device().type == "xla"
