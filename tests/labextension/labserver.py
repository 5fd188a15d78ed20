"""A throwaway JupyterLab for the browser tests: its own port, token, root, settings and config
dirs, a kernelspec for this interpreter that imports this checkout's xlanb, and a stop that ends
exactly the processes it started.

Chromium is Debian's (/usr/bin/chromium, `apt-get install chromium`), driven by Python Playwright;
`playwright install` is never needed.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
REPO = pathlib.Path(__file__).resolve().parents[2]
OUTPUT = REPO / "test-output" / "labextension"       # screenshots and server logs (CI artifacts)
KERNEL = "xlanb-test"
NO_NEWS = {"fetchNews": "false", "checkForUpdates": False}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def notebook(cells: list[str]) -> dict:
    """An nbformat 4.5 notebook (cell ids included) for the test kernel, written as plain JSON."""
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": KERNEL, "display_name": "xlanb test", "language": "python"},
                     "language_info": {"name": "python"}},
        "cells": [{"cell_type": "code", "id": f"c{i:07d}-test", "metadata": {}, "source": src, "outputs": [],
                   "execution_count": None} for i, src in enumerate(cells)],
    }


def _descendants(pid: int) -> list[int]:
    """Every process below pid (kernels start in their own session, outside the server's group)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in pathlib.Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def playwright_or_skip():
    """playwright.sync_api, or a skip of the calling test module when playwright or Debian chromium
    is missing, unless REQUIRE_BROWSER_TESTS=1 (.ci/run sets it: there a missing browser fails)."""
    import pytest
    if os.environ.get("REQUIRE_BROWSER_TESTS") != "1":
        pytest.importorskip("playwright.sync_api")
        if not os.path.exists(CHROMIUM):
            pytest.skip("needs Debian chromium at /usr/bin/chromium (apt-get install chromium)",
                        allow_module_level=True)
    from playwright import sync_api
    return sync_api


def open_page(browser, lab: "Lab", width: int = 1440, height: int = 1000):
    """A page on lab.url once the notebook's kernel is ready, in JupyterLab or Notebook 7 (both
    expose the app as window.jupyterapp); returns (page, errors): page errors and console errors."""
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.goto(lab.url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    panel = "window.jupyterapp.shell.currentWidget"
    page.wait_for_function(f"() => {panel} && {panel}.sessionContext && "
                           f"{panel}.sessionContext.kernelDisplayStatus === 'idle'", timeout=90_000)
    return page, errors


STATIC = REPO / "xlanb" / "notebook" / "static"     # the report widget's bundle (make widget)
WIDGET_PAGE = """<html><head><link rel="stylesheet" href="/widget.css"></head><body><div id="out"></div>
<script type="module">
import widget from "/widget.js";
const report = await (await fetch("/report.json")).json();
widget.render({model: {get: () => report, on() {}, off() {}}, el: document.getElementById("out")});
document.body.dataset.drawn = "yes";
</script></body></html>"""


def widget_page(browser, report_json: dict, width: int = 1200, height: int = 900):
    """A page that draws `report_json` with the report widget's bundle (the extension's renderReport,
    as xlanb/notebook/static/widget.js bundles it), served by Playwright's routing; returns (page,
    errors) once it is drawn: page errors and console errors."""
    assert (STATIC / "widget.js").is_file(), "the widget bundle is missing: make widget"
    css = STATIC / "widget.css"
    files = {"/": (WIDGET_PAGE, "text/html"), "/widget.js": ((STATIC / "widget.js").read_text(), "text/javascript"),
             "/widget.css": (css.read_text() if css.is_file() else "", "text/css"),
             "/report.json": (json.dumps(report_json, allow_nan=False), "application/json")}
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)

    def serve(route):
        body, kind = files[route.request.url.removeprefix("http://xlanb.test")]
        route.fulfill(status=200, body=body, content_type=kind)
    page.route("http://xlanb.test/**", serve)
    page.goto("http://xlanb.test/")
    page.wait_for_selector("body[data-drawn=yes]", state="attached")
    return page, errors


class Lab:
    """`with Lab(tmp_path, cells, disabled=[...]) as lab:` then open lab.url in a browser."""

    def __init__(self, tmp: pathlib.Path, cells: list[str], disabled: tuple[str, ...] = (), name: str = "lab",
                 files: dict[str, dict] | None = None, app: str = "lab"):
        """`app`: "lab" (JupyterLab) or "notebook" (Jupyter Notebook 7, the same prebuilt extension)."""
        self.tmp, self.name, self.app = tmp, name, app
        self.port, self.token = free_port(), "xlanb-test-token"
        self.root = tmp / "root"
        self.root.mkdir()
        (self.root / "test.ipynb").write_text(json.dumps(notebook(cells), indent=1))
        for path, content in (files or {}).items():
            (self.root / path).write_text(json.dumps(content, indent=1))
        self.env = self._environment(disabled)
        self.proc: subprocess.Popen | None = None
        self.log_path = OUTPUT / f"{name}-server.log"

    def _environment(self, disabled) -> dict:
        """Config, data, runtime and IPython dirs of its own: the venv's page_config is never touched."""
        dirs = {k: self.tmp / k.lower() for k in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                                                  "IPYTHONDIR")}
        for d in dirs.values():
            d.mkdir()
        (dirs["JUPYTER_CONFIG_DIR"] / "labconfig").mkdir()
        (dirs["JUPYTER_CONFIG_DIR"] / "labconfig" / "page_config.json").write_text(
            json.dumps({"disabledExtensions": {name: True for name in disabled}}))
        # this checkout's built extension shadows an installed copy (the first labextensions dir wins)
        built = REPO / "xlanb" / "labextension"
        if (built / "package.json").is_file():
            shutil.copytree(built, dirs["JUPYTER_DATA_DIR"] / "labextensions" / "xlanb-lab")
        spec = dirs["JUPYTER_DATA_DIR"] / "kernels" / KERNEL
        spec.mkdir(parents=True)
        # the kernel imports this checkout's xlanb, as the test process does, not the venv's install
        # (an editable install may point at another worktree)
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "xlanb test", "language": "python", "env": {"PYTHONPATH": path}}))
        settings = self.tmp / "settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True)
        (settings / "notification.jupyterlab-settings").write_text(json.dumps(NO_NEWS))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
        env.update({k: str(v) for k, v in dirs.items()})
        env["PYTHONUNBUFFERED"] = "1"
        env["JUPYTER_PATH"] = str(dirs["JUPYTER_DATA_DIR"])     # searched before the venv's: the copy above wins
        return env

    @property
    def url(self) -> str:
        path = "notebooks" if self.app == "notebook" else "lab/tree"
        return f"http://127.0.0.1:{self.port}/{path}/test.ipynb?token={self.token}"

    def __enter__(self) -> "Lab":
        OUTPUT.mkdir(parents=True, exist_ok=True)
        app = "JupyterNotebookApp" if self.app == "notebook" else "LabApp"
        cmd = [sys.executable, "-m", "notebook" if self.app == "notebook" else "jupyterlab", "--no-browser",
               "--ip=127.0.0.1", f"--port={self.port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={self.root}", f"--{app}.workspaces_dir={self.tmp / 'workspaces'}",
               f"--{app}.user_settings_dir={self.tmp / 'settings'}", f"--{app}.expose_app_in_browser=True",
               "--allow-root"]
        self.log = open(self.log_path, "w")
        # its own process group (start_new_session): stop() signals exactly this group
        self.proc = subprocess.Popen(cmd, cwd=self.tmp, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        try:
            self._wait_ready(60)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        status = f"http://127.0.0.1:{self.port}/api/status?token={self.token}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(status, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError(f"jupyter lab did not answer on port {self.port} in {timeout:.0f} s; see {self.log_path}")

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Shuts the server down; kills what remains of its process group and of its kernels."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        kernels = _descendants(proc.pid)
        if proc.poll() is None:
            try:        # the server's own shutdown stops its kernels too
                req = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/shutdown?token={self.token}",
                                             method="POST")
                urllib.request.urlopen(req, timeout=5).close()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(timeout=5)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass
        for pid in kernels:     # a kernel the shutdown missed: still ours if its command line names our dirs
            try:
                if str(self.tmp).encode() in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass
        self.log.close()
