"""The report widget's front end: the ES module and stylesheet built from labextension/.

`npm run build:widget` (run by `make setup`, `npm run build:prod` and wheel builds) bundles
labextension/src/widget.ts, which draws the report with the JupyterLab extension's own
renderer (report.ts), into static/widget.js, and style/report.css into static/widget.css.
They are build outputs, not in git; the wheel ships them.
"""

from __future__ import annotations

import pathlib

STATIC = pathlib.Path(__file__).resolve().parent / "static"
ESM = STATIC / "widget.js"
CSS = STATIC / "widget.css"


def widget_files() -> tuple[pathlib.Path, pathlib.Path]:
    """(ESM, CSS), the files that anywidget sends to the front end; an error if they are not built."""
    missing = [p.name for p in (ESM, CSS) if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"xlanb: the report widget's front end is not built ({', '.join(missing)} missing in {STATIC}). "
            "This xlanb comes from a source tree: run `make setup`, or "
            "`cd labextension && npm ci && npm run build:widget` (node >= 20), or install the wheel.")
    return ESM, CSS
