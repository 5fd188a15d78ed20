"""torch_xla's `SpmdFullyShardedDataParallel` over `xlanb.spmd.fsdp`: every parameter split over the
mesh axis "fsdp" along one dimension (the largest that divides), the forward's output split along
its first dimension, and XLA's partitioner gathering weights and reduce-scattering gradients.
"""

from __future__ import annotations

import torch
from torch import nn

from xlanb.compat import sharding
from xlanb.spmd import api, modules
from xlanb.spmd.mesh import as_mesh


def _shard_first_dim(output, mesh) -> None:
    """The default `shard_output`: the output (or a tuple's first element) split along its first
    dimension over "fsdp" (padded where it does not divide, as torch_xla pads it)."""
    real = output[0] if isinstance(output, tuple) else output
    if not isinstance(real, torch.Tensor):
        raise RuntimeError(f"SpmdFullyShardedDataParallel: the output type is not supported: {type(output)}. "
                           "Pass shard_output=callable(output, mesh).")
    if real.dim():
        api.mark_sharding(real, mesh, ("fsdp",) + (None,) * (real.dim() - 1))


class SpmdFullyShardedDataParallel(nn.Module):
    """`SpmdFullyShardedDataParallel(module, mesh=..., shard_output=...)`; `auto_wrap_policy` and
    `extra_data_axis` are not covered (they raise)."""

    def __init__(self, module: nn.Module, *, mesh=None, shard_output=None, auto_wrap_policy=None,
                 auto_wrapper_callable=None, extra_data_axis=None):
        if isinstance(module, SpmdFullyShardedDataParallel):
            raise RuntimeError("Cannot wrap a module that is already wrapped with FSDP")
        if auto_wrap_policy is not None or auto_wrapper_callable is not None or extra_data_axis is not None:
            raise NotImplementedError("SpmdFullyShardedDataParallel: auto_wrap_policy, auto_wrapper_callable and "
                                      "extra_data_axis are not supported by xlanb.compat")
        mesh = mesh if mesh is not None else sharding.get_global_mesh()
        if mesh is None:
            raise ValueError("No mesh is provided and no global mesh is set. Please provide a mesh.")
        mesh = as_mesh(mesh)
        if "fsdp" not in mesh.axis_names:
            raise ValueError("The mesh must have an axis named 'fsdp'.")
        super().__init__()
        self._orig_module = modules.fsdp(module, mesh, axis="fsdp")
        self._mesh = mesh
        self._shard_output = shard_output or _shard_first_dim

    @property
    def module(self) -> nn.Module:
        return self._orig_module

    def forward(self, *args, **kwargs):
        output = self._orig_module(*args, **kwargs)
        self._shard_output(output, self._mesh)
        return output
