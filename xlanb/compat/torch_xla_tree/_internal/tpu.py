"""`torch_xla._internal.tpu`: the TPU generation and chip count, from jax's devices (0 off TPU)."""

import re

from xlanb.compat.devices import _jax_devices


def _tpus() -> list:
    return [d for d in _jax_devices() if d.platform == "tpu"]


def version() -> int:
    """The TPU generation (4 for 'TPU v4'), 0 when there is no TPU."""
    tpus = _tpus()
    match = re.search(r"v(\d+)", tpus[0].device_kind) if tpus else None
    return int(match.group(1)) if match else 0


def num_available_chips() -> int:
    return len(_tpus())
