"""Device memory by variable: which notebook variables, module parameters and optimizer state
hold the device buffers of live xla tensors, the change since the previous cell, and a warning
when a compiled graph's temporaries take more than a share of the device's memory.

The notebook side (notebook/memory.py) walks the namespace and hands plain `Holder`s here.
"""

from __future__ import annotations

import dataclasses

from xlanb.report.format import format_bytes

TOP = 10


@dataclasses.dataclass(frozen=True)
class Holder:
    name: str                 # "x", "model.parameters", "opt.state", "model.grads"
    kind: str                 # "tensor" | "parameters" | "gradients" | "buffers" | "optimizer state" | "tensors"
    bytes: int                # device bytes, each buffer counted once (with the first holder met)
    tensors: int
    pending: int = 0          # tensors whose value is not computed yet (they hold no buffer)
    change: int | None = None  # bytes since the previous cell (None: the name is new)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class MemoryReport:
    holders: tuple[Holder, ...]        # the TOP largest
    others: int                        # holders left out
    others_bytes: int
    attributed: int                    # bytes held by named variables
    total: int                         # bytes of every live buffer on the device (xlanb's accounting)
    change: int | None                 # total since the previous cell
    device: str                        # "cpu:0 (cpu)"
    capacity: int | None               # the device's memory (memory_stats bytes_limit, host RAM on CPU)
    stats: dict | None                 # jax's memory_stats() where the backend has it (GPU, TPU)
    warnings: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        change = f" ({_signed(self.change)} since the previous cell)" if self.change else ""
        head = (f"device memory: {format_bytes(self.total)} in live buffers{change}, "
                f"{format_bytes(self.attributed)} held by named variables")
        return head

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["holders"] = [h.to_json() for h in self.holders]
        d["warnings"] = list(self.warnings)
        d["text"] = self.text
        return d


def _signed(n: int) -> str:
    return ("+" if n >= 0 else "-") + format_bytes(abs(n))


def memory_section(holders, total: int, *, previous: dict | None = None, device: str = "",
                   capacity: int | None = None, stats: dict | None = None, graphs=(),
                   share: float = 0.5) -> MemoryReport:
    """The report's memory section. `previous` is {name: bytes, "": total} of the previous cell."""
    holders = sorted(holders, key=lambda h: -h.bytes)
    if previous is not None:
        holders = [dataclasses.replace(h, change=h.bytes - previous[h.name] if h.name in previous else None)
                   for h in holders]
    top, rest = holders[:TOP], holders[TOP:]
    warnings = []
    if capacity:
        for g in graphs:
            temp = (g.memory or {}).get("temp_size_in_bytes", 0)
            if temp > share * capacity:
                warnings.append(f"graph {g.name}: temporaries take {format_bytes(temp)}, "
                                f"{temp / capacity:.0%} of the device's {format_bytes(capacity)} "
                                f"(over the {share:.0%} set by memory_warning)")
    change = total - previous[""] if previous is not None and "" in previous else None
    return MemoryReport(tuple(top), len(rest), sum(h.bytes for h in rest), sum(h.bytes for h in holders), total,
                        change, device, capacity, dict(stats) if stats else None, tuple(warnings))
