"""mark_sharding, clear_sharding, get_sharding: shardings of xla tensors, on XLA's SPMD partitioner.

A computed tensor (a graph input) is laid out at once: its buffer becomes a sharded `jax.Array`.
A pending tensor (an intermediate) gets a sharding constraint, lowered as `with_sharding_constraint`.
A dimension that does not divide over its mesh axes is padded, as torch_xla pads uneven shards: the
buffer holds the value in its corner (runtime/partition.py's lay_out), its shards are all one shape.
Nothing here is a global switch: a tensor goes back to one device with `clear_sharding`, and
`to_one_device` brings modules, optimizers and the RNG key back too.
"""

from __future__ import annotations

import jax
import numpy as np
import torch

from xlanb.capture.handlers import SPECIAL
from xlanb.capture.nodes import make_node
from xlanb.capture.realize import realize
from xlanb.capture.tensor import LazyTensor, base_node, tensor_meta, value, view_chain, write
from xlanb.ir.node import data_node
from xlanb.ir.sharding import is_multi_device, sharding_text
from xlanb.lower.rules.sharding import MARK_SHARDING, is_manual
from xlanb.runtime import executor
from xlanb.runtime.partition import CONSTRAINT, constraint_key, lay_out, unpadded
from xlanb.spmd import traced
from xlanb.spmd.mesh import Mesh, as_mesh, caller_name, named_sharding
from xlanb.state import runtime_state

_rt = runtime_state()


def _check_tensor(t, what: str, views: bool = False) -> None:
    if type(t) is not LazyTensor:
        device = getattr(t, "device", None)
        raise TypeError(f"{what} takes a tensor on the xla device, got "
                        f"{type(t).__name__}" + (f" on {device}" if device is not None else "") +
                        ". Move it first: t = t.to('xla')")
    if view_chain(t) and not views:
        raise ValueError(f"{what}: the tensor is a view of another tensor; shard the tensor it views "
                         "(or a .clone() of the view)")


def _set_buffer(t: LazyTensor, buffer) -> None:
    """Gives `t` a new device buffer holding the same value (no write: nothing becomes pending)."""
    meta = tensor_meta(t)
    node = data_node(buffer, meta)
    if t._node is not None:
        t._node = node
    else:
        t._storage.node = node
        t._storage.version += 1


def mark_sharding(t: torch.Tensor, mesh, partition_spec, *, name: str = "") -> torch.Tensor:
    """Shards `t` over `mesh` as `partition_spec` says (one entry per dimension: a mesh axis name or
    index, a tuple of them, or None). On a computed tensor the buffer is laid out now; on a pending
    one a sharding constraint is recorded. Under functional tracing (aot_function, AOT autograd) the
    sharding is an op of the traced graph (spmd/traced.py). Returns `t`."""
    if type(t) is not LazyTensor and isinstance(t, torch.Tensor) and t.device.type == _rt.device.type:
        return traced.traced(t, as_mesh(mesh), partition_spec)
    _check_tensor(t, "mark_sharding")
    node = base_node(t)
    if _rt.manual_used and node.buffer is None and is_manual(node, {}):
        raise RuntimeError("mark_sharding: the tensor is manually sharded (one shard on each device, from "
                           "enable_manual_sharding); shard the tensor disable_manual_sharding gives back")
    mesh = as_mesh(mesh)
    meta = tensor_meta(t)
    sharding = named_sharding(meta, mesh, partition_spec, "mark_sharding", name or caller_name(t))
    if node.buffer is not None:
        _set_buffer(t, lay_out(node.buffer, meta.shape, sharding))
    else:
        key = constraint_key(sharding, len(meta.shape))
        write(t, make_node(CONSTRAINT, CONSTRAINT, (node, key), None, node.meta))
    return t


def _on_xla(func, args, kwargs):
    """spmd/traced.py's op on an xla tensor (capture's handler): a clone of `x`, marked."""
    x, text = args if len(args) == 2 else (args[0], kwargs["sharding"])
    mesh, spec = traced.mesh_and_spec(text)
    return mark_sharding(torch.ops.aten.clone.default(x), mesh, spec)


SPECIAL.setdefault(MARK_SHARDING, _on_xla)


def clear_sharding(t: torch.Tensor) -> torch.Tensor:
    """Back to one device: the whole value on `xla:0` (a pending tensor is computed first, unless its
    last op is a sharding constraint, which is dropped). Returns `t`."""
    _check_tensor(t, "clear_sharding")
    node = base_node(t)
    if node.buffer is None and node.name == CONSTRAINT:
        write(t, node.args[0])
        return t
    node = realize(t, "clear_sharding")
    _set_buffer(t, unpadded(_one_device(node.buffer), node.meta.shape))
    return t


def set_local_shards(t: torch.Tensor, arrays: list) -> torch.Tensor:
    """Replaces the data of a sharded tensor shard by shard, keeping its sharding: one array per
    device of this process holding a tile, in device-id order, each of its tile's shape (what
    torch_xla's `load_local_shards_` does). Returns `t`."""
    _check_tensor(t, "set_local_shards")
    buf = realize(t, "set_local_shards").buffer
    if not is_multi_device(buf.sharding) or buf.sharding.is_fully_replicated:
        raise RuntimeError("set_local_shards: the tensor is not split into tiles (replicated or on one device); "
                           "give it a tiled sharding with mark_sharding first, or write it whole")
    shards = sorted(buf.addressable_shards, key=lambda sh: sh.device.id)
    if len(arrays) != len(shards):
        raise RuntimeError(f"set_local_shards: {len(arrays)} shards given for {len(shards)} devices; give one per "
                           "device")
    with jax.enable_x64(True):
        placed = []
        for a, sh in zip(arrays, shards):
            a = np.asarray(a, dtype=buf.dtype)
            if a.shape != sh.data.shape:
                raise RuntimeError(f"set_local_shards: a shard of shape {list(a.shape)} for the tile of device "
                                   f"{sh.device.id}, which has shape {list(sh.data.shape)}")
            placed.append(jax.device_put(a, sh.device))
        _set_buffer(t, jax.make_array_from_single_device_arrays(buf.shape, buf.sharding, placed))
    return t


def _one_device(buf):
    if not is_multi_device(buf.sharding):
        return buf
    with jax.enable_x64(True):
        if buf.is_fully_addressable:
            return jax.device_put(buf, _rt.jax_device())
        from jax.experimental import multihost_utils
        return jax.device_put(np.asarray(multihost_utils.process_allgather(buf, tiled=True)), _rt.jax_device())


def get_sharding(t: torch.Tensor):
    """The tensor's sharding after propagation (a `jax.sharding.Sharding`), None on one device.
    A pending tensor's graph is compiled (not run) to ask the partitioner; the executable is kept
    in the cache, so a sync of the same pending tensors does not compile it again."""
    _check_tensor(t, "get_sharding", views=True)
    node = value(t)
    if node.buffer is not None:
        s = node.buffer.sharding
        return s if is_multi_device(s) else None
    graph = executor.new_graph([node], _rt.graph_name)
    _, compiled, _ = executor.executable(graph, eager=False, cause="get_sharding")    # as run_graph will see it
    s = compiled.executable.output_shardings[0]
    return s if is_multi_device(s) else None


def sharding_spec(t: torch.Tensor) -> str:
    """How the report names the tensor's sharding: "one device", "('data', None) on mesh data=8"."""
    s = get_sharding(t)
    return "one device" if s is None else sharding_text(s, t.dim())


def visualize_sharding(t: torch.Tensor) -> str:
    """A text picture of which device holds which tile of `t` (after propagation)."""
    from xlanb.report.sharding import tile_text
    from xlanb.runtime.partition import sharding_info
    s = get_sharding(t)
    if s is None:
        return f"{tensor_meta(t).text}: one device"
    return tile_text(sharding_info(0, tensor_meta(t), s))


def _tensors_of(obj):
    if isinstance(obj, torch.nn.Module):
        yield from obj.parameters()
        yield from obj.buffers()
    elif isinstance(obj, torch.optim.Optimizer):
        for state in obj.state.values():
            yield from (v for v in state.values() if isinstance(v, torch.Tensor))
    elif isinstance(obj, torch.Tensor):
        yield obj
        if obj.grad is not None:
            yield obj.grad
    else:
        raise TypeError(f"to_one_device takes tensors, modules and optimizers, got {type(obj).__name__}")


def to_one_device(*objects) -> None:
    """Brings tensors, modules (parameters, gradients, buffers) and optimizers (their state) back to
    one device, and the device RNG key too: the way back from a mesh in a notebook."""
    for obj in objects:
        for t in _tensors_of(obj):
            if type(t) is LazyTensor and not view_chain(t):
                clear_sharding(t)
                if isinstance(obj, torch.nn.Module) and t.grad is not None and type(t.grad) is LazyTensor:
                    clear_sharding(t.grad)
    rng = _rt.rng
    if rng is not None and rng.node.buffer is not None and is_multi_device(rng.node.buffer.sharding):
        rng.node = data_node(_one_device(rng.node.buffer), rng.node.meta)
        rng.version += 1


__all__ = ["Mesh", "mark_sharding", "clear_sharding", "get_sharding", "set_local_shards", "sharding_spec", "visualize_sharding",
           "to_one_device"]
