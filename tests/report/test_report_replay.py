"""Step replay in the cell report, built from the events a real `xlanb.compile(fn, replay=True)`
emits: calls replayed with their host time and executable, guard failures and not-replayable
reasons once each with a count, and replayed calls counted as executions of a cached graph."""

import linecache

import jsonschema
import pytest
import torch

import xlanb
from xlanb.report import SCHEMA, CellContext, Cells, build_report, render_html, render_json, render_text
from xlanb.report.format import format_call_ms


def events_since(mark):
    return list(xlanb.runtime_state().log.since(mark))


@pytest.fixture
def step():
    """A training-step-like function: it updates w in place from a batch; replayed from call 3."""
    w = torch.zeros(4).to("xla")

    def step(x):
        w.add_(x.sum(0))
        return w.sum().detach()
    return xlanb.compile(step, replay=True)


def replay_line(f) -> str:
    return (f"replay: step replayed {f.calls} calls, {format_call_ms(f.per_call_us / 1000)} host per call, "
            f"executable {f.keys[0][:8]}")


def test_five_calls_trace_twice_then_replay_three_times(step):
    x = torch.ones(4, 4).to("xla")
    log = xlanb.runtime_state().log
    mark = log.mark()
    for _ in range(5):
        step(x)
    evs = events_since(mark)
    r = build_report(evs)
    s = r.summary
    # two traced calls (one compile, one cache hit) and three replayed launches of the same executable
    assert (s.graphs_compiled, s.graphs_executed, s.replayed, s.cache_hits, s.cache_misses) == (1, 5, 3, 4, 1)
    (g,) = r.graphs
    assert g.name == "step" and g.executions == 5
    (f,) = r.replay.functions
    assert (f.name, f.calls, f.keys, f.donated, f.misses, f.not_replayable) == ("step", 3, (g.key,), 1, (), ())
    replays = [e for e in evs if type(e).__name__ == "Replay"]
    assert f.per_call_us == pytest.approx(sum(e.ns for e in replays) / 3 / 1000, abs=0.5)
    text = render_text(r)
    assert text.splitlines()[0].startswith("xlanb [lazy]: 1 graph compiled, 5 executed (3 replayed) \u00b7 "
                                           "cache: 4 hits, 1 miss \u00b7 ")
    assert "  " + replay_line(f) in text.splitlines()
    data = render_json(r)
    jsonschema.validate(data, SCHEMA)
    assert data["version"] == "1.6" and data["summary"]["replayed"] == 3
    (jf,) = data["replay"]["functions"]
    assert (jf["name"], jf["calls"], jf["keys"], jf["misses"], jf["not_replayable"]) == ("step", 3, [g.key], [], [])
    assert data["replay"]["lines"] == [replay_line(f)]


def test_a_cell_that_only_replayed_is_not_empty(step):
    x = torch.ones(4, 4).to("xla")
    for _ in range(3):
        step(x)
    mark = xlanb.runtime_state().log.mark()
    for _ in range(5):
        step(x)
    evs = events_since(mark)
    assert {type(e).__name__ for e in evs} == {"Replay"}     # no Execute, no Sync
    r = build_report(evs)
    assert not r.empty
    s = r.summary
    assert (s.graphs_compiled, s.graphs_executed, s.replayed, s.cache_hits, s.cache_misses, s.syncs) == \
        (0, 5, 5, 5, 0, 0)
    (c,) = r.cached                   # compiled before the cell, run (replayed) in it
    (f,) = r.replay.functions
    assert (c.name, c.key, c.executions) == ("step", f.keys[0], 5)
    lines = render_text(r).splitlines()
    assert lines[0] == f"xlanb [lazy]: 0 graphs compiled, 5 executed (5 replayed) \u00b7 cache: 5 hits, 0 misses " \
                       f"\u00b7 execute {xlanb.report.format.format_ms(s.execute_ms)}"
    assert lines[1:] == [f"  graph step [{c.key[:8]}] from cache, ran 5x "
                         f"({xlanb.report.format.format_ms(c.execute_ms)})", "  " + replay_line(f)]
    assert [sp.name for sp in r.timeline.spans] == ["step (replayed)"] * 5


def test_a_guard_failure_is_said_once_with_its_count(step):
    a, b = torch.ones(4, 4).to("xla"), torch.ones(2, 4).to("xla")
    for _ in range(3):
        step(a)                       # the third call replays: the plan is for (4, 4)
    mark = xlanb.runtime_state().log.mark()
    for x in (b, a, a, b):            # each b fails the (4, 4) plan's shape guard and traces
        step(x)
    evs = events_since(mark)
    r = build_report(evs)
    (f,) = r.replay.functions
    reason = "replay guard failed: argument 0 shape (4, 4) -> (2, 4)"
    assert f.misses == ((reason, 2),)
    # the a calls between replay or trace again, as the runtime decides: the report says what happened
    assert f.calls == sum(type(e).__name__ == "Replay" for e in evs) == r.summary.replayed
    assert f.not_replayable == tuple((e.reason, 1) for e in evs if type(e).__name__ == "NotReplayable")
    lines = render_text(r).splitlines()
    assert f"  replay: step traced instead: {reason} (x2)" in lines
    assert sum(line.startswith("  replay: step traced instead") for line in lines) == 1
    data = render_json(r)
    jsonschema.validate(data, SCHEMA)
    assert data["replay"]["functions"][0]["misses"] == [{"reason": reason, "count": 2}]
    html = render_html(r)
    assert "<li>step traced instead: replay guard failed: argument 0 shape (4, 4) -&gt; (2, 4) (x2)</li>" in html
    assert '<details class="x-replay-section" open><summary>replay: ' in html        # open: a guard failed
    assert "2 calls traced instead" in html


CELL = "<ipython-input-9-0123abcd>"        # a filename as IPython gives a cell
BODY = """v = torch.randn(4).to("xla")
def body():
    if (v.sum() > 100).item():
        v.mul_(0.5)
    v.add_(1.0)
g = xlanb.compile(body, replay=True)
for _ in range(4):
    g()
"""


def test_a_value_read_inside_names_why_the_function_is_never_replayed():
    linecache.cache[CELL] = (len(BODY), None, BODY.splitlines(True), CELL)
    mark = xlanb.runtime_state().log.mark()
    exec(compile(BODY, CELL, "exec"), {"torch": torch, "xlanb": xlanb})      # as IPython runs a cell
    r = build_report(events_since(mark), CellContext(execution_count=9, cells=Cells({CELL: 9}, 9)))
    (f,) = r.replay.functions
    assert (f.name, f.calls, f.keys, f.misses) == ("body", 0, (), ())
    # the reason names the line in the cell, as the report names every line
    ((reason, count),) = f.not_replayable
    assert (reason, count) == ("a value read inside the body cuts its graph (value access (.item()) at "
                               "cell line 3)", 1)
    assert r.replay.lines() == [f"replay: body not replayable: {reason}"]       # no "replayed 0 calls" line
    assert r.summary.replayed == 0 and r.summary.graphs_executed == 8
    assert f"  replay: body not replayable: {reason}" in render_text(r).splitlines()
    jsonschema.validate(render_json(r), SCHEMA)
    html = render_html(r)
    assert "<summary>replay: 0 calls replayed, 1 function not replayable</summary>" in html


def test_a_cell_without_replay_has_no_replay_section():
    mark = xlanb.runtime_state().log.mark()
    (torch.ones(3, device="xla") * 2).sum().item()
    r = build_report(events_since(mark))
    assert r.replay is None and render_json(r)["replay"] is None and r.summary.replayed == 0
    assert not any(line.startswith("  replay:") for line in render_text(r).splitlines())
    assert "x-replay" not in render_html(r)
