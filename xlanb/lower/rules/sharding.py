"""`xlanb.sharding_constraint`: `xlanb.spmd.mark_sharding` on a pending tensor.

The node's attribute is an `ir.sharding.ShardingKey` (compared by tiles and devices, so it is an
exact part of the graph's key); the rule hands its jax sharding to XLA's partitioner. A graph's
output constrained to a sharding that does not divide its shape leaves padded (`padded_output`):
jax arrays have no uneven shards, so the buffer is the padded one torch_xla would hold, and graphs
that read it slice the padding off (lower/to_jax.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xlanb.ir.sharding import pad_widths, padded_shape
from xlanb.lower.registry import lowers

CONSTRAINT = "xlanb.sharding_constraint"


@lowers(CONSTRAINT)
def sharding_constraint(x, key):
    return jax.lax.with_sharding_constraint(x, key.sharding)


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
