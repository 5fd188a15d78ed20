"""The report's insight sections (schema 1.2) in a real (in-process) notebook: ops by module, fusions
traced to ATen ops and cell lines, device memory by variable, the partial graph of a failed cell."""

import re

import jsonschema
import pytest

import xlanb
from xlanb.report import SCHEMA
from xlanb.report.schema import REPORT_SCHEMA_VERSION
from xlanb.report.modules import OUTSIDE, TOP

MODEL = '''import torch, torch.nn as nn, xlanb
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.ff = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 4))
    def forward(self, x):
        return self.ff(self.embed(x).relu()) * 2
torch.manual_seed(0)
model = Net().to("xla")
x = torch.ones(3, 4, device="xla")'''


def _report(c) -> dict:
    data = c.report
    jsonschema.validate(data, SCHEMA)
    assert data["version"] == REPORT_SCHEMA_VERSION
    return data


def test_forward_ops_are_grouped_by_module_with_exact_counts(cell):
    assert cell(MODEL).error is None
    g = _report(cell("%%xla_compile --name fwd\ny = (model(x) + 1).sum()"))["graphs"][0]
    groups = {m["path"]: (m["ops"], m["total"]) for m in g["modules"]["groups"]}
    # a Linear records t + addmm; GELU one op; Net.forward's own relu and * 2; the cell's + 1 and sum
    assert groups == {"embed": (2, 2), TOP: (2, 9), "ff.0": (2, 2), "ff.1": (1, 1), "ff.2": (2, 2),
                      OUTSIDE: (2, 2)}
    scopes = [line["scope"] for line in g["ir"]["lines"] if not line["is_input"]]
    assert scopes == ["embed", "embed", "", "ff.0", "ff.0", "ff.1", "ff.2", "ff.2", "", None, None]
    # one box per top-level module, each with the DAG of its ops to expand into
    dag = g["modules"]["dag"]
    # (a Sequential's or ModuleList's entries are boxes of their own: ff.0, not ff; Net.forward's own
    # ops before and after self.ff are two boxes, so the drawing has no cycle)
    assert dag["collapsed"] == "modules" and dag["drawn"] == 7
    assert 'data-module="ff.1"' in dag["svg"] and 'data-module="embed"' in dag["svg"]
    assert list(g["modules"]["expanded"]) == ["embed", TOP, "ff.0", "ff.1", "ff.2", f"{TOP} (2)", OUTSIDE]
    assert g["modules"]["expanded"]["ff.0"]["nodes"] == 2
    assert "module=ff.1" in g["ir"]["text"]


def test_backward_ops_carry_the_module_of_their_forward_op(cell):
    assert cell(MODEL).error is None
    c = cell("%%xla_compile --name step\nloss = model(x).sum()\nloss.backward()")
    g = _report(c)["graphs"][0]
    by_scope = {}
    for line in g["ir"]["lines"]:
        if not line["is_input"]:
            by_scope.setdefault(line["scope"], []).append(line["op"])
    assert "aten::gelu_backward.default" in by_scope["ff.1"]            # GELU's backward
    assert "aten::threshold_backward.default" in by_scope[""]           # Net.forward's relu
    assert by_scope["ff.2"].count("aten::mm.default") == 2              # grad of input and of weight
    assert by_scope["embed"].count("aten::mm.default") == 1             # x needs no grad: weight only


def test_a_fusion_is_traced_to_its_aten_ops_modules_and_cell_line(cell):
    assert cell(MODEL).error is None
    g = _report(cell("%%xla_compile --name fwd\ny = (model(x) + 1).sum()"))["graphs"][0]
    fusions = {f["name"]: f for f in g["fusions"]}
    assert fusions, g["hlo"]["optimized"]["text"][:2000]
    last = [f for f in fusions.values() if "aten.sum" in f["ops"]]
    assert len(last) == 1
    f = last[0]
    # the cell's `+ 1` and `.sum()` fused with Net.forward's `* 2` (and the bias add of ff.2's addmm)
    assert {"aten.mul", "aten.add", "aten.sum"} <= set(f["ops"])
    assert "cell line 2" in f["lines"]
    assert any(re.fullmatch(r"In \[\d+\] line 8", line) for line in f["lines"])     # Net.forward's line
    assert TOP in f["modules"]
    assert f["text"].startswith(f"{f['name']}: ") and "cell line 2" in f["text"]
    # every fusion names graph positions that are ops of this graph
    ops = {line["index"] for line in g["ir"]["lines"] if not line["is_input"]}
    assert all(set(f["nodes"]) <= ops for f in fusions.values())
    gelu = [f for f in fusions.values() if "aten.gelu" in f["ops"]]
    assert gelu and all("ff.1" in f["modules"] for f in gelu)


def test_memory_by_variable_has_exact_bytes_and_the_change_since_the_previous_cell(cell):
    assert cell("import torch, torch.nn as nn, xlanb\nbig = torch.ones(256, 256, device='xla')").error is None
    c = cell("lin = nn.Linear(64, 32).to('xla')\nopt = torch.optim.Adam(lin.parameters())\n"
             "lin(torch.ones(2, 64, device='xla')).sum().backward()\nopt.step()")
    m = _report(c)["memory"]
    held = {h["name"]: h for h in m["holders"]}
    params = (64 * 32 + 32) * 4
    assert held["big"]["bytes"] == 256 * 256 * 4 and held["big"]["change"] == 0
    assert held["lin.parameters"]["bytes"] == params and held["lin.parameters"]["change"] is None
    assert held["lin.gradients"]["bytes"] == params and held["lin.gradients"]["tensors"] == 2
    assert held["opt.state"]["bytes"] == 2 * params          # exp_avg and exp_avg_sq (step lives on the CPU)
    assert m["attributed"] == sum(h["bytes"] for h in m["holders"]) + m["others_bytes"]
    assert m["total"] >= m["attributed"]
    c = cell("big = torch.ones(16, device='xla')")
    m = _report(c)["memory"]
    held = {h["name"]: h for h in m["holders"]}
    assert held["big"]["bytes"] == 64 and held["big"]["change"] == 64 - 256 * 256 * 4
    assert "device memory:" in c.reports[0]["text/plain"]


def test_memory_warning_names_a_graph_whose_temporaries_exceed_the_share(cell):
    from xlanb._config import override
    cell("import torch, xlanb\nw = torch.ones(128, 128, device='xla')")
    body = "a = w @ w\nb = a.exp() @ a.t()\nz = (b.softmax(0) @ a).sum(0).cumsum(0).sum()"
    with override(memory_warning=1e-9):
        m = _report(cell(f"%%xla_compile --name tmp\n{body}"))["memory"]
    assert len(m["warnings"]) == 1 and m["warnings"][0].startswith("graph tmp: temporaries take ")
    assert "memory_warning" in m["warnings"][0]
    with pytest.raises(ValueError, match="memory_warning must be a share"):
        with override(memory_warning=2.0):
            pass


def test_a_failing_cell_shows_its_partial_graph_with_the_op_and_line(cell):
    cell("import torch, xlanb\nx4 = torch.ones(4, 4, device='xla')")
    cell("%xla_mode lazy")
    c = cell("a = x4 * 2.5\nb = a + 1\nc = b @ torch.ones(5, 5, device='xla')\nd = c + 1")
    assert isinstance(c.error, RuntimeError)
    data = _report(c)
    p = data["pending"]
    f = p["failure"]
    assert f["op"] == "aten.mm.default"
    assert f["where"]["text"] == "cell line 3" and f["where"]["source"].startswith("c = b @ torch.ones")
    assert f["error"].startswith("RuntimeError: ")
    lines = {line["index"]: line for line in p["ir"]["lines"]}
    ops = [line["op"] for line in lines.values() if not line["is_input"]]
    assert ops[:2] == ["aten::mul.Tensor", "aten::add.Tensor"]          # nothing recorded before is lost
    assert f["highlight"] and all(lines[i]["location"] == "cell line 3" for i in f["highlight"])
    assert {p["tensors"][i]["name"] for i in range(len(p["tensors"]))} >= {"a", "b"}
    text = c.reports[0]["text/plain"]
    assert "the cell failed in aten.mm.default at cell line 3" in text and "\n    >>" in text
    assert "partial graph of the failed cell" in c.reports[0]["text/html"]
    assert cell("b.sum().item()").error is None                     # the pending work still computes
    assert xlanb.metrics.counter_value("UncachedCompile") >= 1


def test_scopes_label_through_identity_modules_and_hold_no_autograd_node():
    import torch
    import torch.nn as nn

    from xlanb import events, hooks
    from xlanb.state import runtime_state

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.same = nn.Linear(3, 3), nn.Identity()

        def forward(self, x):
            return self.same(self.lin(x).relu())

    net = Net().to("xla")
    x = torch.ones(2, 3, device="xla")
    with hooks.recording_modules(), hooks.recording_texts():
        mark = hooks.mark()
        out = net(x)
        segments = runtime_state().module_hooks[2]             # numbers and paths only: no autograd node held
        assert {type(v) for v in segments.starts} == {int} and set(segments.paths) == {"", "lin", None}
        out.sum().backward()
        xlanb.sync()
    (c,) = [e for e in hooks.since(mark) if isinstance(e, events.Compile)]
    scopes = {line.op: line.scope for line in c.ir if not line.is_input}
    assert scopes["aten::relu.default"] == "" and scopes["aten::threshold_backward.default"] == ""
    assert scopes["aten::addmm.default"] == "lin"


def test_segments_name_the_innermost_module_of_each_sequence_number():
    """Marks arrive as forwards start and return: top from 0, a from 2 (a.b from 3 to 4 inside), c
    from 8 to 12, outside every module from 20; a mark at the number of the last one replaces it (no
    node numbered between), and a lower number (another thread's counter) keeps the marks sorted."""
    from xlanb.capture.scopes import Segments

    s = Segments()
    for mark in ((0, ""), (2, "a"), (3, "a.b"), (4, "a"), (5, ""), (8, "c"), (12, ""), (20, None)):
        s.mark(*mark)
    assert [s.path(n) for n in (0, 2, 3, 4, 5, 7, 8, 11, 12, 19, 20, -1)] == \
        ["", "a", "a.b", "a", "", "", "c", "c", "", "", None, None]
    s.mark(25, "d"), s.mark(30, "d.e"), s.mark(30, "d")              # the next step's forward; e made no node
    assert (s.path(22), s.path(27), s.path(31), len(s.starts)) == (None, "d", "d", 10)
    s.mark(26, "f")
    assert (s.path(27), s.starts[-1], s.path(24)) == ("f", 26, None)


def test_each_fusion_carries_xla_s_cost_analysis_of_it_alone(cell):
    """x * 2 + 1 then exp on 64 x 256 floats: one loop fusion of 2 flops and one transcendental an
    element, reading x and writing the result; the fusions' flops add up to the executable's."""
    assert cell("import torch, xlanb\nx = torch.ones(64, 256, device='xla')").error is None
    data = _report(cell("%%xla_compile --name costs\ny = (x * 2 + 1).exp()"))
    g = data["graphs"][0]
    (f,) = [f for f in g["fusions"] if "aten.exp" in f["ops"]]
    n = 64 * 256
    # (+ a flop or two: the lifted 2 and 1 arrive as f64 and are converted once)
    assert 2 * n <= f["flops"] <= 2 * n + 2 and f["transcendentals"] == n
    assert 2 * 4 * n <= f["bytes_accessed"] <= 2 * 4 * n + 64          # x and y (and the lifted scalars)
    assert sum(x["flops"] or 0 for x in g["fusions"]) == g["cost"]["flops"]
    assert f"fusion {f['name']}: aten.mul, aten.add, aten.exp; cell line 2 (32.8 kFLOP, 128.0 KiB accessed)" \
        in data["text"]
