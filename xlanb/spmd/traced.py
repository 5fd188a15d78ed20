"""mark_sharding under functional tracing (`aot_function`, AOT autograd, `torch.export`): the
sharding becomes an op of the traced graph, `xlanb::mark_sharding(Tensor x, str sharding) -> Tensor`.

A tracer hands `mark_sharding` a stand-in of an xla tensor (a FunctionalTensor over a FakeTensor),
whose sharding cannot be set in place: the stand-in takes the op's result instead (`copy_`, which
functionalization turns into the result itself). When the traced graph runs on xla tensors, the op
is a sharded copy (`api.mark_sharding` on a clone, a constraint on a pending value); its gradient is
the same op on the gradient, as torch_xla's `MarkShardingFunction` gives it. On the CPU (an
`xlanb.compare` twin, a graph run on CPU tensors) it is a copy: a sharding never changes a value.

The sharding travels as text, the mesh and the partition spec, so the op's schema takes no Python
object and a traced graph can be printed, cached and compared (lower/rules/sharding.py's
`mark_sharding_text`, whose rule lowers the op where torch.compile's graph holds it).
"""

from __future__ import annotations

import functools

import torch

from xlanb.ir.node import intern_meta
from xlanb.lower.rules.sharding import mark_sharding_parts, mark_sharding_text
from xlanb.spmd.mesh import Mesh, named_sharding


def sharding_text(mesh, partition_spec) -> str:
    """The op's text for `mesh` (an xlanb Mesh) and a partition spec of axis names or indices."""
    spec = tuple(partition_spec) if isinstance(partition_spec, (tuple, list)) else (partition_spec,)

    def axis(a):
        return mesh.axis_names[a] if isinstance(a, int) and not isinstance(a, bool) else a

    entries = [None if e is None else tuple(axis(a) for a in e) if isinstance(e, tuple) else axis(e) for e in spec]
    return mark_sharding_text(mesh.device_ids, mesh.mesh_shape, mesh.axis_names, entries)


@torch.library.custom_op("xlanb::mark_sharding", mutates_args=())
def mark_sharding_op(x: torch.Tensor, sharding: str) -> torch.Tensor:
    """A copy of `x` (CPU and other plain tensors; on xla tensors capture runs api.py's `_on_xla`)."""
    return x.clone()


@mark_sharding_op.register_fake
def _(x, sharding):
    return torch.empty_like(x)


def _backward(ctx, grad):
    return mark_sharding_op(grad, ctx.sharding), None


def _setup(ctx, inputs, output):
    ctx.sharding = inputs[1]


mark_sharding_op.register_autograd(_backward, setup_context=_setup)


def traced(t: torch.Tensor, mesh, partition_spec) -> torch.Tensor:
    """mark_sharding on a tracer's stand-in of an xla tensor: `t` takes the op's result. The spec is
    checked against the mesh and the shape here, at the user's line, not when the graph runs."""
    named_sharding(intern_meta(tuple(t.shape), t.dtype), mesh, partition_spec, "mark_sharding")
    return t.copy_(mark_sharding_op(t, sharding_text(mesh, partition_spec)))



@functools.lru_cache(maxsize=64)
def mesh_and_spec(text: str) -> tuple:
    """(Mesh, partition spec) from the op's text."""
    ids, shape, axes, spec = mark_sharding_parts(text)
    return Mesh(ids, shape, axes), spec
