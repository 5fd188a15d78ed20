"""CPU's verdict on memory overlap between what an op writes and what it reads.

torch's CPU kernels refuse an in-place or out= write whose memory partly overlaps one of the op's
inputs (`x[1:].add_(x[:-1])`, `torch.mul(a, 2, out=a[1:])`: TensorIterator's partial-overlap check)
and, for the index ops, any overlap at all (`x.index_add_(0, i, x[:2])`): "unsupported operation: some
elements of the input tensor and the written-to tensor refer to a single memory location". XLA has no
memory to overlap: the functional op would compute a value CPU never gives. Which ops check which
overlap is each kernel's own business, so the kernel is asked: when a written tensor shares a storage
with another tensor argument (the same Storage cell, or the same tensor object twice), the op runs once
per signature on CPU tensors laid out alike (one CPU storage per shared storage, each tensor at its
offset and strides; zeros, so every index is valid), and CPU's overlap error is raised at the op. The
internal overlap of the written tensor alone (an expanded out=) is the verdict's (capture/verdict.py).

Costs nothing unless a written tensor aliases an argument; then one dict lookup (the layout pattern).
"""

from __future__ import annotations

import torch

from xlanb.capture.tensor import LazyTensor
from xlanb.capture.verdict import OVERLAP, raise_remembered, rng_kept, tensors_in
from xlanb.lower.fallback import host_dispatch, probe_on_cpu

_verdicts: dict = {}           # (func, layout pattern) -> the overlap error CPU raised, or None
_MAX_BYTES = 1 << 28           # storages larger than this are not mirrored on CPU (no verdict)


def check_write_overlap(func, args, kwargs, targets) -> None:
    """Raises CPU's overlap error when one of `targets` (the tensors `func` writes) shares memory with
    another tensor argument in a way CPU's kernel refuses."""
    if len(targets) == 1:          # the common case, without sets
        t = targets[0]
        cell = t._storage
        aliases = 0
        for a in (*args, *kwargs.values()) if kwargs else args:
            if a is t or cell is not None and type(a) is LazyTensor and a._storage is cell:
                aliases += 1
            elif type(a) is list or type(a) is tuple:
                aliases += sum(1 for b in tensors_in(a) if b is t or cell is not None and type(b) is LazyTensor
                               and b._storage is cell)
        if aliases > 1:            # the target meets itself once
            _verdict(func, args, kwargs or {})
        return
    mine = {id(t) for t in targets}
    mine.update(id(t._storage) for t in targets if t._storage is not None)
    aliases = 0
    for a in tensors_in((args, tuple(kwargs.values()) if kwargs else ())):
        aliases += type(a) is LazyTensor and (id(a) in mine or id(a._storage) in mine)
    if aliases > len(targets):     # each target meets itself once
        _verdict(func, args, kwargs or {})


def _group(t) -> object:
    """What identifies t's memory: its Storage cell, or the tensor itself when it has none."""
    s = t._storage if type(t) is LazyTensor else None
    return s if s is not None else t


def _verdict(func, args, kwargs) -> None:
    groups: dict = {}          # id(memory) -> its number in the pattern
    layout = []
    tensors = list(tensors_in((args, tuple(kwargs.values()))))
    for t in tensors:
        g = groups.setdefault(id(_group(t)), len(groups))
        layout.append((tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, g))
    key = (func, tuple(layout), _constants(args), _constants(tuple(kwargs.items())))
    raise_remembered(_verdicts, key, lambda: _run_on_cpu(func, args, kwargs, tensors, layout))


def _constants(x):
    if isinstance(x, torch.Tensor):
        return None
    if isinstance(x, (list, tuple)):
        return tuple(_constants(y) for y in x)
    return x


def _run_on_cpu(func, args, kwargs, tensors, layout):
    """CPU's overlap error for this layout, or None (no error, another error, or too large to mirror)."""
    extent: dict = {}          # group -> bytes its tensors reach
    for shape, strides, offset, dtype, g in layout:
        reach = offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else offset
        extent[g] = max(extent.get(g, 0), reach * dtype.itemsize)
    if max(extent.values()) > _MAX_BYTES:
        return None
    memory = {g: torch.UntypedStorage(size) for g, size in extent.items()}
    for m in memory.values():
        m.fill_(0)
    mirrors = {}
    for t, (shape, strides, offset, dtype, g) in zip(tensors, layout):
        mirrors[id(t)] = torch.empty(0, dtype=dtype).set_(memory[g], offset, shape, strides)

    def mirror(x):
        if isinstance(x, torch.Tensor):
            return mirrors[id(x)]
        if isinstance(x, (list, tuple)):
            return type(x)(mirror(y) for y in x)
        if isinstance(x, torch.device):
            return torch.device("cpu")
        return x
    try:
        with torch.no_grad(), host_dispatch(), rng_kept(func):     # the mirrors made at top-level state too
            probe_on_cpu(func, *mirror(tuple(args)), **{k: mirror(v) for k, v in kwargs.items()})
    except (RuntimeError, IndexError, ValueError, TypeError, NotImplementedError) as e:
        if str(e).startswith(OVERLAP):
            return e
    return None
