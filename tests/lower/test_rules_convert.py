"""A float (or complex) converted to a narrower integer type as torch's CPU kernels convert: the
value truncates to a 32-bit integer and wraps (XLA's own convert saturates: 200.0 -> int8 127, CPU
-56). Compared with the installed torch's CPU kernels for values inside int32's range, where C++
defines the result; outside it (and NaN, inf) the result is undefined (docs/torch_xla.md)."""

import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702

import warnings

import pytest
import torch

from rulecheck import check

VALUES = [-1.5, 0.0, 0.7, 127.9, 128.0, 200.0, 255.9, 256.0, 300.0, -3.0, -129.0, -200.0, 1000.5, -40000.0,
          40000.0, 65000.0, 1.0e5, -1.0e5, 2.0e9, -2.0e9]
SOURCES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.complex64]
TARGETS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool]


def values(dtype):
    x = torch.tensor(VALUES * 5, dtype=torch.float64)       # long enough for CPU's vectorised loop too
    if dtype == torch.float16:
        x = x[x.abs() < 65504]                                # float16's range
    if dtype.is_complex:
        return torch.complex(x, -x).to(dtype)
    return x.to(dtype)


@pytest.mark.parametrize("target", TARGETS, ids=str)
@pytest.mark.parametrize("source", SOURCES, ids=str)
def test_float_to_integer_wraps_as_cpu(source, target):
    x = values(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # complex to real discards the imaginary part
        check("aten._to_copy.default", x, dtype=target)
        check("aten.copy.default", torch.zeros(x.shape, dtype=target), x)


def test_on_the_device_lazy_and_eager():
    import xlanb
    x = torch.tensor([-1.5, 200.0, 300.0, -200.0, 40000.0])
    for eager in (False, True):
        with xlanb.eager_mode_context(eager):
            for target in (torch.int8, torch.uint8, torch.int16):
                assert x.to("xla").to(target).cpu().tolist() == x.to(target).tolist()
                written = torch.zeros(5, dtype=target, device="xla")
                written.copy_(x.to("xla"))
                assert written.cpu().tolist() == x.to(target).tolist()
