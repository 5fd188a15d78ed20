"""`xlanb.sharding_constraint`: `xlanb.spmd.mark_sharding` on a pending tensor; and manual sharding's
two nodes.

The node's attribute is an `ir.sharding.ShardingKey` (compared by tiles and devices, so it is an
exact part of the graph's key); the rule hands its jax sharding to XLA's partitioner. A graph's
output constrained to a sharding that does not divide its shape leaves padded (`padded_output`):
jax arrays have no uneven shards, so the buffer is the padded one torch_xla would hold, and graphs
that read it slice the padding off (lower/to_jax.py).

Manual sharding (xlanb/spmd/manual.py): `FULL_TO_SHARD` makes each device's shard of a sharded value a
value of its own (its tensor has the shard's shape), every op on such a value runs on each device's
shard alone, and `SHARD_TO_FULL` makes the value the shards tile again. In the jax function a manual
value of shard shape S is one array of shape (devices, *S), split over every mesh axis along its first
dimension (device k's block is its shard), and each node is lowered inside a `jax.shard_map`
(lower/to_jax.py's `_run_manual`): XLA sees the per-device program torch_xla's manual region gives it.
A manual value cannot leave a graph (it is no one tensor's value): syncs leave it pending
(`without_manual`), and reading it is an error (xlanb/spmd/manual.py)."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp

from xlanb.ir.node import Node
from xlanb.ir.sharding import pad_widths, padded_shape
from xlanb.lower.registry import lowers

CONSTRAINT = "xlanb.sharding_constraint"
MARK_SHARDING = "xlanb.mark_sharding.default"     # spmd/traced.py's op: mark_sharding in a traced graph
FULL_TO_SHARD = "xlanb.full_to_shard"       # (value, ShardingKey of its sharding): each device's shard
SHARD_TO_FULL = "xlanb.shard_to_full"       # (manual value, ShardingKey of the result): the value tiled


@lowers(CONSTRAINT)
def sharding_constraint(x, key):
    return jax.lax.with_sharding_constraint(x, key.sharding)


def mark_sharding_text(ids, shape, axes, spec) -> str:
    """MARK_SHARDING's sharding argument: the mesh (logical device ids, shape, axis names) and the
    partition spec (per dimension None, an axis name or a list of them), as JSON."""
    return json.dumps({"ids": [int(i) for i in ids], "shape": [int(n) for n in shape], "axes": list(axes),
                       "spec": [list(e) if isinstance(e, (tuple, list)) else e for e in spec]},
                      separators=(",", ":"))


@functools.lru_cache(maxsize=64)
def mark_sharding_parts(text: str) -> tuple:
    """(ids, shape, axes, spec) from `mark_sharding_text`."""
    d = json.loads(text)
    spec = tuple(tuple(e) if isinstance(e, list) else e for e in d["spec"])
    return tuple(d["ids"]), tuple(d["shape"]), tuple(d["axes"]), spec


def devices_spec(mesh):
    """The spec of a manual value's array: its first dimension split over every mesh axis."""
    return jax.sharding.PartitionSpec(tuple(mesh.axis_names))


@lowers(FULL_TO_SHARD)
def full_to_shard(x, key):
    """A sharded value -> (devices, *shard shape): device k's block is the shard it holds."""
    s = key.sharding
    return jax.shard_map(lambda b: b[None], mesh=s.mesh, in_specs=s.spec, out_specs=devices_spec(s.mesh),
                         check_vma=False)(x)


@lowers(SHARD_TO_FULL)
def shard_to_full(g, key):
    """(devices, *shard shape) -> the value whose shards, laid out as `key`'s sharding, they are."""
    s = key.sharding
    return jax.shard_map(lambda b: b[0], mesh=s.mesh, in_specs=devices_spec(s.mesh), out_specs=s.spec,
                         check_vma=False)(g)


def padded_output(node):
    """For a graph root: (pad widths, sharding) when it is a constraint to a sharding its shape does
    not divide over, else None."""
    if node.name != CONSTRAINT or node.buffer is not None:
        return None
    s = node.args[1].sharding
    shape = tuple(node.meta.shape)
    target = padded_shape(s, shape)
    return None if target == shape else (pad_widths(shape, target), s)


def pad_output(x, pad):
    widths, s = pad
    return jax.lax.with_sharding_constraint(jnp.pad(x, widths), s)


def is_manual(node, memo: dict) -> bool:
    """Whether a pending node's value is a manual one: computed from a FULL_TO_SHARD's output without
    a SHARD_TO_FULL between (a walk of its pending ancestors, shared through `memo`)."""
    stack = [node]
    while stack:
        n = stack[-1]
        if n in memo:
            stack.pop()
            continue
        if n.buffer is not None or n.name == SHARD_TO_FULL:
            memo[n] = False
        elif n.name == FULL_TO_SHARD:
            memo[n] = True
        else:
            todo = [o for o in n.operands if type(o) is Node and o not in memo]
            if todo:
                stack.extend(todo)
                continue
            memo[n] = any(memo[o] for o in n.operands if type(o) is Node)
        stack.pop()
    return memo[node]


def without_manual(nodes) -> list:
    """`nodes` less the manual values, which no graph may return."""
    memo: dict = {}
    return [n for n in nodes if not is_manual(n, memo)]
