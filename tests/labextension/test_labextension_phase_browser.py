"""The live phase of a long compile in a real browser, in JupyterLab and in Jupyter Notebook 7 (the
same prebuilt extension): a cell whose XLA compile is made to take 4.5 s shows the phase in the cell
through the extension's renderer (phase, graph name, op count, a moving bar, the seconds; past
slow_compile=2 s the interrupt note in bold) and, in JupyterLab, in the status bar; when it ends the
cell keeps one line with the total and the status bar goes back to the mode. Screenshots go to test-output/labextension/ and /tmp/phase_screens/.

Skipped when /usr/bin/chromium or playwright is missing, unless REQUIRE_BROWSER_TESTS=1 (.ci/run).
"""

import pathlib
import re
import shutil

import pytest

from labserver import Lab, OUTPUT, open_page, playwright_or_skip

sync_api = playwright_or_skip()
expect = sync_api.expect

BUILT = pathlib.Path(__file__).resolve().parents[2] / "xlanb" / "labextension"
SCREENS = pathlib.Path("/tmp/phase_screens")
pytestmark = pytest.mark.timeout(240)

SETUP = "%load_ext xlanb\n%xla_config slow_compile=2\nimport torch, xlanb\nx = torch.ones(4, 4, device='xla')"
# XLA's compile made to take 4.5 s (the phase shows from 1 s, its note from 2 s); the cache
# cleared, so the graph compiles in this kernel whatever ran before
SLOW = '''import time
from xlanb.runtime import stages
real_init = stages.Compiled.__init__
def slow_init(self, *args, **kwargs):
    time.sleep(4.5)
    real_init(self, *args, **kwargs)
stages.Compiled.__init__ = slow_init
try:
    xlanb.runtime_state().cache.clear()
    with xlanb.compile(name="slowstep"):
        y = (x @ x + 1).relu().sum()
    print(y.item())
finally:
    stages.Compiled.__init__ = real_init'''

WATCH_STATUS = """() => {
  const el = document.getElementById('xlanb-status');
  window.__xlanbStatus = [[el.textContent, el.dataset.mode]];
  new MutationObserver(() => window.__xlanbStatus.push([el.textContent, el.dataset.mode]))
    .observe(el, {childList: true, characterData: true, subtree: true, attributes: true});
}"""
LIVE_STATUS = re.compile(r"^XLA: compiling slowstep \(\d+ ops\) \u00b7 \d+\.\d s$")


def screenshot(page, tmp_path: pathlib.Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path))
    for folder in (OUTPUT, SCREENS):
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, folder / path.name)


@pytest.mark.parametrize("app", ["lab", "notebook"])
def test_a_long_compile_shows_its_phase_in_the_cell_and_the_status_bar(browser, tmp_path, app):
    assert (BUILT / "package.json").exists(), "the extension is not built: run make setup"
    with Lab(tmp_path, [SETUP, SLOW], name=f"phase-{app}", app=app) as lab:
        page, errors = open_page(browser, lab)
        status = page.locator("#xlanb-status")
        if app == "lab":
            page.evaluate(WATCH_STATUS)
        else:
            assert status.count() == 0                  # Notebook 7 has no status bar
        # not awaited (the command's promise settles when the cells are done): watch them run
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

        # while it compiles: the phase in the cell through the extension, not the text/html
        phase = page.locator(".jp-OutputArea-output .xlanb-lab-phase")
        live = phase.locator(".xl-phase-live")
        expect(live).to_be_visible(timeout=90_000)
        expect(live.locator(".xl-phase-word")).to_have_text("compiling")
        expect(live.locator(".xl-phase-graph")).to_have_text("slowstep")
        expect(live.locator(".xl-phase-ops")).to_have_text(re.compile(r"^ \(\d+ ops\)$"))
        expect(live.locator(".xl-phase-bar")).to_be_visible()
        seconds = live.locator(".xl-phase-seconds")
        expect(seconds).to_have_text(re.compile(r"^\d+\.\d s$"))
        # the kernel's updates change the text in place: the bar (and its animation) stays the same element
        first = seconds.inner_text()
        live.locator(".xl-phase-bar").evaluate("bar => { bar.__xlanbFirst = true; }")
        expect(seconds).not_to_have_text(first)
        assert live.locator(".xl-phase-bar").evaluate("bar => bar.__xlanbFirst === true")
        if app == "lab":
            expect(status).to_have_text(LIVE_STATUS)
            expect(status).to_have_attribute("data-mode", "compiling")
            expect(status).to_have_attribute("title", re.compile(r"^xlanb is compiling graph slowstep \(\d+ ops\) for"))
        # past slow_compile: how to interrupt, in bold, in the cell and in the status bar's title
        note = live.locator("xpath=..").locator(".xl-phase-note")
        expect(note.locator("b")).to_have_text(re.compile(r"^still compiling after 2 s: Kernel > Interrupt .*"
                                                          r"the pending graph stays pending$"))
        if app == "lab":
            expect(status).to_have_attribute("title", re.compile(r"; still compiling after 2 s: Kernel > Interrupt"))
            expect(status).to_have_text(LIVE_STATUS)
        screenshot(page, tmp_path, f"phase-{app}-compiling")
        assert page.locator(".jp-OutputArea-output .xlanb-phase").count() == 0     # not the html fallback

        # afterwards: one quiet line with the total in the cell, the mode again in the status bar
        done = phase.locator(".xl-phase-done")
        expect(done).to_have_text(re.compile(r"^xlanb graph slowstep \(\d+ ops\) compiled and launched in \d+\.\d s$"),
                                  timeout=60_000)
        expect(live).to_have_count(0)
        expect(page.locator(".jp-OutputArea-output .xlanb-lab-report")).to_have_count(1, timeout=60_000)
        total = float(re.search(r"in (\d+\.\d) s$", done.inner_text()).group(1))
        assert 4 <= total < 30, total
        if app == "lab":
            expect(status).to_have_text("XLA: eager \u00b7 0 ops pending", timeout=30_000)
            expect(status).to_have_attribute("data-mode", "eager")
            seen = page.evaluate("() => window.__xlanbStatus")
            live_texts = [text for text, mode in seen if LIVE_STATUS.match(text) and mode == "compiling"]
            assert len(set(live_texts)) >= 2, seen             # the seconds went on
            assert not any("idle" in text.lower() for text, _ in seen), seen
        screenshot(page, tmp_path, f"phase-{app}-done")
        assert [e for e in errors if re.search(r"xlanb|xl-|remoteEntry", e, re.I)] == []
