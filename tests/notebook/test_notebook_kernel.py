"""The extension in a real kernel: nbclient runs a notebook through ipykernel, and the saved
outputs are checked (reports after runtime cells only, all representations, errors)."""

import json
import sys

import jsonschema
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from xlanb.report import MIME_TYPE, SCHEMA  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
CELLS = [
    "%load_ext xlanb",
    "import torch, xlanb\nx4 = torch.ones(4, 4, device='xla')\nx5 = torch.ones(5, 5, device='xla')",
    "a = sum(range(10))\na",
    "%%xla_compile --name step\ny = (x4 * 2).sum()\ny",
    "%%xla_compile --name step\ny = (x5 * 2).sum()\ny",
    "%%xla_compile --name strict --full-graph\ny = (x4 * 3).sum()\nprint(y.item())",
    "%%xla_compile --max-graphs abc\n1",
    "%xla_mode lazy",
    "p = x4 + 1",
    "%xla_metrics",
    # a custom op whose lowering is wrong (2.5 where the CPU kernel multiplies by 2), found by %%xla_compare
    "from xlanb.lower.registry import lowers\n"
    "@torch.library.custom_op('kernel_cmp::twice', mutates_args=())\n"
    "def twice(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n"
    "@twice.register_fake\ndef _(x):\n    return torch.empty_like(x)\n"
    "@lowers('kernel_cmp.twice.default')\ndef _twice(x):\n    return x * 2.5",
    "%%xla_compare\nlin = torch.nn.Linear(4, 4).to('xla')\nh = lin(x4)\nout = twice(h).sum()\nout.shape",
    "_xla_compare.first_divergence.op, _xla_compare.first_divergence.location",
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The notebook after a run in a fresh kernel of this interpreter (a throwaway kernelspec)."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "share" / "jupyter" / "kernels" / "xlanb-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "xlanb test", "language": "python"}))
    patch = pytest.MonkeyPatch()
    patch.setenv("JUPYTER_PATH", str(root / "share" / "jupyter"))
    patch.setenv("IPYTHONDIR", str(root / "ipython"))
    patch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    client = nbclient.NotebookClient(nb, kernel_name="xlanb-test", timeout=120, allow_errors=True,
                                     resources={"metadata": {"path": str(root)}})
    try:
        client.execute()
    finally:
        patch.undo()
    return nb


def outputs(nb, i, kind=None):
    return [o for o in nb.cells[i].outputs if kind is None or o.output_type == kind]


def reports(nb, i):
    return [o for o in outputs(nb, i, "display_data") if MIME_TYPE in o.data]


def test_reports_follow_runtime_cells_only(executed):
    with_report = [i for i in range(len(CELLS)) if reports(executed, i)]
    assert with_report == [1, 3, 4, 5, 8, 11]


def test_each_report_has_every_representation_and_a_valid_schema(executed):
    for i in (1, 3, 4, 5, 8, 11):
        (out,) = reports(executed, i)
        assert {MIME_TYPE, WIDGET_MIME, "text/html", "text/plain"} <= set(out.data)
        data = out.data[MIME_TYPE]
        jsonschema.validate(data, SCHEMA)
        assert out.data["text/plain"] == data["text"]
        assert data["cell"]["execution_count"] == executed.cells[i].execution_count


def test_compiled_cell_output_and_recompile_explanation(executed):
    (result,) = outputs(executed, 4, "execute_result")
    assert "50." in result.data["text/plain"]
    data = reports(executed, 4)[0].data[MIME_TYPE]
    assert "input 0: f32[4,4] -> f32[5,5] (cell line 2)" in data["recompiles"][0]["text"]
    assert executed.cells[4].outputs.index(result) < executed.cells[4].outputs.index(reports(executed, 4)[0])


def test_full_graph_violation_names_the_cell_line(executed):
    (error,) = outputs(executed, 5, "error")
    assert error.ename == "UnexpectedExecution"
    assert "cell line 3" in error.evalue
    forced = reports(executed, 5)[0].data[MIME_TYPE]["forced"][0]
    assert forced["kind"] == "violation" and forced["where"]["text"] == "cell line 3"


def test_bad_argument_is_a_usage_error(executed):
    # IPython prints a UsageError on stderr (no traceback) and the cell counts as failed
    (stream,) = outputs(executed, 6, "stream")
    assert stream.name == "stderr"
    assert stream.text.startswith("UsageError: argument --max-graphs: invalid int value: 'abc'")


def test_lazy_cell_reports_pending_ir_and_metrics_show_a_table(executed):
    data = reports(executed, 8)[0].data[MIME_TYPE]
    assert data["cell"]["mode"] == "lazy"
    # y is the partial graph of the cell that raised: it stays pending, by design
    assert [t["name"] for t in data["pending"]["tensors"]] == ["y", "p"]
    (table,) = outputs(executed, 9, "display_data")
    assert "<table" in table.data["text/html"] and "CompileTime" in table.data["text/html"]


def test_xla_compare_names_the_custom_op_whose_lowering_differs(executed):
    (result,) = outputs(executed, 11, "execute_result")
    assert result.data["text/plain"] == "torch.Size([])"
    data = reports(executed, 11)[0].data[MIME_TYPE]
    (region,) = data["compare"]["regions"]
    first = region["first"]
    assert (first["op"], first["location"], first["phase"]) == ("kernel_cmp.twice.default", "cell line 4", "forward")
    rows = [(r["op"], r["status"]) for r in region["rows"]]       # .to('xla') copies the parameters in: compared
    assert rows == [("aten.copy_.default", "ok"), ("aten.copy_.default", "ok"), ("aten.addmm.default", "ok"),
                    ("kernel_cmp.twice.default", "introduced"), ("aten.sum.default", "inherited")]
    assert any("first divergence at kernel_cmp.twice.default, cell line 4" in line for line in data["text"].splitlines())
    (held,) = outputs(executed, 12, "execute_result")
    assert held.data["text/plain"].startswith("('kernel_cmp.twice.default', ")
