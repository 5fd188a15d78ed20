"""`xlanb.DeviceLoader`: a DataLoader on the xla device, torch_xla's MpDeviceLoader habit.

Each step of `for batch in DeviceLoader(loader):` (1) syncs, launching the step just traced
(asynchronously), (2) takes the host batches needed to keep `prefetch` batches uploaded and issues
their uploads (asynchronous `jax.device_put`s; with a mesh, each batch is split along `data_axis`
on its first dimension), and (3) hands out the oldest uploaded batch. So batch N+1 is on its way to
the device before step N is traced, while step N-1 runs. Events: `BatchUpload` when an upload is
issued, `LoaderWait` with how long the host waited for the wrapped loader at each step.
"""

from __future__ import annotations

import collections
import time

import jax
import numpy as np
import torch
from jax.sharding import NamedSharding, PartitionSpec
from torch.utils import _pytree as pytree

from xlanb import events
from xlanb.capture.realize import sync
from xlanb.capture.tensor import new_tensor
from xlanb.ir.node import data_node, intern_meta
from xlanb.lower.dtypes import torch_to_numpy
from xlanb.runtime.partition import lay_out
from xlanb.spmd.mesh import as_mesh
from xlanb.state import emit, runtime_state

_rt = runtime_state()


class DeviceLoader:
    """Wraps an iterable of CPU batches (tensors, or tuples, lists and dicts of them)."""

    def __init__(self, loader, mesh=None, data_axis: str = "data", prefetch: int = 2, sync_each_step: bool = True):
        if prefetch < 1:
            raise ValueError(f"DeviceLoader: prefetch must be at least 1, got {prefetch}")
        self.loader = loader
        self.mesh = as_mesh(mesh) if mesh is not None else None
        if self.mesh is not None and data_axis not in self.mesh.axis_names:
            raise ValueError(f"DeviceLoader: data_axis {data_axis!r} is not an axis of {self.mesh}; its axes are "
                             f"{self.mesh.axis_names}")
        self.data_axis = data_axis
        self.prefetch = prefetch
        self.sync_each_step = sync_each_step

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        source = iter(self.loader)
        queue: collections.deque = collections.deque()
        index = 0          # the next host batch to upload
        taken = 0
        exhausted = False
        while True:
            if self.sync_each_step and taken:
                sync(cause="DeviceLoader step")
            start = time.perf_counter_ns()
            while not exhausted and len(queue) < self.prefetch:
                try:
                    batch = next(source)
                except StopIteration:
                    exhausted = True
                    break
                queue.append(self._upload(batch, index))
                index += 1
            if not queue:
                return
            emit(events.LoaderWait(index=taken, ns=time.perf_counter_ns() - start))
            taken += 1
            yield queue.popleft()

    def _upload(self, batch, index: int):
        leaves, spec = pytree.tree_flatten(batch)
        nbytes = 0
        out = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                t, n = self._upload_tensor(leaf, index)
                out.append(t)
                nbytes += n
            else:
                out.append(leaf)
        emit(events.BatchUpload(index=index, nbytes=nbytes, sharded=self.mesh is not None))
        return pytree.tree_unflatten(out, spec)

    def _upload_tensor(self, t: torch.Tensor, index: int):
        host = torch_to_numpy(t.detach().contiguous())
        meta = intern_meta(tuple(t.shape), t.dtype)
        if self.mesh is None:
            sharding = jax.sharding.SingleDeviceSharding(_rt.jax_device())
        else:
            if t.dim() == 0:
                raise ValueError(
                    f"DeviceLoader: batch {index} has a tensor {meta.text} with no dimension to split over mesh axis "
                    f"{self.data_axis!r} of {self.mesh}. Give each sample a batch dimension.")
            sharding = NamedSharding(self.mesh.jax_mesh, PartitionSpec(self.data_axis, *([None] * (t.dim() - 1))))
        start = time.perf_counter_ns()
        with jax.enable_x64(True):
            buf = lay_out(np.ascontiguousarray(host), meta.shape, sharding)    # a short batch: padded shards
        emit(events.Transfer(direction="to_device", nbytes=host.nbytes, ns=time.perf_counter_ns() - start))
        return new_tensor(data_node(buf, meta), meta), host.nbytes
