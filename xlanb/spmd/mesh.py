"""`Mesh` (torch_xla's names, over `jax.sharding.Mesh`) and partition specs checked against it."""

from __future__ import annotations

import math
import sys

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from xlanb._config import config
from xlanb.capture.frames import is_library
from xlanb.ir.sharding import mesh_text, spec_text


class Mesh:
    """A logical mesh of devices: `Mesh(device_ids, mesh_shape, axis_names)`, as torch_xla's
    `xs.Mesh`. Device ids are logical: positions in `jax.devices()`, which lists every process's
    devices under jax.distributed (0..7 for 2 processes of 4 devices)."""

    def __init__(self, device_ids, mesh_shape: tuple, axis_names: tuple | None = None):
        ids = [int(i) for i in np.asarray(device_ids).reshape(-1)]
        mesh_shape = tuple(int(n) for n in mesh_shape)
        if axis_names is None:
            axis_names = tuple(f"axis_{i}" for i in range(len(mesh_shape)))
        axis_names = tuple(axis_names)
        devices = jax.devices(config().platform or None)
        by_id = dict(enumerate(devices))       # logical ids, as torch_xla's: positions in jax.devices()
        if math.prod(mesh_shape) > len(devices):
            raise ValueError(
                f"Mesh: mesh_shape {mesh_shape} needs {math.prod(mesh_shape)} devices but {len(devices)} are present "
                f"({devices[0].platform} x {len(devices)}). Use a smaller mesh_shape, or on the CPU set "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={math.prod(mesh_shape)} before jax starts "
                "(a fresh process or kernel).")
        if len(ids) != math.prod(mesh_shape):
            raise ValueError(f"Mesh: {len(ids)} device_ids do not fill mesh_shape {mesh_shape} "
                             f"({math.prod(mesh_shape)} devices)")
        if len(axis_names) != len(mesh_shape):
            raise ValueError(f"Mesh: {len(axis_names)} axis_names {axis_names} for a {len(mesh_shape)}-d mesh_shape")
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(f"Mesh: axis_names {axis_names} repeat a name")
        unknown = [i for i in ids if i not in by_id]
        if unknown or len(set(ids)) != len(ids):
            raise ValueError(f"Mesh: device_ids {ids} must be distinct logical ids of the present devices "
                             f"(0 to {len(devices) - 1})")
        self.device_ids = np.array(ids)
        self.mesh_shape = mesh_shape
        self.axis_names = axis_names
        self.jax_mesh = jax.sharding.Mesh(np.array([by_id[i] for i in ids], dtype=object).reshape(mesh_shape),
                                          axis_names)

    def size(self) -> int:
        return len(self.device_ids)

    def shape(self) -> dict:
        """{axis name: size}, in mesh order."""
        return dict(zip(self.axis_names, self.mesh_shape))

    def get_logical_mesh(self) -> np.ndarray:
        return self.device_ids.reshape(self.mesh_shape)

    def __repr__(self) -> str:
        return f"Mesh({mesh_text(self.jax_mesh)}, devices {self.device_ids.tolist()})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Mesh) and self.jax_mesh == other.jax_mesh

    def __hash__(self) -> int:
        return hash(self.jax_mesh)


def get_1d_mesh(axis_name: str = "data") -> Mesh:
    """Every device in one axis (torch_xla's `xs.get_1d_mesh`)."""
    n = len(jax.devices(config().platform or None))
    return Mesh(np.arange(n), (n,), (axis_name,))


def as_mesh(mesh) -> Mesh:
    """An xlanb Mesh from a Mesh, a jax Mesh, or a torch.distributed DeviceMesh."""
    if type(mesh) is Mesh:
        return mesh
    if isinstance(mesh, Mesh):     # a subclass that presents other names (xlanb.compat's torch_xla Mesh)
        return Mesh(mesh.device_ids, mesh.jax_mesh.devices.shape, mesh.jax_mesh.axis_names)
    if isinstance(mesh, jax.sharding.Mesh):
        position = {d: i for i, d in enumerate(jax.devices(config().platform or None))}
        return Mesh([position[d] for d in mesh.devices.flat], mesh.devices.shape, mesh.axis_names)
    ids = getattr(mesh, "mesh", None)
    if ids is not None and hasattr(ids, "shape"):       # torch.distributed DeviceMesh
        names = getattr(mesh, "mesh_dim_names", None)
        return Mesh(np.asarray(ids.tolist()), tuple(ids.shape), tuple(names) if names else None)
    raise TypeError(f"expected an xlanb.spmd.Mesh (or a jax Mesh, or a torch DeviceMesh), got {type(mesh).__name__}")


def caller_name(t) -> str:
    """The user's variable holding `t`, if the innermost user frame has one ("" otherwise)."""
    f = sys._getframe(1)
    while f is not None and is_library(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return ""
    for scope in (f.f_locals, f.f_globals):
        for name, v in scope.items():
            if v is t and not name.startswith("_"):
                return name
    return ""


def named_sharding(t_meta, mesh: Mesh, partition_spec, what: str, name: str = "") -> NamedSharding:
    """The NamedSharding of `partition_spec` for a tensor of `t_meta` on `mesh`, or a ValueError that
    names the tensor, the spec and the mesh, and says what to do."""
    shape = tuple(t_meta.shape)
    spec = tuple(partition_spec) if isinstance(partition_spec, (tuple, list, PartitionSpec)) else (partition_spec,)
    label = f"{name}: {t_meta.text}" if name else t_meta.text
    head = f"{what}({label}, {spec!r}, {mesh_text(mesh.jax_mesh)})"
    if len(spec) > len(shape):
        raise ValueError(f"{head}: the partition spec has {len(spec)} entries but the tensor has {len(shape)} "
                         f"dimensions. Give one entry per dimension (None keeps a dimension whole).")
    entries, used = [], []
    for dim, entry in enumerate(spec):
        axes = entry if isinstance(entry, tuple) else (entry,)
        names = []
        for a in axes:
            if a is None:
                continue
            if isinstance(a, int) and not isinstance(a, bool):
                if not 0 <= a < len(mesh.axis_names):
                    raise ValueError(f"{head}: mesh axis index {a} is out of range; the mesh's axes are "
                                     f"{mesh.axis_names}")
                a = mesh.axis_names[a]
            if a not in mesh.axis_names:
                raise ValueError(f"{head}: {a!r} is not an axis of the mesh; its axes are {mesh.axis_names}. "
                                 "Use one of them, or None to keep the dimension whole.")
            if a in used:
                raise ValueError(f"{head}: mesh axis {a!r} is used for two dimensions; each axis shards one")
            used.append(a)
            names.append(a)
        entries.append(None if not names else names[0] if len(names) == 1 else tuple(names))
    return NamedSharding(mesh.jax_mesh, PartitionSpec(*entries))


__all__ = ["Mesh", "get_1d_mesh", "as_mesh", "named_sharding", "caller_name", "spec_text"]
