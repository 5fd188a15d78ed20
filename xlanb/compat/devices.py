"""Devices and ordinals with torch_xla's names (torch_xla.device, xm.xla_device, xr.world_size...).

xlanb drives one xla device per process, `xla:0`, as torch_xla does under SPMD (and in each
process of `xmp.spawn`): several local devices are reached through a mesh (xs.Mesh), not as
`xla:1`, `xla:2`. A replica is a process: `world_size()` is the number of processes that
`xmp.spawn` started (1 otherwise) and `global_ordinal()` this process's index among them.
"""

from __future__ import annotations

import dataclasses
import re
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


# xr's and xm's other device queries ----------------------------------------------------

def local_device_count() -> int:
    return addressable_device_count()


def local_process_count() -> int:
    return 1


def host_index() -> int:
    return process_index()


def is_bf16_supported() -> bool:
    return True


def runtime_device_attributes(name: str) -> dict:
    return next(a for a in global_runtime_device_attributes() if a["name"] == name)


def set_device_type(pjrt_device: str) -> None:
    """Accepted when it names the platform xlanb runs on; xlanb's platform is chosen before import
    (XLANB_PLATFORM), so another one is an error that says so."""
    if pjrt_device.upper().split("_")[0] != device_type():
        raise RuntimeError(f"xr.set_device_type({pjrt_device!r}): xlanb runs on {device_type()}; choose the platform "
                           "with XLANB_PLATFORM=cpu|gpu|tpu before the process starts")


def device_kind(device=None) -> str:
    return _jax_devices()[0].device_kind


def memory_info(device=None) -> dict:
    """{'bytes_used', 'bytes_limit', 'peak_bytes_used'} from the PJRT device (zeros where it keeps none)."""
    stats = _rt.jax_device().memory_stats() or {}
    return {"bytes_used": stats.get("bytes_in_use", 0), "bytes_limit": stats.get("bytes_limit", 0),
            "peak_bytes_used": stats.get("peak_bytes_in_use", 0)}


def default_device() -> str:
    return str(device())


def replication_devices_count() -> int:
    return 0 if world_size() == 1 else world_size()


def set_replication(device, devices) -> None:
    """torch_xla's per-thread replication setup; a no-op here: `xmp.spawn` sets the replicas up."""
    del device, devices


def _tpus() -> list:
    return [d for d in _jax_devices() if d.platform == "tpu"]


def tpu_version() -> int:
    """The TPU generation (4 for 'TPU v4'), 0 when there is no TPU."""
    tpus = _tpus()
    match = re.search(r"v(\d+)", tpus[0].device_kind) if tpus else None
    return int(match.group(1)) if match else 0


def tpu_chips() -> int:
    return len(_tpus())
