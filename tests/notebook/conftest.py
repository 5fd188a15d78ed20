"""An in-process IPython shell with the extension loaded, and a helper that runs one cell."""

import dataclasses

import pytest

import xlanb
from xlanb._config import set_config
from xlanb.state import runtime_state
from xlanb.report import MIME_TYPE



@dataclasses.dataclass
class Cell:
    result: object
    stdout: str
    stderr: str
    outputs: list            # IPython.utils.capture.RichOutput, displays included

    @property
    def error(self):
        return self.result.error_in_exec or self.result.error_before_exec

    @property
    def reports(self) -> list[dict]:
        """The report bundles this cell displayed."""
        return [o.data for o in self.outputs if MIME_TYPE in o.data]

    @property
    def report(self) -> dict:
        assert len(self.reports) == 1, f"expected one report, got {len(self.reports)}: {self.stdout}{self.stderr}"
        return self.reports[0][MIME_TYPE]


@pytest.fixture
def ip():
    """The process's InteractiveShell with `%load_ext xlanb` run; unloaded afterwards."""
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    xlanb.runtime_state().cache.clear()           # graphs compiled by earlier tests would be cache hits here
    previous = set_config(report="on")
    shell.run_cell("%load_ext xlanb", store_history=False)
    yield shell
    shell.run_cell("%unload_ext xlanb", store_history=False)
    set_config(report=previous.report)
    runtime_state().eager = False


def run(shell, code: str) -> Cell:
    from IPython.utils.capture import capture_output
    with capture_output() as cap:
        result = shell.run_cell(code, store_history=True)
    return Cell(result, cap.stdout, cap.stderr, cap.outputs)


@pytest.fixture
def cell(ip):
    """cell("x = 1") runs one cell in the shell and returns what it did (a Cell)."""
    return lambda code: run(ip, code)
