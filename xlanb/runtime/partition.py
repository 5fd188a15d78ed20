"""Graphs on several devices: XLA's SPMD partitioner through JAX shardings.

A graph runs on a mesh when one of its input buffers is sharded over several devices, or when it
holds a sharding constraint (`xlanb.spmd.mark_sharding` on a pending tensor). Then its inputs are
lowered with their shardings (`jax.ShapeDtypeStruct(..., sharding=...)`), inputs still on one device
and the lifted scalars are replicated over the mesh, constraints become `with_sharding_constraint`,
and outputs keep the shardings the partitioner chose. After a compile, `partition_event` copies what
the report shows out of the executable: shardings after propagation with their tile maps, the
collectives in the optimized HLO, and XLA's memory analysis (per device).
"""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

from xlanb import events
from xlanb.ir.graph import Graph
from xlanb.ir.node import Meta
from xlanb.ir.sharding import (corner, input_shardings, is_multi_device, mesh_text, pad_widths, padded_shape,
                               sharding_key, sharding_text)

from xlanb.lower.rules.sharding import CONSTRAINT

_SINGLE = SingleDeviceSharding


def graph_mesh(graph: Graph):
    """The jax Mesh `graph` runs on (None: one device). Scans the nodes only when no input is
    sharded (on a miss, or for a graph holding constraints)."""
    for k in graph.key.shardings:
        if isinstance(k.sharding, NamedSharding) and len(k.sharding.device_set) > 1:
            return k.sharding.mesh
    for n in graph.order:
        if n.name == CONSTRAINT and n.buffer is None:
            return n.args[1].sharding.mesh
    return None


def replicated(mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def input_avals(graph: Graph, mesh) -> list:
    """The inputs' abstract values for `jax.jit(...).lower`, with shardings when on a mesh."""
    if mesh is None:
        return [jax.ShapeDtypeStruct(n.buffer.shape, n.buffer.dtype) for n in graph.inputs]
    rep = replicated(mesh)
    return [jax.ShapeDtypeStruct(n.buffer.shape, n.buffer.dtype,
                                 sharding=n.buffer.sharding if is_multi_device(n.buffer.sharding) else rep)
            for n in graph.inputs]


def scalar_aval(shape, dtype, mesh):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=replicated(mesh) if mesh is not None else None)


def place(x, sharding):
    """`x` (a jax array or a host array) laid out as `sharding`; across processes each one
    supplies its own shards from the same host value."""
    with jax.enable_x64(True):       # int64 and float64 values (the scalar vectors) stay exact
        if sharding.is_fully_addressable:
            return jax.device_put(x, sharding)
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def lay_out(x, shape: tuple, sharding):
    """A value of `shape` laid out as `sharding` (`x`: a jax array or a host array holding it, perhaps
    in a padded buffer). Where a dimension does not divide over its tiles the buffer is padded with
    zeros to the next multiple (`padded_shape`): graphs read such an input through a slice and pad
    a root constrained so (lower/rules/sharding.py), as torch_xla pads uneven shards."""
    shape = tuple(shape)
    target = padded_shape(sharding, shape)
    with jax.enable_x64(True):
        if tuple(x.shape) != shape:
            x = x[corner(shape)]
        if target != shape:
            widths = pad_widths(shape, target)
            x = np.pad(x, widths) if isinstance(x, np.ndarray) else jnp.pad(x, widths)
        return place(x, sharding)


def unpadded(buf, shape: tuple):
    """The value of `shape` a (perhaps padded) buffer holds, as a jax array."""
    shape = tuple(shape)
    if tuple(buf.shape) == shape:
        return buf
    with jax.enable_x64(True):
        return buf[corner(shape)]


def normalize_inputs(graph: Graph) -> Graph:
    """A graph on a mesh whose inputs are partly on one device, as it is built (runtime/executor.py's
    new_graph, before anyone holds its key): those buffers are replicated over the mesh once (the same
    values, kept in their nodes, so the next step's key is the same) and the key is redone."""
    shardings = graph.key.shardings
    if not shardings or all(is_multi_device(k.sharding) for k in shardings):
        return graph
    mesh = graph_mesh(graph)
    if mesh is None:
        return graph
    rep = replicated(mesh)
    for n, k in zip(graph.inputs, shardings):
        if not is_multi_device(k.sharding):
            n.release(place(n.buffer, rep))
    return dataclasses.replace(graph, key=dataclasses.replace(graph.key, shardings=input_shardings(graph.inputs)))


def place_args(in_shardings: tuple, args: list) -> list:
    """Arguments still on one device (or on the host, as the scalar vectors are) placed as the
    executable expects them."""
    out = list(args)
    for i, (a, s) in enumerate(zip(args, in_shardings)):
        if s is None:                      # an argument the executable does not use
            continue
        if not isinstance(a, jax.Array) or (type(a.sharding) is _SINGLE and not type(s) is _SINGLE):
            out[i] = place(a, s)
    return out


# What the report shows ---------------------------------------------------------------

def tiles(s, shape: tuple) -> tuple[tuple[int, ...], tuple[events.Tile, ...]]:
    """Which device holds which block, drawn over two dimensions: the first sharded one (or 0) as
    rows and the last as columns. Devices holding the same block (replicas) share a tile."""
    ndim = len(shape)
    if ndim == 0:
        return (), (events.Tile(0, 1, 0, 1, tuple(sorted(d.id for d in s.device_set))),)
    indices = s.devices_indices_map(padded_shape(s, shape))     # spans over padding are clipped below
    if ndim == 1:
        rdim, cdim = None, 0
    else:
        cdim = ndim - 1
        sharded = [i for i in range(ndim - 1) if any(idx[i] != slice(None) and _span(idx[i], shape[i]) != (0, shape[i])
                                                     for idx in indices.values())]
        rdim = sharded[0] if sharded else 0
    blocks: dict = {}
    for device, idx in indices.items():
        r0, r1 = _span(idx[rdim], shape[rdim]) if rdim is not None else (0, 1)
        c0, c1 = _span(idx[cdim], shape[cdim])
        if r0 < r1 and c0 < c1:            # a device holding padding only (uneven shards) draws no tile
            blocks.setdefault((r0, r1, c0, c1), []).append(device.id)
    found = tuple(events.Tile(*b, tuple(sorted(ds))) for b, ds in sorted(blocks.items()))
    return ((cdim,) if rdim is None else (rdim, cdim)), found


def _span(sl, size: int) -> tuple[int, int]:
    start, stop, _ = sl.indices(size)
    return start, stop


def sharding_info(index: int, meta, s) -> events.ShardingInfo:
    if s is None:
        return events.ShardingInfo(index, getattr(meta, "text", "tuple"), "not used", "", 1, 1)
    if not isinstance(meta, Meta):
        return events.ShardingInfo(index, "tuple", sharding_text(s, 0), "", 1, 1)
    shape = tuple(meta.shape)
    dims, found = tiles(s, shape)
    rows = shape[dims[0]] if len(dims) == 2 else 1
    cols = shape[dims[-1]] if dims else 1
    return events.ShardingInfo(index, meta.text, sharding_text(s, len(shape)), str(s._to_xla_hlo_sharding(len(shape))),
                               rows, cols, dims, found)


_COLLECTIVE = re.compile(r"=\s*(?P<type>\([^=]*?\)|[a-z0-9]+\[[0-9,]*\](?:\{[^}]*\})?)\s+"
                         r"(?P<op>all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)(?:-start)?\(")
_GROUPS = re.compile(r"(?:replica_groups|source_target_pairs)=(.*?)(?:, (?!device_ids=)[a-z_]+=|$)")
_SHAPE = re.compile(r"([a-z]+[0-9]*)\[([0-9,]*)\]")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
          "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}


def collectives(optimized_hlo: str) -> tuple[events.Collective, ...]:
    """The collectives in an optimized HLO module (the async `-start` halves, not the `-done`)."""
    found = []
    for line in optimized_hlo.splitlines():
        m = _COLLECTIVE.search(line)
        if m is None:
            continue
        shapes = _SHAPE.findall(m.group("type"))
        dtype, dims = shapes[-1] if shapes else ("", "")
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        groups = _GROUPS.search(line)
        text = line.strip()
        found.append(events.Collective(m.group("op"), f"{dtype}[{dims}]", n * _BYTES.get(dtype, 0),
                                       replica_groups(groups.group(1)) if groups else "", text[:300]))
    return tuple(found)


_MESH_GROUPS = re.compile(r"^mesh\[(?P<axes>[^\]]*)\](?:, device_ids=\((?P<ids>[^)]*\)?)\))?\s*\{(?P<over>[^}]*)\}")
_IOTA_GROUPS = re.compile(r"^\[(?P<shape>[0-9,]+)\]<=\[(?P<dims>[0-9,]+)\](?:T\((?P<perm>[0-9,]+)\))?$")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _iota(dims: list[int], perm: list[int] | None) -> np.ndarray:
    a = np.arange(int(np.prod(dims))).reshape(dims)
    return a.transpose(perm) if perm else a


def replica_groups(text: str) -> str:
    """XLA's compact replica groups (`[2,4]<=[8]`, `mesh['axis_0'=2,...], device_ids=(...) {'axis_1'}`)
    written out as explicit groups, `{{0,4},{1,5},...}`; any other form as XLA wrote it."""
    text = text.strip()
    try:
        m = _IOTA_GROUPS.match(text)
        if m:
            shape = _ints(m.group("shape"))
            perm = _ints(m.group("perm")) if m.group("perm") else None
            groups = _iota(_ints(m.group("dims")), perm).reshape(shape)
            return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups.reshape(shape[0], -1)) + "}"
        m = _MESH_GROUPS.match(text)
        if m:
            axes = [(a.split("=")[0].strip("' "), int(a.split("=")[1])) for a in m.group("axes").split(",")]
            sizes = [n for _, n in axes]
            ids = m.group("ids")
            if ids:
                im = re.match(r"\[([0-9,]+)\](?:T\(([0-9,]+)\))?", ids)
                devices = _iota(_ints(im.group(1)), _ints(im.group(2)) if im.group(2) else None).reshape(sizes)
            else:
                devices = np.arange(int(np.prod(sizes))).reshape(sizes)
            over = [a.strip("' ") for a in m.group("over").split(",") if a.strip()]
            names = [a for a, _ in axes]
            inner = [names.index(a) for a in over]
            outer = [i for i in range(len(names)) if i not in inner]
            size = int(np.prod([sizes[i] for i in inner]))
            groups = devices.transpose(outer + inner).reshape(-1, size)
            return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"
    except (ValueError, IndexError, AttributeError):
        pass
    return text


def partition_event(graph: Graph, compiled, mesh) -> events.Partitioned:
    ex = compiled.executable
    ins = ex.input_shardings[0]
    outs = ex.output_shardings
    inputs = tuple(sharding_info(i, n.meta, s) for i, (n, s) in enumerate(zip(graph.inputs, ins)))
    outputs = tuple(sharding_info(i, n.meta, s) for i, (n, s) in enumerate(zip(graph.roots, outs)))
    memory = compiled.memory_analysis() or {}
    devices = len(mesh.devices.flat) if mesh is not None else max((len(s.device_set) for s in ins), default=1)
    return events.Partitioned(name=graph.name, key=compiled.digest, devices=devices,
                              mesh=mesh_text(mesh) if mesh is not None else "", inputs=inputs, outputs=outputs,
                              collectives=collectives(compiled.as_text()),
                              memory=tuple((k, int(v)) for k, v in memory.items()))


def constraint_key(sharding, ndim: int):
    """A constraint's attribute: its ShardingKey (compared by tiles and devices, carries the sharding)."""
    return sharding_key(sharding, ndim)
