"""Sharding whole modules: data parallel, FSDP-style parameter sharding, and torch_xla's
DTensor-style `xla_distribute_tensor` / `xla_distribute_module`."""

from __future__ import annotations

import torch

from xlanb.capture.tensor import LazyTensor
from xlanb.spmd.api import mark_sharding
from xlanb.spmd.mesh import Mesh, as_mesh


def _named_tensors(module: torch.nn.Module):
    yield from module.named_parameters()
    yield from ((n, b) for n, b in module.named_buffers() if type(b) is LazyTensor)


def _check_on_xla(module: torch.nn.Module, what: str) -> None:
    for name, t in _named_tensors(module):
        if type(t) is not LazyTensor:
            raise TypeError(f"{what}: {name} is on {t.device}, not on the xla device. "
                            "Move the module first: model.to('xla')")


def data_parallel(module: torch.nn.Module, mesh) -> torch.nn.Module:
    """Every parameter and buffer replicated over `mesh`: shard the batch (xlanb.DeviceLoader, or
    `mark_sharding(x, mesh, ('data', None))`) and XLA's partitioner all-reduces the gradients."""
    mesh = as_mesh(mesh)
    _check_on_xla(module, "data_parallel")
    for name, t in _named_tensors(module):
        mark_sharding(t, mesh, (None,) * t.dim(), name=name)
    return module


def fsdp_plan(module: torch.nn.Module, mesh, axis: str = "fsdp") -> dict[str, tuple]:
    """The partition spec `fsdp` gives each parameter: its largest dimension that divides over
    `axis` is sharded (the first of equal ones), others are replicated."""
    mesh = as_mesh(mesh)
    if axis not in mesh.axis_names:
        raise ValueError(f"fsdp: {axis!r} is not an axis of {mesh}; its axes are {mesh.axis_names}")
    n = mesh.shape()[axis]
    plan = {}
    for name, t in _named_tensors(module):
        dims = [d for d in range(t.dim()) if t.shape[d] % n == 0 and t.shape[d] >= n]
        spec = [None] * t.dim()
        if dims:
            spec[max(dims, key=lambda d: (t.shape[d], -d))] = axis
        plan[name] = tuple(spec)
    return plan


def fsdp(module: torch.nn.Module, mesh, axis: str = "fsdp") -> torch.nn.Module:
    """FSDP-style sharding: each parameter (and buffer) split over mesh axis `axis` along one
    dimension (fsdp_plan), so each device holds 1/n of the model; XLA's partitioner gathers the
    weights where a matmul needs them and reduce-scatters the gradients."""
    mesh = as_mesh(mesh)
    _check_on_xla(module, "fsdp")
    plan = fsdp_plan(module, mesh, axis)
    tensors = dict(_named_tensors(module))
    for name, spec in plan.items():
        mark_sharding(tensors[name], mesh, spec, name=name)
    return module


def _spec_from_placements(mesh: Mesh, ndim: int, placements) -> tuple:
    spec: list = [None] * ndim
    if len(placements) != len(mesh.mesh_shape):
        raise ValueError(f"xla_distribute_tensor: {len(placements)} placements for a {len(mesh.mesh_shape)}-d mesh "
                         f"{mesh}: give one placement (Shard(dim) or Replicate()) per mesh dimension")
    for axis, p in zip(mesh.axis_names, placements):
        if getattr(p, "is_replicate", lambda: False)():
            continue
        dim = getattr(p, "dim", None)
        if dim is None or not getattr(p, "is_shard", lambda *a: True)():
            raise ValueError(f"xla_distribute_tensor: placement {p!r} is not supported (Shard(dim) and "
                             "Replicate() are)")
        dim = dim % ndim if ndim else dim
        if spec[dim] is None:
            spec[dim] = axis
        else:
            spec[dim] = (spec[dim] if isinstance(spec[dim], tuple) else (spec[dim],)) + (axis,)
    return tuple(spec)


def xla_distribute_tensor(tensor: torch.Tensor, device_mesh, placements=None) -> torch.Tensor:
    """torch_xla's DTensor-style entry: `placements` (torch.distributed.tensor's Shard(dim) /
    Replicate(), one per mesh dimension) on an xlanb Mesh or a torch DeviceMesh; replicated when
    None. The tensor is sharded in place and returned."""
    mesh = as_mesh(device_mesh)
    if placements is None:
        spec = (None,) * tensor.dim()
    else:
        spec = _spec_from_placements(mesh, tensor.dim(), list(placements))
    return mark_sharding(tensor, mesh, spec)


def xla_distribute_module(module: torch.nn.Module, device_mesh=None, partition_fn=None) -> torch.nn.Module:
    """`partition_fn(name, submodule, mesh)` for every submodule (it calls xla_distribute_tensor or
    mark_sharding on what it wants sharded); without one, every parameter is replicated."""
    mesh = as_mesh(device_mesh)
    _check_on_xla(module, "xla_distribute_module")
    if partition_fn is None:
        return data_parallel(module, mesh)
    for name, sub in module.named_modules():
        partition_fn(name, sub, mesh)
    return module
