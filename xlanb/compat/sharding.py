"""`torch_xla.distributed.spmd` over xlanb.spmd: Mesh, get_1d_mesh, the global mesh, mark_sharding
returning an XLAShardedTensor view of the tensor, clear_sharding, ShardingSpec, and the sharding
text torch_xla's `_XLAC._get_xla_sharding_spec` prints: `{devices=[1,8]0,1,2,3,4,5,6,7}`,
`{replicated}`, `{devices=[2,1,4]0,...,7 last_tile_dim_replicate}` (device ids are logical: positions
in the device list, as in torch_xla's Mesh).
"""

from __future__ import annotations

import dataclasses
import enum
import os
import warnings

import jax
import numpy as np
import torch
from torch.utils import _pytree as pytree

from xlanb._config import config
from xlanb.capture.tensor import LazyTensor
from xlanb.spmd import api, manual, mesh as mesh_module
from xlanb.compat.mesh import HybridMesh, Mesh
from xlanb.state import runtime_state

_rt = runtime_state()
_warned_use_spmd: list = []


class ShardingType(enum.IntEnum):
    """torch_xla's ShardingType (OpSharding.Type ids)."""
    REPLICATED = 0
    MAXIMAL = 1
    TUPLE = 2
    TILED = 3
    MANUAL = 4
    PARTIAL = 5
    UNKNOWN = 6


def use_spmd(auto: bool = False) -> None:
    """`xr.use_spmd()`: a no-op. xlanb needs no SPMD switch: a tensor is sharded when mark_sharding
    says so, and the rest stay on one device. Says so once."""
    if auto:
        raise NotImplementedError("xr.use_spmd(auto=True): auto-sharding is not supported by xlanb.compat")
    os.environ["XLA_USE_SPMD"] = "1"          # torch_xla's own flag, which its scripts read back
    if not _warned_use_spmd:
        _warned_use_spmd.append(True)
        warnings.warn("xr.use_spmd() is a no-op under xlanb: tensors are sharded by xs.mark_sharding, with no global "
                      "SPMD mode; xla:0 stays the one device.", stacklevel=2)


def is_spmd() -> bool:
    """True after use_spmd() (or with XLA_USE_SPMD=1), as torch_xla says; nothing in xlanb depends on it."""
    return os.environ.get("XLA_USE_SPMD", "0").upper() in ("1", "ON", "TRUE", "YES", "Y")


def get_1d_mesh(axis_name: str | None = None) -> Mesh:
    """Every device in one axis (named `axis_name`, or `axis_0` as torch_xla's unnamed axis)."""
    n = len(jax.devices(config().platform or None))
    return Mesh(np.arange(n), (n,), (axis_name,) if axis_name else None)


def set_global_mesh(mesh: Mesh) -> None:
    _rt.global_mesh = mesh if isinstance(mesh, mesh_module.Mesh) else mesh_module.as_mesh(mesh)


def get_global_mesh() -> Mesh | None:
    return _rt.global_mesh


def _logical_ids(s) -> list[int]:
    position = {d: i for i, d in enumerate(jax.devices(config().platform or None))}
    return [position[d] for d in s._device_assignment]


def sharding_text(s, ndim: int) -> str:
    """A jax sharding in torch_xla's text: explicit device lists, no iota form."""
    hlo = s._to_xla_hlo_sharding(ndim)
    if hlo.is_replicated():
        return "{replicated}"
    if hlo.is_maximal():
        return f"{{maximal device={_logical_ids(s)[hlo.tile_assignment_devices()[0]]}}}"
    ids = _logical_ids(s)
    dims = ",".join(str(d) for d in hlo.tile_assignment_dimensions())
    devices = ",".join(str(ids[i]) for i in hlo.tile_assignment_devices())
    tail = " last_tile_dim_replicate" if hlo.replicate_on_last_tile_dim() else ""
    return f"{{devices=[{dims}]{devices}{tail}}}"


def _unwrap(t):
    return t.global_tensor if isinstance(t, XLAShardedTensor) else t


def get_sharding_spec(t) -> str:
    """`_XLAC._get_xla_sharding_spec(t)`: torch_xla's text, "" for a tensor on one device."""
    t = _unwrap(t)
    if type(t) is not LazyTensor:
        return ""
    if _rt.manual_used and manual.is_manual_tensor(t):
        return "{manual}"
    s = api.get_sharding(t)
    return "" if s is None else sharding_text(s, t.dim())


def get_sharding_type(t) -> int | None:
    t = _unwrap(t)
    if type(t) is LazyTensor and _rt.manual_used and manual.is_manual_tensor(t):
        return int(ShardingType.MANUAL)
    s = api.get_sharding(t) if type(t) is LazyTensor else None
    if s is None:
        return None
    hlo = s._to_xla_hlo_sharding(t.dim())
    if hlo.is_replicated():
        return int(ShardingType.REPLICATED)
    return int(ShardingType.PARTIAL if hlo.replicate_on_last_tile_dim() else ShardingType.TILED)


@dataclasses.dataclass
class XLAShard:
    """One shard on one of this process's devices: a CPU snapshot of its data (zero-padded to the
    shape every shard has where a dimension does not divide), where it sits in the global tensor
    (Ellipsis when replicated), its device ('CPU:3') and replica id."""
    data: torch.Tensor
    indices: object
    shard_device: str
    replica_id: int

    @property
    def unpadded_data(self) -> torch.Tensor:
        if not isinstance(self.indices, list):
            return self.data
        return self.data[tuple(slice(0, s.stop - s.start) for s in self.indices)]


class XLAShardedTensor:
    """What `xs.mark_sharding` returns: the sharded tensor (`global_tensor`, the same tensor object
    passed in) with torch_xla's XLAShardedTensor attributes. Unlike torch_xla's, it is not a
    torch.Tensor subclass: compute with `global_tensor` (or the tensor you sharded); other
    attributes are looked up on the tensor."""

    def __init__(self, global_tensor: torch.Tensor, mesh_shape=None, partition_spec=None):
        self.global_tensor = global_tensor
        self.mesh_shape = mesh_shape
        self.partition_spec = partition_spec

    @property
    def sharding_spec(self) -> str:
        return get_sharding_spec(self.global_tensor)

    @property
    def sharding_type(self) -> ShardingType:
        kind = get_sharding_type(self.global_tensor)
        return ShardingType(ShardingType.REPLICATED if kind is None else kind)

    @property
    def local_shards(self) -> list[XLAShard]:
        from xlanb.capture.realize import realize
        from xlanb.compat.devices import device_type
        node = realize(self.global_tensor, "XLAShardedTensor.local_shards")
        replicated = self.sharding_type == ShardingType.REPLICATED
        shards = []
        for sh in sorted(node.buffer.addressable_shards, key=lambda sh: sh.device.id):
            data = torch.from_numpy(np.array(sh.data)).to(self.global_tensor.dtype)
            indices = Ellipsis if replicated else [_clipped(s, n) for s, n in zip(sh.index, self.global_tensor.shape)]
            shards.append(XLAShard(data, indices, f"{device_type()}:{sh.device.id}", sh.replica_id))
        return shards

    def load_local_shards_(self, shards: list[XLAShard]) -> None:
        """Writes `shards` (as `local_shards` gives them, data edited on the CPU) back into the tensor,
        keeping its sharding (xlanb.spmd.set_local_shards)."""
        api.set_local_shards(self.global_tensor, [s.data.detach().cpu().numpy() for s in shards])

    def cpu(self) -> torch.Tensor:
        return self.global_tensor.cpu()

    def __getattr__(self, name):
        return getattr(self.__dict__["global_tensor"], name)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch functions see the tensor; xla tensors they return come back as XLAShardedTensors,
        as torch_xla's subclass propagates itself."""
        args = pytree.tree_map(_unwrap, tuple(args))
        kwargs = pytree.tree_map(_unwrap, dict(kwargs or {}))
        return pytree.tree_map(_wrap, func(*args, **kwargs))

    def __repr__(self) -> str:
        return f"XLAShardedTensor({self.global_tensor})"


def _clipped(s: slice, n: int) -> slice:
    """A shard's span of a dimension of size `n` (its index runs over the padded size)."""
    start, stop, _ = s.indices(n)
    return slice(start, max(start, stop), 1)


def _wrap(v):
    return XLAShardedTensor(v) if type(v) is LazyTensor else v


def _forward(name: str):
    def op(self, *args):
        return _wrap(getattr(self.global_tensor, name)(*[_unwrap(a) for a in args]))
    op.__name__ = name
    return op


def _forward_inplace(name: str):
    def op(self, other):
        getattr(self.global_tensor, name)(_unwrap(other))
        return self
    op.__name__ = name
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__matmul__", "__rmatmul__", "__pow__", "__neg__", "__getitem__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(XLAShardedTensor, _name, _forward(_name))
for _name in ("__iadd__", "__isub__", "__imul__", "__itruediv__"):
    setattr(XLAShardedTensor, _name, _forward_inplace(_name))


def mark_sharding(t, mesh, partition_spec) -> XLAShardedTensor:
    """Shards `t` in place (xlanb.spmd.mark_sharding; partition entries are mesh axis indices or
    names, tuples of them, or None) and returns it as an XLAShardedTensor."""
    t = _unwrap(t)
    given, mesh = mesh, mesh_module.as_mesh(mesh)
    if len(tuple(partition_spec)) != t.dim():
        raise ValueError(f"xs.mark_sharding: partition_spec {tuple(partition_spec)} has {len(tuple(partition_spec))} "
                         f"entries for a {t.dim()}-d tensor; give one per dimension (None replicates it)")
    api.mark_sharding(t, mesh, tuple(partition_spec))
    if hasattr(given, "get_op_sharding"):           # torch_xla's Mesh: its sharding made once per spec
        given.get_op_sharding(tuple(partition_spec))
    return XLAShardedTensor(t, mesh.mesh_shape, tuple(partition_spec))


def clear_sharding(t) -> torch.Tensor:
    """Back to one device; returns the plain tensor."""
    t = _unwrap(t)
    api.clear_sharding(t)
    return t


def _mesh_or_global(mesh, what: str):
    mesh = get_global_mesh() if mesh is None else mesh
    if mesh is None:
        raise RuntimeError(f"xs.{what}: no mesh given and no global mesh set; pass mesh= or call xs.set_global_mesh")
    return mesh


def enable_manual_sharding(t, partition_spec, *, mesh=None) -> XLAShardedTensor:
    """Shards `t` (mark_sharding) and returns its shards as one manual tensor of a shard's shape, whose
    ops run on each device's shard (xlanb/spmd/manual.py)."""
    mesh = _mesh_or_global(mesh, "enable_manual_sharding")
    xt = mark_sharding(t, mesh, partition_spec)
    return XLAShardedTensor(manual.to_shards(xt.global_tensor, "enable_manual_sharding"), mesh.mesh_shape,
                            tuple(partition_spec))


def disable_manual_sharding(t, partition_spec, full_shape, *, mesh=None) -> XLAShardedTensor:
    """The tensor of `full_shape`, sharded as `partition_spec`, whose shards manual tensor `t` holds."""
    mesh = _mesh_or_global(mesh, "disable_manual_sharding")
    out = manual.disable_manual_sharding(_unwrap(t), mesh, tuple(partition_spec), full_shape)
    return XLAShardedTensor(out, mesh.mesh_shape, tuple(partition_spec))


def mark_manual_sharding(t) -> XLAShardedTensor:
    """`xs._mark_manual_sharding`: a tensor computed on shards (from enable_manual_sharding) is manual
    already. torch_xla also marks a value computed whole as per-device data; xlanb does not."""
    t = _unwrap(t)
    if type(t) is not LazyTensor or not manual.is_manual_tensor(t):
        raise RuntimeError("xs._mark_manual_sharding: xlanb marks as manual only tensors computed on shards "
                           "(from xs.enable_manual_sharding or _XLAC._spmd_full_to_shard_shape)")
    return XLAShardedTensor(t)


def full_to_shard_shape(t) -> torch.Tensor:
    """`_XLAC._spmd_full_to_shard_shape`: a sharded tensor's shards as one manual tensor."""
    return manual.to_shards(_unwrap(t), "_spmd_full_to_shard_shape")


def shard_to_full_shape(t, sharding, full_shape, dtype) -> torch.Tensor:
    """`_XLAC._spmd_shard_to_full_shape`: `sharding` is what `Mesh.get_op_sharding` returns."""
    if not isinstance(sharding, jax.sharding.NamedSharding):
        raise TypeError(f"_spmd_shard_to_full_shape takes the sharding Mesh.get_op_sharding(partition_spec) "
                        f"returns, got {type(sharding).__name__}")
    out = manual.from_shards(_unwrap(t), sharding, full_shape, "_spmd_shard_to_full_shape")
    return out if dtype is None or out.dtype == dtype else out.to(dtype)


def visualize_sharding(t, **kwargs) -> str:
    text = api.visualize_sharding(_unwrap(t))
    print(text)
    return text


class MarkShardingFunction(torch.autograd.Function):
    """`MarkShardingFunction.apply(t, mesh, partition_spec)`: a sharded copy of `t` whose gradient is
    sharded the same way (torch_xla's mark_sharding_with_gradients)."""

    @staticmethod
    def forward(ctx, t, mesh, partition_spec):
        ctx.mesh, ctx.spec = mesh, tuple(partition_spec)
        out = t.clone()
        api.mark_sharding(out, mesh_module.as_mesh(mesh), ctx.spec)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        api.mark_sharding(grad, mesh_module.as_mesh(ctx.mesh), ctx.spec)
        return grad, None, None


def mark_sharding_with_gradients(t, mesh, partition_spec) -> torch.Tensor:
    return MarkShardingFunction.apply(_unwrap(t), mesh, partition_spec)


@dataclasses.dataclass
class ShardingSpec:
    """`xs.ShardingSpec(mesh, partition_spec)`: a sharding to apply to tensors later (the
    MpDeviceLoader's `input_sharding`); `apply(t)` marks `t` with it."""
    mesh: Mesh
    partition_spec: tuple
    minibatch: bool = False

    def can_apply(self, t: torch.Tensor) -> bool:
        return len(self.partition_spec) == t.dim()

    def apply(self, t: torch.Tensor) -> None:
        mark_sharding(t, self.mesh, self.partition_spec)
