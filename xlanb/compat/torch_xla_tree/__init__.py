"""`torch_xla` as xlanb.compat serves it (installed into sys.modules by `xlanb.compat.install()`).

The names torch_xla's scripts use at the top level: device, devices, sync, compile, step, launch,
manual_seed, and the submodules (core.xla_model, runtime, debug.metrics, distributed.*, utils.utils,
experimental, _XLAC). The implementations live in xlanb.compat; this tree only names them.
"""

from xlanb.compat.devices import device, device_count, devices, real_devices
from xlanb.compat.spawn import launch
from xlanb.compat.steps import compile, manual_seed, step, sync

__version__ = "2.9.0+xlanb"     # the torch_xla API level the compat layer follows
_found_libtpu = False

from xlanb.compat.torch_xla_tree import _XLAC, core, debug, distributed, experimental, runtime, utils  # noqa: E402
from xlanb.compat.torch_xla_tree.core import xla_model  # noqa: E402,F401

__all__ = ["device", "devices", "device_count", "real_devices", "sync", "compile", "step", "launch", "manual_seed",
           "runtime", "core", "debug", "distributed", "experimental", "utils", "_XLAC"]
