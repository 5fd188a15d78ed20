"""Faults injected at every stage (Runtime.inject_fault), in a notebook shell: an error, a
KeyboardInterrupt and the device's out-of-memory error inside capture, lowering, compilation,
execution, transfer and the report builder. After each the shell lives, the pending tensors keep
their values (the retry gives torch's result), counters and caches agree with what really ran,
the next cell works, and the error names the stage and what to do."""

import jax
import pytest
import torch

import xlanb
from xlanb.state import FAULT_KINDS, FAULT_STAGES

SETUP = """
import torch, xlanb
x_cpu = torch.arange(16.).reshape(4, 4) / 10
x = x_cpu.to("xla")
y = (x @ x + 1).relu()
"""
TRIGGER = {"capture": "z = y * 2", "report": "v = y.cpu()"}      # the others: reading y runs every stage
ERROR_TYPE = {"error": RuntimeError, "interrupt": KeyboardInterrupt, "oom": jax.errors.JaxRuntimeError}
WHERE = {"capture": "while recording aten.mul.Tensor", "lowering": "while lowering graph",
         "compilation": "while compiling graph",
         "execution": "while running graph", "transfer": "bytes from the device"}


def counter(name):
    return xlanb.metrics.counter_value(name) or 0


@pytest.mark.parametrize("kind", FAULT_KINDS)
@pytest.mark.parametrize("stage", FAULT_STAGES)
def test_a_fault_loses_nothing(cell, stage, kind):
    assert cell("%xla_mode lazy").error is None
    assert cell(SETUP).error is None
    expected = ((torch.arange(16.).reshape(4, 4) / 10) @ (torch.arange(16.).reshape(4, 4) / 10) + 1).relu()
    xlanb.runtime_state().inject_fault(stage, kind)

    hit = cell(TRIGGER.get(stage, "v = y.cpu()"))
    if stage == "report":                         # the cell ran; only its report is missing, and says so
        assert hit.error is None
        assert "xlanb: could not build the cell report" in hit.stderr
    else:
        assert isinstance(hit.error, ERROR_TYPE[kind])
        notes = "\n".join(getattr(hit.error, "__notes__", []))
        assert WHERE[stage] in notes and "nothing pending was lost" in notes, notes
        if kind == "oom":
            assert "ran out of memory" in notes and "smaller batch" in notes
    assert xlanb.runtime_state().faults == {}     # a fault fires once

    retry = cell("v = y.cpu()")
    assert retry.error is None
    assert torch.allclose(_ns()["v"], expected)
    # one graph was compiled and run in all: a fault before a compile or a launch finished left
    # nothing behind in the cache or the counters
    assert counter("UncachedCompile") == 1 and len(xlanb.runtime_state().cache) == 1
    assert xlanb.metrics.metric_data("ExecuteTime")[0] == 1
    following = cell("w = (y * 3).cpu()")
    assert following.error is None and torch.allclose(_ns()["w"], expected * 3)


def _ns():
    from IPython.core.interactiveshell import InteractiveShell
    return InteractiveShell.instance().user_ns


def test_unknown_stage_or_kind_is_refused():
    with pytest.raises(ValueError, match="unknown stage 'linking'; stages are capture, lowering"):
        xlanb.runtime_state().inject_fault("linking", "error")
    with pytest.raises(ValueError, match="unknown fault kind 'segfault'; kinds are error, interrupt, oom"):
        xlanb.runtime_state().inject_fault("lowering", "segfault")


def test_reset_disarms_an_armed_fault():
    xlanb.runtime_state().inject_fault("capture", "error")
    xlanb.runtime_state().inject_fault("execution", "error")
    xlanb.reset()
    y = torch.ones(3, device="xla") * 2        # neither fault fires
    assert y.cpu().tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("line, words", [
    ("%%xla_compile --max-graphs 0\nz = y + 1", "--max-graphs must be >= 1, got 0"),
    ("%%xla_compile --max-graphs x\nz = y + 1", "argument --max-graphs: invalid int value: 'x'"),
    ("%%xla_compile --bogus\nz = y + 1", "unrecognized arguments: --bogus"),
    ("%xla_mode fast", "%xla_mode takes eager or lazy, got 'fast'"),
    ("%xla_report loud", "%xla_report takes one of on, off, compact, full, got 'loud'"),
])
def test_bad_magic_arguments_are_usage_errors_and_lose_nothing(cell, line, words):
    from IPython.core.error import UsageError

    assert cell("%xla_mode lazy").error is None
    assert cell(SETUP + "z = None\n").error is None
    bad = cell(line)
    assert isinstance(bad.error, UsageError) and words in str(bad.error)
    assert _ns()["z"] is None                            # the body did not run
    assert xlanb.is_eager_mode() is False and xlanb.runtime_state().compile_scope is None
    after = cell("v = y.cpu()")
    assert after.error is None and _ns()["v"][0, 0].item() == pytest.approx(1.56)
