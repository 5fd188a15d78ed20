"""events -> CellReport: what the report says about what the runtime did."""

import linecache

import jsonschema
import torch

import xlanb
from xlanb import events
from xlanb import hooks
from xlanb.report import SCHEMA, CellContext, Cells, build_report, pending_section, render_json, render_text

CELL = "<ipython-input-7-0123abcd>"        # a filename as IPython gives a cell


def run_as_cell(source: str, namespace: dict, filename: str = CELL):
    """Runs `source` the way IPython runs a cell: compiled under a cell filename."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)


def cell_context(**kw) -> CellContext:
    return CellContext(execution_count=7, cells=Cells({CELL: 7}, 7), **kw)


def report_of(source: str, namespace: dict, **kw):
    mark = xlanb.runtime_state().log.mark()
    run_as_cell(source, namespace)
    return build_report(xlanb.runtime_state().log.since(mark), cell_context(**kw))


def test_a_lazy_value_access_is_a_forced_execution_at_its_cell_line():
    ns = {"torch": torch}
    r = report_of("x = torch.ones(4, 4, device='xla')\ny = (x * 2).sum()\nv = y.item()", ns)
    s = r.summary
    assert (s.graphs_compiled, s.graphs_executed, s.cache_misses, s.forced) == (1, 1, 1, 1)
    assert s.from_device.count == 1 and s.from_device.bytes == 4
    (g,) = r.graphs
    # made from shapes only (torch.ones on the device): the read is no graph cut, and its cause says so
    assert g.name == "sync" and g.where.text == "cell line 3"
    assert g.cause == "value access (.item()), derivable from shapes (no graph cut)"
    # x is live and pending, and y's graph computes it: it comes out too (kept as device data)
    assert [t.text for t in g.outputs] == ["f32[]", "f32[4,4]"] and g.executions == 1
    (f,) = r.forced
    assert (f.kind, f.where.text, f.where.source) == ("value", "cell line 3", "v = y.item()")
    assert r.fallbacks == ()          # .item()'s aten::_local_scalar_dense is a transfer, not a fallback
    assert "1 forced execution" in render_text(r)


def recompile_of(step: str):
    ns = {"torch": torch, "xlanb": xlanb}
    run_as_cell("x = torch.ones(4, 4, device='xla')\nxlanb.sync()", ns)
    report_of(step, ns)
    run_as_cell("x = torch.ones(5, 5, device='xla')\nxlanb.sync()", ns)
    return report_of(step, ns)


def test_recompile_names_the_changed_input_at_the_line_that_reads_it():
    # with a graph limit, ops record their source line, and the change points at the reader
    r = recompile_of("with xlanb.compile(name='step', max_different_graphs=4):\n    y = (x * 2).sum()\n")
    (rc,) = r.recompiles
    assert rc.graph == "step"
    assert rc.changes[0]["text"] == "input 0: f32[4,4] -> f32[5,5] (cell line 2)"
    assert "recompiled: input 0: f32[4,4] -> f32[5,5] (cell line 2)" in render_text(r)
    assert "location=cell line 2" in r.graphs[-1].ir.text


def test_recompile_without_op_lines_names_where_the_graph_was_built():
    r = recompile_of("with xlanb.compile(name='step'):\n    y = (x * 2).sum()\n")
    assert r.recompiles[0].changes[0]["text"] == "input 0: f32[4,4] -> f32[5,5] (cell line 1)"


def test_eager_ops_are_aggregated_not_shown_one_graph_each():
    ns = {"torch": torch}
    with xlanb.eager_mode_context(True):
        # a float range runs on the device (a small fill or integer range is made on the host: capture/factories.py)
        r = report_of("a = torch.arange(3.0, device='xla')\nb = a * 3.5\nc = a * 4.5\nd = (b + c).sum()", ns)
    assert r.graphs == ()
    assert r.summary.eager_ops_compiled == r.eager.compiles == 4       # arange, mul (once: 3.5 is an input), add, sum
    assert r.summary.eager_ops_executed == 5
    assert [o.op for o in r.eager.ops] == ["aten.arange.default", "aten.mul.Tensor", "aten.add.Tensor",
                                           "aten.sum.default"]
    assert r.eager.ops[1].signature == "f32[3] -> f32[3]"
    assert "4 eager ops compiled, 5 run" in render_text(r)


def test_full_style_shows_eager_graphs_and_compact_leaves_out_the_details():
    ns = {"torch": torch, "xlanb": xlanb}
    with xlanb.eager_mode_context(True):
        r = report_of("a = torch.arange(6.0, device='xla').sum()", ns, style="full")
    assert all(g.eager for g in r.graphs) and r.graphs[0].stablehlo is not None
    r = report_of("with xlanb.compile(name='c'):\n    y = torch.ones(2, device='xla') + 1", ns, style="compact")
    (g,) = [g for g in r.graphs if g.name == "c"]
    assert g.stablehlo is None and g.dag is None and g.cost is None
    assert "IR {" not in render_text(r)


def test_graph_section_has_hlo_dag_and_analyses():
    ns = {"torch": torch, "xlanb": xlanb}
    r = report_of("w = torch.ones(8, 8, device='xla')\nwith xlanb.compile(name='mm'):\n"
                  "    y = (w @ w).relu().sum()", ns)
    (g,) = [g for g in r.graphs if g.name == "mm"]
    assert g.stablehlo.text.startswith("module @jit_mm") and not g.stablehlo.truncated
    assert "HloModule" in g.optimized.text and "FileNames" not in g.optimized.text
    assert g.dag.svg.startswith("<svg") and g.dag.collapsed == "none"
    if g.cost is not None:                         # CPU gives cost analysis; not every backend does
        assert g.cost["flops"] > 0 and all("{}" not in k for k in g.cost)
    jsonschema.validate(render_json(r), SCHEMA)


def test_cpu_fallback_is_listed_once_with_its_graph():
    ns = {"torch": torch}
    r = report_of("x = torch.ones(4, device='xla')\ny = torch.special.bessel_j0(x) * 2\nv = y.cpu()", ns)
    (f,) = r.fallbacks
    assert f.op == "prims::bessel_j0" and f.reason == "no lowering" and f.graphs == ("sync",)
    assert f.where.text == "cell line 3"          # computed where the value was asked for
    assert r.graphs[0].fallback_ops == ("prims::bessel_j0",)


def test_pending_ir_names_the_tensors_holding_it():
    ns = {"torch": torch}
    run_as_cell("x = torch.ones(2, 2, device='xla')\np = x + 1\nq = p.t()\n_hidden = p * 3", ns)
    snapshot = hooks.snapshot_pending(ns)
    assert snapshot in xlanb.runtime_state().log.all()        # an event: the report reads it from the log
    pending = pending_section(snapshot, cells=Cells({CELL: 7}, 7))
    names = {t.name: t.type for t in pending.tensors}
    assert names == {"x": "f32[2,2]", "p": "f32[2,2]", "q": "f32[2,2]"}     # _names are IPython's
    assert pending.unnamed == 1
    assert "# x" in pending.ir.text and "aten::add.Tensor" in pending.ir.text
    r = build_report([snapshot], cell_context())
    assert not r.empty and "pending IR left behind" in render_text(r)
    assert r.pending == pending
    xlanb.sync()
    assert hooks.snapshot_pending(ns) is None


def test_nothing_ran_is_an_empty_report():
    r = build_report([], cell_context())
    assert r.empty
    assert render_json(r)["summary"]["text"].endswith("nothing ran")


def test_timeline_spans_are_relative_to_the_cell_start():
    import time
    start, mark = time.time(), xlanb.runtime_state().log.mark()
    run_as_cell("y = (torch.ones(3, device='xla') * 5).sum().item()", {"torch": torch})
    r = build_report(xlanb.runtime_state().log.since(mark), cell_context(started=start, finished=time.time()))
    kinds = {s.kind for s in r.timeline.spans}
    assert {"lower", "compile", "execute", "transfer"} <= kinds
    assert all(0 <= s.start_ms and s.start_ms + s.ms <= r.wall_ms + 1 for s in r.timeline.spans)
    assert r.timeline.svg.startswith("<svg") and ">compile<" in r.timeline.svg


def test_only_the_first_graphs_of_a_cell_get_hlo_and_a_dag(monkeypatch):
    monkeypatch.setattr("xlanb.report.build.DETAILED_GRAPHS", 1)
    ns = {"torch": torch, "xlanb": xlanb}
    r = report_of("for n in (2, 3):\n    y = torch.ones(n, device='xla') * 2.5\n    xlanb.sync()", ns)
    assert [(g.stablehlo is not None, g.dag is not None) for g in r.graphs] == [(True, True), (False, False)]
    assert "recompiled" in render_text(r)
