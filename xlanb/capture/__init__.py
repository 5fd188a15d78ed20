"""Capture: the xla device, the LazyTensor subclass, and op dispatch into the IR."""

from __future__ import annotations

from xlanb._config import config
from xlanb.capture import dispatch, factories, tensor
from xlanb.capture.modules import keep_ties_on_move
from xlanb.capture.device import register_device
from xlanb.ir.node import LIFT_SPECIAL

_done: list = []


def register():
    """Registers the device, the dispatch and the factories (once per process)."""
    if not _done:
        device = register_device(config().device_name)
        LIFT_SPECIAL[0] = not config().special_scalars
        tensor.set_device(device)
        dispatch.install()
        factories.register_factories()
        keep_ties_on_move()
        _done.append(device)
    return _done[0]
