"""Factories (tensors made with no tensor argument) are refused where CPU refuses them, with CPU's
exception type and text: the meta kernels skip the checks of a value against the dtype
(`full((2,), 300, dtype=int8)`, `randperm(3000, dtype=float16)`), and where a meta kernel refuses,
CPU's words are given. Each case runs on CPU first: the reference is the installed torch."""

import warnings

import pytest
import torch

import xlanb
from helpers import assert_close

CASES = {
    "randperm of more than float16 counts exactly": lambda d: torch.randperm(3000, dtype=torch.float16, device=d),
    "randperm into int8": lambda d: torch.randperm(300, dtype=torch.int8, device=d),
    "randperm out= int8": lambda d: torch.randperm(300, out=torch.empty(300, dtype=torch.int8, device=d)),
    "full of a value past int8": lambda d: torch.full((2,), 300, dtype=torch.int8, device=d),
    "scalar_tensor past int8": lambda d: torch.scalar_tensor(300, dtype=torch.int8, device=d),
    "linspace past int8": lambda d: torch.linspace(0, 300, 5, dtype=torch.int8, device=d),
    "arange to nan": lambda d: torch.arange(0, float("nan"), device=d),
    "arange with step 0": lambda d: torch.arange(0, 3, 0, device=d),
    "eye of -1": lambda d: torch.eye(-1, device=d),
    "randint past int8": lambda d: torch.randint(0, 300, (3,), dtype=torch.int8, device=d),
    "full of a bool": lambda d: torch.full((2,), 2, dtype=torch.bool, device=d),
    "arange of int8 to 300": lambda d: torch.arange(0, 300, dtype=torch.int8, device=d),
    "tril_indices": lambda d: torch.tril_indices(3, 3, device=d),
}


def _outcome(device, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = case(device)
            return ("value", value.cpu() if device == "xla" else value)
        except Exception as e:          # noqa: BLE001 - the outcome compared is the exception itself
            return ("error", type(e), str(e))


@pytest.mark.parametrize("name", list(CASES))
def test_xla_refuses_what_cpu_refuses(name):
    cpu = _outcome("cpu", CASES[name])
    xla = _outcome("xla", CASES[name])
    if cpu[0] == "error":
        assert xla == cpu
    else:
        assert xla[0] == "value" and xla[1].shape == cpu[1].shape and xla[1].dtype == cpu[1].dtype
        if name != "arange of int8 to 300":       # its wrap-around past 127 is C++'s to define
            assert_close(xla[1], cpu[1], rtol=0, atol=0)


def test_a_call_is_asked_once_and_a_large_one_not_made_on_cpu(monkeypatch):
    from xlanb.capture import factories
    asked = []
    verdict = factories._cpu_verdict
    monkeypatch.setattr(factories, "_cpu_verdict", lambda *a: asked.append(a[:2]) or verdict(*a))
    monkeypatch.setattr(factories, "_verdicts", {})
    for _ in range(3):
        torch.full((3,), 7, dtype=torch.int8, device="xla")
    assert len(asked) == 3 and len(factories._verdicts) == 1          # asked each call, run once
    torch.zeros(100, 100, device="xla")                                 # 10,000 elements: not made on CPU,
    assert asked[3] == (torch.ops.aten.zeros.default, ((2, 2),))        # asked at 2 per dim
    xlanb.sync()
