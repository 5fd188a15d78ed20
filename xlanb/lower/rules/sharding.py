"""`xlanb.sharding_constraint`: `xlanb.spmd.mark_sharding` on a pending tensor.

The node's attribute is an `ir.sharding.ShardingKey` (compared by tiles and devices, so it is an
exact part of the graph's key); the rule hands its jax sharding to XLA's partitioner."""

from __future__ import annotations

import jax

from xlanb.lower.registry import lowers


@lowers("xlanb.sharding_constraint")
def sharding_constraint(x, key):
    return jax.lax.with_sharding_constraint(x, key.sharding)
