"""Cell reports: pure functions from runtime events to a CellReport, and its renderings.

    log = xlanb.runtime_state().log
    mark = log.mark()
    ...                                   # run some xla code
    report = build_report(log.since(mark))
    print(render_text(report))            # or render_html(report), render_json(report)

The JSON form is versioned (REPORT_SCHEMA_VERSION, SCHEMA; docs/report-schema.md); the
notebook shows all forms in one display, and the JupyterLab extension renders the JSON.
"""

from xlanb.report.build import CellContext, build_report, pending_section
from xlanb.report.dag import draw_dag
from xlanb.report.hlo import highlight
from xlanb.report.html import render_html
from xlanb.report.model import CellReport
from xlanb.report.schema import MIME_TYPE, REPORT_SCHEMA_VERSION, SCHEMA
from xlanb.report.serialize import render_json
from xlanb.report.text import render_text
from xlanb.report.where import Cells, location_text, rewrite_locations

__all__ = ["CellContext", "CellReport", "Cells", "MIME_TYPE", "REPORT_SCHEMA_VERSION", "SCHEMA", "build_report",
           "draw_dag", "highlight", "location_text", "pending_section", "render_html", "render_json", "render_text",
           "rewrite_locations"]
