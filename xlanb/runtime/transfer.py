"""Host <-> device copies. Every copy appends a Transfer event."""

from __future__ import annotations

import functools
import time

import jax
import numpy as np
import torch

from xlanb import events
from xlanb._config import config
from xlanb.lower.dtypes import numpy_to_torch, torch_to_numpy


@functools.cache
def jax_device(index: int = 0):
    platform = config().platform or None
    devices = jax.devices(platform)
    if index >= len(devices):
        raise RuntimeError(f"xla:{index} does not exist: jax sees {len(devices)} {devices[0].platform} device(s)")
    return devices[index]


def upload(t: torch.Tensor) -> jax.Array:
    """Copies a CPU tensor to the device (a copy: later CPU writes do not leak in)."""
    start = time.perf_counter_ns()
    host = torch_to_numpy(t)
    with jax.enable_x64(True):
        buf = jax.device_put(host, jax_device())
    events.emit(events.Transfer(direction="to_device", nbytes=host.nbytes, ns=time.perf_counter_ns() - start))
    return buf


def upload_numpy(host: np.ndarray) -> jax.Array:
    with jax.enable_x64(True):
        return jax.device_put(host, jax_device())


def download(buf: jax.Array) -> torch.Tensor:
    """Waits for `buf` and copies it into a new CPU tensor."""
    start = time.perf_counter_ns()
    host = np.asarray(buf)
    t = numpy_to_torch(host)
    events.emit(events.Transfer(direction="from_device", nbytes=host.nbytes, ns=time.perf_counter_ns() - start))
    return t
