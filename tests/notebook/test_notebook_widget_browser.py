"""The widget's front end (the bundle built from labextension/src) in a real browser: it renders the
report JSON with the JupyterLab extension's renderer, tabs switch, HLO is highlighted as the HTML
fallback highlights it, and nothing logs an error. Skipped without Python playwright and
/usr/bin/chromium."""

import html
import json
import os
import re

import pytest

from helpers import step_report
from xlanb.report import highlight, render_json

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian chromium at /usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def report_json() -> dict:
    return render_json(step_report(execution_count=1))


# the part of anywidget's model that render() uses, and set() to play the kernel sending a new report
MODEL_JS = ("class Model { constructor(r) { this.r = r; this.cbs = []; }"
            " get(k) { return k === 'report' ? this.r : undefined; }"
            " on(e, cb) { this.cbs.push(cb); } off(e, cb) { this.cbs = this.cbs.filter(c => c !== cb); }"
            " set(r) { this.r = r; this.cbs.forEach(cb => cb()); } }")


def python_spans(text: str) -> list[list[str]]:
    """[class, token] of each token the Python highlighter (the HTML fallback's) marks."""
    return [[kind, html.unescape(tok)] for kind, tok in re.findall(r'<span class="h-(\w+)">(.*?)</span>', highlight(text))]


def test_widget_renders_the_report_and_its_tabs_work():
    from xlanb.notebook.assets import widget_files
    esm, css = widget_files()
    data = report_json()
    compact = dict(data, cell=dict(data["cell"], style="compact"))
    page_html = (f"<!doctype html><html><head><style>{css.read_text()}</style></head><body>"
                 "<div id=out></div><div id=c></div>"
                 f"<script type=module>import w from './widget.js'; {MODEL_JS}"
                 f"const r = {json.dumps(data)}, c = {json.dumps(compact)};"
                 "window.models = [new Model(r), new Model(c)];"
                 "window.stop = w.render({model: models[0], el: document.getElementById('out')});"
                 "w.render({model: models[1], el: document.getElementById('c')});"
                 "window.done = true;</script></body></html>")
    files = {"index.html": (page_html, "text/html"), "widget.js": (esm.read_text(), "text/javascript")}
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
            out = page.locator("#out.xlanb-widget .xlanb-lab-report")             # the extension's renderer
            assert "1 graph compiled" in out.locator("details.xl-top > summary").inner_text()
            assert out.locator("details.xl-top").evaluate("d => d.open")        # a named graph: open
            assert out.locator(".xl-mode").inner_text() == data["cell"]["mode"]
            compact = page.locator("#c")
            assert compact.locator("details.xl-graph").count() == 0 and "step" in compact.locator("table").inner_text()

            graph = out.locator("details.xl-graph[data-graph='step']")
            graph.locator("summary").click()
            graph.locator("button.xl-tab", has_text="StableHLO").click()
            pre = graph.locator("pre.xl-code")
            assert "stablehlo.dot_general" in pre.inner_text()
            spans = pre.evaluate("p => [...p.querySelectorAll('span')].map(s => [s.className.slice(2), s.textContent])")
            assert len(spans) > 10 and spans == python_spans(data["graphs"][0]["hlo"]["stablehlo"]["text"])
            graph.locator("button.xl-tab", has_text="DAG").click()
            assert graph.locator(".xl-svg svg.xlanb-dag rect").count() >= 4     # inlined: the widget is trusted

            # a new `report` redraws; after the returned cleanup, changes are no longer followed
            page.evaluate("() => models[0].set(Object.assign({}, models[0].r, {version: '9.0', text: 'later'}))")
            assert page.locator("#out pre.xl-plain").inner_text() == "later"
            page.evaluate("() => { stop(); models[0].set(null); }")
            assert page.locator("#out pre.xl-plain").inner_text() == "later"
        finally:
            browser.close()
    assert errors == []
