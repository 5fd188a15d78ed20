"""Writes CPU refuses are refused at the op, with CPU's exception type and text, and the written tensor
keeps its value: a write whose memory partly overlaps an input (capture/overlap.py), an index write
whose source overlaps the tensor written, an in-place op whose operands broadcast beyond the tensor
written (a ref's meta kernel resizes it: capture/record.py), a copy_ of a wider source. Where CPU
computes, xla gives CPU's values. Each case runs on CPU first: the reference is the installed torch."""

import warnings

import pytest
import torch

import xlanb
from helpers import assert_close


def _base(device):
    return torch.arange(6.0, device=device)


def _index(device):
    return torch.tensor([0, 1], device=device)


# name -> f(device) returning the tensor whose value is compared (the one written)
CASES = {
    "add_ partly overlapping": lambda d: (lambda x: (x[1:].add_(x[:-1]), x)[1])(_base(d)),
    "add_ of itself": lambda d: (lambda x: (x.add_(x), x)[1])(_base(d)),
    "mul out= partly overlapping": lambda d: (lambda x: (torch.mul(x[:-1], 2, out=x[1:]), x)[1])(_base(d)),
    "addcmul_ partly overlapping": lambda d: (lambda x: (x[1:].addcmul_(x[:-1], x[:-1]), x)[1])(_base(d)),
    "clamp_ min a view": lambda d: (lambda x: (x[1:].clamp_(min=x[:-1]), x)[1])(_base(d)),
    "where out= partly overlapping": lambda d: (lambda x: (torch.where(x[:-1] > 2, x[:-1], x[1:], out=x[1:]), x)[1])(
        _base(d)),
    "cat out= over its inputs": lambda d: (lambda x: (torch.cat([x[:2], x[2:4]], out=x[1:5]), x)[1])(_base(d)),
    "cat out= apart from its inputs": lambda d: (lambda x: (torch.cat([x[:2], x[2:3]], out=x[3:6]), x)[1])(_base(d)),
    "index_add_ from a view of itself": lambda d: (lambda x: (x.index_add_(0, _index(d), x[:2]), x)[1])(_base(d)),
    "index_copy_ from a view of itself": lambda d: (lambda x: (x.index_copy_(0, _index(d), x[2:4]), x)[1])(_base(d)),
    "scatter_ from a view of itself": lambda d: (lambda x: (x.scatter_(0, _index(d).flip(0), x[:2]), x)[1])(_base(d)),
    "copy_ partly overlapping": lambda d: (lambda x: (x[1:].copy_(x[:-1]), x)[1])(_base(d)),
    "copy_ of itself": lambda d: (lambda x: (x.copy_(x), x)[1])(_base(d)),
    "masked_fill_ with a mask of itself": lambda d: (lambda x: (x.masked_fill_(x > 2, 0.0), x)[1])(_base(d)),
    "atan2_ broadcast beyond self": lambda d: torch.zeros(3, device=d).atan2_(torch.ones(2, 3, device=d)),
    "fmod_ broadcast beyond self": lambda d: torch.zeros(3, device=d).fmod_(torch.ones(2, 3, device=d)),
    "pow_ broadcast beyond self": lambda d: torch.zeros(3, device=d).pow_(torch.ones(2, 3, device=d)),
    "clamp_ broadcast beyond self": lambda d: torch.zeros(3, device=d).clamp_(torch.ones(2, 3, device=d)),
    "hypot_ broadcast beyond self": lambda d: torch.zeros(3, device=d).hypot_(torch.ones(2, 3, device=d)),
    "copy_ of a wider source": lambda d: torch.zeros(3, device=d).copy_(torch.ones(2, 3, device=d)),
    "copy_ of a broadcastable source": lambda d: torch.zeros(2, 3, device=d).copy_(torch.arange(3.0, device=d)),
    "masked_scatter_ with a wider mask": lambda d: torch.zeros(3, device=d).masked_scatter_(
        torch.ones(2, 3, dtype=torch.bool, device=d), torch.ones(6, device=d)),
    "atan2_ broadcast within self": lambda d: torch.ones(2, 3, device=d).atan2_(torch.ones(3, device=d)),
}


def _outcome(device, case):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = case(device)
            if device == "xla":
                xlanb.sync(wait=True)
            return ("value", value.cpu()), [str(w.message) for w in caught]
        except Exception as e:          # noqa: BLE001 - the outcome compared is the exception itself
            return ("error", type(e), str(e)), [str(w.message) for w in caught]


@pytest.mark.parametrize("name", list(CASES))
def test_xla_does_what_cpu_does(name):
    cpu, cpu_warnings = _outcome("cpu", CASES[name])
    xla, xla_warnings = _outcome("xla", CASES[name])
    if cpu[0] == "value":
        assert xla[0] == "value", xla
        assert_close(xla[1], cpu[1])       # atan2's XLA kernel is an ulp from the CPU's on some values
    else:
        assert xla == cpu
    assert len(xla_warnings) == len(cpu_warnings), (xla_warnings, cpu_warnings)


def test_a_refused_write_leaves_the_tensor_as_it_was():
    x = _base("xla")
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        x[1:].add_(x[:-1])
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.atan2_(torch.ones(2, 6, device="xla"))
    assert torch.equal(x.cpu(), _base("cpu"))


def test_the_overlap_verdict_is_asked_once_per_layout(monkeypatch):
    from xlanb.capture import overlap
    runs = []
    run = overlap._run_on_cpu
    monkeypatch.setattr(overlap, "_run_on_cpu", lambda *a: runs.append(1) or run(*a))
    monkeypatch.setattr(overlap, "_verdicts", {})
    x = _base("xla")
    for _ in range(3):
        x.add_(x)                               # full overlap: CPU computes
    y = torch.arange(4.0, device="xla")
    y.add_(y)                                   # another shape: asked again
    x.add_(torch.ones(6, device="xla"))          # no alias: not asked
    assert len(runs) == 2
    assert torch.equal(x.cpu(), _base("cpu") * 8 + 1) and torch.equal(y.cpu(), torch.arange(4.0) * 2)
