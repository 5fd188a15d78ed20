"""XLA's report of an error torch raised in a CPU fallback op becomes torch's error wherever the
device reports it: at the launch (the CPU) or at a later read or wait (an asynchronous device: on a
TPU v5e the segment_reduce case below came as 'INTERNAL: Execute event error: CpuCallback error' at
the read, and at the test's teardown)."""

import jax
import pytest
import torch

import xlanb
from xlanb.runtime.outside import jax_entry

_MESSAGE = "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) when !unsafe."


def _failing_segment_reduce():
    data = torch.arange(6.0, device="xla")
    lengths = torch.tensor([0, 2, 3, 0], device="xla") * 1
    return torch._segment_reduce(data, "sum", lengths=lengths, axis=0, unsafe=False)


def test_a_report_at_a_later_read_is_torchs_error():
    with pytest.raises(RuntimeError):
        _failing_segment_reduce().cpu()          # records torch's error (the CPU reports it at the launch)

    @jax_entry
    def read():                                  # the same error as an asynchronous device reports it
        raise jax.errors.JaxRuntimeError("INTERNAL: Execute event error: CpuCallback error: Traceback (most "
                                         f"recent call last):\n  File \"fallback.py\", line 1\nRuntimeError: {_MESSAGE}")
    with pytest.raises(RuntimeError) as caught:
        read()
    assert type(caught.value) is RuntimeError and str(caught.value) == _MESSAGE
    assert any("aten.segment_reduce.default, which has no lowering and ran on the CPU inside its graph" in n
               for n in caught.value.__notes__)


def test_other_device_errors_pass_unchanged():
    with pytest.raises(RuntimeError):
        _failing_segment_reduce().cpu()

    @jax_entry
    def read():
        raise jax.errors.JaxRuntimeError("INTERNAL: CpuCallback error: ValueError: something else")
    with pytest.raises(jax.errors.JaxRuntimeError, match="something else"):
        read()


def test_reset_forgets_the_errors():
    with pytest.raises(RuntimeError):
        _failing_segment_reduce().cpu()
    assert xlanb.runtime_state().fallback_errors
    xlanb.reset()
    assert not xlanb.runtime_state().fallback_errors


def test_a_program_with_a_fallback_op_is_waited_for_at_its_launch(monkeypatch):
    """So that torch's error comes at the launch on any device, with the pending work kept (on a TPU
    v5e the failed program's outputs were bound first: the segment_reduce test's inputs, computed in
    the same graph, then raised at their own reads)."""
    waited = []
    real = jax.block_until_ready
    monkeypatch.setattr(jax, "block_until_ready", lambda x: waited.append(x) or real(x))
    data = torch.arange(6.0, device="xla") * 1
    r = torch._segment_reduce(data, "sum", lengths=torch.tensor([2, 4], device="xla") * 1, axis=0, unsafe=False)
    assert r.cpu().tolist() == [1.0, 14.0] and len(waited) == 1
    assert (data * 2).cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0] and len(waited) == 1
