"""Which notebook variables hold device memory: a walk of the user's namespace after each cell.

Every xla tensor reachable from a name (directly, in a list/tuple/dict, as a module's
parameter, gradient or buffer, or as an optimizer's state) is counted once, with the first
holder met: modules and tensors before optimizers, so an optimizer's own entry is its state.
Bytes are those of the device buffer a tensor's value lives in (views share their base's).
"""

from __future__ import annotations

import jax
import torch

from xlanb.capture.tensor import LazyTensor, base_node
from xlanb.report.memory import Holder, memory_section

_SKIP = {"In", "Out", "exit", "quit", "get_ipython", "open"}


class _Counter:
    def __init__(self):
        self.seen: set[int] = set()

    def add(self, t, into: list) -> None:
        if type(t) is not LazyTensor:
            return
        node = base_node(t)
        buffer = node.buffer
        into[1] += 1
        if buffer is None:
            into[2] += 1                   # pending: no buffer yet
            return
        if id(buffer) in self.seen:
            return
        self.seen.add(id(buffer))
        try:
            if buffer.is_deleted():
                return
        except AttributeError:
            pass
        into[0] += int(buffer.nbytes)


def _holder(name: str, kind: str, tensors, counter: _Counter) -> Holder | None:
    acc = [0, 0, 0]
    for t in tensors:
        counter.add(t, acc)
    return Holder(name, kind, acc[0], acc[1], acc[2]) if acc[1] else None


def _tensors_in(value, depth: int = 0):
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 2 and isinstance(value, (list, tuple)):
        for v in value[:10_000]:
            yield from _tensors_in(v, depth + 1)
    elif depth < 2 and isinstance(value, dict):
        for v in list(value.values())[:10_000]:
            yield from _tensors_in(v, depth + 1)


def holders(namespace) -> list[Holder]:
    """One Holder per (variable, kind) holding xla tensors, each buffer counted once."""
    counter = _Counter()
    found: list[Holder] = []
    items = [(k, v) for k, v in dict(namespace).items() if not k.startswith("_") and k not in _SKIP]
    optimizers = []
    for name, value in items:
        if isinstance(value, torch.nn.Module):
            params = list(value.parameters())
            for kind, tensors in (("parameters", params),
                                  ("gradients", [p.grad for p in params if p.grad is not None]),
                                  ("buffers", list(value.buffers()))):
                h = _holder(f"{name}.{kind}", kind, tensors, counter)
                if h is not None:
                    found.append(h)
        elif isinstance(value, torch.optim.Optimizer):
            optimizers.append((name, value))
        elif isinstance(value, (torch.Tensor, list, tuple, dict)):
            h = _holder(name, "tensor" if isinstance(value, torch.Tensor) else "tensors", _tensors_in(value), counter)
            if h is not None:
                found.append(h)
    for name, opt in optimizers:
        state = [t for s in opt.state.values() for t in _tensors_in(s)]
        params = [p for g in opt.param_groups for p in g["params"]]
        for kind, tensors in (("optimizer state", state), ("parameters", params),
                              ("gradients", [p.grad for p in params if p.grad is not None])):
            h = _holder(f"{name}.{'state' if kind == 'optimizer state' else kind}", kind, tensors, counter)
            if h is not None:
                found.append(h)
    return found


def device_total(device) -> int:
    """Bytes of every live jax array on `device` (xlanb's accounting: its buffers and any others)."""
    total = 0
    for a in jax.live_arrays():
        try:
            if a.is_deleted() or device not in a.devices():
                continue
            total += int(a.nbytes)
        except (RuntimeError, AttributeError):
            continue
    return total


def host_memory() -> int | None:
    import os
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def memory_report(namespace, device, *, previous=None, graphs=(), share: float = 0.5):
    """(MemoryReport, baseline for the next cell)."""
    found = holders(namespace)
    try:
        stats = device.memory_stats()
    except Exception:            # backends without memory stats raise assorted errors
        stats = None
    capacity = (stats or {}).get("bytes_limit") or (host_memory() if device.platform == "cpu" else None)
    report = memory_section(found, device_total(device), previous=previous, device=f"{device} ({device.platform})",
                            capacity=capacity, stats=stats, graphs=graphs, share=share)
    return report, {**{h.name: h.bytes for h in found}, "": report.total}
