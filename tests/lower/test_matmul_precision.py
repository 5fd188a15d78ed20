"""torch's float32 matmul precision is part of the graph key: float32 products and convolutions are
lowered at the XLA precision it maps to ("highest" -> HIGHEST, "high" -> HIGH, "medium" -> DEFAULT),
changing it compiles new graphs (never serves old ones), and the recompile explainer names it."""

import pytest
import torch
import torch.nn.functional as F

import xlanb
from xlanb import events, hooks
from xlanb.report import CellContext, build_report, render_text
from xlanb.state import runtime_state
from helpers import compiles, eager_compiles


@pytest.fixture(autouse=True)
def precision():
    """torch's setting is process-global: every test leaves it as it found it."""
    before = torch.get_float32_matmul_precision()
    try:
        yield torch.set_float32_matmul_precision
    finally:
        torch.set_float32_matmul_precision(before)


def operands(*shapes, dtype=torch.float32):
    torch.manual_seed(0)
    return [torch.randn(*s, dtype=dtype).to("xla") for s in shapes]


def compile_events(name: str | None = None) -> list[events.Compile]:
    return [e for e in runtime_state().log.all() if isinstance(e, events.Compile) and name in (None, e.name)]


def stablehlo(run) -> str:
    """The StableHLO of the one graph `run()` compiles."""
    before = len(compile_events())
    with hooks.recording_texts():
        run()
    (compiled,) = compile_events()[before:]
    return compiled.stablehlo


def matmul(a, b):
    return (a @ b).cpu()


def assert_close_at(setting: str, got: torch.Tensor, want: torch.Tensor) -> None:
    """Values of float32 products under `setting` against the CPU's float32: "highest" within
    float32's tolerance; "medium" within bfloat16's, where XLA may multiply in one bfloat16 pass (a
    TPU v5e does: 2.7e-3 relative on a large product; the CPU computes float32 whatever the setting)."""
    tolerance = {} if setting == "highest" else {"rtol": 2e-2, "atol": 5e-2}
    torch.testing.assert_close(got, want, **tolerance)


def test_a_float32_matmul_is_highest_by_default_and_default_under_medium(precision):
    a, b = operands((8, 16), (16, 4))
    assert torch.get_float32_matmul_precision() == "highest"
    assert "precision = [HIGHEST, HIGHEST]" in stablehlo(lambda: matmul(a, b))
    precision("medium")
    text = stablehlo(lambda: matmul(a, b))
    assert "precision = [DEFAULT, DEFAULT]" in text and "HIGHEST" not in text
    precision("high")
    assert "precision = [HIGH, HIGH]" in stablehlo(lambda: matmul(a, b))


def test_switching_compiles_a_new_graph_and_switching_back_hits_the_cache(precision):
    a, b = operands((8, 16), (16, 4))
    want = (a.cpu() @ b.cpu())
    counts = []
    for setting in ("highest", "highest", "medium", "highest", "medium"):
        precision(setting)
        before = compiles()
        got = matmul(a, b)
        counts.append(compiles() - before)
        assert_close_at(setting, got, want)
    assert counts == [1, 0, 1, 0, 0]
    assert [e.matmul_precision for e in compile_events()] == ["highest", "medium"]


def test_a_float32_conv2d_follows_the_same_mapping(precision):
    x, w = operands((2, 3, 8, 8), (4, 3, 3, 3))
    text = stablehlo(lambda: F.conv2d(x, w).cpu())
    assert "stablehlo.convolution" in text and "#stablehlo<precision HIGHEST>" in text
    precision("medium")
    before = compiles()
    text = stablehlo(lambda: F.conv2d(x, w).cpu())
    assert compiles() == before + 1
    assert "#stablehlo<precision DEFAULT>" in text and "HIGHEST" not in text


@pytest.mark.parametrize("setting", ["highest", "medium"])
def test_half_types_keep_their_float32_accumulation_whatever_the_setting(precision, setting):
    """bfloat16 operands are exact in one pass; float16 ones are multiplied exactly too (HIGHEST),
    where XLA:TPU's DEFAULT would round them to bfloat16."""
    precision(setting)
    for dtype, shape in ((torch.bfloat16, (8, 16)), (torch.float16, (8, 17))):
        a, b = operands(shape, (shape[1], 4), dtype=dtype)
        text = stablehlo(lambda: matmul(a, b))
        dot = next(line for line in text.splitlines() if "dot_general" in line)
        assert "tensor<8x4xf32>" in dot
        assert ("HIGHEST" in dot) == (dtype == torch.float16)
    x, w = operands((1, 2, 6, 6), (3, 2, 3, 3), dtype=torch.float16)
    text = stablehlo(lambda: F.conv2d(x, w).cpu())
    assert "stablehlo.convolution" in text and "#stablehlo<precision HIGHEST>" in text


def test_the_eager_fast_path_is_not_stale(precision):
    a, b = operands((8, 16), (16, 4))
    want = a.cpu() @ b.cpu()
    with xlanb.eager_mode_context(True):
        counts = []
        for setting in ("highest", "highest", "medium", "medium", "highest"):
            precision(setting)
            before = eager_compiles()
            assert_close_at(setting, (a @ b).cpu(), want)
            counts.append(eager_compiles() - before)
    assert counts == [1, 0, 1, 0, 0]
    assert [e.matmul_precision for e in compile_events()] == ["highest", "medium"]


def test_the_explainer_names_the_precision(precision):
    a, b = operands((8, 16), (16, 4))
    with xlanb.compile(name="mm"):
        y = a @ b
    precision("medium")
    with xlanb.compile(name="mm"):
        z = a @ b
    assert_close_at("medium", z.cpu(), y.cpu())
    first, second = compile_events("mm")
    assert first.recompile is None
    (change,) = second.recompile.changes
    assert change.kind == "precision"
    assert str(change) == "matmul precision 'highest' -> 'medium' (torch.set_float32_matmul_precision)"
    assert "matmul precision 'highest' -> 'medium'" in xlanb.debug.explain_recompiles()


def test_the_report_names_a_precision_that_is_not_the_default(precision):
    a, b = operands((8, 16), (16, 4))
    reports = []
    for setting in ("highest", "medium"):
        precision(setting)
        mark = runtime_state().log.mark()
        with xlanb.compile(name="step"):
            y = (a @ b).sum()
        y.item()
        report = build_report(runtime_state().log.since(mark), CellContext(execution_count=1))
        assert [g["matmul_precision"] for g in report.to_json()["graphs"]] == [setting]
        reports.append(render_text(report))
    highest, medium = reports
    assert "matmul precision" not in highest.splitlines()[1]
    assert medium.splitlines()[1].startswith("  graph step [")
    assert ", matmul precision: medium, ran 1x" in medium.splitlines()[1]


def test_a_replayed_step_traces_again_when_the_precision_changes(precision):
    w, x = operands((16, 4), (8, 16))
    step = xlanb.compile(lambda x: (x @ w).relu().detach(), replay=True)
    for _ in range(3):
        step(x)
    assert step.replayed == 1
    precision("medium")
    before = compiles()
    assert_close_at("medium", step(x).cpu(), (x.cpu() @ w.cpu()).relu())
    assert compiles() == before + 1
    assert [e.reason for e in runtime_state().log.all() if isinstance(e, events.ReplayMiss)] == [
        "replay guard failed: float32 matmul precision 'highest' -> 'medium'"]
