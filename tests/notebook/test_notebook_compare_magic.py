"""%%xla_compare in-process: sugar for `with xlanb.compare(rtol=..., atol=...)` around the cell body,
the comparison left in the namespace as `_xla_compare`, its result in the cell report. A fake
compare (a context manager emitting one Compared event) stands in for the real one here."""

import os
import sys

import jsonschema
import pytest
from IPython.core.error import UsageError

from xlanb import events, hooks
from xlanb.report import MIME_TYPE, SCHEMA
from xlanb.state import runtime_state

SETUP = "import torch, xlanb\nx4 = torch.ones(4, 4, device='xla')"


class FakeComparison:
    """What the magic uses of xlanb.compare(): a context manager yielding an object with `ok`,
    `first_divergence` and `rows` that emits one Compared event when the region ends. `op(name)`,
    called in the body, stands for an op run there: a divergence at that line (none without it)."""

    def __init__(self, rtol=None, atol=None):
        self.rtol, self.atol = rtol, atol
        self.rows, self.first_divergence, self.entered, self.exited = [], None, False, False
        self._op = None

    @property
    def ok(self) -> bool:
        return self.first_divergence is None

    def op(self, name: str) -> None:
        f = sys._getframe(1)
        self._op = (name, f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}")

    def __enter__(self):
        self.entered = True
        return self

    def __exit__(self, exc_type, exc, tb):
        self.exited = True
        if exc_type is not None:
            return False
        self.rows = [events.CompareRow(0, "aten.mul.Tensor", "", "", "forward", "ok", 0.0, 0.0, (4, 4), "float32")]
        if self._op is not None:
            name, where = self._op
            self.rows += [events.CompareRow(1, name, where, "act", "forward", "introduced", 0.5, 0.25, (4, 4),
                                            "float32"),
                          events.CompareRow(2, "aten.sum.default", where, "", "forward", "inherited", 8.0, 0.5, (),
                                            "float32")]
            self.first_divergence = self.rows[1]
        runtime_state().log.emit(events.Compared(rows=tuple(self.rows), first=1 if self._op else None,
                                                 rtol=self.rtol, atol=self.atol, skipped=1))
        return False


@pytest.fixture
def regions(monkeypatch):
    """The fake comparisons the magic opened, in order."""
    made = []

    def compare(rtol=None, atol=None):
        made.append(FakeComparison(rtol, atol))
        return made[-1]
    monkeypatch.setattr(hooks, "compare", compare)
    return made


def test_compare_cell_reports_the_first_divergence_at_its_cell_line(ip, cell, regions):
    assert "xla_compare" in ip.magics_manager.magics["cell"]
    cell(SETUP)
    c = cell("%%xla_compare --rtol 1e-3\ny = x4 * 2\n_xla_compare.op('aten.gelu.default')\ny.sum()")
    assert c.error is None
    (region,) = regions
    assert (region.entered, region.exited, region.rtol, region.atol) == (True, True, 1e-3, None)
    assert ip.user_ns["_xla_compare"] is region and ip.user_ns["_"].item() == 32.0      # the last expression
    data = c.report
    jsonschema.validate(data, SCHEMA)
    assert data["cell"]["mode"] == "eager"
    (r,) = data["compare"]["regions"]
    assert (r["ok"], r["ops"], r["skipped"], r["rtol"], r["atol"], r["differ"]) == (False, 3, 1, 0.001, None, 2)
    assert (r["first"]["op"], r["first"]["location"], r["first"]["module"]) == ("aten.gelu.default", "cell line 3",
                                                                                 "act")
    headline = ("compare: first divergence at aten.gelu.default, cell line 3 (module 'act'), forward: max abs 0.5, "
                "max rel 0.25")
    assert r["text"] == headline and "  " + headline in data["text"].splitlines()
    assert [row["status"] for row in r["rows"]] == ["ok", "introduced", "inherited"]
    html = next(o.data["text/html"] for o in c.outputs if "text/html" in o.data)
    assert '<details class="x-top" open>' in html and '<details class="x-compare-section" open>' in html
    # the comparison outlives the cell
    assert cell("print(_xla_compare.first_divergence.op, _xla_compare.ok)").stdout == "aten.gelu.default False\n"


def test_compare_cell_whose_ops_agree_says_so_in_one_line(cell, regions):
    cell(SETUP)
    c = cell("%%xla_compare --atol 0.5 --rtol 0\nz = (x4 + 1).sum()")
    assert c.error is None and regions[0].ok and (regions[0].rtol, regions[0].atol) == (0.0, 0.5)
    assert c.report["compare"]["lines"] == ["compare: 1 op within tolerance (rtol 0, atol 0.5), 1 op not compared"]
    assert c.report["compare"]["regions"][0]["rows"] == []


@pytest.mark.parametrize("line, names", [
    ("--rtol -1", "--rtol"),
    ("--atol nan", "--atol"),
    ("--rtol abc", "--rtol"),
    ("--bogus", "--bogus"),
    ("stray", "stray"),
])
def test_bad_arguments_are_usage_errors_naming_the_argument(cell, regions, line, names):
    c = cell(f"%%xla_compare {line}\n1 + 1")
    assert isinstance(c.error, UsageError) and names in str(c.error)
    assert regions == [] and c.reports == []


def test_an_error_in_the_body_closes_the_region_and_names_the_cell_line(ip, cell, regions):
    cell(SETUP)
    c = cell("%%xla_compare\ny = x4 * 2\n1 / 0")
    assert isinstance(c.error, ZeroDivisionError)
    assert regions[0].exited and regions[0].rows == []
    tb = c.error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_filename in ip.compile._filename_map and tb.tb_lineno == 3   # the user's line
    assert all(r[MIME_TYPE]["compare"] is None for r in c.reports)


def test_unload_removes_the_magic(ip, cell):
    assert cell("%unload_ext xlanb").error is None
    assert "xla_compare" not in ip.magics_manager.magics["cell"]
    assert cell("%load_ext xlanb").error is None
    assert "xla_compare" in ip.magics_manager.magics["cell"]
