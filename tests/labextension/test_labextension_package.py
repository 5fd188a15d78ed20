"""The JupyterLab extension matches the Python package: one version, one highlighter, one MIME type,
the wheel maps the built extension to share/jupyter/labextensions/xlanb-lab, and the report widget's
front end is the extension's renderer, bundled."""

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


def relative_imports(path: pathlib.Path) -> list[str]:
    return re.findall(r"^import [^;]*?from '(\.[^']+)';", path.read_text(), re.M | re.S)


def test_widget_entry_reaches_only_the_pure_dom_renderer():
    """widget.ts and what it imports (report.ts ...) import no package at all, JupyterLab's least:
    the widget also runs in Colab, VS Code and the classic notebook."""
    seen, todo = set(), ["widget"]
    while todo:
        name = todo.pop()
        src = (EXT / "src" / f"{name}.ts").read_text()
        packages = re.findall(r"^import [^;]*?from '([^.][^']*)';", src, re.M | re.S)
        assert packages == [], f"{name}.ts imports {packages}"
        seen.add(name)
        todo += [m.removeprefix("./") for m in relative_imports(EXT / "src" / f"{name}.ts")
                 if m.removeprefix("./") not in seen]
    assert {"widget", "report", "insight", "devices", "dom", "highlight", "types"} == seen
    assert "'./report'" in (EXT / "src" / "mime.ts").read_text()       # the MIME renderer draws with the same


def test_widget_esm_is_the_bundle_of_the_extension_renderer():
    from xlanb.notebook.assets import CSS, ESM, widget_files
    assert widget_files() == (ESM, CSS), "the widget's front end is not built: `make setup` builds it"
    esm = ESM.read_text()
    assert esm.startswith("/* xlanb report widget: built from labextension/src/widget.ts")
    assert re.search(r"export\s*\{\s*[\w$]+ as default\s*\};?\s*$", esm)           # one ES module, default export
    assert re.search(r"\brender:", esm) and "change:report" in esm             # anywidget's render({model, el})
    for marker in ("xlanb-lab-report", "xl-graph", "xl-tabbox", "hide metadata"):   # report.ts, dom.ts
        assert marker in esm, marker
    assert not re.search(r"@jupyterlab|@lumino|\bimport\s*\(|\bimport\s*[\w{*][^;'\"]*\bfrom\s*['\"]", esm)
    css = CSS.read_text()
    rules = re.sub(r"/\*.*?\*/|\s", "", (EXT / "style" / "report.css").read_text(), flags=re.S)
    assert re.sub(r"/\*.*?\*/|\s", "", css, flags=re.S).startswith(".xlanb-lab-report{") and len(rules) > 1000


def test_the_widget_says_how_to_build_it_when_it_is_missing(tmp_path, monkeypatch):
    from xlanb.notebook import assets, widget
    monkeypatch.setattr(assets, "ESM", tmp_path / "widget.js")
    monkeypatch.setattr(widget, "_widget_class", [])
    with pytest.raises(FileNotFoundError, match=r"widget\.js missing .*make setup"):
        widget.widget_class()


def test_renderer_mime_type_is_the_report_mime_type():
    types = (EXT / "src" / "types.ts").read_text()
    assert f"export const REPORT_MIME = '{MIME_TYPE}';" in types


def test_phase_mime_type_is_the_kernels():
    from xlanb.notebook.progress import PHASE_MIME
    assert f"export const PHASE_MIME = '{PHASE_MIME}';" in (EXT / "src" / "phase.ts").read_text()
    mime = (EXT / "src" / "mime.ts").read_text()
    assert "mimeTypes: [PHASE_MIME]" in mime and mime.count("defaultRank: -20") == 2


def test_status_bar_never_says_idle():
    """JupyterLab tools (galata) find the kernel status by the word Idle in the status bar."""
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", (EXT / "src" / "status.ts").read_text(), flags=re.S)
    assert "idle" not in code.lower()
