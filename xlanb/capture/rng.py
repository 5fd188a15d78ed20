"""The device RNG: a threefry key held like a tensor, threaded through the graph.

Each random op takes the current key as a graph input and advances the state to
`xlanb.rng_next(key)`, so consecutive draws differ and never recompile, and
`manual_seed` (or `torch.manual_seed`) reproduces them. An op given a `torch.Generator`
(`torch.randn(3, device="xla", generator=g)`) takes its key from that generator instead: its
numbers follow the generator's seed and state, and the device RNG does not move.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from xlanb.capture.nodes import make_node
from xlanb.capture.tensor import LazyTensor, Storage, mark_pending, new_tensor, value
from xlanb.ir.node import Node, data_node, intern_meta
from xlanb.runtime.transfer import upload, upload_numpy
from xlanb.state import runtime_state

_rt = runtime_state()

KEY_META = intern_meta((2,), torch.uint32)


def key_data(seed: int) -> np.ndarray:
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    return np.array([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], dtype=np.uint32)


def rng_storage() -> Storage:
    """The device RNG state (made on first use from torch's initial seed)."""
    if _rt.rng is None:
        _rt.rng = Storage(data_node(upload_numpy(key_data(torch.initial_seed())), KEY_META))
    return _rt.rng


def manual_seed(seed: int) -> None:
    """Seeds the xla device RNG (torch.manual_seed calls this too)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"xlanb.manual_seed expects an int, got {type(seed).__name__} {seed!r}")
    if not -(2 ** 63) <= seed < 2 ** 64:
        raise ValueError(f"xlanb.manual_seed: the seed must be in [-2**63, 2**64), as torch's, got {seed}")
    s = rng_storage()
    s.node = data_node(upload_numpy(key_data(seed)), KEY_META)
    s.version += 1


def take_key(generator=None) -> Node:
    """The key for one random op; the state moves on to the next key. With the op's `generator`, a key
    of 64 bits drawn from it (the generator moves on, as one draw of it on its own device would move
    it; the device RNG does not): the same generator state gives the same numbers. The key is an
    upload, so a replayed step that draws from a generator is traced again (its key differs)."""
    if generator is not None:
        seed = int(torch.randint(-2 ** 63, 2 ** 63 - 1, (), dtype=torch.int64, generator=generator,
                                 device=generator.device))
        return data_node(upload(torch.from_numpy(key_data(seed))), KEY_META)
    s = rng_storage()
    key = s.node
    if key.buffer is not None:
        _rt.overwritten.add(key)
    s.node = make_node("xlanb.rng_next", "xlanb.rng_next", (key,), None, KEY_META)
    s.version += 1
    mark_pending(s)
    return key


def keyed(nargs: tuple, args, kwargs) -> tuple:
    """A random op's node arguments `nargs` with its key first: from the generator it was given (by
    keyword or in its place, `poisson(x, g)`), else the device RNG's; a generator in its place becomes
    None (it is no constant of the graph)."""
    g = kwargs.get("generator") if kwargs else None
    if g is None:
        g = next((a for a in args if type(a) is torch.Generator), None)
    return (take_key(g),) + tuple(None if type(a) is torch.Generator else a for a in nargs)


def get_state() -> torch.Tensor:
    """The device RNG state (`torch.xla.get_rng_state()`), lazily: an xla uint32[2] tensor
    holding a copy of the current key, so torch.random.fork_rng and torch's checkpointing
    can save and restore it without running anything."""
    key = rng_storage().node
    return new_tensor(make_node(torch.ops.aten.clone.default, "aten.clone.default", (key,), None, KEY_META),
                      KEY_META)


def set_state(new_state: torch.Tensor) -> None:
    """Restores a state from get_state (or its CPU copy: uint32[2], or torch's 8-byte ByteTensor)."""
    s = rng_storage()
    if type(new_state) is LazyTensor:
        if tuple(new_state.shape) != (2,) or new_state.dtype != torch.uint32:
            raise ValueError(f"not an xla RNG state: {new_state.dtype}{list(new_state.shape)}")
        # a copy: the key is overwritten (donated) by the next random op, the state must survive
        s.node = make_node(torch.ops.aten.clone.default, "aten.clone.default", (value(new_state),), None, KEY_META)
        mark_pending(s)
    else:
        host = new_state.detach().cpu().contiguous()
        data = np.frombuffer(host.numpy().tobytes(), dtype=np.uint8)
        if data.size != 8:
            raise ValueError(f"not an xla RNG state: {new_state.dtype}{list(new_state.shape)}")
        s.node = data_node(upload_numpy(data.view(np.uint32).copy()), KEY_META)
    s.version += 1
