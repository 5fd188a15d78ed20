"""xlanb's own ops (graph plumbing) and the copies and factories capture records."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from xlanb.lower.dtypes import cast, from_words, to_jax_dtype, to_words
from xlanb.lower.fallback import aten_op
from xlanb.lower.registry import lookup, lowers

_RESHAPES = {"aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.alias.default",
             "aten.detach.default", "aten.view.dtype"}


@lowers("xlanb.getitem")
def getitem(x, i):
    return x[i]


@lowers("xlanb.fx_graph")
def fx_graph(program, *arrays):
    """A torch.compile FX graph recorded as one node (xlanb/dynamo): its own lowered function."""
    return program(*arrays)


# The device RNG's next key: its two words as one 64-bit number, times _RNG_MUL plus _RNG_ADD modulo
# 2**64 (Knuth's MMIX constants: every state is reached once in 2**64 steps), a few scalar ops where
# a fold-in was a threefry hash to compile (capture/rng.py). A key only keys threefry's draws
# (lower/threefry.py), so what matters is that the keys of one stream differ, and that seeds next to
# each other (0, 1, 2, ...) do not start one stream a step along another, as adding 1 would.
_RNG_MUL, _RNG_ADD = np.uint64(6364136223846793005), np.uint64(1442695040888963407)


@lowers("xlanb.rng_next")
def rng_next(key_data):
    wide = key_data.astype(jnp.uint64)
    state = ((wide[0] << np.uint64(32)) | wide[1]) * _RNG_MUL + _RNG_ADD
    return jnp.stack([(state >> np.uint64(32)).astype(jnp.uint32), state.astype(jnp.uint32)])


@lowers("xlanb.bounds_check")
def bounds_check(index, lo, hi, inside=False, ignore=None):
    """[1 if any index value is outside [lo, hi) (with `inside`: inside it) and is not `ignore` else 0,
    the first such value, its flat position] (capture/bounds)."""
    flat = index.reshape(-1).astype(jnp.int64)
    bad = ((flat >= lo) & (flat < hi)) if inside else ((flat < lo) | (flat >= hi))
    if ignore is not None:
        bad = bad & (flat != ignore)
    first = jnp.argmax(bad)
    return jnp.stack([jnp.any(bad).astype(jnp.int64), jnp.where(bad[first], flat[first], 0), first.astype(jnp.int64)])


@lowers("xlanb.range_check")
def range_check(x, lo, hi):
    """[1 if any value is outside [lo, hi] or NaN else 0, the first such value, its flat position], in
    float64 (capture/bounds)."""
    flat = x.reshape(-1).astype(jnp.float64)
    bad = ~((flat >= lo) & (flat <= hi))
    first = jnp.argmax(bad)
    return jnp.stack([jnp.any(bad).astype(jnp.float64), jnp.where(bad[first], flat[first], 0.0),
                      first.astype(jnp.float64)])


@lowers("xlanb.optimization_barrier")
def optimization_barrier(*arrays):
    """XLA's optimization barrier: its outputs are its inputs, and no computation moves across it."""
    return tuple(jax.lax.optimization_barrier(arrays))


@lowers("xlanb.error")
def error(*args, **kwargs):
    raise RuntimeError("this value was computed by an op that failed inside backward (its error was raised by "
                       "that backward); recompute it: zero the gradients and run the step again")


def apply_view(x, spec):
    name, args, kwitems, index = spec
    out = lookup(name).fn(x, *args, **dict(kwitems))
    return out if index is None else out[index]


def _host_view(x: torch.Tensor, spec) -> torch.Tensor:
    """The view `spec` of a CPU tensor, by torch's own view op: where view_scatter follows a chain
    on an index array. Evaluated with JAX, each view op of a new shape dispatched (and compiled) an
    XLA executable of its own: ~200 ms of lowering for a graph with three writes through views."""
    name, args, kwitems, index = spec
    out = aten_op(name)(x, *args, **dict(kwitems))
    return out if index is None else out[index]


_INVOLUTIONS = {"aten._conj.default": jnp.conj, "aten._neg_view.default": jnp.negative}


@lowers("xlanb.view_scatter")
def view_scatter(base, src, chain):
    """Writes `src` into the part of `base` that the view chain selects."""
    if chain and chain[0][0] in _INVOLUTIONS:     # a conjugate or negative view: the base takes f(written)
        f = _INVOLUTIONS[chain[0][0]]
        return f(view_scatter(f(base), src, chain[1:]))
    if chain and chain[0][0] == "aten.view_as_real.default":      # complex base, real view
        r = view_scatter(jnp.stack([jnp.real(base), jnp.imag(base)], axis=-1), src, chain[1:])
        return jax.lax.complex(r[..., 0], r[..., 1]).astype(base.dtype)
    if chain and chain[0][0] == "aten.view_as_complex.default":   # real base, complex view
        c = view_scatter(jax.lax.complex(base[..., 0], base[..., 1]), src, chain[1:])
        return jnp.stack([jnp.real(c), jnp.imag(c)], axis=-1).astype(base.dtype)
    if not chain:
        return jnp.broadcast_to(src, base.shape).astype(base.dtype)
    reinterpreted = False
    for spec in chain:
        if spec[0] in ("aten.view_as_real.default", "aten.view_as_complex.default"):
            raise NotImplementedError("writing through view_as_real/view_as_complex is not supported; "
                                      "write to the base tensor instead")
        if spec[0] == "aten.view.dtype":
            reinterpreted = True
    if reinterpreted:
        widths = {np.dtype(to_jax_dtype(spec[1][0])).itemsize for spec in chain if spec[0] == "aten.view.dtype"}
        if widths != {base.dtype.itemsize}:
            return _byte_scatter(base, src, chain)
        src = from_words(to_words(src, 1), base.dtype)
    if all(spec[0] in _RESHAPES or spec[0] in _PERMUTES for spec in chain):
        return _undo_permutes(base, src, chain).astype(base.dtype)
    index_dtype = torch.int32 if base.size < 2 ** 31 else torch.int64
    positions = torch.arange(base.size, dtype=index_dtype).reshape(base.shape)
    for spec in chain:
        if spec[0] != "aten.view.dtype":      # same-size reinterpretation: same positions
            positions = _host_view(positions, spec)
    positions = positions.reshape(-1).numpy()
    flat = base.reshape(-1).at[positions].set(src.reshape(-1).astype(base.dtype), unique_indices=True)
    return flat.reshape(base.shape)


_PERMUTES = {"aten.t.default", "aten.transpose.int", "aten.permute.default"}


def _undo_permutes(base, src, chain):
    """The base whose view through `chain` (reshapes and permutations of the dims only, each of which
    keeps every element once) is `src`: each step undone in reverse order, a transpose by its inverse
    (x.t().mul_(2) writes back with one transpose, where a scatter by positions cost XLA's CPU backend
    ~100 us for 128 x 128)."""
    shapes = []
    x = base
    for spec in chain:                   # each step's input shape (traced only: nothing of it is computed)
        shapes.append(x.shape)
        x = apply_view(x, spec)
    out = src
    for spec, shape in zip(reversed(chain), reversed(shapes)):
        name, args = spec[0], spec[1]
        if name in _RESHAPES:
            out = out.reshape(shape)
            continue
        rank = len(shape)
        if name == "aten.t.default":
            dims = list(range(rank))[::-1]
        elif name == "aten.transpose.int":
            dims = list(range(rank))
            if rank:
                a, b = args[0] % rank, args[1] % rank
                dims[a], dims[b] = dims[b], dims[a]
        else:
            dims = [d % rank for d in args[0]] if rank else []
        out = jnp.transpose(out, np.argsort(dims)) if rank else out
    return out


def _byte_scatter(base, src, chain):
    """view_scatter through a chain that reinterprets the bytes as a dtype of another size (a storage
    shared by tensors of two dtypes, `view(torch.int16)` of a float32 tensor): the written elements'
    bytes are found by following the chain on the byte offset of each element, as torch's views do
    (a narrower dtype splits the last dim, a wider one joins it), and set in the base's bytes."""
    width = base.dtype.itemsize
    offsets = torch.arange(base.size, dtype=torch.int64).reshape(base.shape) * width
    for spec in chain:
        if spec[0] == "aten.view.dtype":
            new = np.dtype(to_jax_dtype(spec[1][0])).itemsize
            if new < width:
                offsets = (offsets[..., None] + torch.arange(width // new) * new).reshape(
                    *offsets.shape[:-1], offsets.shape[-1] * (width // new))
            elif new > width:
                offsets = offsets.reshape(*offsets.shape[:-1], offsets.shape[-1] // (new // width), new // width)[..., 0]
            width = new
        else:
            offsets = _host_view(offsets, spec)
    positions = (offsets[..., None] + torch.arange(width)).reshape(-1).numpy()
    viewed = to_jax_dtype([spec for spec in chain if spec[0] == "aten.view.dtype"][-1][1][0])
    written = to_words(jnp.broadcast_to(src.astype(viewed), tuple(offsets.shape)), 1).reshape(-1)
    flat = to_words(base, 1).reshape(-1).at[positions].set(written, unique_indices=True)
    return from_words(flat.reshape(base.shape + (base.dtype.itemsize,)), base.dtype)


@lowers("aten.copy.default")
def copy(self, src, non_blocking=False):
    return jnp.broadcast_to(cast(src, self.dtype), self.shape)


@lowers("aten._to_copy.default")
def to_copy(x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
            memory_format=None):
    return x if dtype is None else cast(x, to_jax_dtype(dtype))


@lowers("aten.clone.default")
def clone(x, *, memory_format=None):
    return x


def _zeros(size, dtype):
    return jnp.zeros(tuple(size), to_jax_dtype(dtype) if dtype is not None else jnp.float32)


@lowers("aten.empty.memory_format")
def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _zeros(size, dtype)


@lowers("aten.empty_strided.default")
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _zeros(size, dtype)
