"""The compare section (schema 1.6) in a real browser, from a report the real builder made of a cell
that ran xla ops and two `xlanb.compare()` regions (synthetic Compared events: one diverges at
its 11th op, with a hint; one agrees): drawn by the extension's renderer as the report widget
bundles it (xlanb/notebook/static/widget.js, the same renderReport the JupyterLab MIME renderer
uses) on a page of its own served by Playwright's routing, and as the text/html fallback with
scripts and style off. The screenshots go to test-output/labextension/.

Skipped when /usr/bin/chromium or playwright is missing, unless REQUIRE_BROWSER_TESTS=1 (.ci/run).
"""

import math
import re

import pytest
import torch

import xlanb
from labserver import OUTPUT, playwright_or_skip, widget_page
from xlanb import events as ev
from xlanb.report import CellContext, Cells, build_report, render_html, render_json
from xlanb.report.format import format_error

sync_api = playwright_or_skip()
expect = sync_api.expect
pytestmark = pytest.mark.timeout(120)

CELL = "/tmp/ipykernel_1/4242.py"
HINT = ("aten.mm.default multiplies float32 under torch.set_float32_matmul_precision('medium'): XLA runs its "
        "products in reduced precision (one or three bfloat16 passes) where the CPU uses float32. "
        "torch.set_float32_matmul_precision('highest') makes them agree")
# op 10 introduces the difference; the ops after it inherit it, growing (then an op whose shapes differ)
ERRORS = [0.0] * 7 + [1.2e-7, 0.0, 3e-8] + [0.031, 0.31, 3.1, 31.0, 310.0, 3100.0, math.inf, 0.5, 0.0]


def compare_report():
    rows = []
    for i in range(40):
        err = ERRORS[i] if i < len(ERRORS) else 0.0
        status = "ok" if i < 10 or err == 0.0 else ("introduced" if i == 10 else "inherited")
        rows.append(ev.CompareRow(i, "aten.mm.default" if i == 10 else "aten.add.Tensor", f"4242.py:{i // 4 + 1}",
                                  "blocks.0.mlp" if i == 10 else "blocks.0", "forward" if i < 30 else "backward",
                                  status, err, err * 2, (8, 8), "float32"))
    mark = xlanb.runtime_state().log.mark()
    (torch.ones(4, 4, device="xla") * 2).sum().item()
    log = xlanb.runtime_state().log
    log.emit(ev.Compared(rows=tuple(rows), first=10, rtol=None, atol=1e-5, skipped=2, precision="medium", hint=HINT))
    log.emit(ev.Compared(rows=tuple(rows[:7]), first=None, rtol=None, atol=None))
    return build_report(log.since(mark), CellContext(execution_count=5, cells=Cells({CELL: 5}, 5)))


def test_compare_section_in_the_extension_renderer(browser):
    r = compare_report()
    page, errors = widget_page(browser, render_json(r))
    report = page.locator(".xlanb-lab-report")
    assert report.locator("details.xl-top").evaluate("d => d.open"), "a divergence opens the report by itself"
    (bad, good) = r.compare.regions
    section = report.locator("details.xl-compare")
    expect(section).to_have_count(1)
    expect(section.locator("> summary")).to_have_text(
        "compare: first divergence at aten.mm.default, cell line 3 (module 'blocks.0.mlp'), forward: "
        "max abs 0.031, max rel 0.062")
    assert section.evaluate("d => d.open"), "a divergence opens its section"
    expect(section.locator("p.xl-compare-detail")).to_have_text(
        "40 ops compared (rtol torch default, atol 1e-05), 8 differ, 2 not compared; ops 7 to 18 shown")
    rows = section.locator("table.xl-compare-table tr")
    expect(rows).to_have_count(1 + 12)
    expect(rows.nth(0)).to_have_text("#oplocationmodulephasestatusmax absmax rel")
    for i, row in enumerate(bad.rows):          # the extension's numbers read as the text report's
        cells = rows.nth(i + 1).locator("td")
        expect(cells.nth(0)).to_have_text(str(row.index))
        expect(cells.nth(5)).to_have_text(row.status)
        expect(cells.nth(6)).to_have_text(format_error(row.max_abs))
        expect(cells.nth(7)).to_have_text(format_error(row.max_rel))
    first = section.locator("tr.xl-first")
    expect(first).to_have_count(1)
    expect(first.locator("td")).to_have_text(["10", "aten.mm.default", "cell line 3", "blocks.0.mlp", "forward",
                                              "introduced", "0.031", "0.062"])
    expect(rows.nth(1).locator("td").nth(6)).to_have_text("1.20e-07")        # op 7
    expect(rows.nth(9).locator("td").nth(6)).to_have_text("3.10e+03")        # op 15
    expect(rows.nth(10).locator("td").nth(6)).to_have_text("inf")            # op 16
    expect(section.locator("p.xl-compare-hint")).to_have_text(f"hint: {HINT}")
    expect(report.locator("p.xl-compare-ok")).to_have_text(good.headline())
    assert good.headline() == "compare: 7 ops within tolerance (rtol/atol: torch defaults)"
    OUTPUT.mkdir(parents=True, exist_ok=True)
    section.scroll_into_view_if_needed()
    page.screenshot(path=str(OUTPUT / "compare-section.png"))
    assert errors == []


def test_compare_section_in_the_html_fallback_without_scripts_or_style(browser):
    r = compare_report()
    html = re.sub(r"<style>.*?</style>", "", render_html(r), flags=re.S)      # as GitHub strips it
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_content(f"<html><body>{html}</body></html>")
    section = page.locator("details.x-compare-section")
    expect(section.locator("> summary")).to_have_text(r.compare.regions[0].headline())
    expect(section.locator("table.x-compare")).to_be_visible()        # open: an op diverged
    expect(section.locator("table.x-compare tr")).to_have_count(13)
    expect(section.locator("tr.x-first td")).to_have_text(["10", "aten.mm.default", "cell line 3", "blocks.0.mlp",
                                                           "forward", "introduced", "0.031", "0.062"])
    expect(section.locator("p.x-compare-hint")).to_have_text(f"hint: {HINT}")
    expect(page.locator("p.x-compare-ok")).to_have_text("compare: 7 ops within tolerance (rtol/atol: torch defaults)")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT / "compare-section-html.png"))
    context.close()
