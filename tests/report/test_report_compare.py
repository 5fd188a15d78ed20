"""xlanb.compare() in the cell report (schema 1.6), built from Compared events: the first divergence
with its line, module and error, the rows around it (3 before, up to 8 after: how the error grows),
the hint, one line for a region whose ops all agreed, and the region's other rows kept out."""

import json
import math

import jsonschema
import pytest
import torch

import xlanb
from xlanb import events as ev
from xlanb.report import SCHEMA, CellContext, Cells, build_report, render_html, render_json, render_text
from xlanb.report.format import format_error

CELL = "/tmp/ipykernel_1/2784.py"          # a kernel's made-up filename for cell 7


def compared(n: int, first: int | None, *, grows: int = 20, file: str = "2784.py", **kw) -> ev.Compared:
    """A region of n ops; op `first` introduces a difference that the next `grows` ops inherit,
    each 1.5x the one before."""
    rows = []
    for i in range(n):
        if first is None or i < first or i > first + grows:
            status, err = "ok", 0.0
        else:
            status, err = ("introduced" if i == first else "inherited"), 0.031 * 1.5 ** (i - first)
        op = "aten.gelu.default" if i == first else "aten.addmm.default"
        rows.append(ev.CompareRow(index=i, op=op, location=f"{file}:{i + 1}", module="mlp.act" if i == first else "mlp",
                                  phase="forward", status=status, max_abs=err, max_rel=4 * err, shape=(4, 8),
                                  dtype="float32"))
    return ev.Compared(rows=tuple(rows), first=first, rtol=kw.pop("rtol", None), atol=kw.pop("atol", None), **kw)


def report(*evs, style="on"):
    return build_report(evs, CellContext(execution_count=7, style=style, cells=Cells({CELL: 7}, 7)))


def test_the_first_divergence_is_named_with_its_cell_line_module_and_error():
    r = report(compared(300, 150, skipped=3))
    (c,) = r.compare.regions
    assert (c.ok, c.ops, c.skipped, c.differ, c.hidden) == (False, 300, 3, 21, 288)
    assert (c.first.index, c.first.op, c.first.location, c.first.module) == (150, "aten.gelu.default",
                                                                            "cell line 151", "mlp.act")
    assert [row.index for row in c.rows] == list(range(147, 159))       # 3 before, 8 after
    lines = render_text(r).splitlines()
    i = lines.index("  compare: first divergence at aten.gelu.default, cell line 151 (module 'mlp.act'), forward: "
                    "max abs 0.031, max rel 0.124")
    assert lines[i + 1] == "    300 ops compared (rtol/atol: torch defaults), 21 differ, 3 not compared; ops 147 to " \
                           "158 shown"
    assert lines[i + 2].split() == ["#", "op", "location", "module", "phase", "status", "max", "abs", "max", "rel"]
    assert lines[i + 3].split() == ["147", "aten.addmm.default", "cell", "line", "148", "mlp", "forward", "ok", "0", "0"]
    assert lines[i + 6].split()[-3:] == ["introduced", "0.031", "0.124"]
    assert [line.split()[-2] for line in lines[i + 7:i + 15]] == [format_error(0.031 * 1.5 ** k) for k in range(1, 9)]
    assert len(lines) == i + 15                            # no hint


def test_the_json_holds_the_window_not_the_regions_thousands_of_rows():
    data = render_json(report(compared(5000, 4000, skipped=2)))
    jsonschema.validate(data, SCHEMA)
    assert data["version"] == "1.6"
    (c,) = data["compare"]["regions"]
    assert (c["ok"], c["ops"], c["differ"], c["hidden"], len(c["rows"])) == (False, 5000, 21, 4988, 12)
    assert c["first"] == {"index": 4000, "op": "aten.gelu.default", "location": "cell line 4001", "module": "mlp.act",
                          "phase": "forward", "status": "introduced", "max_abs": 0.031, "max_rel": 0.124,
                          "shape": [4, 8], "dtype": "float32"}
    assert [row["status"] for row in c["rows"]] == ["ok"] * 3 + ["introduced"] + ["inherited"] * 8
    assert c["text"] == c["lines"][0] and data["compare"]["lines"] == c["lines"]
    assert len(json.dumps(data["compare"])) < 8000


def test_a_divergence_at_the_first_op_shows_it_and_eight_after():
    (c,) = report(compared(5, 0)).compare.regions
    assert [row.index for row in c.rows] == [0, 1, 2, 3, 4] and c.hidden == 0
    assert "; ops" not in c.detail()                       # every row is shown
    (c,) = report(compared(40, 0)).compare.regions
    assert [row.index for row in c.rows] == list(range(9)) and c.hidden == 31


def test_a_region_whose_ops_agree_is_one_line_without_a_table():
    r = report(compared(214, None, skipped=3))
    (c,) = r.compare.regions
    assert c.ok and c.rows == () and c.first is None and not r.compare.diverged
    assert r.compare.lines() == ["compare: 214 ops within tolerance (rtol/atol: torch defaults), 3 ops not compared"]
    assert "  " + r.compare.lines()[0] in render_text(r).splitlines()
    data = render_json(r)
    jsonschema.validate(data, SCHEMA)
    assert (data["compare"]["regions"][0]["first"], data["compare"]["regions"][0]["rows"]) == (None, [])
    html = render_html(r)
    assert '<p class="x-compare-ok">compare: 214 ops within tolerance (rtol/atol: torch defaults), 3 ops not ' \
           'compared</p>' in html
    assert "x-compare-section" not in html and '<details class="x-top" open>' not in html
    assert not report(compared(3, None, skipped=0)).compare.lines()[0].endswith("not compared")


def test_the_hint_and_the_users_tolerances():
    hint = ("aten.mm.default multiplies float32 under torch.set_float32_matmul_precision('medium'): XLA runs its "
            "products in reduced precision")
    r = report(compared(20, 5, rtol=1e-2, atol=None, precision="medium", hint=hint))
    lines = render_text(r).splitlines()
    assert f"    hint: {hint}" == lines[-1]
    assert "    20 ops compared (rtol 0.01, atol torch default), 15 differ; ops 2 to 13 shown" in lines
    data = render_json(r)
    jsonschema.validate(data, SCHEMA)
    c = data["compare"]["regions"][0]
    assert (c["rtol"], c["atol"], c["precision"], c["hint"]) == (0.01, None, "medium", hint)
    assert f'<p class="x-compare-hint"><b>hint:</b> {hint.replace(chr(39), "&#x27;")}</p>' in render_html(r)


def test_the_html_section_is_open_with_the_first_row_marked_and_opens_the_report():
    for style in ("on", "compact"):
        html = render_html(report(compared(30, 12), style=style))
        assert '<details class="x-top" open>' in html
        assert ('<details class="x-compare-section" open><summary>compare: first divergence at aten.gelu.default, '
                "cell line 13 (module &#x27;mlp.act&#x27;), forward: max abs 0.031, max rel 0.124</summary>") in html
        assert "<tr class=x-first><td class=num>12</td><td><code>aten.gelu.default</code></td>" in html
        assert html.count("<tr class=x-first>") == 1 and html.count("<td class=num>") == 3 * 12


def test_infinite_and_nan_errors_are_json_strings():
    rows = (ev.CompareRow(0, "aten.view_as_real.default", "", "", "backward", "introduced", math.inf, math.nan),)
    r = report(ev.Compared(rows=rows, first=0, rtol=None, atol=None))
    data = render_json(r)
    jsonschema.validate(data, SCHEMA)
    json.dumps(data, allow_nan=False)                        # Jupyter's packer refuses inf and NaN
    assert (data["compare"]["regions"][0]["first"]["max_abs"], data["compare"]["regions"][0]["first"]["max_rel"]) \
        == ("inf", "nan")
    assert r.compare.lines()[0] == "compare: first divergence at aten.view_as_real.default, backward: max abs inf, " \
                                   "max rel nan"


def test_two_regions_are_two_entries_in_order():
    r = report(compared(10, None), compared(10, 2))
    assert [c.ok for c in r.compare.regions] == [True, False] and r.compare.diverged
    assert render_text(r).count("  compare: ") == 2


def test_format_error():
    assert [format_error(x) for x in (0.0, 0.031, 0.12, 1.0, 123.4, 999.7, 1234.5, 1e-7, 0.000999, math.inf,
                                      math.nan)] == \
        ["0", "0.031", "0.12", "1", "123", "1.00e+03", "1.23e+03", "1.00e-07", "9.99e-04", "inf", "nan"]


def test_a_real_region_that_agrees():
    x = torch.randn(4, 8).to("xla")
    mark = xlanb.runtime_state().log.mark()
    with xlanb.compare() as cmp:
        y = torch.nn.functional.gelu(x @ x.T).sum()
    del y
    r = build_report(xlanb.runtime_state().log.since(mark))
    (c,) = r.compare.regions
    assert cmp.ok and c.ok and c.ops == len(cmp.rows) > 0
    assert r.compare.lines() == [f"compare: {c.ops} ops within tolerance (rtol/atol: torch defaults)"]
    jsonschema.validate(render_json(r), SCHEMA)


def test_a_cell_without_compare_has_no_compare_section():
    mark = xlanb.runtime_state().log.mark()
    (torch.ones(3, device="xla") * 2).sum().item()
    r = build_report(xlanb.runtime_state().log.since(mark))
    assert r.compare is None and render_json(r)["compare"] is None
    assert "compare:" not in render_text(r) and "x-compare" not in render_html(r)


@pytest.mark.parametrize("first", [None, 3])
def test_a_cell_that_only_compared_has_a_report(first):
    assert not report(compared(5, first)).empty


def test_a_region_whose_differences_grew_without_an_introduced_op_says_so():
    rows = tuple(ev.CompareRow(index=i, op="aten.mul.Tensor", location=f"2784.py:{i + 1}", module="", phase="forward",
                               status="ok" if i == 0 else "inherited", max_abs=0.0 if i == 0 else 4e-3,
                               max_rel=0.0 if i == 0 else 4e-3, shape=(16,), dtype="float32") for i in range(3))
    (c,) = report(ev.Compared(rows=rows, first=None, rtol=None, atol=None)).compare.regions
    assert (c.ok, c.differ, c.first) == (False, 2, None)
    assert render_text(report(ev.Compared(rows=rows, first=None, rtol=None, atol=None))).splitlines()[-1].strip() == (
        "compare: 2 ops of 3 differ (rtol/atol: torch defaults), but none computes other values than the CPU's from "
        "the inputs it got: differences under the tolerance grew past it (a product scales an absolute error)")
