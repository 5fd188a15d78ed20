"""The widget's JavaScript in a real browser: it renders the report JSON, tabs switch, HLO is
highlighted, and nothing logs an error. Skipped without Python playwright and /usr/bin/chromium."""

import json
import os

import pytest

from helpers import step_report

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian chromium at /usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def report_json() -> dict:
    return step_report(execution_count=1).to_json()


def test_widget_renders_the_report_and_its_tabs_work():
    from xlanb.notebook.assets import CSS, ESM
    data = report_json()
    compact = dict(data, cell=dict(data["cell"], style="compact"))
    page_html = (f"<!doctype html><html><head><style>{CSS}</style></head><body><div id=out></div><div id=c></div>"
                 "<script type=module>import w from './widget.js';"
                 f"const r = {json.dumps(data)}, c = {json.dumps(compact)};"
                 "w.render({model: {get: () => r, on() {}, off() {}}, el: document.getElementById('out')});"
                 "w.render({model: {get: () => c, on() {}, off() {}}, el: document.getElementById('c')});"
                 "window.done = true;</script></body></html>")
    files = {"index.html": (page_html, "text/html"), "widget.js": (ESM, "text/javascript")}
    errors = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.route("http://xlanb.test/**", lambda route: route.fulfill(
                body=files[route.request.url.rsplit("/", 1)[1]][0],
                content_type=files[route.request.url.rsplit("/", 1)[1]][1]))
            page.goto("http://xlanb.test/index.html")
            page.wait_for_function("window.done === true")
            summary = page.locator("#out details.xlanb-w > summary").inner_text()
            assert "1 graph compiled" in summary
            assert page.locator("#out details.xlanb-w").evaluate("d => d.open")     # a named graph: open
            compact = page.locator("#c")
            assert compact.locator(".xw-card").count() == 0 and "step" in compact.locator("table").inner_text()
            card = page.locator("#out .xw-card").first
            assert "step" in card.inner_text()
            card.locator("button.xw-tab", has_text="StableHLO").click()
            assert card.locator("pre.xw-code .h-op").count() > 3
            assert "stablehlo.dot_general" in card.locator("pre.xw-code").inner_text()
            card.locator("button.xw-tab", has_text="DAG").click()
            assert card.locator("svg.xlanb-dag rect").count() >= 4
        finally:
            browser.close()
    assert errors == []
