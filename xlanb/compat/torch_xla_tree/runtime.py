"""`torch_xla.runtime` (xr) as xlanb.compat serves it."""

from xlanb.compat.devices import (addressable_device_count, addressable_runtime_device_count, device_type,
                                  global_runtime_device_attributes,
                                  global_device_count, global_ordinal, global_runtime_device_count, local_ordinal,
                                  process_count, process_index, world_size)
from xlanb.compat.sharding import is_spmd, use_spmd


def local_device_count() -> int:
    return addressable_device_count()


def local_process_count() -> int:
    return 1


def host_index() -> int:
    return process_index()


def initialize_cache(path: str, readonly: bool = False) -> None:
    """The persistent compilation cache in `path` (xlanb's cache_dir). `readonly` is accepted and
    has no effect: JAX's disk cache has no read-only mode."""
    from xlanb._config import set_config
    del readonly
    set_config(cache_dir=str(path), persistent_cache=True)


def get_num_cached_compilation_graph() -> int:
    from xlanb.state import runtime_state
    return len(runtime_state().cache)


def is_bf16_supported() -> bool:
    return True


def runtime_device_attributes(device: str) -> dict:
    return next(a for a in global_runtime_device_attributes() if a["name"] == device)


def set_device_type(pjrt_device: str) -> None:
    """Accepted when it names the platform xlanb runs on; xlanb's platform is chosen before import
    (XLANB_PLATFORM), so another one is an error that says so."""
    if pjrt_device.upper().split("_")[0] != device_type():
        raise RuntimeError(f"xr.set_device_type({pjrt_device!r}): xlanb runs on {device_type()}; choose the platform "
                           "with XLANB_PLATFORM=cpu|gpu|tpu before the process starts")
