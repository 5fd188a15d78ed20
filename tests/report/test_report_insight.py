"""Schema 1.2 sections built from events alone: ops by module, fusions read from the optimized
HLO, the memory section, and their text and HTML forms (HTML that works without scripts)."""

import jsonschema
import torch
import torch.nn as nn

import xlanb
from xlanb import events, hooks
from xlanb.report import SCHEMA, build_report, render_html, render_json, render_text
from xlanb.report.fusions import fusions
from xlanb.report.memory import Holder, memory_section
from xlanb.report.modules import OUTSIDE, box_key, module_groups

from test_report_build import cell_context, run_as_cell


def _step(source: str, ns: dict):
    mark = hooks.mark()
    with hooks.recording_modules(), hooks.recording_locations():
        run_as_cell(source, ns)
    return hooks.since(mark)


MLP = "y = model(x)\nz = (y * 3.0 + 1.5).sum()\nv = z.item()"


def _mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2)).to("xla")
    return {"torch": torch, "model": model, "x": torch.ones(4, 6, device="xla")}


def test_module_groups_count_every_op_once():
    evs = _step(MLP, _mlp())
    (c,) = [e for e in evs if isinstance(e, events.Compile)]
    groups = {g.path: (g.ops, g.total) for g in module_groups(c.ir)}
    # Linear: t + addmm; Tanh: tanh; outside: the pending torch.ones of x, then * 3.0, + 1.5 and sum
    assert groups == {"0": (2, 2), "1": (1, 1), "2": (2, 2), OUTSIDE: (4, 4)}
    assert sum(ops for ops, _ in groups.values()) == c.nodes
    assert [box_key(s) for s in ("blocks.0.attn.qkv", "head", "", None, "ff.2")] == \
        ["blocks.0", "head", "<top>", OUTSIDE, "ff.2"]


def test_the_fusion_of_the_cell_line_names_its_aten_ops_and_line():
    evs = _step(MLP, _mlp())
    r = build_report(evs, cell_context())
    data = render_json(r)
    jsonschema.validate(data, SCHEMA)
    (g,) = r.graphs
    tail = [f for f in g.fusions if "aten.sum" in f.ops]
    assert len(tail) == 1
    assert {"aten.mul", "aten.add", "aten.sum"} <= set(tail[0].ops) and "cell line 2" in tail[0].lines
    assert "2" in tail[0].modules                                    # the bias add of the last Linear
    assert any("aten.tanh" in f.ops and f.modules == ("1",) or "1" in f.modules for f in g.fusions)
    assert f"fusion {tail[0].name}: " in render_text(r)
    html = render_html(r)
    assert f'id="xlanb-fusion-{g.key[:8]}-{tail[0].name}"' in html


def test_fusions_parse_nested_computations_and_custom_calls():
    text = """HloModule m

%fused_inner (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %e = f32[4]{0} exponential(%p), metadata={op_name="jit(g)/aten.exp.default %2 [act] a.py:3/exp"}
}

%fused (p0: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %m = f32[4]{0} multiply(%p0, %p0), metadata={op_name="jit(g)/aten.mul.Tensor %1 a.py:2/mul"}
  ROOT %c = f32[4]{0} call(%m), to_apply=%fused_inner
}

ENTRY %main (a: f32[4]) -> (f32[4], f32[2,2]) {
  %a = f32[4]{0} parameter(0)
  %fusion.3 = f32[4]{0} fusion(%a), kind=kLoop, calls=%fused, metadata={op_name="jit(g)/aten.mul.Tensor %1 a.py:2/mul"}
  %cc = f32[2,2]{1,0} custom-call(%fusion.3), custom_call_target="onednn$matmul", metadata={op_name="jit(g)/aten.mm.default %3 [head] a.py:4/dot_general"}
  ROOT %t = (f32[4]{0}, f32[2,2]{1,0}) tuple(%fusion.3, %cc)
}
"""
    lines = (events.IrLine(0, "xlanb::device_data", "f32[4]", (), "", is_input=True),
             events.IrLine(1, "aten::mul.Tensor", "f32[4]", (0, 0), "", "cell line 2"),
             events.IrLine(2, "aten::exp.default", "f32[4]", (1,), "", "cell line 3", scope="act"),
             events.IrLine(3, "aten::mm.default", "f32[2,2]", (2,), "", "cell line 4", scope="head"))
    f, cc = fusions(text, lines)
    assert (f.name, f.kind, f.nodes, f.ops, f.modules, f.lines, f.out_bytes) == \
        ("fusion.3", "fusion (kLoop)", (1, 2), ("aten.mul", "aten.exp"), (OUTSIDE, "act"), ("cell line 2", "cell line 3"),
         16)
    assert f.text == "fusion.3: aten.mul, aten.exp; (outside modules), act; cell line 2, cell line 3"
    assert (cc.kind, cc.ops, cc.modules, cc.out_bytes) == ("custom-call (onednn$matmul)", ("aten.mm",), ("head",), 16)


def test_memory_section_keeps_the_top_ten_and_the_change():
    holders = [Holder(f"t{i}", "tensor", 100 * i, 1) for i in range(1, 13)]
    m = memory_section(holders, 10_000, previous={"t12": 1000, "t3": 300, "": 9000}, capacity=1000,
                       graphs=[type("G", (), {"name": "big", "memory": {"temp_size_in_bytes": 600}})()], share=0.5)
    assert [h.name for h in m.holders] == [f"t{i}" for i in range(12, 2, -1)]
    assert (m.others, m.others_bytes, m.attributed, m.change) == (2, 300, 7800, 1000)
    assert [h.change for h in m.holders][:1] == [200] and m.holders[-1].change == 0 and m.holders[1].change is None
    assert m.warnings == ("graph big: temporaries take 600 B, 60% of the device's 1000 B "
                          "(over the 50% set by memory_warning)",)


def test_module_boxes_expand_in_html_without_scripts():
    evs = _step(MLP, _mlp())
    html = render_html(build_report(evs, cell_context()))
    assert "<script" not in html
    assert 'data-module="0"' in html and "<details class=\"x-module\"><summary>expand <code>0</code>" in html


def test_an_executable_compiled_without_positions_still_names_its_aten_ops():
    """JAX's disk cache ignores metadata: a graph compiled by an xlanb that named only the op keeps
    those names; the fusion lists the ops, without modules or lines."""
    text = """HloModule m

%fused (p0: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  ROOT %m = f32[4]{0} multiply(%p0, %p0), metadata={op_name="jit(g)/aten.mul.Tensor/mul"}
}

ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  ROOT %fusion = f32[4]{0} fusion(%a), kind=kLoop, calls=%fused, metadata={op_name="jit(g)/aten.mul.Tensor/mul"}
}
"""
    (f,) = fusions(text, (events.IrLine(0, "aten::mul.Tensor", "f32[4]", (), "", "cell line 1"),))
    assert (f.nodes, f.ops, f.modules, f.lines) == ((), ("aten.mul",), (), ())
