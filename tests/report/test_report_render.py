"""Rendering a report: text, HTML, JSON and its schema, the HLO highlighter, the DAG, cell lines."""

import codecs
import json
import pathlib
import re

import jsonschema
import pytest

from helpers import step_report
from xlanb.ir.graph import IrLine
from xlanb.report import (REPORT_SCHEMA_VERSION, SCHEMA, Cells, draw_dag, highlight, render_html, render_json,
                          render_text, rewrite_locations)
from xlanb.report import format as format_module
from xlanb.report.format import format_bytes, format_ms, plural, tensors_text
from xlanb.report.hlo import PATTERN
from xlanb.report.where import display_source


@pytest.fixture(scope="module")
def report():
    return step_report(execution_count=3)       # module-scoped: built before the per-test cache clearing


def test_json_is_versioned_valid_and_says_what_the_text_says(report):
    data = render_json(report)
    jsonschema.validate(data, SCHEMA)
    assert data["version"] == REPORT_SCHEMA_VERSION
    assert data["text"] == render_text(report)
    assert data["text"].splitlines()[0] == data["summary"]["text"]
    assert json.loads(json.dumps(data)) == data              # plain JSON: no tuples, no objects
    assert [g["name"] for g in data["graphs"]] == ["step"]


def test_schema_rejects_an_unknown_major_version_and_missing_fields(report):
    data = render_json(report)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(dict(data, version="2.0"), SCHEMA)
    broken = dict(data)
    del broken["summary"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)


def test_html_reads_without_css_or_javascript(report):
    html = render_html(report)
    assert "<script" not in html
    assert html.count("<details") >= 4 and "<table" in html and "<pre" in html and "<svg" in html
    assert 'border="1"' in html                               # tables keep borders when <style> is stripped
    no_style = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
    assert "step" in no_style and "StableHLO" in no_style and "recompiled" not in no_style


def test_text_and_html_escape_what_they_show():
    text = "%0 = tensor<4xf32> stablehlo.add %a, %b : (tensor<4xf32>) -> tensor<4xf32> // a < b & \"q\""
    out = highlight(text)
    assert "<4xf32>" not in out and "&lt;4xf32&gt;" in out and "&amp;" in out
    assert '<span class="h-op">stablehlo.add</span>' in out
    assert '<span class="h-type">tensor&lt;4xf32&gt;</span>' in out
    assert '<span class="h-comment">// a &lt; b &amp; "q"</span>' in out
    assert re.sub(r"<[^>]+>", "", out).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") == text


def test_hlo_highlighter_marks_metadata_and_hlo_types():
    line = '  %add.1 = f32[4,4]{1,0} add(%p.0, %p.1), metadata={op_name="jit(step)/add" stack_frame_id=3}'
    out = highlight(line)
    assert '<span class="h-type">f32[4,4]{1,0}</span>' in out
    assert '<span class="h-meta">metadata={op_name="jit(step)/add" stack_frame_id=3}</span>' in out
    assert '<span class="h-op">add</span>' in out


def test_the_widget_highlights_with_the_same_pattern():
    from xlanb.notebook.assets import widget_files
    esm = widget_files()[0].read_text()
    # the string literal that esbuild wrote for highlight.ts's PATTERN, in either quote style
    literal = re.search(r"""(["'])(\(\?<c>(?:\\.|(?!\1).)*)\1""", esm)
    assert literal and codecs.decode(literal.group(2), "unicode_escape") == PATTERN
    assert "(?<c>" in PATTERN             # JavaScript's named-group syntax; Python's is derived from it


def test_text_and_html_format_with_the_shared_helpers(report):
    assert [format_ms(v) for v in (0.123, 12.34, 1234.5)] == ["0.12 ms", "12.3 ms", "1.23 s"]
    assert [format_bytes(n) for n in (0, 512, 1536, 3 * 2**20, 5 * 2**30, 2**41)] == \
        ["0 B", "512 B", "1.5 KiB", "3.0 MiB", "5.0 GiB", "2048.0 GiB"]
    assert [plural(n, w) for n, w in ((1, "graph"), (2, "graph"), (0, "miss"), (3, "box"))] == \
        ["1 graph", "2 graphs", "0 misses", "3 boxes"]
    g = report.graphs[0]
    assert f"lower {format_ms(g.lower_ms)}, compile {format_ms(g.compile_ms)}" in render_text(report)
    assert f"<td class=num>{format_ms(g.execute_ms)}</td>" in render_html(report)
    assert tensors_text(g.inputs) in render_text(report) and tensors_text(g.inputs) in render_html(report)
    # no other report module keeps its own copy
    copies = re.compile(r"^def _?(plural|format_ms|format_bytes|tensors_text)\(", re.M)
    for path in pathlib.Path(format_module.__file__).parent.glob("*.py"):
        if path.name != "format.py":
            assert not copies.search(path.read_text()), path


def test_cell_lines_name_cells_and_earlier_cells():
    cells = Cells({"/tmp/ipykernel_1/123.py": 5, "/tmp/ipykernel_1/456.py": 6}, current=6)
    assert cells.line_text("/tmp/ipykernel_1/456.py", 3) == "cell line 3"
    assert cells.line_text("/tmp/ipykernel_1/123.py", 2) == "In [5] line 2"
    assert cells.line_text("train.py", 2) is None
    message = "at /tmp/ipykernel_1/456.py:3 (<module>); Got: aten.add.Tensor f32[5] (456.py:4)"
    assert rewrite_locations(message, cells) == "at cell line 3 (<module>); Got: aten.add.Tensor f32[5] (cell line 4)"


def test_magic_calls_read_as_typed():
    assert display_source("get_ipython().run_cell_magic('xla_compile', '--name s', 'y = x\\n')") == \
        "%%xla_compile --name s"
    assert display_source("get_ipython().run_line_magic('xla_mode', 'lazy')") == "%xla_mode lazy"
    assert display_source("  y = x * 2  ") == "y = x * 2"


def lines_of(n_ops: int, fan_in: int = 1):
    """A synthetic IR: two inputs, then n ops each reading the previous `fan_in` nodes."""
    lines = [IrLine(0, "xlanb::device_data", "f32[4]", (), "", is_input=True),
             IrLine(1, "xlanb::device_data", "f32[4]", (), "", is_input=True)]
    for i in range(2, n_ops + 2):
        operands = tuple(range(max(0, i - fan_in), i))
        lines.append(IrLine(i, "aten::mul.Tensor", "f32[4]", operands, "", roots=(0,) if i == n_ops + 1 else ()))
    return lines


def test_dag_draws_every_node_of_a_small_graph():
    dag = draw_dag(lines_of(6, fan_in=2))
    assert dag.collapsed == "none" and dag.nodes == dag.drawn == 8
    assert dag.svg.count("<rect") == 8 and "%7 mul \u2192 out 0" in dag.svg
    assert dag.svg.count("<path d=") == 1 + 12          # the arrow marker, and two edges into each op


def test_dag_collapses_chains_beyond_the_limit():
    dag = draw_dag(lines_of(500), limit=300)
    assert dag.collapsed == "groups" and dag.drawn <= 300 and dag.nodes == 502
    assert dag.drawn == 3 and "%2..%500 499 ops" in dag.svg    # input 0, the chain, the output


def test_dag_collapses_to_layers_when_nothing_groups():
    dag = draw_dag(lines_of(400, fan_in=2), limit=300)
    assert dag.collapsed == "layers" and dag.drawn <= 60
    assert "nodes" in dag.svg


def test_dag_is_deterministic():
    assert draw_dag(lines_of(40, fan_in=3)).svg == draw_dag(lines_of(40, fan_in=3)).svg
