"""`pl.MpDeviceLoader` and `pl.ParallelLoader` over xlanb.DeviceLoader.

As torch_xla's per-device loader, each `next()` first syncs (launching the step traced since the
last batch, and running its step closures), then hands out a batch already uploaded; the end of
the data syncs once more. `input_sharding` (an `xs.ShardingSpec` whose partition spec shards
the first dimension over one mesh axis, the rest None) splits each batch over that axis, as
xlanb.DeviceLoader does; other specs are refused.
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from xlanb.compat import profiler, steps
from xlanb.loader import DeviceLoader
from xlanb.spmd.mesh import as_mesh


def _data_axis(input_sharding):
    """(mesh, axis name) of a ShardingSpec that splits the batch dimension, or (None, None)."""
    if input_sharding is None:
        return None, None
    if isinstance(input_sharding, dict):
        raise NotImplementedError("MpDeviceLoader(input_sharding={...}): a dict of ShardingSpecs is not supported by "
                                  "xlanb.compat; pass one ShardingSpec")
    mesh, spec = input_sharding.mesh, tuple(input_sharding.partition_spec)
    first = spec[0] if spec else None
    if isinstance(first, int) and not isinstance(first, bool):
        first = as_mesh(mesh).axis_names[first]
    if not isinstance(first, str) or any(e is not None for e in spec[1:]):
        raise NotImplementedError(f"MpDeviceLoader(input_sharding=ShardingSpec(mesh, {spec})): xlanb.compat splits the "
                                  "batch (first) dimension over one mesh axis, e.g. ('data', None); other specs are "
                                  "not supported")
    return mesh, first


class _PerDeviceLoader:
    """The iterator one pass over the data gives."""

    def __init__(self, loader: DeviceLoader):
        self._it = iter(loader)
        self._len = len(loader) if hasattr(loader.loader, "__len__") else 0
        self._done = False

    def __iter__(self):
        return self

    def __len__(self) -> int:
        return self._len

    def __next__(self):
        if profiler.get_tracer_marked_step():       # an xp.StepTrace ended the step with a sync
            profiler.set_tracer_marked_step(False)
        else:
            steps.sync()
        if self._done:
            raise StopIteration
        try:
            return next(self._it)
        except StopIteration:
            self._done = True
            steps.sync()
            raise

    next = __next__


class _Minibatches:
    """A loader whose batches are this process's part of the global batch (`ShardingSpec(...,
    minibatch=True)`): each one's first dimension must divide over this process's devices."""

    def __init__(self, loader):
        self.loader = loader

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        import jax
        from xlanb._config import config
        count = jax.local_device_count(config().platform or None)
        for batch in self.loader:
            for t in pytree.tree_leaves(batch):
                if isinstance(t, torch.Tensor) and t.dim() > 0 and t.shape[0] % count:
                    raise RuntimeError("When minibatch is configured, the per-host batch size must be divisible by "
                                       f"local runtime device count. Per host input data shape = {t.size()}, "
                                       f"local_runtime_device_count = {count}")
            yield batch


class MpDeviceLoader:
    """`pl.MpDeviceLoader(loader, device, **kwargs)`: batches on the xla device, uploaded ahead."""

    def __init__(self, loader, device, *, input_sharding=None, device_prefetch_size: int = 2,
                 loader_prefetch_size: int = 16, host_to_device_transfer_threads: int = 1,
                 batches_per_execution: int = 1, batchdim: int = 0):
        if batches_per_execution != 1 or batchdim != 0:
            raise NotImplementedError("MpDeviceLoader: batches_per_execution and batchdim other than 1 and 0 are not "
                                      "supported by xlanb.compat")
        self._loader = loader
        self._device = device
        mesh, axis = _data_axis(input_sharding)
        if getattr(input_sharding, "minibatch", False):
            loader = _Minibatches(loader)
        self._device_loader = DeviceLoader(loader, mesh=mesh, data_axis=axis or "data",
                                           prefetch=max(1, int(device_prefetch_size)), sync_each_step=False)

    def __iter__(self):
        return _PerDeviceLoader(self._device_loader)

    def __len__(self) -> int:
        return len(self._loader)


class ParallelLoader:
    """`pl.ParallelLoader(loader, [device])`: `per_device_loader(device)` gives one pass."""

    def __init__(self, cpu_loader, devices, **kwargs):
        self._loader = MpDeviceLoader(cpu_loader, devices[0] if devices else None, **kwargs)

    def per_device_loader(self, device):
        return iter(self._loader)

    def per_device_samples(self) -> int:
        return len(self._loader)

    def close(self) -> None:
        pass
