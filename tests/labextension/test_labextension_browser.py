"""The JupyterLab extension in a real browser (Python Playwright driving Debian chromium).

A throwaway JupyterLab runs a notebook with `%load_ext xlanb` and `%%xla_compile` cells; the DOM
must show the report rendered by the extension, the XLA sidebar listing the graph with its
compile count, and the status bar showing the mode. With the extension disabled, the report's
text/html fallback shows instead. Screenshots go to test-output/labextension/.

Skipped when /usr/bin/chromium or playwright is missing, unless REQUIRE_BROWSER_TESTS=1 (.ci/run).
"""

import pathlib
import re
import sys

import pytest

from labserver import Lab, OUTPUT, notebook, playwright_or_skip

sync_api = playwright_or_skip()
Page = sync_api.Page
expect = sync_api.expect

EXTENSION = pathlib.Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "xlanb-lab"
WIDGET_MANAGER = "@jupyter-widgets/jupyterlab-manager"
pytestmark = pytest.mark.timeout(180)

CELLS = [
    "%load_ext xlanb\nimport torch, xlanb\nw = torch.ones(8, 8, device='xla')",
    # the sleep keeps the cell running long enough to see the status bar say so
    "%%xla_compile --name step\nimport time; time.sleep(0.6)\ny = (w @ w).relu().sum()\ny",
    "w = torch.ones(4, 4, device='xla')",
    "%%xla_compile --name step\ny = (w @ w).relu().sum()\ny",
    "%xla_mode lazy\nq = w + 1",
]

WATCH_STATUS = """() => {
  const el = document.getElementById('xlanb-status');
  window.__xlanbStatus = [el.textContent];
  new MutationObserver(() => window.__xlanbStatus.push(el.textContent))
    .observe(el, {childList: true, characterData: true, subtree: true});
}"""


def open_notebook(browser, lab: Lab) -> tuple[Page, list[str]]:
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.goto(lab.url)
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=60_000)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
    # the kernel is ready (JupyterLab's own status item; ours never says "Idle")
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=60_000)
    return page, errors


def run_all(page: Page) -> None:
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(OUTPUT / f"{name}.png"))


def xlanb_errors(errors: list[str]) -> list[str]:
    return [e for e in errors if re.search(r"xlanb|xl-|remoteEntry", e, re.I)]


def saved_notebook() -> dict:
    """A notebook saved with a report output and no signature: JupyterLab opens it untrusted."""
    import torch

    import xlanb
    from xlanb.report import MIME_TYPE, CellContext, build_report, render_json

    w = torch.ones(4, 4, device="xla")
    xlanb.sync()
    mark = xlanb.runtime_state().log.mark()
    with xlanb.hooks.recording_texts(), xlanb.compile(name="saved_step"):
        y = (w @ w).sum()
    y.item()
    report = build_report(xlanb.runtime_state().log.since(mark), CellContext(execution_count=1, mode="compiled"))
    report = render_json(report)
    nb = notebook(["%%xla_compile --name saved_step\ny = (w @ w).sum()"])
    nb["cells"][0]["outputs"] = [{"output_type": "display_data", "metadata": {},
                                  "data": {MIME_TYPE: report, "text/plain": report["text"]}}]
    return nb


def test_report_sidebar_and_status_bar_render_through_the_extension(browser, tmp_path):
    assert (EXTENSION / "package.json").exists(), f"the extension is not installed in {EXTENSION}: run make setup"
    with Lab(tmp_path, CELLS, name="enabled", files={"saved.ipynb": saved_notebook()}) as lab:
        page, errors = open_notebook(browser, lab)
        status = page.locator("#xlanb-status")
        expect(status).to_have_text("XLA: \u2013")          # no xlanb in the kernel yet
        page.evaluate(WATCH_STATUS)
        run_all(page)

        # the report of every runtime cell renders through the extension's MIME renderer (the first
        # cell has none: the cell hooks start with the cell after %load_ext)
        reports = page.locator(".jp-OutputArea-output .xlanb-lab-report")
        expect(reports).to_have_count(4, timeout=90_000)
        expect(status).to_have_text("XLA: lazy \u00b7 1 op pending", timeout=30_000)
        assert page.locator(".jp-OutputArea-output .xlanb-report").count() == 0      # not the html fallback
        assert page.locator(".jp-OutputArea-output .xlanb-widget").count() == 0     # not the widget's view
        seen = page.evaluate("() => window.__xlanbStatus")
        assert "XLA: compiling step" in seen, seen
        assert "XLA: eager \u00b7 0 ops pending" in seen, seen
        assert not any("idle" in s.lower() for s in seen), seen

        compiled = reports.nth(0)
        expect(compiled.locator(".xl-mode")).to_have_text("compiled")
        expect(compiled.locator(".xl-summary")).to_contain_text("1 graph compiled")
        graph = compiled.locator("details.xl-graph[data-graph='step']")
        graph.locator("summary").click()
        graph.locator("button.xl-tab", has_text="StableHLO").click()
        expect(graph.locator("pre.xl-code")).to_contain_text("stablehlo.dot_general")
        assert graph.locator("pre.xl-code .h-op").count() > 3                     # highlighted
        graph.locator("button.xl-tab", has_text="DAG").click()
        expect(graph.locator(".xl-svg svg.xlanb-dag")).to_be_visible()
        expect(reports.nth(1).locator(".xl-mode")).to_have_text("eager")
        recompiled = reports.nth(2)
        expect(recompiled.locator(".xl-notes")).to_contain_text("graph step: input 0: f32[8,8] -> f32[4,4]")
        graph.scroll_into_view_if_needed()
        shot(page, "enabled-report")

        # the sidebar: the graph by name, its compile count and last recompile reason; IR and HLO on click
        page.locator(".jp-SideBar.jp-mod-left [data-id='xlanb-sidebar']").click()
        sidebar = page.locator("#xlanb-sidebar")
        expect(sidebar).to_be_visible()
        item = sidebar.locator(".xl-sb-graph[data-graph='step']")
        expect(item.locator(".xl-sb-gname")).to_have_text("step")
        expect(item.locator(".xl-sb-compiles")).to_have_text("2 compiles")
        expect(item.locator(".xl-sb-recompile")).to_contain_text("f32[8,8] -> f32[4,4]")
        expect(sidebar.locator(".xl-sb-mode")).to_have_text("lazy")
        # the kernel's own count (report `state.cache_size`): graphs plus eager-op executables
        expect(sidebar.locator(".xl-sb-cache")).to_have_text(re.compile(r"^[1-9][0-9]* executables$"))
        # the two compiles of step (the cells' small fills are made on the host: capture/factories.py)
        expect(sidebar.locator(".xl-sb-hitrate")).to_contain_text("0 hits, 2 misses")
        item.locator(".xl-sb-ghead").click()
        expect(item.locator("pre.xl-code")).to_contain_text("aten::mm")            # the IR tab opens first
        item.locator("button.xl-tab", has_text="Optimized").click()
        expect(item.locator("pre.xl-code")).to_contain_text("HloModule")
        shot(page, "enabled-sidebar")
        item.locator("button.xl-sb-open").click()                                   # the graph in a tab
        view = page.locator(".jp-MainAreaWidget .xlanb-graph-view")
        expect(view.locator("pre.xl-code")).to_contain_text("aten::relu")
        shot(page, "enabled-graph-tab")

        # a kernel restart clears the sidebar and says so
        notebook = "[...window.jupyterapp.shell.widgets('main')].find(w => w.sessionContext).sessionContext"
        page.evaluate(f"() => {notebook}.restartKernel()")
        expect(sidebar.locator(".xl-sb-notice")).to_contain_text("kernel restarted", timeout=30_000)
        expect(sidebar.locator(".xl-sb-graph")).to_have_count(0)
        page.wait_for_function(f"() => {notebook}.kernelDisplayStatus === 'idle'", timeout=60_000)
        page.locator(".jp-NotebookPanel").first.click()                  # the notebook again: its status items
        expect(status).to_have_text("XLA: \u2013")
        shot(page, "enabled-after-restart")

        # a saved, untrusted notebook: the report still renders, its SVG only through <img>
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:open', {path: 'saved.ipynb'})")
        saved = page.locator(".jp-NotebookPanel:visible .xlanb-lab-report")
        expect(saved.locator(".xl-summary")).to_contain_text("1 graph compiled", timeout=30_000)
        graph = saved.locator("details.xl-graph[data-graph='saved_step']")
        graph.locator("summary").click()
        graph.locator("button.xl-tab", has_text="DAG").click()
        expect(graph.locator(".xl-svg img")).to_be_visible()
        assert graph.locator(".xl-svg svg").count() == 0
        shot(page, "enabled-untrusted-saved")
        assert xlanb_errors(errors) == []


def test_without_the_extension_the_html_fallback_shows(browser, tmp_path):
    """The report's text/html is what a frontend without the extension (and without the widget
    manager, which would otherwise show the anywidget view) renders."""
    cells = CELLS[:2]
    with Lab(tmp_path, cells, disabled=("xlanb-lab", WIDGET_MANAGER), name="disabled") as lab:
        page, errors = open_notebook(browser, lab)
        assert page.locator("#xlanb-status").count() == 0
        assert page.locator(".jp-SideBar [data-id='xlanb-sidebar']").count() == 0
        run_all(page)
        fallback = page.locator(".jp-OutputArea-output .xlanb-report")
        expect(fallback).to_have_count(1, timeout=90_000)
        expect(fallback.locator("details.x-top > summary")).to_contain_text("1 graph compiled")
        expect(fallback.locator("details.x-graph")).to_contain_text("step")
        assert page.locator(".xlanb-lab-report").count() == 0
        fallback.locator("details.x-graph > summary").click()
        fallback.scroll_into_view_if_needed()
        shot(page, "disabled-html-fallback")
        assert xlanb_errors(errors) == []
