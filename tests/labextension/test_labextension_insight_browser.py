"""Modules, fusions and memory in a real browser, in JupyterLab and in Jupyter Notebook 7 (the same
prebuilt extension): the module-collapsed DAG expands on click, a fusion's name in the optimized
HLO opens its row (ATen ops, modules, cell lines), the memory table lists the variables.
Screenshots go to test-output/labextension/.

Skipped when /usr/bin/chromium or playwright is missing, unless REQUIRE_BROWSER_TESTS=1 (.ci/run).
"""

import dataclasses
import pathlib
import re
import sys

import pytest

from labserver import Lab, OUTPUT, open_page, playwright_or_skip

sync_api = playwright_or_skip()
Page = sync_api.Page
expect = sync_api.expect

EXTENSION = pathlib.Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "xlanb-lab"
pytestmark = pytest.mark.timeout(240)

MODEL = '''%load_ext xlanb
import torch, torch.nn as nn, xlanb
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.ff = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 4))
    def forward(self, x):
        return self.ff(self.embed(x).relu()) * 2
torch.manual_seed(0)
model = Net().to("xla")
x = torch.ones(3, 4, device="xla")'''
CELLS = [MODEL, "%%xla_compile --name fwd\ny = (model(x) + 1).sum()\ny"]


def open_and_run(browser, lab: Lab) -> tuple[Page, list[str]]:
    page, errors = open_page(browser, lab, height=1100)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    return page, errors


def shot(page: Page, locator, name: str) -> None:
    locator.scroll_into_view_if_needed()
    page.screenshot(path=str(OUTPUT / f"{name}.png"))


@pytest.mark.parametrize("app", ["lab", "notebook"])
def test_modules_fusions_and_memory_in_the_browser(browser, tmp_path, app):
    assert (EXTENSION / "package.json").exists(), f"the extension is not installed in {EXTENSION}: run make setup"
    with Lab(tmp_path, CELLS, name=f"insight-{app}", app=app) as lab:
        page, errors = open_and_run(browser, lab)
        report = page.locator(".jp-OutputArea-output .xlanb-lab-report")
        expect(report).to_have_count(1, timeout=120_000)           # through the extension, not the fallback
        assert page.locator(".jp-OutputArea-output .xlanb-report").count() == 0
        graph = report.locator("details.xl-graph[data-graph='fwd']")
        graph.locator("summary").click()

        # the DAG collapsed to one box per module; a click on a box expands it into its ops
        graph.locator("button.xl-tab", has_text="Modules").click()
        drawing = graph.locator(".xl-module-dag svg.xlanb-dag")
        expect(drawing).to_be_visible()
        expect(drawing.locator("[data-module]")).to_have_count(7)
        expanded = graph.locator(".xl-module-expanded")
        expect(expanded.locator("svg")).to_have_count(0)
        drawing.locator("[data-module='ff.0']").click()
        expect(expanded.locator(".xl-module-head")).to_contain_text("ff.0 \u00b7 2 ops")
        expect(expanded.locator("svg.xlanb-dag")).to_be_visible()
        expect(expanded.locator("svg.xlanb-dag")).to_contain_text("addmm")
        expect(graph.locator("button.xl-chip.xl-active")).to_have_text(re.compile(r"^ff\.0 \u00b7 2$"))
        shot(page, expanded, f"{app}-modules-expanded")
        drawing.locator("[data-module='ff.0']").click()             # a second click collapses it
        expect(expanded.locator("svg")).to_have_count(0)
        graph.locator("button.xl-chip", has_text="ff.1").click()     # the names expand too
        expect(expanded.locator("svg.xlanb-dag")).to_contain_text("gelu")
        expect(graph.locator("table.xl-table").last).to_contain_text("with submodules")

        # the IR filtered by module
        graph.locator("button.xl-tab", has_text="IR").click()
        graph.locator("select.xl-ir-filter").select_option("ff.1")
        expect(graph.locator("pre.xl-code")).to_contain_text("aten::gelu.default")
        assert "addmm" not in graph.locator("pre.xl-code").inner_text()

        # a fusion's name in the optimized HLO links to its ATen ops, modules and cell lines
        graph.locator("button.xl-tab", has_text="Optimized HLO").click()
        links = graph.locator("pre.xl-code .xl-fusion-link")
        expect(links.first).to_be_visible()
        name = page.evaluate("""(g) => {
          const el = [...g.querySelectorAll('pre.xl-code .xl-fusion-link')]
            .find(s => (s.getAttribute('title') || '').includes('aten.gelu'));
          return el ? el.getAttribute('data-fusion') : null;
        }""", graph.element_handle())
        assert name, "no fusion link names aten.gelu"
        link = graph.locator(f"pre.xl-code .xl-fusion-link[data-fusion='{name}']").first
        assert "ff.1" in link.get_attribute("title")
        link.click()
        expect(graph.locator("button.xl-tab.xl-active")).to_have_text(re.compile(r"^Fusions \(\d+\)$"))
        row = graph.locator(f"tr.xl-hit[data-fusion='{name}']")
        expect(row).to_be_visible()
        expect(row).to_contain_text("aten.gelu")
        expect(row).to_contain_text("ff.1")
        expect(row).to_contain_text(re.compile(r"In \[\d+\] line 9"))        # Net.forward's line
        shot(page, row, f"{app}-fusion-link")

        # device memory by variable
        memory = report.locator("details.xl-memory")
        memory.locator("summary").click()
        table = memory.locator("table.xl-memory-table")
        expect(table).to_contain_text("model.parameters")
        params = table.locator("tr", has_text="model.parameters")
        expect(params).to_contain_text("592 B")                     # (8*4+8 + 8*8+8 + 4*8+4) floats
        expect(table.locator("tr", has=page.locator("code", has_text=re.compile(r"^x$")))).to_contain_text("48 B")
        shot(page, memory, f"{app}-memory")
        assert [e for e in errors if re.search(r"xlanb|xl-|remoteEntry", e, re.I)] == []


def test_html_fallback_expands_modules_with_scripts_disabled(browser):
    """The text/html form as GitHub or an untrusted notebook shows it: no JavaScript at all; a module
    box expands through its <details>, the fusion and memory tables are there."""
    import torch
    import torch.nn as nn

    from xlanb import hooks
    from xlanb.report import CellContext, build_report, render_html
    from xlanb.report.memory import Holder, memory_section

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2)).to("xla")
    x = torch.ones(3, 4, device="xla")
    mark = hooks.mark()
    with hooks.recording_texts(), hooks.recording_modules(), hooks.recording_locations():
        with hooks.compile(name="fallback"):
            y = (model(x) * 2).sum()
        y.item()
    report = build_report(hooks.since(mark), CellContext(execution_count=1, mode="compiled"))
    report = dataclasses.replace(report, memory=memory_section([Holder("model.parameters", "parameters", 232, 4)],
                                                               1024))
    html = render_html(report)
    assert "<script" not in html
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1200, "height": 1400})
    page = context.new_page()
    page.set_content(f"<html><body>{html}</body></html>")
    graph = page.locator("details.x-graph", has=page.locator("> summary", has_text="graph fallback ["))
    graph.locator("> summary").click()
    modules = graph.locator("details.x-by-module")
    modules.locator("> summary").click()
    expect(modules.locator("svg.xlanb-dag").first).to_be_visible()
    box = modules.locator("details.x-module", has_text="expand 1")
    expect(box.locator("svg")).to_be_hidden()
    box.locator("> summary").click()
    expect(box.locator("svg")).to_be_visible()
    expect(box.locator("svg")).to_contain_text("gelu")
    graph.locator("details.x-fusions-details > summary").click()
    expect(graph.locator("table.x-fusions")).to_contain_text("aten.gelu")
    # a fusion's name in the optimized HLO links to its row (a plain anchor)
    graph.locator("details", has=page.locator("> summary", has_text="Optimized HLO")).locator("> summary").click()
    link = graph.locator("pre.x-code a[href^='#xlanb-fusion-']", has_text="%add_multiply_fusion").first
    assert "aten.gelu" in link.get_attribute("title")
    link.click()
    assert page.evaluate("location.hash").endswith("-add_multiply_fusion")
    page.locator("details.x-memory-details > summary").click()
    expect(page.locator("table.x-memory")).to_contain_text("model.parameters")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    box.scroll_into_view_if_needed()
    page.screenshot(path=str(OUTPUT / "html-fallback-no-scripts.png"), full_page=True)
    context.close()
