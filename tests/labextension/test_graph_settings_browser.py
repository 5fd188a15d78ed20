"""A graph's settings in the extension's renderer (schema 1.6): a graph compiled under torch's "medium"
matmul precision and xlanb's compile_effort="fast" says both on its summary line and in its detail
rows; a graph at the defaults says neither. Drawn from a report the real builder made of real
compiles, by the report widget's bundle (the extension's renderReport).

Skipped when /usr/bin/chromium or playwright is missing, unless REQUIRE_BROWSER_TESTS=1 (.ci/run).
"""

import pytest
import torch

import xlanb
from labserver import playwright_or_skip, widget_page
from xlanb.report import CellContext, build_report, render_json

sync_api = playwright_or_skip()
expect = sync_api.expect
pytestmark = pytest.mark.timeout(120)


def report_of_two_graphs():
    before = torch.get_float32_matmul_precision()
    a = torch.randn(8, 8).to("xla")
    xlanb.sync()
    mark = xlanb.runtime_state().log.mark()
    try:
        with xlanb.compile(name="plain"):
            y = (a @ a).sum()
        y.item()
        torch.set_float32_matmul_precision("medium")
        with xlanb.config.override(compile_effort="fast"):
            with xlanb.compile(name="quick"):
                z = (a @ a).relu().sum()
            z.item()
    finally:
        torch.set_float32_matmul_precision(before)
    return build_report(xlanb.runtime_state().log.since(mark), CellContext(execution_count=1, style="full"))


def test_precision_and_compile_effort_on_the_graph_lines(browser):
    data = render_json(report_of_two_graphs())
    assert [(g["name"], g["matmul_precision"], g["compile_effort"]) for g in data["graphs"]] == [
        ("plain", "highest", "default"), ("quick", "medium", "fast")]
    page, errors = widget_page(browser, data)
    graphs = page.locator(".xlanb-lab-report details.xl-graph")
    expect(graphs).to_have_count(2)
    plain, quick = graphs.nth(0), graphs.nth(1)
    expect(quick.locator("> summary")).to_contain_text("matmul precision: medium \u00b7 compile effort: fast")
    summary = plain.locator("> summary").inner_text()
    assert "matmul precision" not in summary and "compile effort" not in summary
    if not quick.evaluate("d => d.open"):
        quick.locator("> summary").click()
    quick.get_by_role("tab", name="Overview").click()
    expect(quick.get_by_role("tabpanel")).to_contain_text("compile effort: fast (XLA optimized less)")
    expect(quick.get_by_role("tabpanel")).to_contain_text("medium")
    assert errors == []
