"""The torch_xla-compatible metrics API and the IR / HLO dumps."""

import torch

import xlanb
from custom_ops import FALLBACK_COUNTER, scale_shift
from xlanb import metrics


def test_unknown_names_give_none_and_clear_all_empties():
    assert metrics.counter_value("NoSuchCounter") is None
    assert metrics.metric_data("NoSuchMetric") is None
    x = torch.ones(2, device="xla") * 3.0
    xlanb.sync()
    count, total_ns, samples = metrics.metric_data("CompileTime")
    assert count == 1 and total_ns > 0 and len(samples) == 1
    assert "UncachedCompile" in metrics.counter_names()
    metrics.clear_all()
    assert metrics.counter_names() == [] and metrics.metric_names() == []
    assert x.cpu().tolist() == [3.0, 3.0]


def test_short_report_lists_times_and_fallbacks():
    x = torch.linspace(0.5, 1.5, 3, device="xla")
    scale_shift(x, 2.0).cpu()
    report = metrics.short_metrics_report()
    assert "Metric: CompileTime" in report and "Metric: ExecuteTime" in report
    assert "Metric: TransferFromDeviceTime" in report
    assert f"Counter: {FALLBACK_COUNTER}" in report
    assert "Accumulator:" in metrics.metrics_report()


def test_ir_text_before_and_after_sync():
    a, b = torch.ones(2, 2, device="xla"), torch.ones(2, 2, device="xla")
    xlanb.sync()
    c = a + b * 2.5
    text = xlanb.debug.ir_text(c)
    lines = text.splitlines()
    assert lines[0] == "IR {" and lines[-1] == "}"
    assert text.count("ROOT=0") == 1
    assert "scalar=2.5" in text and "aten::mul.Tensor" in text and "aten::add.Tensor" in text
    assert text.count("xlanb::device_data()") == 2
    xlanb.sync()
    after = xlanb.debug.ir_text(c)
    assert after.splitlines()[1].strip() == "%0 = f32[2,2] xlanb::device_data(), ROOT=0"


def test_hlo_text_stages():
    x = torch.ones(3, device="xla")
    y = (x * 2).exp()
    assert "stablehlo.exponential" in xlanb.debug.hlo_text(y)
    assert xlanb.debug.hlo_text(y, stage="hlo").startswith("HloModule")
    assert "HloModule" in xlanb.debug.hlo_text(y, stage="optimized")


def test_a_package_pip_installed_into_a_folder_on_sys_path_is_not_user_code(tmp_path, monkeypatch):
    # pip install --target DIR, DIR on PYTHONPATH (a TPU machine without a network): the packages there
    # are libraries (a dist-info beside them); a folder of the user's own modules on sys.path is not
    from xlanb.events import in_package
    target, mine = tmp_path / "site", tmp_path / "project"
    (target / "lib" / "sub").mkdir(parents=True)
    (target / "lib-1.0.dist-info").mkdir()
    (target / "single.py").write_text("")          # a one-module distribution
    (mine / "pkg").mkdir(parents=True)
    for f in (target / "lib" / "sub" / "m.py", mine / "pkg" / "m.py", mine / "top.py"):
        f.write_text("")
    monkeypatch.syspath_prepend(str(target))
    monkeypatch.syspath_prepend(str(mine))
    monkeypatch.syspath_prepend(str(tmp_path))        # a folder above both, on sys.path too
    in_package.cache_clear()
    try:
        assert in_package(str(target / "lib" / "sub" / "m.py")) and in_package(str(target / "single.py"))
        assert not in_package(str(mine / "pkg" / "m.py")) and not in_package(str(mine / "top.py"))
        assert in_package("/usr/lib/python3/dist-packages/x/y.py")
    finally:
        in_package.cache_clear()
