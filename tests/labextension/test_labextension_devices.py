"""The report's devices section and the sidebar's mesh, drawn by the extension in a real browser:
a kernel with 8 CPU devices runs a sharded matmul; the report shows each input's tiles and the
all-reduce, and the XLA sidebar shows the 2x4 mesh. The extension built in this checkout
(xlanb/labextension/) is used when present, else the one installed in the venv."""

import pathlib
import sys

import pytest

from labserver import Lab, playwright_or_skip

sync_api = playwright_or_skip()
expect = sync_api.expect

from test_labextension_browser import open_notebook, run_all, shot, xlanb_errors  # noqa: E402

BUILT = pathlib.Path(__file__).resolve().parents[2] / "xlanb" / "labextension"
INSTALLED = pathlib.Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "xlanb-lab"
pytestmark = pytest.mark.timeout(180)

CELLS = [
    "import os\nos.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=8'\n%load_ext xlanb\n"
    "import torch, xlanb, xlanb.spmd as xs\nmesh = xs.Mesh(range(8), (2, 4), ('data', 'model'))",
    "a = xs.mark_sharding(torch.randn(16, 64).to('xla'), mesh, (None, 'model'))\n"
    "b = xs.mark_sharding(torch.randn(64, 24).to('xla'), mesh, ('model', None))",
    "%%xla_compile --name matmul\nc = a @ b",
]


def test_devices_section_and_sidebar_mesh(browser, tmp_path):
    # Lab copies this checkout's built extension ahead of the venv's copy (labserver.py)
    assert (BUILT / "package.json").exists() or (INSTALLED / "package.json").exists(), \
        "the extension is not built: run make setup"
    lab = Lab(tmp_path, CELLS, name="devices")
    with lab:
        page, errors = open_notebook(browser, lab)
        run_all(page)
        reports = page.locator(".jp-OutputArea-output .xlanb-lab-report")
        expect(reports).to_have_count(2, timeout=90_000)
        devices = reports.nth(1).locator("details.xl-devices")
        expect(devices).to_have_count(1)
        devices.locator("> summary").click()
        expect(devices).to_contain_text("graph matmul on 8 devices (mesh data=2 model=4)")
        expect(devices).to_contain_text("(None, 'model') on mesh data=2 model=4")
        expect(devices).to_contain_text("replicated on mesh data=2 model=4")
        expect(devices.locator("table").last).to_contain_text("all-reduce")
        expect(devices.locator("table").last).to_contain_text("{{0,1,2,3},{4,5,6,7}}")
        expect(devices.locator(".xl-tiles svg.xlanb-tiles")).to_have_count(3)      # 2 inputs, 1 output
        devices.scroll_into_view_if_needed()
        shot(page, "devices-report")

        page.locator(".jp-SideBar.jp-mod-left [data-id='xlanb-sidebar']").click()
        mesh = page.locator("#xlanb-sidebar .xl-sb-meshbox")
        expect(mesh).to_contain_text("mesh data=2 model=4 \u00b7 8 devices (graph matmul)")
        expect(mesh.locator("tr")).to_have_count(2)
        expect(mesh.locator("td")).to_have_count(8)
        shot(page, "devices-sidebar")
        assert xlanb_errors(errors) == []
