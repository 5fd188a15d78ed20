"""The IPython extension in-process: magics, arguments, hooks, and the report after each cell."""

import jsonschema
import pytest
from IPython.core.error import UsageError

import xlanb
from xlanb.state import runtime_state
from xlanb.notebook.widget import WIDGET_MIME
from xlanb.report import MIME_TYPE, SCHEMA

SETUP = "import torch, xlanb\nx4 = torch.ones(4, 4, device='xla')\nx5 = torch.ones(5, 5, device='xla')"


def test_load_ext_registers_magics_and_starts_in_eager_mode(ip):
    magics = ip.magics_manager.magics
    assert "xla_compile" in magics["cell"]
    assert {"xla_mode", "xla_report", "xla_metrics"} <= set(magics["line"])
    assert xlanb.is_eager_mode()


def test_load_is_idempotent_and_reload_and_unload_work(ip, cell):
    hooks = len(ip.events.callbacks["post_run_cell"])
    xlanb.load_ipython_extension(ip)                  # a second load does nothing
    assert len(ip.events.callbacks["post_run_cell"]) == hooks
    assert cell("%reload_ext xlanb").error is None
    assert len(ip.events.callbacks["post_run_cell"]) == hooks
    assert cell("%xla_mode lazy").error is None
    assert cell("%unload_ext xlanb").error is None
    assert "xla_compile" not in ip.magics_manager.magics["cell"]
    assert len(ip.events.callbacks["post_run_cell"]) == hooks - 1
    assert not xlanb.is_eager_mode()                  # the mode from before the load
    assert cell(SETUP).reports == []                  # no hooks, no report
    assert cell("%load_ext xlanb").error is None
    assert xlanb.is_eager_mode()


def test_compile_cell_returns_its_last_expression_and_names_the_graph(cell):
    cell(SETUP)
    c = cell("%%xla_compile --name double\ny = (x4 * 2).sum()\ny")
    assert c.error is None
    out = last_output()
    assert out.device.type == "xla" and out.item() == 32.0
    report = c.report
    assert report["cell"]["mode"] == "compiled"
    assert [g["name"] for g in report["graphs"]] == ["double"]
    assert report["graphs"][0]["where"]["text"] == "cell line 1"
    assert report["graphs"][0]["where"]["source"] == "%%xla_compile --name double"
    assert xlanb.is_eager_mode() and runtime_state().graph_name == "sync"


def last_output():
    """The value of the last cell's Out[n]."""
    from IPython.core.interactiveshell import InteractiveShell
    return InteractiveShell.instance().user_ns["_"]


def test_compile_cell_body_sees_and_sets_user_variables_and_nested_magics(cell):
    cell(SETUP)
    c = cell("%%xla_compile\n\n%xla_mode\nz = x4 + 1\nw = z * 3;")
    assert c.error is None
    assert "lazy" in c.stdout                          # inside the body eager mode is off
    assert cell("print(w.sum().item())").stdout.strip() == "96.0"


@pytest.mark.parametrize("line, names", [
    ("--max-graphs abc", "--max-graphs"),
    ("--max-graphs 0", "--max-graphs"),
    ("--bogus", "--bogus"),
    ("--name", "--name"),
    ("stray", "stray"),
])
def test_bad_arguments_are_usage_errors_naming_the_argument(cell, line, names):
    c = cell(f"%%xla_compile {line}\n1 + 1")
    assert isinstance(c.error, UsageError)
    assert names in str(c.error)
    assert c.reports == []


def test_compile_cell_help(cell):
    c = cell("%%xla_compile?")
    assert "--full-graph" in c.stdout and "--max-graphs" in c.stdout and "--name" in c.stdout
    assert "with xlanb.compile" in c.stdout


@pytest.mark.parametrize("body", ["y = x4 * 2\n1 / 0", "y = x4 * 2\nraise KeyboardInterrupt"])
def test_state_is_restored_after_a_raising_cell(cell, body):
    cell(SETUP)
    c = cell(f"%%xla_compile --name broken --full-graph --max-graphs 2\n{body}")
    assert c.error is not None or "KeyboardInterrupt" in c.stderr + c.stdout
    assert runtime_state().eager and runtime_state().graph_name == "sync" and runtime_state().compile_scope is None
    assert runtime_state().allow_execution and runtime_state().observer is None and not runtime_state().track_locations
    c = cell("%%xla_compile --name fine\n(x4 + 1).sum()")     # the next cell runs normally
    names = [g["name"] for g in c.report["graphs"]]
    assert c.error is None and names == ["fine_clear_pending", "fine"]   # the partial graph stayed pending


def test_report_after_runtime_cells_and_none_after_plain_python(cell):
    assert cell(SETUP).reports
    assert cell("a = [i * i for i in range(10)]\nsum(a)").reports == []
    assert cell("def f(x):\n    return x + 1").reports == []
    assert cell("%xla_mode").reports == []
    assert cell("(x4 @ x4).sum()").reports


@pytest.mark.parametrize("style", ["on", "off"])
def test_host_memory_goes_back_after_a_cell_that_ran_on_the_device(cell, monkeypatch, style):
    from xlanb.notebook import extension
    released = []
    monkeypatch.setattr(extension, "release_host_memory", lambda: released.append(1))
    monkeypatch.setattr(runtime_state(), "host_memory", True)
    cell(SETUP)
    cell(f"%xla_report {style}")
    released.clear()
    cell("(x4 @ x4).sum()")
    assert released == [1]                        # whatever the report style
    cell("a = [i * i for i in range(10)]")
    assert released == [1]                        # plain Python: nothing to give back
    monkeypatch.setattr(runtime_state(), "host_memory", False)
    cell("(x5 @ x5).sum()")
    assert released == [1]                        # malloc left as glibc's: nothing either


def test_report_has_four_consistent_representations(cell):
    cell(SETUP)
    c = cell("%%xla_compile --name mm\ny = (x4 @ x4).relu().sum()\ny")
    bundle = c.reports[0]
    assert {MIME_TYPE, WIDGET_MIME, "text/html", "text/plain"} <= set(bundle)
    data = bundle[MIME_TYPE]
    jsonschema.validate(data, SCHEMA)
    widget = widget_for(bundle)
    assert widget.report == data                                  # the widget renders the same JSON
    assert bundle["text/plain"] == data["text"]
    assert data["summary"]["text"] in bundle["text/plain"]
    html_summary = data["summary"]["text"].replace("xlanb", "", 1)
    assert html_summary.replace("'", "&#x27;") in bundle["text/html"]
    assert "mm" in bundle["text/html"] and "StableHLO" in bundle["text/html"]
    graph = data["graphs"][0]
    assert graph["hlo"]["stablehlo"]["text"].startswith("module @jit_mm")
    assert graph["dag"]["svg"].startswith("<svg") and "relu" in graph["dag"]["svg"]


def widget_for(bundle):
    from ipywidgets.widgets.widget import _instances     # Widget.widgets, without its deprecation warning
    return _instances[bundle[WIDGET_MIME]["model_id"]]


def test_recompile_names_the_shape_change_and_the_cell_line(cell):
    cell(SETUP)
    cell("%%xla_compile --name step\ny = (x4 * 2).sum()")
    c = cell("%%xla_compile --name step\ny = (x5 * 2).sum()")
    data = c.report
    assert data["recompiles"][0]["graph"] == "step"
    assert "input 0: f32[4,4] -> f32[5,5] (cell line 2)" in data["recompiles"][0]["text"]
    assert "input 0: f32[4,4] -> f32[5,5] (cell line 2)" in c.reports[0]["text/plain"]
    assert "f32[4,4] -&gt; f32[5,5] (cell line 2)" in c.reports[0]["text/html"]


def test_full_graph_violation_names_the_cell_line(cell):
    cell(SETUP)
    c = cell("%%xla_compile --name strict --full-graph\ny = (x4 * 2).sum()\nprint(y.item())\nz = y + 1")
    assert isinstance(c.error, RuntimeError)
    message = str(c.error)
    assert message.startswith("Unexpected execution happens inside the compiled function, exiting: 'strict' made a ")
    assert "cell line 3" in message
    forced = c.report["forced"]
    assert forced[0]["kind"] == "violation" and forced[0]["where"]["text"] == "cell line 3"
    assert forced[0]["where"]["source"] == "print(y.item())"


def test_max_graphs_counts_repeated_runs_of_a_cell_by_name(cell):
    cell(SETUP)
    body = "%%xla_compile --name limited --max-graphs 1\ny = (x{} * 2).sum()"
    assert cell(body.format(4)).error is None
    assert cell(body.format(4)).error is None                  # the same graph again: fine
    c = cell(body.format(5))
    assert "Maximum number of different graphs allowed per function exceeded: 1" in str(c.error)
    assert "cell line 2" in str(c.error)


def test_xla_mode_shows_and_sets(cell):
    assert cell("%xla_mode").stdout.strip() == "eager"
    cell("%xla_mode lazy")
    assert not xlanb.is_eager_mode()
    assert cell("%xla_mode").stdout.strip() == "lazy"
    c = cell("%xla_mode fast")
    assert isinstance(c.error, UsageError) and "eager or lazy" in str(c.error)


def test_xla_report_styles(cell):
    cell(SETUP)
    assert cell("%xla_report").stdout.strip() == "on"
    cell("%xla_report off")
    assert cell("(x4 * 7).sum()").reports == []
    cell("%xla_report compact")
    data = cell("%%xla_compile --name c\n(x4 * 8).sum()").report
    assert data["cell"]["style"] == "compact" and data["graphs"][0]["hlo"]["stablehlo"] is None
    cell("%xla_report full")
    data = cell("(x5 - 9).sum()").report
    assert data["cell"]["style"] == "full" and all(g["eager"] for g in data["graphs"]) and data["graphs"]
    c = cell("%xla_report loud")
    assert isinstance(c.error, UsageError) and "on, off, compact, full" in str(c.error)


def test_xla_metrics_shows_a_table(cell):
    cell(SETUP)
    cell("y = x4 * 2")          # an op compiled (SETUP's small fills are made on the host)
    c = cell("%xla_metrics")
    html = c.outputs[0].data["text/html"]
    assert "<table" in html and "EagerOpCompileTime" in html and "UncachedCompile" in html
    assert "Metric: EagerOpCompileTime" in c.outputs[0].data["text/plain"]


def test_lazy_cell_reports_pending_ir_and_the_names_holding_it(cell):
    cell(SETUP)
    cell("%xla_mode lazy")
    c = cell("p = x4 + 1\nq = (p * 2).sum()")
    pending = c.report["pending"]
    assert {t["name"]: t["type"] for t in pending["tensors"]} == {"p": "f32[4,4]", "q": "f32[]"}
    assert "aten::add.Tensor" in pending["ir"]["text"] and "# q" in pending["ir"]["text"]
    assert cell("n = 3").reports == []                         # nothing new pending: no report
    c = cell("print(q.item())")
    forced = c.report["forced"][0]
    assert forced["kind"] == "value" and forced["where"]["text"] == "cell line 1"


def test_cpu_fallback_is_named_with_its_cell_line(cell):
    cell(SETUP)
    c = cell("a = 1\nb = torch.special.bessel_j0(x4)")
    fallback = c.report["fallbacks"][0]
    assert "bessel_j0" in fallback["op"] and fallback["where"]["text"] == "cell line 2"
    assert "CPU fallback" in c.reports[0]["text/plain"]


def test_the_widgets_display_metadata_is_kept(cell, monkeypatch):
    # in Colab, anywidget's metadata carries the custom widget manager's URL; it must reach display()
    colab = {WIDGET_MIME: {"colab": {"custom_widget_manager": {"url": "https://example.test/manager.js"}}}}
    monkeypatch.setattr("anywidget._util.get_repr_metadata", lambda: colab)
    cell(SETUP)
    c = cell("(x4 + 2).sum()")
    (out,) = [o for o in c.outputs if MIME_TYPE in o.data]
    assert out.metadata == colab
