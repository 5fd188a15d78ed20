"""The torch.compile section of the cell report in a real browser (JupyterLab, the prebuilt
extension): a cell runs torch.compile(fn, backend="xlanb") on a function with a print() in it, and
the report lists the FX graphs dynamo captured and the graph break with its reason and user line,
open because something broke. The screenshot goes to test-output/labextension/.

Skipped when /usr/bin/chromium or playwright is missing, unless REQUIRE_BROWSER_TESTS=1 (.ci/run).
"""

import pathlib
import re
import sys

import pytest

from labserver import Lab, OUTPUT, open_page, playwright_or_skip

sync_api = playwright_or_skip()
expect = sync_api.expect

EXTENSION = pathlib.Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "xlanb-lab"
pytestmark = pytest.mark.timeout(240)

SETUP = "%load_ext xlanb\nimport torch, xlanb\nx = torch.ones(3, 4, device='xla')"
# the report of this cell: dynamo captures the code before and after print() as two FX graphs
STEP = '''def step(a):
    b = a.cos() + 1
    print("between graphs")
    return (b * 2).sum()
compiled = torch.compile(step, backend="xlanb")
y = compiled(x)
xlanb.sync()'''


def test_torch_compile_section_lists_graphs_and_the_graph_break(browser, tmp_path):
    assert (EXTENSION / "package.json").exists(), f"the extension is not installed in {EXTENSION}: run make setup"
    with Lab(tmp_path, [SETUP, STEP], name="torch-compile") as lab:
        page, errors = open_page(browser, lab)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

        report = page.locator(".jp-OutputArea-output .xlanb-lab-report")
        expect(report).to_have_count(1, timeout=150_000)            # through the extension, not the fallback
        assert page.locator(".jp-OutputArea-output .xlanb-report").count() == 0
        section = report.locator("details.xl-torch-compile")
        expect(section).to_have_count(1)
        expect(section.locator("> summary")).to_have_text(
            re.compile(r"^torch\.compile \(\d+ FX graphs? captured, 1 graph break\)$"))
        assert section.evaluate("d => d.open"), "a section with a graph break opens by itself"
        graphs = section.locator("li.xl-tc-graph")
        assert graphs.count() >= 1
        expect(graphs.first).to_contain_text(re.compile(r"torch\.compile captured inference graph \S+: \d+ ops, "
                                                        r"\d+ inputs"))
        brk = section.locator("li.xl-tc-break")
        expect(brk).to_have_count(1)
        expect(brk.locator(".xl-tag")).to_have_text("graph break")
        # the user's line (the print, line 3 of the cell) and dynamo's reason
        expect(brk).to_contain_text(re.compile(r"^graph breaktorch\.compile graph break at cell line 3: .*`print`"))
        OUTPUT.mkdir(parents=True, exist_ok=True)
        section.scroll_into_view_if_needed()
        page.screenshot(path=str(OUTPUT / "torch-compile-section.png"))
        assert [e for e in errors if re.search(r"xlanb|xl-|remoteEntry", e, re.I)] == []
