"""Events, metrics and the cell report cover torch.compile: FX graphs captured (and their path),
graph breaks with reasons and user lines, re-captures with the failed guard, and the lazy graph
a step became (its macro-nodes in the compiled graph's IR)."""

import jsonschema
import torch
import torch.nn as nn

import xlanb
from xlanb import hooks
from xlanb.report import CellContext, build_report
from xlanb.report.schema import REPORT_SCHEMA_VERSION, SCHEMA
from xlanb.report.serialize import render_json
from xlanb.report.html import render_html
from xlanb.report.text import render_text


def step_with_print(model, opt, x):
    loss = model(x).square().mean()
    print("loss computed")                 # a graph break: dynamo cannot trace print
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def test_report_metrics_and_ir_of_a_compiled_step():
    torch.manual_seed(0)
    model = nn.Linear(4, 3).to("xla")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = torch.compile(step_with_print, backend="xlanb")
    x = torch.randn(2, 4).to("xla")
    xlanb.sync()
    mark = hooks.mark()
    step(model, opt, x)
    xlanb.sync()
    report = build_report(hooks.since(mark), CellContext(execution_count=1))
    tc = report.torch_compile
    assert [(g["kind"], g["path"]) for g in tc.graphs] == [("forward", "macro"), ("backward", "macro"),
                                                           ("inference", "macro")]
    line = step_with_print.__code__.co_firstlineno + 2
    assert tc.breaks and tc.breaks[0]["location"] == f"test_report.py:{line}"
    assert "print" in tc.breaks[0]["reason"]
    assert tc.graphs[0]["location"] == f"test_report.py:{line - 1}"
    text = render_text(report)
    assert f"torch.compile graph break at test_report.py:{line}: " in text
    assert "torch.compile captured forward graph" in text and "one lazy node per call" in text
    assert "torch.compile" in render_html(report)
    data = render_json(report)
    jsonschema.validate(data, SCHEMA)
    assert data["version"] == REPORT_SCHEMA_VERSION and data["torch_compile"]["lines"] == tc.lines()
    (graph,) = report.graphs                                        # the step: one graph
    macro_lines = [ln for ln in graph.ir.lines if ln.op == "xlanb::fx_graph"]
    assert len(macro_lines) == 3, [ln.op for ln in graph.ir.lines]  # forward, backward, SGD: 3 macro-nodes
    assert "forward" in macro_lines[0].attrs and "backward" in macro_lines[1].attrs
    assert xlanb.metrics.counter_value("DynamoGraph") == 3
    assert xlanb.metrics.counter_value("DynamoGraphBreak") >= 1


def test_a_failed_guard_is_reported_as_a_recapture():
    f = torch.compile(lambda a: a.cos() + 1, backend="xlanb", dynamic=False)
    f(torch.randn(3).to("xla"))
    mark = hooks.mark()
    f(torch.randn(4).to("xla"))
    report = build_report(hooks.since(mark))
    (recapture,) = report.torch_compile.recaptures
    assert "size mismatch at index 0. expected 3, actual 4" in recapture["reason"]
    assert "captured again" in render_text(report)
    assert xlanb.metrics.counter_value("DynamoRecompile") == 1
