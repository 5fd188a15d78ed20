"""Shardings as CacheKey ingredients: an exact, comparable form of a jax Sharding, with a text.

Two shardings that place the same tiles on the same devices are the same ingredient, however
they were spelled (`P('data')` and `P('data', None)`, or a NamedSharding and the partitioner's
own output sharding): the key compares XLA's HloSharding text and the device order. One device
is not an ingredient at all, so single-device keys stay as they were (`shardings == ()`).
"""

from __future__ import annotations

import dataclasses

from jax.sharding import NamedSharding, SingleDeviceSharding

_SINGLE = SingleDeviceSharding


@dataclasses.dataclass(frozen=True)
class ShardingKey:
    """One input's (or one constraint's) sharding: compared by tiles and devices, named by `text`."""
    hlo: str                    # XLA's HloSharding text, e.g. "{devices=[8,1]<=[8]}" or "{replicated}"
    devices: tuple[int, ...]    # device ids in the sharding's order
    text: str = dataclasses.field(compare=False, default="")
    sharding: object = dataclasses.field(compare=False, default=None, repr=False)   # the jax Sharding

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:          # how the IR text shows a constraint's attribute
        return f"sharding={self.text}"


def mesh_text(mesh) -> str:
    """`Mesh('data': 8)` -> "mesh data=8"; a 2-D mesh "mesh data=2 model=4"."""
    return "mesh " + " ".join(f"{a}={n}" for a, n in mesh.shape.items())


def spec_text(spec, ndim: int) -> str:
    """A partition spec as written, padded to the rank: `('data', None)`."""
    entries = list(spec) + [None] * (ndim - len(spec))
    return "(" + ", ".join(repr(e) if not isinstance(e, tuple) else "(" + ", ".join(map(repr, e)) + ")"
                           for e in entries) + ("," if ndim == 1 else "") + ")"


def sharding_text(s, ndim: int) -> str:
    """How a report names a sharding: "one device", "replicated on mesh data=8",
    "('data', None) on mesh data=8", or XLA's text for shardings without a mesh."""
    if type(s) is _SINGLE or len(s.device_set) == 1:
        return "one device"
    if s.is_fully_replicated:
        where = mesh_text(s.mesh) if isinstance(s, NamedSharding) else f"{len(s.device_set)} devices"
        return f"replicated on {where}"
    if isinstance(s, NamedSharding):
        return f"{spec_text(s.spec, ndim)} on {mesh_text(s.mesh)}"
    return f"{s._to_xla_hlo_sharding(ndim)} on {len(s.device_set)} devices"


def sharding_key(s, ndim: int) -> ShardingKey:
    devices = tuple(d.id for d in s._device_assignment)
    return ShardingKey(str(s._to_xla_hlo_sharding(ndim)), devices, sharding_text(s, ndim), s)


def padded_shape(s, shape: tuple) -> tuple:
    """The shape of the buffer that holds a value of `shape` laid out as `s`: each dimension rounded up
    to a multiple of the tiles it is split into (padded shards, as torch_xla keeps them: jax arrays
    have none that are uneven). `shape` itself when every dimension divides or `s` is on one device."""
    shape = tuple(shape)
    if not shape or type(s) is _SINGLE or len(s.device_set) == 1 or s.is_fully_replicated:
        return shape
    tiles = s._to_xla_hlo_sharding(len(shape)).tile_assignment_dimensions()[:len(shape)]
    return tuple(-(-n // t) * t for n, t in zip(shape, tiles))


def corner(shape: tuple) -> tuple:
    """The index that takes a value of `shape` out of the padded buffer holding it."""
    return tuple(slice(0, n) for n in shape)


def pad_widths(shape: tuple, target: tuple) -> list:
    """`jnp.pad`'s widths from `shape` to its padded shape `target` (zeros after the value)."""
    return [(0, t - n) for t, n in zip(target, shape)]


def is_multi_device(s) -> bool:
    return type(s) is not _SINGLE and len(s.device_set) > 1


def input_shardings(inputs) -> tuple:
    """The shardings ingredient of a graph's inputs: () when every buffer is on one device."""
    multi = False
    for n in inputs:
        s = getattr(n.buffer, "sharding", None)      # torch.compile's FX inputs hold a placeholder
        if s is not None and type(s) is not _SINGLE and len(s.device_set) > 1:
            multi = True
            break
    if not multi:
        return ()
    return tuple(sharding_key(n.buffer.sharding, len(n.meta.shape)) for n in inputs)
