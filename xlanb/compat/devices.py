"""Devices and ordinals with torch_xla's names (torch_xla.device, xm.xla_device, xr.world_size...).

xlanb drives one xla device per process, `xla:0`, as torch_xla does under SPMD (and in each
process of `xmp.spawn`): several local devices are reached through a mesh (xs.Mesh), not as
`xla:1`, `xla:2`. A replica is a process: `world_size()` is the number of processes that
`xmp.spawn` started (1 otherwise) and `global_ordinal()` this process's index among them.
"""

from __future__ import annotations

import dataclasses
import sys

import jax
import torch

from xlanb._config import config
from xlanb.state import runtime_state

_rt = runtime_state()


@dataclasses.dataclass
class Replica:
    """This process's place in an `xmp.spawn` replication (set by the spawned worker)."""
    world_size: int = 1
    ordinal: int = 0


replica = Replica()

# torch_xla's PJRT device names, from jax's platform names
_DEVICE_TYPES = {"cpu": "CPU", "gpu": "CUDA", "cuda": "CUDA", "rocm": "ROCM", "tpu": "TPU"}


def device(index: int | None = None) -> torch.device:
    """`torch_xla.device(index)`: `xla:0`, the one device of this process."""
    if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
        raise TypeError(f"torch_xla.device(index) takes an int or None, got {type(index).__name__} {index!r}")
    if index not in (None, 0):
        raise IndexError(f"Device index {index} out of range in ['xla:0']: xlanb has one xla device per process "
                         "(as torch_xla under SPMD); reach several devices with xs.Mesh and xs.mark_sharding, "
                         "or one device per process with xmp.spawn(fn, nprocs=N)")
    return _rt.device


def xla_device(n: int | None = None, devkind: str | None = None) -> torch.device:
    """`xm.xla_device(n)` (deprecated in torch_xla for torch_xla.device); `devkind` is ignored, as there."""
    del devkind
    return device(n)


def devices() -> list[torch.device]:
    return [_rt.device]


def device_count() -> int:
    """Devices this process addresses as `xla:N`: one (the mesh's devices are not `xla:N` devices)."""
    return len(devices())


def get_xla_supported_devices(max_devices: int | None = None) -> list[str]:
    return [str(d) for d in devices()][:max_devices] if max_devices else [str(d) for d in devices()]


def _jax_devices() -> list:
    return jax.devices(config().platform or None)


def device_type() -> str:
    """The PJRT device type torch_xla names: 'CPU', 'CUDA', 'TPU'."""
    platform = _jax_devices()[0].platform
    return _DEVICE_TYPES.get(platform, platform.upper())


def real_devices() -> list[str]:
    """This process's runtime devices, torch_xla style: ['CPU:0', ...]."""
    return [f"{device_type()}:{d.id}" for d in jax.local_devices(backend=config().platform or None)]


def xla_device_hw(dev=None) -> str:
    return device_type()


def global_runtime_device_count() -> int:
    """Every runtime device of every process (what an SPMD mesh may span)."""
    return len(_jax_devices())


def addressable_runtime_device_count() -> int:
    return len(jax.local_devices(backend=config().platform or None))


def global_device_count() -> int:
    return global_runtime_device_count()


def addressable_device_count() -> int:
    return 1


def world_size() -> int:
    return replica.world_size


def global_ordinal() -> int:
    return replica.ordinal


def local_ordinal() -> int:
    return replica.ordinal


def process_index() -> int:
    return jax.process_index()


def process_count() -> int:
    return jax.process_count()


def is_master_ordinal(local: bool = True) -> bool:
    return (local_ordinal() if local else global_ordinal()) == 0


def master_print(*args, fd=None, local: bool = False, flush: bool = False) -> None:
    """print on the master ordinal only (`fd` defaults to the sys.stdout of the call)."""
    if is_master_ordinal(local=local):
        print(*args, file=sys.stdout if fd is None else fd, flush=flush)


def is_xla_tensor(t: torch.Tensor) -> bool:
    return t.device.type == _rt.device.type


def global_runtime_device_attributes() -> list[dict]:
    """`xr.global_runtime_device_attributes()`, per device: {'name': 'CPU:0', 'core_on_chip': 0,
    ...} as far as jax's devices say."""
    return [{"name": f"{device_type()}:{d.id}", "core_on_chip": getattr(d, "core_on_chip", 0),
             "coords": list(getattr(d, "coords", []) or [])} for d in _jax_devices()]
