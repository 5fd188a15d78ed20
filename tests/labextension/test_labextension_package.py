"""The JupyterLab extension matches the Python package: one version, one highlighter, one MIME type,
and the wheel maps the built extension to share/jupyter/labextensions/xlanb-lab."""

import json
import pathlib
import re
import tomllib

import pytest
from importlib import metadata

import xlanb
from xlanb.report import MIME_TYPE
from xlanb.report.hlo import CLASSES, PATTERN

REPO = pathlib.Path(__file__).resolve().parents[2]
EXT = REPO / "labextension"


def package_json() -> dict:
    return json.loads((EXT / "package.json").read_text())


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def ts_constant(path: pathlib.Path, name: str):
    """A constant the TypeScript source writes as one JSON literal: `export const NAME = <json>;`."""
    m = re.search(rf"^export const {name}(?:: [^=]+)? = (.+);$", path.read_text(), re.M)
    assert m, f"{name} not found in {path}"
    return json.loads(m.group(1))


def test_extension_version_is_the_python_package_version():
    version = pyproject()["project"]["version"]
    assert package_json()["version"] == version
    assert xlanb.__version__ == version
    assert metadata.version("xlanb") == version


def test_built_extension_has_the_same_name_and_version():
    built = REPO / "xlanb" / "labextension" / "package.json"
    if not built.exists():
        pytest.skip("the extension is not built yet: `make setup` builds it")
    data = json.loads(built.read_text())
    assert (data["name"], data["version"]) == (package_json()["name"], package_json()["version"])


def test_wheel_installs_the_extension_under_its_npm_name():
    project = pyproject()
    shared = project["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    out_dir = package_json()["jupyterlab"]["outputDir"]
    assert (EXT / out_dir).resolve() == REPO / "xlanb" / "labextension"
    assert shared == {"xlanb/labextension": f"share/jupyter/labextensions/{package_json()['name']}"}
    install = json.loads((EXT / "install.json").read_text())
    assert install["packageName"] == project["project"]["name"]


def test_highlighter_is_the_python_one():
    src = EXT / "src" / "highlight.ts"
    assert ts_constant(src, "PATTERN") == PATTERN
    assert ts_constant(src, "CLASSES") == CLASSES


def test_renderer_mime_type_is_the_report_mime_type():
    types = (EXT / "src" / "types.ts").read_text()
    assert f"export const REPORT_MIME = '{MIME_TYPE}';" in types


def test_status_bar_never_says_idle():
    """JupyterLab tools (galata) find the kernel status by the word Idle in the status bar."""
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", (EXT / "src" / "status.ts").read_text(), flags=re.S)
    assert "idle" not in code.lower()
