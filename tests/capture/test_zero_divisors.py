"""Integer division by zero raises CPU's error (type and message), where XLA would give -1 or the
dividend: at the op when the divisor is a number or host-readable, at the next value read when the
graph computes it (capture/bounds.py, the index checks' mechanism)."""

import pytest
import torch

import xlanb

OPS = {
    "floordiv": lambda a, d: a // d,
    "div floor": lambda a, d: torch.div(a, d, rounding_mode="floor"),
    "div trunc": lambda a, d: torch.div(a, d, rounding_mode="trunc"),
    "remainder": lambda a, d: a % d,
    "fmod": lambda a, d: torch.fmod(a, d),
    "floordiv_": lambda a, d: a.clone().floor_divide_(d),
    "remainder out=": lambda a, d: torch.remainder(a, d, out=torch.empty_like(a)),
    "rfloordiv": lambda a, d: 7 // d,
    "int32": lambda a, d: a.int() // d.int(),
    "uint8": lambda a, d: a.to(torch.uint8) % d.to(torch.uint8),
    "bool divisor": lambda a, d: torch.remainder(a, d.bool()),
    "true div": lambda a, d: a / d,                                       # float: inf, no error
    "float floordiv": lambda a, d: a.double() // d,
}


def _outcome(op, device, divisor, pending):
    a = torch.tensor([5, -7, 9], device=device)
    d = torch.tensor(divisor, device=device)
    if pending:
        d = d * 1                       # computed in the pending graph: its values are not on the host
    try:
        return "ok", OPS[op](a, d).cpu().tolist()
    except RuntimeError as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("divisor", [[2, 0, 3], [2, -3, 4]], ids=["zero", "nonzero"])
def test_integer_division_by_zero_raises_cpu_error(op, divisor):
    cpu = _outcome(op, "cpu", divisor, False)
    assert _outcome(op, "xla", divisor, False) == cpu           # uploaded divisor: at the op
    assert _outcome(op, "xla", divisor, True) == cpu            # pending divisor: at the value read


@pytest.mark.parametrize("op", [lambda a: a // 0, lambda a: a % 0, lambda a: torch.fmod(a, 0),
                                lambda a: torch.div(a, 0, rounding_mode="trunc")])
def test_a_zero_number_divisor_raises_at_the_op(op):
    with pytest.raises(RuntimeError) as cpu:
        op(torch.tensor([1, 2]))
    a = torch.tensor([1, 2], device="xla") + 1                  # pending: nothing is read
    with pytest.raises(RuntimeError) as xla:
        op(a)
    assert str(xla.value) == str(cpu.value)
    assert (a * 2).cpu().tolist() == [4, 6]                     # nothing lost


def test_a_pending_zero_divisor_raises_at_the_read_with_the_ops_line_and_loses_nothing():
    a = torch.tensor([6, 8], device="xla")
    keep = a * 3
    d = torch.tensor([2, 1], device="xla") - 1
    q = a // d
    with pytest.raises(RuntimeError) as info:
        q.sum().item()
    note = info.value.__notes__[0]
    assert note.startswith(f"xlanb: raised by the op at {__file__}:")
    assert "whose divisor was computed on the device" in note
    assert keep.cpu().tolist() == [18, 24]
    assert xlanb.runtime_state().device_checks == []


def test_eager_mode_raises_at_the_op():
    with xlanb.eager_mode_context(True):
        a = torch.tensor([6, 8], device="xla")
        d = torch.tensor([2, 1], device="xla") - 1
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            a % d
