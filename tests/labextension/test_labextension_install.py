"""The set-up installs the extension where JupyterLab finds it, and a wheel carries it prebuilt."""

import json
import pathlib
import subprocess
import sys
import zipfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
NAME = json.loads((REPO / "labextension" / "package.json").read_text())["name"]


def test_jupyter_labextension_list_shows_it_enabled_and_ok():
    result = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                            text=True, timeout=120)
    lines = [ln for ln in (result.stdout + result.stderr).splitlines() if NAME in ln]
    if not lines and not (REPO / "xlanb" / "labextension" / "package.json").exists():
        pytest.skip("the extension is not built yet: `make setup` builds and installs it")
    assert lines, result.stdout + result.stderr
    assert "enabled" in lines[0] and "OK" in lines[0], lines[0]


def test_pip_wheel_contains_the_prebuilt_extension(tmp_path):
    if not (REPO / "xlanb" / "labextension" / "package.json").exists():
        pytest.skip("the extension is not built yet: `make setup` builds it")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(tmp_path)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    wheel = next(tmp_path.glob("xlanb-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    prefix = f"share/jupyter/labextensions/{NAME}/"
    assert any(n.endswith(prefix + "package.json") for n in names)
    assert any(prefix + "static/" in n for n in names)
    assert any(n.endswith(prefix + "install.json") for n in names)
    assert "xlanb/__init__.py" in names
    assert {"xlanb/notebook/static/widget.js", "xlanb/notebook/static/widget.css"} <= set(names)   # the widget's
    assert not any(n.startswith("xlanb/labextension/") for n in names)
