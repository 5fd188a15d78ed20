"""XLA:CPU's YNNPACK fusions are off in every compile xlanb makes on the CPU (runtime/stages.py):
jax 0.10.2 to 0.12's XLA fuses a sum with the product that feeds it, and reads a broadcast constant
operand of that product out of bounds (wrong sums, NaN, or a segmentation fault for large shapes)."""

import jax
import pytest
import torch

import xlanb
from xlanb.runtime import stages

from helpers import assert_close

_YNN = "xla_cpu_experimental_ynn_fusion_type"
on_cpu = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the options of XLA's CPU backend")


@pytest.mark.parametrize("rows", [64, 4096])
def test_a_product_of_a_fill_summed_in_one_graph_matches_cpu(rows):
    torch.manual_seed(0)
    w = torch.randn(32, 64)
    got = (torch.ones(rows, 32, device="xla") @ w.to("xla")).sum()     # the fill is a constant of the graph
    assert_close(got.cpu(), (torch.ones(rows, 32) @ w).sum())


def test_a_product_of_transcendentals_of_a_fill_is_not_nan():
    """XLA folds sin and cos of a fill into broadcast constants: the summed product was NaN here
    (jax 0.10.2, an AMD EPYC VM) before the fusions were turned off."""
    x = torch.ones(65536, 256, device="xla")
    got = (x.sin().T @ x.cos()).sum()
    one = torch.ones(65536, 256)
    assert_close(got.cpu(), (one.sin().T @ one.cos()).sum(), rtol=1e-5, atol=0)


@on_cpu
def test_no_cpu_executable_holds_a_ynnpack_fusion():
    a = torch.ones(64, 32, device="xla")
    b = torch.ones(32, 64, device="xla")
    optimized = xlanb.debug.hlo_text((a @ b).sum(), stage="optimized")
    assert "__ynn_fusion" not in optimized and "dot(" in optimized


@on_cpu
def test_the_options_of_every_cpu_compile(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert stages.compile_options("default") == {_YNN: ""}
    assert stages.compile_options("fast")[_YNN] == ""
    # a user who set the flag in XLA_FLAGS decides it (XLA reads it when its backend starts)
    monkeypatch.setenv("XLA_FLAGS", f"--xla_force_host_platform_device_count=1 --{_YNN}=+dot")
    assert _YNN not in stages.compile_options("default") and _YNN not in stages.compile_options("fast")


@on_cpu
def test_the_runtimes_own_programs_take_them(spy, monkeypatch):
    """debug_nans' exact check and probe are compiled through stages.run_jitted, with the options."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    a = torch.ones(8, 8, device="xla")
    with xlanb.config.override(debug_nans=True):
        with pytest.raises(FloatingPointError, match="aten.sqrt"):
            (a @ a - 9).sqrt().sum().item()
    assert len(spy) >= 3 and all(options == {_YNN: ""} for options in spy)    # the graph, the check, the probe
