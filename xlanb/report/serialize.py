"""The report as `application/vnd.xlanb.report+json` (docs/report-schema.md): the model's data
plus its two text renderings (the summary line and the whole report as plain text), so a
reader of the JSON alone (the JupyterLab extension, a saved notebook) has every form."""

from __future__ import annotations

from typing import Any

from xlanb.report.model import CellReport
from xlanb.report.text import render_text, summary_line


def render_json(report: CellReport) -> dict[str, Any]:
    data = report.to_json()
    data["summary"]["text"] = summary_line(report)
    data["text"] = render_text(report)
    return data
