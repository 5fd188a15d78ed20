"""torch_xla's `xs.Mesh` and `xs.HybridMesh` over xlanb.spmd's Mesh, and the global tensor built
from CPU shards (`_XLAC._global_tensor_from_cpu_shards`).

The checks are torch_xla's: a mesh spans every device of the runtime, device ids are unique and
below the mesh size, and a broken mesh is an AssertionError (also a ValueError, as xlanb.spmd's
Mesh errors are). An unnamed mesh keeps `axis_names=None` (its axes are `axis_0`, ... inside).
"""

from __future__ import annotations

import math
import sys
from collections import OrderedDict

import numpy as np
import torch
from jax.sharding import NamedSharding, PartitionSpec

from xlanb.compat import counters, devices
from xlanb.spmd import mesh as spmd_mesh


class MeshError(AssertionError, ValueError):
    """A mesh torch_xla rejects (an AssertionError there; a ValueError in xlanb.spmd)."""


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise MeshError(message)


def _torch_xla(name: str):
    """Where the device queries are looked up, per call: torch_xla's module `name` (`runtime`,
    `core.xla_model`) as the user's code sees it when the compat names are installed (torch_xla's
    tests patch its functions), else compat/devices.py, which defines them."""
    return sys.modules.get(f"torch_xla.{name}") or devices


def _runtime():
    return _torch_xla("runtime")


class Mesh(spmd_mesh.Mesh):
    """`xs.Mesh(device_ids, mesh_shape, axis_names=None)`: device ids are logical (positions in
    `xr.global_runtime_device_attributes()`), laid out row-major over `mesh_shape`."""

    def __init__(self, device_ids, mesh_shape: tuple, axis_names: tuple | None = None):
        ids = np.asarray(device_ids).reshape(-1)
        mesh_shape = tuple(int(n) for n in mesh_shape)
        n = _runtime().global_runtime_device_count()
        _check(n > 0, "This requires XLA supported device(s).")
        _check(len(ids) == n, f"Number of device IDs ({len(ids)}) must match the global number of devices ({n}): "
                              "an xs.Mesh spans every device (xlanb.spmd.Mesh takes a subset)")
        if axis_names is not None:
            axis_names = tuple(axis_names)
            _check(len(axis_names) == len(mesh_shape), f"Number of axis names ({len(axis_names)}) must match mesh "
                                                       f"dimensions ({len(mesh_shape)})")
            _check(len(set(axis_names)) == len(axis_names), f"Axis names must be unique, got: {axis_names}")
        size = math.prod(mesh_shape)
        _check(len(ids) == size, f"Number of device IDs ({len(ids)}) must match mesh size ({size})")
        _check(len(np.unique(ids)) == len(ids), f"Device IDs must be unique, got: {ids.tolist()}")
        _check(all(0 <= int(d) < size for d in ids), f"Device IDs must be less than mesh size ({size}), "
                                                     f"got: {ids.tolist()}")
        super().__init__(ids, mesh_shape, axis_names)
        self.device_ids = np.asarray(device_ids)
        self.axis_names = axis_names            # None when unnamed, as torch_xla keeps it

    def size(self) -> int:
        return math.prod(self.mesh_shape)

    def shape(self) -> OrderedDict:
        """{axis name: size}; {axis index: size} for an unnamed mesh (torch_xla's)."""
        keys = self.axis_names if self.axis_names is not None else range(len(self.mesh_shape))
        return OrderedDict(zip(keys, self.mesh_shape))

    def get_axis_name_idx(self, name: str) -> int | None:
        return None if name not in (self.axis_names or ()) else self.axis_names.index(name)

    def get_op_sharding(self, partition_spec: tuple) -> NamedSharding:
        """The sharding `partition_spec` names on this mesh (torch_xla returns XLA's OpSharding;
        xlanb hands the same thing to XLA as a jax NamedSharding). Made once per spec and mesh, as
        torch_xla caches it; each one made counts `CreateOpSharding`."""
        key = tuple(partition_spec)
        made = self.__dict__.setdefault("_op_shardings", {})
        sharding = made.get(key)
        if sharding is None:
            sharding = made[key] = self._op_sharding(key)
            counters.increment_counter("CreateOpSharding")
        return sharding

    def _op_sharding(self, partition_spec: tuple) -> NamedSharding:
        names = self.jax_mesh.axis_names
        entries = []
        for entry in partition_spec:
            axes = entry if isinstance(entry, tuple) else (entry,)
            axes = tuple(names[a] if isinstance(a, int) and not isinstance(a, bool) else a for a in axes if a is not None)
            entries.append(None if not axes else axes[0] if len(axes) == 1 else axes)
        return NamedSharding(self.jax_mesh, PartitionSpec(*entries))


def _hybrid_device_ids(ici_mesh_shape: tuple, dcn_mesh_shape: tuple) -> np.ndarray:
    """Device ids on the hybrid mesh: on TPU, each slice's devices in physical order (by
    coordinates, then core) fill one ICI block, and the slices are laid out over the DCN mesh;
    elsewhere the ids in order."""
    xr = _runtime()
    n = xr.global_runtime_device_count()
    full = tuple(i * d for i, d in zip(ici_mesh_shape, dcn_mesh_shape))
    if _torch_xla("core.xla_model").xla_device_hw() != "TPU":
        return np.arange(n).reshape(full)
    attributes = xr.global_runtime_device_attributes()
    slices: dict[int, list] = {}
    for a in attributes:
        slices.setdefault(int(a.get("slice_index", 0)), []).append(a)
    _check(len(slices) == math.prod(dcn_mesh_shape), f"HybridMesh: dcn_mesh_shape {dcn_mesh_shape} needs "
                                                     f"{math.prod(dcn_mesh_shape)} slices, the runtime has {len(slices)}")
    blocks = []
    for index in sorted(slices):
        ordered = sorted(slices[index], key=lambda a: (tuple(reversed(a["coords"])), a.get("core_on_chip", 0)))
        blocks.append([int(str(a["name"]).rsplit(":", 1)[-1]) for a in ordered])
    grid = np.array(blocks).reshape(tuple(dcn_mesh_shape) + tuple(ici_mesh_shape))
    k = len(full)
    order = [axis for pair in zip(range(k), range(k, 2 * k)) for axis in pair]    # (dcn_0, ici_0, dcn_1, ...)
    return grid.transpose(order).reshape(full)


class HybridMesh(Mesh):
    """`xs.HybridMesh(ici_mesh_shape=, dcn_mesh_shape=, axis_names=)`: a mesh over slices, each
    slice's devices on the inner (ICI) shape and the slices on the outer (DCN) shape."""

    def __init__(self, *, ici_mesh_shape: tuple, dcn_mesh_shape: tuple | None = None, axis_names=None):
        dcn_mesh_shape = tuple(dcn_mesh_shape) if dcn_mesh_shape is not None else (1,) * len(ici_mesh_shape)
        _check(len(ici_mesh_shape) == len(dcn_mesh_shape), f"HybridMesh: ici_mesh_shape {ici_mesh_shape} and "
                                                           f"dcn_mesh_shape {dcn_mesh_shape} must have one size per axis")
        ids = _hybrid_device_ids(tuple(ici_mesh_shape), dcn_mesh_shape)
        self.ici_mesh_shape, self.dcn_mesh_shape = tuple(ici_mesh_shape), dcn_mesh_shape
        super().__init__(ids.reshape(-1), ids.shape, axis_names)


def global_tensor_from_cpu_shards(shards: list, sharding: NamedSharding, global_shape=None) -> torch.Tensor:
    """The xla tensor whose shards are `shards` (one CPU tensor per device of the sharding, in
    device-id order, all of one shape; the last ones may carry padding), sharded as `sharding`.
    `global_shape` defaults to the shards put together; a smaller one drops padding (the tensor is
    then held in padded shards, as torch_xla holds it)."""
    from xlanb.spmd import api
    devices = sorted(sharding.device_set, key=lambda d: spmd_mesh_position(d))
    if len(shards) != len(devices):
        raise RuntimeError(f"_global_tensor_from_cpu_shards: {len(shards)} shards for a sharding over "
                           f"{len(devices)} devices; give one shard per device")
    shard_shape = tuple(shards[0].shape)
    if any(tuple(s.shape) != shard_shape for s in shards):
        raise RuntimeError(f"_global_tensor_from_cpu_shards: the shards must have one shape, got "
                           f"{sorted({tuple(s.shape) for s in shards})}")
    replicated = all(entry is None for entry in sharding.spec)
    tiles = [1] * len(shard_shape)
    if not replicated:
        if len(sharding.spec) > len(shard_shape):
            raise RuntimeError(f"_global_tensor_from_cpu_shards: the sharding {sharding.spec} has more entries than "
                               f"the shards have dimensions ({len(shard_shape)})")
        tiles = list(sharding._to_xla_hlo_sharding(len(shard_shape)).tile_assignment_dimensions())[:len(shard_shape)]
    padded = tuple(s * t for s, t in zip(shard_shape, tiles))
    shape = padded if global_shape is None else tuple(global_shape)
    if len(shape) != len(padded) or any(not 0 < g <= p or -(-g // t) != s
                                        for g, p, t, s in zip(shape, padded, tiles, shard_shape)):
        raise RuntimeError(f"_global_tensor_from_cpu_shards: global shape {list(shape)} does not fit shards of shape "
                           f"{list(shard_shape)} tiled {tiles} (at most {list(padded)}, padding under one shard)")
    whole = torch.zeros(padded, dtype=shards[0].dtype)
    index = (sharding if not replicated else NamedSharding(sharding.mesh, PartitionSpec())).devices_indices_map(padded)
    for device, shard in zip(devices, shards):
        whole[index[device]] = shard
    t = whole[tuple(slice(0, g) for g in shape)].contiguous().to("xla")
    mesh = spmd_mesh.as_mesh(sharding.mesh)
    spec = (None,) * len(shape) if replicated else tuple(sharding.spec) + (None,) * (len(shape) - len(sharding.spec))
    api.mark_sharding(t, mesh, spec)
    return t


def spmd_mesh_position(device) -> int:
    """A jax device's logical id: its position in the device list."""
    import jax
    from xlanb._config import config
    return jax.devices(config().platform or None).index(device)
