"""Replica collectives (`xm.all_reduce`, `all_gather`, `reduce_scatter`, `rendezvous`, `mesh_reduce`)
across the processes `xmp.spawn` started, as XLA collectives on jax.distributed.

Each process holds one device; a collective stacks every process's buffer into one global
`jax.Array` sharded over a mesh of all processes' devices (axis "replica") and runs a jitted
reduction whose output sharding makes XLA's partitioner emit the all-reduce, all-gather or
reduce-scatter (gloo on the CPU, ICI/NCCL on accelerators). Different from torch_xla on purpose:
the inputs are computed first (a sync of the pending graph, as a value read would), and the
collective runs as its own executable instead of inside the step's graph. With one replica every
call is what torch_xla does there: all_reduce of a tensor returns a copy, of a list leaves it as it is.
"""

from __future__ import annotations

import functools
import io
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax.sharding import NamedSharding, PartitionSpec

from xlanb.capture import realize
from xlanb.capture.tensor import LazyTensor, base_node, new_tensor, tensor_meta, view_chain, write
from xlanb.compat import devices
from xlanb.ir.node import data_node, intern_meta

REDUCE_SUM, REDUCE_MUL, REDUCE_AND, REDUCE_OR, REDUCE_MIN, REDUCE_MAX = "sum", "mul", "and", "or", "min", "max"
AXIS = "replica"
_REDUCERS = {REDUCE_SUM: jnp.sum, REDUCE_MUL: jnp.prod, REDUCE_MIN: jnp.min, REDUCE_MAX: jnp.max,
             REDUCE_AND: jnp.all, REDUCE_OR: jnp.any}


def _check_reduce_type(reduce_type: str, what: str) -> None:
    if reduce_type not in _REDUCERS:
        raise ValueError(f"{what}: reduce_type must be one of {sorted(_REDUCERS)}, got {reduce_type!r}")


def _check(tensors, what: str, groups) -> None:
    if groups:
        raise NotImplementedError(f"{what}(groups=...): replica groups are not supported by xlanb.compat; "
                                  "every collective spans all replicas")
    for t in tensors:
        if type(t) is not LazyTensor:
            raise TypeError(f"{what} takes tensors on the xla device, got {type(t).__name__} on "
                            f"{getattr(t, 'device', '?')}")


def _mesh() -> jax.sharding.Mesh:
    return jax.sharding.Mesh(np.array(jax.devices()), (AXIS,))


def _local_buffers(tensors, what: str) -> list:
    """Each tensor's value as a buffer on this process's device (the pending graph is run first)."""
    work = [t.clone() if view_chain(t) else t for t in tensors]
    if any(base_node(t).buffer is None for t in work):
        realize.sync(cause=f"{what}: inputs computed before the collective")
    return [base_node(t).buffer for t in work]


def _stacked(buffers) -> list:
    """Every replica's buffer as one (replicas, *shape) array, row i on replica i's device."""
    n = jax.device_count()
    sharding = NamedSharding(_mesh(), PartitionSpec(AXIS))
    with jax.enable_x64(True):
        return [jax.make_array_from_single_device_arrays((n,) + tuple(b.shape), sharding,
                                                         [jnp.reshape(b, (1,) + tuple(b.shape))])
                for b in buffers]


def _local(a):
    """This process's part of a global output."""
    return a.addressable_data(0)


@functools.lru_cache(maxsize=None)
def _reduce_fn(reduce_type: str, scale: float, count: int, out_sharding):
    reducer = _REDUCERS[reduce_type]

    def run(stacked):
        out = []
        for x in stacked:
            r = reducer(x, axis=0).astype(x.dtype)
            out.append(r if scale == 1.0 else (r * scale).astype(x.dtype))
        return out
    return jax.jit(run, out_shardings=[out_sharding] * count)


def _set_value(t: LazyTensor, buffer) -> None:
    meta = tensor_meta(t)
    write(t, data_node(buffer, meta))


def _as_tensor(buffer, like: torch.Tensor) -> LazyTensor:
    meta = intern_meta(tuple(buffer.shape), like.dtype)
    return new_tensor(data_node(buffer, meta), meta)


def all_reduce(reduce_type: str, inputs, scale: float = 1.0, groups=None, pin_layout: bool = True):
    """`xm.all_reduce`: a tensor gives a new reduced tensor; a list is reduced in place and returned."""
    single = isinstance(inputs, torch.Tensor)
    tensors = [inputs] if single else list(inputs)
    _check_reduce_type(reduce_type, "xm.all_reduce")
    _check(tensors, "xm.all_reduce", groups)
    if devices.world_size() == 1:
        return inputs.clone() if single else inputs
    if not tensors:
        return inputs
    replicated = NamedSharding(_mesh(), PartitionSpec())
    with jax.enable_x64(True):
        stacked = _stacked(_local_buffers(tensors, "xm.all_reduce"))
        outs = _reduce_fn(reduce_type, float(scale), len(tensors), replicated)(stacked)
    if single:
        return _as_tensor(_local(outs[0]), inputs)
    for t, out in zip(tensors, outs):
        _set_value(t, _local(out))
    return inputs


@functools.lru_cache(maxsize=None)
def _gather_fn(dim: int, out_sharding):
    def run(x):
        return jnp.concatenate([x[i] for i in range(x.shape[0])], axis=dim)
    return jax.jit(run, out_shardings=out_sharding)


def all_gather(value: torch.Tensor, dim: int = 0, groups=None, output=None, pin_layout: bool = True):
    """`xm.all_gather`: every replica's `value` concatenated along `dim`, on every replica."""
    _check([value], "xm.all_gather", groups)
    dim = dim % max(value.dim(), 1)
    if devices.world_size() == 1:
        result = value.clone()
    else:
        replicated = NamedSharding(_mesh(), PartitionSpec())
        with jax.enable_x64(True):
            out = _gather_fn(dim, replicated)(_stacked(_local_buffers([value], "xm.all_gather"))[0])
        result = _as_tensor(_local(out), value)
    if output is not None:
        output.copy_(result)
        return output
    return result


@functools.lru_cache(maxsize=None)
def _scatter_fn(reduce_type: str, scale: float, dim: int, out_sharding):
    reducer = _REDUCERS[reduce_type]

    def run(x):
        n = x.shape[0]
        r = reducer(x, axis=0).astype(x.dtype)
        if scale != 1.0:
            r = (r * scale).astype(x.dtype)
        shape = r.shape
        split = r.reshape(shape[:dim] + (n, shape[dim] // n) + shape[dim + 1:])
        return jnp.moveaxis(split, dim, 0)          # row i, sharded to replica i: the reduce-scatter
    return jax.jit(run, out_shardings=out_sharding)


def reduce_scatter(reduce_type: str, input: torch.Tensor, scale: float, scatter_dim: int, shard_count: int,
                   groups=None, output=None, pin_layout: bool = True):
    """`xm.reduce_scatter`: the reduction over replicas, split in `shard_count` pieces along
    `scatter_dim`; replica i keeps piece i."""
    _check_reduce_type(reduce_type, "xm.reduce_scatter")
    _check([input], "xm.reduce_scatter", groups)
    n = devices.world_size()
    if shard_count != n:
        raise ValueError(f"xm.reduce_scatter: shard_count {shard_count} must equal the number of replicas ({n})")
    dim = scatter_dim % max(input.dim(), 1)
    if input.shape[dim] % n:
        raise ValueError(f"xm.reduce_scatter: dimension {dim} (size {input.shape[dim]}) does not divide into "
                         f"{n} shards")
    if n == 1:
        result = input * scale if scale != 1.0 else input.clone()
    else:
        rows = NamedSharding(_mesh(), PartitionSpec(AXIS))
        with jax.enable_x64(True):
            out = _scatter_fn(reduce_type, float(scale), dim, rows)(
                _stacked(_local_buffers([input], "xm.reduce_scatter"))[0])
            local = jnp.squeeze(_local(out), 0)
        result = _as_tensor(local, input)
    if output is not None:
        output.copy_(result)
        return output
    return result


_rendezvous_count = itertools.count()


def rendezvous(tag: str, payload: bytes = b"", replicas=None) -> list[bytes]:
    """`xm.rendezvous`: waits for every replica to reach `tag`; returns their payloads in ordinal
    order (through jax.distributed's key-value store, not a device collective)."""
    if not isinstance(payload, bytes):
        raise TypeError(f"xm.rendezvous: payload must be bytes, not {type(payload).__name__}")
    n = devices.world_size()
    if n == 1:
        return [payload]
    from jax._src import distributed
    client = distributed.global_state.client
    key = f"xlanb_compat/{next(_rendezvous_count)}/{tag}"
    client.key_value_set_bytes(f"{key}/{devices.global_ordinal()}", payload)
    return [client.blocking_key_value_get_bytes(f"{key}/{i}", 300_000) for i in range(n)]


def mesh_reduce(tag: str, data, reduce_fn):
    """`xm.mesh_reduce`: `reduce_fn` of every replica's `data` (xla tensors as CPU copies)."""
    cpu = realize.tree_to_cpu(data)
    buf = io.BytesIO()
    torch.save(cpu, buf)
    gathered = [torch.load(io.BytesIO(b), weights_only=False) for b in rendezvous(tag, buf.getvalue())]
    return reduce_fn(gathered) if gathered else cpu
