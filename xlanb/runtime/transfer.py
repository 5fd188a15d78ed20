"""Host <-> device copies. Every copy of user data appends a Transfer event (RNG keys do not)."""

from __future__ import annotations

import time

import jax
import numpy as np
import torch

from xlanb import events
from xlanb.ir.sharding import corner
from xlanb.lower.dtypes import numpy_to_torch, torch_to_numpy
from xlanb.runtime.outside import jax_entry
from xlanb.state import emit, note_stage, runtime_state

_rt = runtime_state()


@jax_entry
def upload(t: torch.Tensor) -> jax.Array:
    """Copies a CPU tensor to the device (a copy: later CPU writes do not leak in)."""
    start = time.perf_counter_ns()
    host = torch_to_numpy(t)
    try:
        if _rt.faults:
            _rt.fault("transfer")
        with jax.enable_x64(True):
            buf = jax.device_put(host, _rt.jax_device())
    except BaseException as error:
        note_stage(error, f"copying {host.nbytes} bytes to the device")
        raise
    emit(events.Transfer(direction="to_device", nbytes=host.nbytes, ns=time.perf_counter_ns() - start))
    return buf


@jax_entry
def upload_numpy(host: np.ndarray) -> jax.Array:
    with jax.enable_x64(True):
        return jax.device_put(host, _rt.jax_device())


@jax_entry
def download(buf: jax.Array, shape: tuple | None = None) -> torch.Tensor:
    """Waits for `buf` and copies it into a new CPU tensor; with `shape`, the value of that shape a
    padded buffer (uneven shards: runtime/partition.py's lay_out) holds in its corner."""
    start = time.perf_counter_ns()
    try:
        if _rt.faults:
            _rt.fault("transfer")
        host = np.asarray(buf) if buf.is_fully_addressable else _gather(buf)
    except BaseException as error:
        note_stage(error, f"copying {buf.nbytes} bytes from the device")
        raise
    if shape is not None and host.shape != tuple(shape):
        host = np.ascontiguousarray(host[corner(shape)])
    t = numpy_to_torch(host)
    emit(events.Transfer(direction="from_device", nbytes=host.nbytes, ns=time.perf_counter_ns() - start))
    return t


def _gather(buf: jax.Array) -> np.ndarray:
    """The whole value of an array spread over several processes (jax.distributed): a replicated
    one is read from a local shard, any other is gathered from every process."""
    if buf.sharding.is_fully_replicated:
        return np.asarray(buf.addressable_data(0))
    from jax.experimental import multihost_utils
    return np.asarray(multihost_utils.process_allgather(buf, tiled=True))
