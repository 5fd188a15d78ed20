"""The `xla` torch device: PrivateUse1 renamed (torch 2.9: torch's own XLA type), with a device guard."""

from __future__ import annotations

import contextlib
import sys

import torch
from xlanb.capture.torch_versions import backend_key, name_backend, register_device_guard, register_seeding

_registered: list[str] = []


def refuse_other_index(device) -> None:
    """xlanb drives one device: `device` (an op's device argument: a torch.device, a string, an index)
    naming xlanb's device type with an index other than 0 is refused at the call, as torch refuses a
    device that does not exist, rather than computed on xla:0."""
    if not _registered or isinstance(device, int):
        return
    d = torch.device(device)
    if d.type == _registered[0] and d.index not in (None, 0):
        raise RuntimeError(f"xlanb drives one device; {d} does not exist (use '{_registered[0]}:0')")


class DeviceModule:
    """`torch.<name>`: what torch asks of a PrivateUse1 device module."""

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    @staticmethod
    def manual_seed(seed: int) -> None:
        from xlanb.capture.rng import manual_seed   # rng imports the capture stack
        manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def get_rng_state(device=None) -> torch.Tensor:
        from xlanb.capture.rng import get_state
        return get_state()

    @staticmethod
    def set_rng_state(new_state, device=None) -> None:
        from xlanb.capture.rng import set_state
        set_state(new_state)

    @staticmethod
    def get_rng_state_all() -> list:
        return [DeviceModule.get_rng_state()]

    @staticmethod
    def set_rng_state_all(new_states) -> None:
        DeviceModule.set_rng_state(new_states[0])

    @staticmethod
    def synchronize(device=None) -> None:
        from xlanb.capture.realize import wait
        wait()

    @staticmethod
    @contextlib.contextmanager
    def device(device):
        """`with torch.xla.device(d)`, as torch.cuda.device (storage.to(device="xla") enters it): one device."""
        yield

    @staticmethod
    def get_amp_supported_dtype():
        return [torch.float16, torch.bfloat16]


def register_device(name: str) -> torch.device:
    """Makes `name` xlanb's device (PrivateUse1 renamed; torch 2.9: see torch_versions); fails clearly
    if torch_xla or another backend has it."""
    if _registered:
        if _registered[0] != name:
            raise RuntimeError(f"xlanb already registered its device as '{_registered[0]}'")
        return torch.device(name, 0)
    if "torch_xla" in sys.modules:
        raise ImportError(
            "xlanb cannot be imported next to torch_xla: both want the 'xla' device. "
            "Use one of them per process (restart the kernel), or set XLANB_DEVICE_NAME "
            "to another name before importing xlanb.")
    if backend_key(name) == "PrivateUse1":
        current = torch._C._get_privateuse1_backend_name()
        if current != "privateuseone":
            raise ImportError(
                f"xlanb needs torch's PrivateUse1 backend, but it is already registered as "
                f"'{current}' by another library. Import xlanb in a fresh process before that library.")
    if name == "xla" and hasattr(torch, "xla"):
        raise ImportError("torch.xla already exists (torch_xla?); set XLANB_DEVICE_NAME to another name")
    name_backend(name)
    module = DeviceModule()
    torch._register_device_module(name, module)
    register_seeding(name, module)
    register_device_guard(name)
    from xlanb.capture.storages import register_serialization     # storages imports the capture stack
    register_serialization(name)
    _registered.append(name)
    return torch.device(name, 0)
