"""Screenshots of the cell report (HTML fallback and widget) in headless chromium.

Not a test: run it by hand after changing the report's look, then look at the PNGs.

    python tests/report/screenshots.py [outdir]      # default: test-output/

Needs playwright (Python) and a chromium at /usr/bin/chromium (never `playwright install`).
"""

from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

MLP_CELLS = [
    "%load_ext xlanb",
    "import torch, torch.nn as nn, xlanb\n"
    "torch.manual_seed(0)\n"
    "model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to('xla')\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "x, y = torch.randn(8, 16, device='xla'), torch.randint(0, 4, (8,), device='xla')",
    "%%xla_compile --name train_step\n"
    "loss = nn.functional.cross_entropy(model(x), y)\n"
    "loss.backward(); opt.step(); opt.zero_grad()\n"
    "loss",
    "x, y = torch.randn(12, 16, device='xla'), torch.randint(0, 4, (12,), device='xla')",
    "%%xla_compile --name train_step\n"
    "loss = nn.functional.cross_entropy(model(x), y)\n"
    "loss.backward(); opt.step(); opt.zero_grad()\n"
    "loss",
    "%xla_mode lazy",
    "h = model(x).relu()\nprint(h.sum().item())\nleft = h * 2",
]


def notebook_reports() -> list[dict]:
    """Runs the MLP cells in an in-process shell and returns the report bundles shown."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from xlanb.report import MIME_TYPE

    ip = InteractiveShell.instance()
    bundles = []
    for cell in MLP_CELLS:
        with capture_output() as cap:
            result = ip.run_cell(cell, store_history=True)
        assert result.success, (cell, result.error_in_exec, cap.stderr)
        bundles += [o.data for o in cap.outputs if MIME_TYPE in o.data]
    return bundles


PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{margin:16px;background:#fff;font-family:system-ui,sans-serif}} .cell{{margin:0 0 18px 0;
max-width:1100px}} .label{{font:12px monospace;color:#888;margin-bottom:2px}}</style>{head}</head><body>{body}</body></html>"""


def html_page(bundles, strip_style: bool = False) -> str:
    import re
    cells = []
    for i, b in enumerate(bundles):
        html = b["text/html"]
        if strip_style:            # what an untrusted notebook shows: the sanitizer drops <style>
            html = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
        cells.append(f'<div class="cell"><div class="label">report {i + 1}</div>{html}</div>')
    return PAGE.format(title="xlanb html fallback", head="", body="".join(cells))


def widget_page(bundles) -> str:
    from xlanb.notebook.assets import CSS
    reports = json.dumps([b["application/vnd.xlanb.report+json"] for b in bundles])
    script = f"""<script type="module">
import widget from "./widget.js";
const reports = {reports};
for (const [i, r] of reports.entries()) {{
  const el = document.createElement("div");
  el.className = "cell";
  document.body.append(el);
  const model = {{ get: () => r, on() {{}}, off() {{}} }};
  widget.render({{ model, el }});
}}
window.rendered = true;
</script>"""
    return PAGE.format(title="xlanb widget", head=f"<style>{CSS.read_text()}</style>", body=script)


def shoot(outdir: pathlib.Path) -> list[pathlib.Path]:
    from playwright.sync_api import sync_playwright

    from xlanb.notebook.assets import widget_files

    esm, _ = widget_files()
    bundles = notebook_reports()
    pages = {"report_html.html": html_page(bundles), "report_html_nostyle.html": html_page(bundles, True),
             "report_widget.html": widget_page(bundles), "widget.js": esm.read_text()}
    outdir.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (outdir / name).write_text(text)
    shots = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.route("http://xlanb.test/**", lambda route: route.fulfill(
            body=pages[route.request.url.rsplit("/", 1)[1]],
            content_type="text/javascript" if route.request.url.endswith(".js") else "text/html"))
        for name in ("report_html.html", "report_html_nostyle.html"):
            page.goto(f"http://xlanb.test/{name}")
            page.evaluate("() => { document.querySelectorAll('details.x-top').forEach(d => d.open = true);"
                          " const g = document.querySelectorAll('details.x-graph')[1]; g.open = true;"
                          " g.querySelectorAll('details').forEach((d, i) => { if (i < 3) d.open = true; }); }")
            shots.append(outdir / name.replace(".html", ".png"))
            page.screenshot(path=str(shots[-1]), full_page=True)
            shots.append(outdir / name.replace(".html", "_top.png"))
            page.screenshot(path=str(shots[-1]))
        page.goto("http://xlanb.test/report_widget.html")
        page.wait_for_function("window.rendered === true")
        page.evaluate("() => document.querySelectorAll('.xlanb-widget details').forEach(d => d.open = true)")
        shots.append(outdir / "report_widget.png")
        page.screenshot(path=str(shots[-1]), full_page=True)
        card = page.locator(".xlanb-widget details.xl-graph").nth(1)           # the recompiled train_step
        for tab in ("DAG", "StableHLO", "Optimized HLO", "Cost", "IR"):
            card.locator("button.xl-tab", has_text=tab).first.click()
            shots.append(outdir / f"report_widget_{tab.lower().replace(' ', '_')}.png")
            card.screenshot(path=str(shots[-1]))
        browser.close()
    if errors:
        raise RuntimeError("browser errors: " + "; ".join(errors))
    return shots


if __name__ == "__main__":
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "test-output"
    for path in shoot(out):
        print(path)
