"""Bad input and faults: clear errors at the user's line, nothing lost, the process lives."""

import subprocess
import sys
import textwrap

import pytest
import torch

import xlanb
from custom_ops import FALLBACK_COUNTER, scale_shift
from helpers import assert_close, counter
from xlanb.lower.registry import LOWERINGS, Rule


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    import os
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **env})


def test_shape_error_is_torchs_own_message():
    a, b = torch.randn(2, 3, device="xla"), torch.randn(4, 5, device="xla")
    with pytest.raises(RuntimeError) as xla_error:
        a @ b
    with pytest.raises(RuntimeError) as cpu_error:
        a.cpu() @ b.cpu()
    assert str(xla_error.value) == str(cpu_error.value)


def test_dtype_error_in_place_is_torchs_own_message():
    x = torch.ones(3, dtype=torch.int64, device="xla")
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        x.add_(2.5)
    assert x.cpu().tolist() == [1, 1, 1]


def test_op_without_lowering_falls_back_to_cpu():
    cpu = torch.linspace(0.1, 3.0, 7)
    x = cpu.to("xla")
    got = scale_shift(x, 2.5) * 2
    assert_close(got.cpu(), scale_shift(cpu, 2.5) * 2)
    assert FALLBACK_COUNTER in xlanb.metrics.executed_fallback_ops()
    assert counter(FALLBACK_COUNTER) == 1


def test_data_dependent_ops_cut_the_graph_and_match_cpu():
    cpu = torch.tensor([0.5, -1.0, 2.0, 0.0, 3.0])
    x = cpu.to("xla")
    assert_close(torch.nonzero(x).cpu(), torch.nonzero(cpu))
    assert_close(x[x > 0].cpu(), cpu[cpu > 0])
    assert_close(torch.masked_select(x, x < 1).cpu(), torch.masked_select(cpu, cpu < 1))
    assert counter("GraphCut") >= 3


def test_failed_compile_leaves_pending_graph_intact():
    name = "aten.sin.default"
    rule = LOWERINGS[name]

    def broken(x):
        raise ValueError("simulated lowering bug")
    x = torch.arange(4.0, device="xla")
    y = x.sin() + 1
    LOWERINGS[name] = Rule(name, broken, rule.promote, rule.rng)
    try:
        with pytest.raises(RuntimeError, match="lowering aten.sin.default failed"):
            xlanb.sync()
    finally:
        LOWERINGS[name] = rule
    xlanb.sync()
    assert_close(y.cpu(), torch.arange(4.0).sin() + 1)


def test_error_in_backward_is_raised_by_backward_as_on_cpu_and_the_process_lives():
    # raising inside the autograd engine would end the process: the op keeps the error, and torch's
    # entry into the engine raises it when the engine returns, at the user's backward() line
    result = run_python("""
        import torch, xlanb
        class Bad(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2
            @staticmethod
            def backward(ctx, g):
                return g @ torch.ones(7, 7, device=g.device)   # shape error inside the engine
        for device in ("cpu", "xla"):
            x = torch.ones(3, 3, device=device, requires_grad=True)
            try:
                Bad.apply(x).sum().backward()
                print(device, "NO ERROR")
            except Exception as e:
                print(device, "RAISED:", type(e).__name__, str(e).splitlines()[0])
        xlanb.sync()                                  # nothing left to raise: the placeholders are not synced
        try:
            x.grad.cpu()
            print("GRAD READ")
        except RuntimeError as e:
            print("GRAD:", "failed inside backward" in str(e))
        y = torch.ones(2, device="xla") + 1           # the runtime still works
        print("ALIVE", y.cpu().tolist())
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    cpu = next(ln for ln in lines if ln.startswith("cpu "))
    assert cpu.startswith("cpu RAISED: RuntimeError") and f"xla {cpu[4:]}" in lines, result.stdout
    assert "GRAD: True" in result.stdout and "ALIVE [2.0, 2.0]" in result.stdout


def test_import_next_to_torch_xla_fails_clearly():
    result = run_python("""
        import sys, types
        sys.modules["torch_xla"] = types.ModuleType("torch_xla")
        import xlanb
    """)
    assert result.returncode != 0
    assert "xlanb cannot be imported next to torch_xla" in result.stderr


def test_import_with_privateuse1_taken_fails_clearly():
    result = run_python("""
        import torch
        torch.utils.rename_privateuse1_backend("npu_like")
        import xlanb
        print((torch.ones(2, device="xla") + 1).cpu().tolist())
    """)
    from xlanb.capture.torch_versions import backend_key
    if backend_key("xla") == "XLA":       # torch 2.9: xla is torch's own XLA type; PrivateUse1 is free
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "[2.0, 2.0]"
        return
    assert result.returncode != 0
    assert "already registered as 'npu_like'" in result.stderr


def test_persistent_cache_hit_in_a_new_process(tmp_path):
    code = """
        import torch, xlanb
        x = torch.arange(12.0, device="xla").reshape(3, 4)
        y = (x.sin() * 2.5).sum(0)
        print(y.cpu().tolist())
        print("HITS", xlanb.metrics.counter_value("PersistentCacheHit") or 0)
    """
    first = run_python(code, XLANB_CACHE_DIR=str(tmp_path))
    second = run_python(code, XLANB_CACHE_DIR=str(tmp_path))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "HITS 0" in first.stdout
    assert "HITS 0" not in second.stdout
    assert first.stdout.splitlines()[0] == second.stdout.splitlines()[0]
