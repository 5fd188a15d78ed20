"""One display, several representations: the widget, the report JSON, HTML and plain text."""

from __future__ import annotations

from xlanb.report import MIME_TYPE, render_html, render_json

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
_widget_class = []


def widget_class():
    """The anywidget class (built on first use, so importing this module needs no anywidget).

    FileNotFoundError, saying how to build it, when the widget's front end is not built."""
    if not _widget_class:
        import anywidget
        import traitlets

        from xlanb.notebook.assets import widget_files

        esm, css = widget_files()

        class ReportWidget(anywidget.AnyWidget):
            """The interactive cell report: the JupyterLab extension's renderer (labextension/src),
            bundled, draws the report JSON (tabs, highlighted HLO, DAG)."""
            _esm = esm
            _css = css
            report = traitlets.Dict().tag(sync=True)

        _widget_class.append(ReportWidget)
    return _widget_class[0]


def report_bundle(report, *, widget: bool = True) -> tuple[dict, dict]:
    """(data, metadata) for IPython.display.display(data, metadata=..., raw=True).

    The widget's own metadata is kept: in Colab it carries the custom widget manager URL.
    """
    data_json = render_json(report)
    data = {MIME_TYPE: data_json, "text/html": render_html(report), "text/plain": data_json["text"]}
    metadata: dict = {}
    if widget:
        w = widget_class()(report=data_json)
        bundle = w._repr_mimebundle_()
        wdata, wmeta = bundle if isinstance(bundle, tuple) else (bundle, {})
        data[WIDGET_MIME] = wdata[WIDGET_MIME]
        metadata.update(wmeta or {})
    return data, metadata
