"""Capture: the xla device, the LazyTensor subclass, and op dispatch into the IR."""

from __future__ import annotations

import atexit
import gc

from xlanb._config import config, fix_field
from xlanb.capture import dispatch, factories, nans, nodtensor, nodynamo, nosympy, optimizers
from xlanb.capture.device import register_device
from xlanb.capture.modules import keep_ties_on_move
from xlanb.capture.tensor import LazyTensor
from xlanb.state import runtime_state


def install():
    """Registers the device, the dispatch, the factories and the module patch, lets torch's
    optimizers take their foreach path on xla tensors, and keeps torch._dynamo,
    torch.distributed.tensor and sympy unimported until torch.compile, DTensor or symbolic shapes
    need them (once per process); returns the device."""
    rt = runtime_state()
    if rt.device is None:
        rt.device = register_device(config().device_name)
        fix_field("device_name", "torch's PrivateUse1 backend can be renamed once per process")
        dispatch.install()
        nodtensor.install()
        factories.register_factories()
        keep_ties_on_move()
        nodynamo.install()
        nosympy.install()
        nans.install()
        optimizers.take_foreach_path(LazyTensor)
        atexit.register(gc.collect)
    return rt.device


# atexit's gc.collect: cyclic garbage freed while the interpreter still runs. Left to the collection
# inside finalization, a checkpointed backward's leftovers made torch's autograd device thread call
# into Python as it exited, and the process aborted at exit ("terminate called without an active
# exception": 2 runs in 20 of a script ending with pending work after such a backward; 0 in 20 now).
