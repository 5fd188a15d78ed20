"""xlanb: ordinary PyTorch on XLA, lazily, in a notebook, with a view of what the runtime does.

    import torch, xlanb
    x = torch.randn(4, 4, device="xla")
    y = (x @ x).relu().sum()
    xlanb.sync()            # compile (once) and launch the pending graph
    print(y.item())
"""

from __future__ import annotations


import jax as _jax
import torch as _torch

from xlanb import _requirements

_requirements.check(_torch.__version__, _jax.__version__)

from xlanb import config, debug, hooks, metrics
from xlanb.capture import install as _install_capture
from xlanb.capture.compare import compare
from xlanb.capture.modes import eager_mode, eager_mode_context, is_eager_mode
from xlanb.capture.realize import sync, wait
from xlanb.capture.rng import manual_seed
from xlanb.generation import generate
from xlanb.loader import DeviceLoader
from xlanb.replay import compile
from xlanb.state import Runtime, runtime_state

__version__ = "0.1.0"
__all__ = [
    "device", "sync", "wait", "compile", "compare", "eager_mode", "is_eager_mode", "eager_mode_context",
    "manual_seed", "metrics", "debug", "hooks", "config", "runtime_state", "reset", "Runtime", "__version__",
    "DeviceLoader", "generate",
]


def _install() -> _torch.device:
    """The one install step: the device, op dispatch, factories and the module patch; the
    metrics counter and the debug printer as event listeners. Idempotent."""
    rt = runtime_state()
    if rt.device is None:
        device = _install_capture()
        metrics.install()
        debug.install()
        return device
    return rt.device


_device = _install()


# torch.compile(..., backend="xlanb") finds the backend through the package's torch_dynamo_backends
# entry point (xlanb/dynamo/entry.py): importing xlanb imports no torch._dynamo (about a second) and
# leaves torch.compile as torch defined it.


def device(index: int = 0) -> _torch.device:
    """The xla device (`xla:0` unless XLANB_DEVICE_NAME says otherwise)."""
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"xlanb.device(index) takes an int, got {type(index).__name__} {index!r}")
    if index != 0:
        raise ValueError(f"xlanb drives one device; xla:{index} does not exist")
    return _device


def reset() -> None:
    """A fresh runtime without restarting the process: nothing pending, compiled-graph cache,
    event log and counters empty, lazy mode, graph limits forgotten (`runtime_state().reset()`)."""
    runtime_state().reset()


def load_ipython_extension(ip):   # `%load_ext xlanb`
    from xlanb.notebook import load_ipython_extension as load
    load(ip)


def unload_ipython_extension(ip):
    from xlanb.notebook import unload_ipython_extension as unload
    unload(ip)
