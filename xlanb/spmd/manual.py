"""Manual sharding: ops that run on each device's shard alone, as torch_xla's `enable_manual_sharding`
and `disable_manual_sharding` give a partitioned program a region written per device (a custom kernel,
hand-placed collectives):

    xx = enable_manual_sharding(x, mesh, ("data", None))       # x sharded; xx has one shard's shape
    xx = xx * 2 + 1                                            # each device computes on its shard
    y = disable_manual_sharding(xx, mesh, ("data", None), x.shape)   # the value the shards tile

A manual tensor is no one tensor's value, so a sync leaves it pending (it is computed inside the graph
that brings it back) and reading it raises. Tensors from outside the region that an op reads (a
number, a tensor on one device or replicated) are the same on every device. Lowered as
lower/rules/sharding.py says.
"""

from __future__ import annotations

import torch
from jax.sharding import NamedSharding

from xlanb.capture.nodes import make_node
from xlanb.capture.tensor import base_node, new_tensor, tensor_meta
from xlanb.ir.node import intern_meta
from xlanb.ir.sharding import is_multi_device, padded_shape, sharding_key
from xlanb.lower.rules.sharding import CONSTRAINT, FULL_TO_SHARD, SHARD_TO_FULL, is_manual
from xlanb.spmd.api import _check_tensor, mark_sharding
from xlanb.spmd.mesh import as_mesh, caller_name, named_sharding
from xlanb.state import runtime_state

_rt = runtime_state()


def _sharding_of(node):
    """The sharding a tensor's value has or is constrained to (None on one device)."""
    if node.buffer is not None:
        s = node.buffer.sharding
        return s if is_multi_device(s) else None
    return node.args[1].sharding if node.name == CONSTRAINT else None


def is_manual_tensor(t) -> bool:
    node = base_node(t)
    return node.buffer is None and is_manual(node, {})


def to_shards(t: torch.Tensor, what: str = "to_shards") -> torch.Tensor:
    """A sharded tensor's shards as one manual tensor of a shard's shape (torch_xla's
    `_spmd_full_to_shard_shape`)."""
    _check_tensor(t, what)
    if t.requires_grad and torch.is_grad_enabled():
        raise RuntimeError(f"{what}: manual shards carry no gradient; use a tensor that needs none (t.detach()) "
                           f"or torch.no_grad()")
    node = base_node(t)
    s = _sharding_of(node)
    if s is None or not isinstance(s, NamedSharding):
        raise RuntimeError(f"{what}: the tensor ({tensor_meta(t).text}) has no sharding over a mesh; "
                           f"give it one first: mark_sharding(t, mesh, partition_spec)")
    shape = tuple(node.meta.shape)
    if padded_shape(s, shape) != shape:
        raise RuntimeError(f"{what}: {node.meta.text} does not divide over its sharding's tiles "
                           f"({s._to_xla_hlo_sharding(len(shape))}); manual shards must be even: pad the tensor")
    local = intern_meta(tuple(s.shard_shape(shape)), node.meta.dtype)
    _rt.manual_used = True
    return new_tensor(make_node(FULL_TO_SHARD, FULL_TO_SHARD, (node, sharding_key(s, len(shape))), None, local), local)


def from_shards(t: torch.Tensor, sharding: NamedSharding, full_shape, what: str = "from_shards") -> torch.Tensor:
    """The tensor of `full_shape` whose shards, laid out as `sharding`, are manual tensor `t`'s
    (torch_xla's `_spmd_shard_to_full_shape`)."""
    _check_tensor(t, what)
    node = base_node(t)
    if node.buffer is not None or not is_manual(node, {}):
        raise RuntimeError(f"{what}: the tensor ({tensor_meta(t).text}) is not manually sharded: it comes from "
                           f"enable_manual_sharding (or ops on such a tensor)")
    shape = tuple(int(d) for d in full_shape)
    if tuple(sharding.shard_shape(shape)) != tuple(node.meta.shape):
        raise RuntimeError(f"{what}: a shard of {list(shape)} laid out as {sharding.spec} is "
                           f"{list(sharding.shard_shape(shape))}, but the tensor is {node.meta.text}; give the "
                           f"full shape and partition spec it was split with")
    meta = intern_meta(shape, node.meta.dtype)
    return new_tensor(make_node(SHARD_TO_FULL, SHARD_TO_FULL, (node, sharding_key(sharding, len(shape))), None, meta),
                      meta)


def enable_manual_sharding(t: torch.Tensor, mesh, partition_spec) -> torch.Tensor:
    """Shards `t` as `partition_spec` says (mark_sharding) and returns its shards as one manual tensor
    of a shard's shape: each op on it runs on each device's shard."""
    return to_shards(mark_sharding(t, mesh, partition_spec), "enable_manual_sharding")


def disable_manual_sharding(t: torch.Tensor, mesh, partition_spec, full_shape) -> torch.Tensor:
    """The tensor of `full_shape`, sharded as `partition_spec`, whose shards manual tensor `t` holds."""
    mesh = as_mesh(mesh)
    meta = intern_meta(tuple(int(d) for d in full_shape), tensor_meta(t).dtype)
    sharding = named_sharding(meta, mesh, partition_spec, "disable_manual_sharding", caller_name(t))
    return from_shards(t, sharding, full_shape, "disable_manual_sharding")


__all__ = ["enable_manual_sharding", "disable_manual_sharding", "to_shards", "from_shards", "is_manual_tensor"]
