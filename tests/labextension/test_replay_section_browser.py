"""The replay section in a real browser, from the report of real replayed calls
(`xlanb.compile(step, replay=True)`, a guard failure, a function that cannot be replayed): drawn
by the extension's renderer, as the report widget bundles it (xlanb/notebook/static/widget.js,
the same renderReport the JupyterLab MIME renderer uses) on a page of its own served by
Playwright's routing, and as the text/html fallback with scripts off; then in JupyterLab, a cell
that only replayed gets its report. The screenshots go to test-output/labextension/.

Skipped when /usr/bin/chromium or playwright is missing, unless REQUIRE_BROWSER_TESTS=1 (.ci/run).
"""

import re

import pytest
import torch

import xlanb
from labserver import OUTPUT, Lab, open_page, playwright_or_skip, widget_page
from xlanb.report import build_report, render_html, render_json

sync_api = playwright_or_skip()
expect = sync_api.expect
pytestmark = pytest.mark.timeout(240)


def replay_report():
    """A cell: `step` traced twice then replayed three times, a batch of another shape (a guard
    fails), and `body`, which reads a value inside (never replayed)."""
    xlanb.runtime_state().cache.clear()
    w = torch.zeros(4).to("xla")
    v = torch.randn(4).to("xla")

    def step(x):
        w.add_(x.sum(0))
        return w.sum().detach()

    def body():
        if (v.sum() > 100).item():
            v.mul_(0.5)
        v.add_(1.0)
    f, g = xlanb.compile(step, replay=True), xlanb.compile(body, replay=True)
    a, b = torch.ones(4, 4).to("xla"), torch.ones(2, 4).to("xla")
    mark = xlanb.runtime_state().log.mark()
    for x in (a, a, a, a, a, b):
        f(x)
    for _ in range(3):
        g()
    return build_report(xlanb.runtime_state().log.since(mark))


def test_replay_section_in_the_extension_renderer(browser):
    r = replay_report()
    page, errors = widget_page(browser, render_json(r))
    report = page.locator(".xlanb-lab-report")
    expect(report.locator(".xl-summary")).to_contain_text(re.compile(r"\d+ executed \(3 replayed\)"))
    section = report.locator("details.xl-replay")
    expect(section).to_have_count(1)
    expect(section.locator("> summary")).to_have_text(
        "replay: 3 calls replayed, 1 call traced instead, 1 function not replayable")
    assert section.evaluate("d => d.open"), "a section with a failed guard opens by itself"
    rows = section.locator("table.xl-replay-table tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_have_text("functionreplayed callshost per callexecutable")
    (step, body) = r.replay.functions
    cells = rows.nth(1).locator("td")
    expect(cells.nth(0)).to_have_text("step")
    expect(cells.nth(1)).to_have_text("3")
    expect(cells.nth(2)).to_have_text(re.compile(r"^\d+ \u00b5s$|^\d+\.\d+ (ms|s)$"))
    expect(cells.nth(3)).to_have_text(step.keys[0][:8])
    expect(rows.nth(2).locator("td").nth(1)).to_have_text("0")
    miss = section.locator("li.xl-replay-miss")
    expect(miss).to_have_count(1)
    expect(miss.locator(".xl-tag")).to_have_text("traced instead")
    expect(miss).to_have_text("traced insteadstep: replay guard failed: argument 0 shape (4, 4) -> (2, 4)")
    never = section.locator("li.xl-replay-never")
    expect(never).to_have_count(1)
    expect(never).to_have_text(f"not replayablebody: {body.not_replayable[0][0]}")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    section.scroll_into_view_if_needed()
    page.screenshot(path=str(OUTPUT / "replay-section.png"))
    assert errors == []


def test_replay_section_in_the_html_fallback_without_scripts_or_style(browser):
    r = replay_report()
    html = re.sub(r"<style>.*?</style>", "", render_html(r), flags=re.S)      # as GitHub strips it
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_content(f"<html><body>{html}</body></html>")
    section = page.locator("details.x-replay-section")
    expect(section.locator("> summary")).to_have_text(
        "replay: 3 calls replayed, 1 call traced instead, 1 function not replayable")
    expect(section.locator("table.x-replay")).to_be_visible()       # open: a guard failed
    expect(section.locator("table.x-replay tr").nth(1).locator("td").nth(1)).to_have_text("3")
    expect(section.locator("li").first).to_have_text(
        "step traced instead: replay guard failed: argument 0 shape (4, 4) -> (2, 4)")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT / "replay-section-html.png"))
    context.close()


SETUP = """%load_ext xlanb
import torch, xlanb
w = torch.zeros(4, device="xla")
def step(x):
    w.add_(x.sum(0))
    return w.sum().detach()
step = xlanb.compile(step, replay=True)
x = torch.ones(4, 4, device="xla")
for _ in range(3):
    step(x)"""
REPLAY_ONLY = "for _ in range(5):\n    loss = step(x)"


def test_a_cell_that_only_replayed_shows_its_report_in_jupyterlab(browser, tmp_path):
    with Lab(tmp_path, [SETUP, REPLAY_ONLY], name="replay") as lab:
        page, errors = open_page(browser, lab)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        cell = page.locator(".jp-Notebook .jp-CodeCell").nth(1)
        report = cell.locator(".jp-OutputArea-output .xlanb-lab-report")
        expect(report).to_have_count(1, timeout=150_000)
        expect(report.locator(".xl-summary")).to_have_text(re.compile(
            r"^0 graphs compiled, 5 executed \(5 replayed\) \u00b7 cache: 5 hits, 0 misses \u00b7 execute "))
        top = report.locator("details.xl-top")
        assert not top.evaluate("d => d.open"), "nothing failed and nothing compiled: the report stays closed"
        top.locator("> summary").click()
        section = report.locator("details.xl-replay")
        expect(section.locator("> summary")).to_have_text("replay: 5 calls replayed")
        assert not section.evaluate("d => d.open"), "nothing failed: the section stays closed"
        section.locator("> summary").click()
        row = section.locator("table.xl-replay-table tr").nth(1)
        expect(row.locator("td").nth(0)).to_have_text("step")
        expect(row.locator("td").nth(1)).to_have_text("5")
        expect(row.locator("td").nth(3)).to_have_text(re.compile(r"^[0-9a-f]{8}$"))
        OUTPUT.mkdir(parents=True, exist_ok=True)
        section.scroll_into_view_if_needed()
        page.screenshot(path=str(OUTPUT / "replay-only-cell.png"))
        assert [e for e in errors if re.search(r"xlanb|xl-|remoteEntry", e, re.I)] == []
