"""Ops that take a device (`_to_copy`, `new_zeros`, `empty_like`, `linspace`, ...): the device they name
is checked before their handler runs (capture/handlers.py's choose_handler wraps those handlers only),
so that no op computes on xla:0 what was asked of another device."""

from __future__ import annotations

import torch

from xlanb.capture.device import refuse_other_index
from xlanb.capture.realize import to_cpu
from xlanb.capture.tensor import LazyTensor, tensor_meta
from xlanb.state import runtime_state

_rt = runtime_state()


def _reads_of(base: str) -> str | None:
    """What an op that takes a device reads of its xla tensors, when torch can make its result on
    another device type from that: their "layout" (`*_like`, `new_*`: the first argument's shape,
    dtype and strides) or their "values" (linspace, logspace with tensor ends); None for the ops
    with handlers of their own for other device types (`_to_copy`, `pin_memory`)."""
    if base.endswith("_like") or base.startswith("new_"):
        return "layout"
    return "values" if base in ("linspace", "logspace") else None


def device_argument(func, handler, position: int):
    """`handler` for an op that takes a device: a device of xlanb's type other than index 0 is refused
    (capture/device.py), as factories refuse it, and a result asked for on another device type is made
    there (`_on_other_device`); both used to compute on xla:0 (`x.to("xla:1")`,
    `torch.zeros_like(x, device="cpu")` gave xla:0 tensors)."""
    reads = _reads_of(func._schema.name.split("::")[-1])

    def checked(func, args, kwargs):
        device = kwargs.get("device") if kwargs else None
        if device is None and len(args) > position:       # given in its place (`_pin_memory(x, device)`)
            device = args[position]
        if device is not None:
            refuse_other_index(device)
            if reads is not None and torch.device(device).type != _rt.device.type:
                return _on_other_device(func, args, kwargs, reads)
        return handler(func, args, kwargs)
    return checked


def _on_other_device(func, args, kwargs, reads: str):
    """Runs `func` in torch for a result on another device type: the xla tensor whose layout it copies
    becomes an empty tensor of that layout on the meta device (nothing is computed), any other xla
    tensor its value on the CPU."""
    def host(x, first: bool):
        if type(x) is not LazyTensor:
            return x
        return tensor_meta(x).empty("meta") if first and reads == "layout" else to_cpu(x)
    return func(*[host(a, i == 0) for i, a in enumerate(args)], **{k: host(v, False) for k, v in kwargs.items()})
