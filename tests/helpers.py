"""What tests share: counters they read (metric sample counts; 0 when the metric does not exist
yet), a small compiled step's cell report, and how closely values must match the CPU's on the
platform the tests run on."""

import sys

import jax
import torch

import xlanb
from xlanb.lower import float64
from xlanb.report import CellContext, build_report
from xlanb.runtime import executor

# A graph's lowering computes nothing: an XLA compile while executor._lower runs is a rule that
# evaluated JAX eagerly on concrete values, which compiles an executable per op and shape (view_scatter's
# index arrays did: 49 compiles, ~200 ms, for a graph of four writes through views). conftest.py checks
# it after every test.
_LOWERING = executor._lower.__code__
compiled_while_lowering: list = []      # the compile times seen inside a lowering


def _on_compile(event: str, duration: float, **kwargs) -> None:
    if event != "/jax/core/compile/backend_compile_duration":
        return
    f = sys._getframe(1)
    while f is not None:
        if f.f_code is _LOWERING:
            compiled_while_lowering.append(duration)
            return
        f = f.f_back


jax.monitoring.register_event_duration_secs_listener(_on_compile)


def samples(name: str) -> int:
    data = xlanb.metrics.metric_data(name)
    return 0 if data is None else data[0]


def compiles() -> int:
    return samples("CompileTime")


def executes() -> int:
    return samples("ExecuteTime")


def eager_compiles() -> int:
    return samples("EagerOpCompileTime")


def eager_executes() -> int:
    return samples("EagerOpExecuteTime")


def counter(name: str) -> int:
    return xlanb.metrics.counter_value(name) or 0


def step_report(execution_count: int):
    """The CellReport of one named compiled step (matmul, relu, sum) from an empty cache."""
    xlanb.runtime_state().cache.clear()
    w = torch.ones(8, 8, device="xla")
    xlanb.sync()
    mark = xlanb.runtime_state().log.mark()
    with xlanb.hooks.recording_texts(), xlanb.compile(name="step"):
        y = (w @ w).relu().sum()
    y.item()
    return build_report(xlanb.runtime_state().log.since(mark), CellContext(execution_count=execution_count))


# -- values against the CPU's, on the platform the tests run on ----------------------------------

PLATFORM = xlanb.runtime_state().jax_device().platform

# XLA:TPU's arithmetic is not the CPU's: its float32 exp, log, tanh and division are approximations
# (exp 5.5e-6, tanh 8.1e-5, log 2.6e-4 relative on a TPU v5e, where the CPU's are within an ulp) and
# its float64 is emulated as float32 pairs (about 1e-14 relative). A test that compares a rule's
# values with the CPU's allows that much there; a bit-for-bit test skips there with that reason.
_TPU_TOLERANCE = {torch.float32: (1e-3, 1e-4), torch.complex64: (1e-3, 1e-4),
                  torch.float64: (1e-11, 1e-12), torch.complex128: (1e-11, 1e-12)}


def tolerance(dtype: torch.dtype, rtol: float | None = None, atol: float | None = None) -> dict:
    """assert_close's rtol/atol for values of `dtype`: the given ones (torch's defaults for None),
    widened to the platform's arithmetic where it is not the CPU's."""
    wide = _TPU_TOLERANCE.get(dtype) if PLATFORM == "tpu" else None
    if wide is None:
        return {} if rtol is None and atol is None else {"rtol": rtol, "atol": atol}
    if rtol is None:
        rtol, atol = torch.testing._comparison.default_tolerances(dtype)
    return {"rtol": max(rtol, wide[0]), "atol": max(atol, wide[1])}


def assert_close(actual, expected, rtol: float | None = None, atol: float | None = None, **kwargs):
    """torch.testing.assert_close, within the platform's arithmetic (`tolerance`)."""
    dtype = expected.dtype if isinstance(expected, torch.Tensor) else torch.float32
    torch.testing.assert_close(actual, expected, **tolerance(dtype, rtol, atol), **kwargs)


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch.equal where the platform computes as the CPU does; elsewhere floating values within the
    platform's arithmetic (`tolerance`), NaNs in the same places."""
    if torch.equal(a, b):
        return True
    if PLATFORM != "tpu" or not (a.is_floating_point() or a.is_complex()):
        return False
    try:
        assert_close(a, b, equal_nan=True)
    except AssertionError:
        return False
    return True


# XLA:TPU's float64 is two float32s with float32's exponent (capture/checks.py says so at the op): a
# finite value past float32's range is inf there, a tiny one 0, and a formula that passes such a value
# on its way gives NaN (mish(inf), tanh-GELU's backward at 25, lerp towards float64's largest value).
FLOAT64_EMULATED = PLATFORM in float64.EMULATED


def inside_float64_emulation(x: torch.Tensor, bound: float | None = None) -> torch.Tensor:
    """x where float64 is IEEE's. Where it is emulated, x with 0 in place of what the emulation cannot
    hold: magnitudes past float32's largest value or under its smallest normal one, and, given a
    bound, every magnitude past it, infinities too."""
    if not FLOAT64_EMULATED:
        return x
    f32 = torch.finfo(torch.float32)
    magnitude = x.abs()
    outside = (magnitude > (f32.max if bound is None else bound)) & (magnitude.isfinite() | (bound is not None))
    return x.masked_fill(outside | ((magnitude > 0) & (magnitude < f32.tiny)), 0)


def without_platform_notes(messages: list) -> list:
    """Warning texts less xlanb's own note that float64 is emulated on a TPU (capture/checks.py)."""
    return [m for m in messages if "on a TPU is emulated" not in str(m)]
