"""compile_effort: "fast" asks XLA to optimize less (shorter compiles); it is part of the graph key, so
switching compiles new graphs and never serves the other setting's executables, the explainer names
it, the report line shows it, and the values stay those of the CPU."""

import jax
import pytest
import torch
import torch.nn.functional as F

import xlanb
from xlanb import events
from xlanb._config import Config, config, from_environ, override
from xlanb.report import CellContext, build_report, render_text
from xlanb.runtime import stages
from xlanb.state import runtime_state

from helpers import assert_close, compiles, eager_compiles


def compile_events() -> list[events.Compile]:
    return [e for e in runtime_state().log.all() if isinstance(e, events.Compile)]


def step(model, x):
    loss = F.mse_loss(model(x), torch.zeros_like(model(x)))
    loss.backward()
    return loss


def test_fast_compiles_with_less_optimization_and_the_same_values(spy):
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    x = torch.randn(5, 8)
    expected = cpu(x).sum()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    model.load_state_dict(cpu.state_dict())
    model = model.to("xla")
    with override(compile_effort="fast"):
        got = model(x.to("xla")).sum()
        xlanb.sync()
    assert_close(got.cpu(), expected.detach())
    assert spy[-1] == stages.compile_options("fast")
    assert spy[-1]["optimization_level"] == 9                 # XLA's effort level O0
    if jax.default_backend() == "cpu":
        assert spy[-1]["xla_backend_optimization_level"] == 0
        assert spy[-1].get("xla_cpu_use_fusion_emitters", False) is False      # where this XLA knows it
    assert compile_events()[-1].compile_effort == "fast"


def test_an_option_this_xla_does_not_know_is_left_out(spy, monkeypatch):
    """jaxlib refuses a whole compile for one unknown option (jax 0.10 and 0.12 know different ones):
    the option is dropped, remembered, and the compile goes on with the others."""
    platform = "gpu" if jax.default_backend() in ("cuda", "rocm", "gpu") else jax.default_backend()
    options = dict(stages._FAST.get(platform, stages._FAST_OTHER), xla_no_such_option_here=True)
    monkeypatch.setitem(stages._FAST, platform, options)
    monkeypatch.setattr(stages, "_unsupported", set())
    a = torch.randn(3, 5)
    with override(compile_effort="fast"):
        got = (a.to("xla") * 3 - 1).cpu()
    assert_close(got, a * 3 - 1)
    assert "xla_no_such_option_here" in spy[-2 - len(stages._unsupported) + 1]     # the first try had it
    assert "xla_no_such_option_here" not in spy[-1]
    # dropped: it, and any of the real options this jaxlib's XLA does not know (jax 0.12's CPU has no
    # xla_cpu_use_fusion_emitters)
    assert "xla_no_such_option_here" in stages._unsupported and stages._unsupported <= set(options)
    assert set(spy[-1]) == (set(options) | set(stages.compile_options("default"))) - stages._unsupported
    assert "xla_no_such_option_here" not in stages.compile_options("fast")


def test_default_passes_only_the_platforms_own_options(spy):
    """No effort options; on the CPU, YNNPACK's fusions off (tests/runtime/test_xla_cpu_fusions.py)."""
    a = torch.randn(4, 4).to("xla")
    (a @ a).cpu()
    own = {"xla_cpu_experimental_ynn_fusion_type": ""} if jax.default_backend() == "cpu" else {}
    own = {k: v for k, v in own.items() if k not in stages._unsupported}
    assert (spy[-1] or {}) == own and compile_events()[-1].compile_effort == "default"
    assert config().compile_effort == "default" and stages.compile_options("default") == own


def test_switching_compiles_again_says_why_and_switching_back_hits_the_cache():
    a = torch.randn(6, 6).to("xla")
    xlanb.sync()

    def run():
        return (a.sin() @ a).sum().item()
    first = run()
    n = compiles()
    with override(compile_effort="fast"):
        assert run() == pytest.approx(first, rel=1e-6)
        assert compiles() == n + 1
        why = compile_events()[-1].recompile
        assert "compile effort 'default' -> 'fast'" in why.text()
        run()
        assert compiles() == n + 1
    run()
    assert compiles() == n + 1


def test_eager_ops_follow_the_setting():
    with xlanb.eager_mode_context(True):
        a = torch.randn(3, 3).to("xla")
        b = a.cos()
        n = eager_compiles()
        b = a.cos()                         # the fast path: no compile
        assert eager_compiles() == n
        with override(compile_effort="fast"):
            c = a.cos()
            assert eager_compiles() == n + 1 and compile_events()[-1].compile_effort == "fast"
            c = a.cos()
            assert eager_compiles() == n + 1
        assert_close(c.cpu(), b.cpu())


def test_the_report_line_shows_it():
    a = torch.randn(4, 5).to("xla")
    xlanb.sync()
    mark = runtime_state().log.mark()
    with override(compile_effort="fast"):
        with xlanb.compile(name="step"):
            y = (a * 3).tanh().sum()
        y.item()
    report = build_report(runtime_state().log.since(mark), CellContext(execution_count=1))
    assert [g["compile_effort"] for g in report.to_json()["graphs"]] == ["fast"]
    assert ", compile effort: fast, ran 1x" in render_text(report).splitlines()[1]


def test_bad_values_are_refused_and_the_environment_sets_it():
    with pytest.raises(ValueError, match="compile_effort must be 'default' or 'fast'"):
        with override(compile_effort="fastest"):
            pass
    assert from_environ({"XLANB_COMPILE_EFFORT": "fast"}).compile_effort == "fast"
    assert Config().compile_effort == "default"


def test_a_replayed_step_traces_again_when_it_changes():
    torch.manual_seed(0)
    w, x = torch.randn(16, 4).to("xla"), torch.randn(8, 16).to("xla")
    step = xlanb.compile(lambda x: (x @ w).relu().detach(), replay=True)
    for _ in range(3):
        step(x)
    assert step.replayed == 1
    mark = runtime_state().log.mark()
    with override(compile_effort="fast"):
        before = compiles()
        assert_close(step(x).cpu(), (x.cpu() @ w.cpu()).relu())
        assert compiles() == before + 1
    assert [e.reason for e in runtime_state().log.since(mark) if isinstance(e, events.ReplayMiss)] == [
        "replay guard failed: compile_effort 'default' -> 'fast'"]
