"""The optimized HLO's fusions and custom calls, traced back to ATen ops, modules and lines.

Lowering names each node's ops `aten.mul.Tensor %5 [blocks.0.ff] 1234.py:4` (lower/to_jax.py
`origin`); XLA keeps that name in each instruction's `op_name` metadata through its passes. A
fusion's origin is every graph position named inside its fused computation, read here from the
optimized HLO text and joined with the graph's IR lines. Each fusion's flops and bytes are XLA's
cost analysis of it alone (runtime/fusion_cost.py, carried by the Compile event).
"""

from __future__ import annotations

import dataclasses
import re

from xlanb.report.dag import short_op
from xlanb.report.modules import scope_label
from xlanb.runtime.fusion_cost import MAX_FUSIONS
from xlanb.runtime.hlo_text import CALLS, computations, reachable

_INSTR = re.compile(r"^\s*(?:ROOT )?%(\S+) = (\([^=]*?\)|\S+) ([a-z][\w-]*)\(")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_ORIGIN = re.compile(r"(?:^|/)[\w.:]+ %(\d+)(?: \[[^\]]*\])?(?: [^/ ]+:\d+)?(?=/|$)")
_OP_ONLY = re.compile(r"(?:^|/)((?:aten|prims|xlanb)\.[\w.]+?)(?=/|$)")     # an origin without a position
_KIND = re.compile(r"kind=(k\w+)")
_CUSTOM_TARGET = re.compile(r'custom_call_target="([^"]*)"')
_SHAPE = re.compile(r"\b(pred|[suf]\d+|bf16|c64|c128|f8e4m3fn|f8e5m2)\[([\d,]*)\]")
_BITS = {"pred": 8, "bf16": 16, "c64": 64, "c128": 128, "f8e4m3fn": 8, "f8e5m2": 8}
LISTED = ("fusion", "custom-call", "dot", "convolution", "reduce", "sort", "scatter", "gather", "while",
          "conditional", "all-reduce", "fft", "triangular-solve", "cholesky")


def _bytes(type_text: str) -> int:
    total = 0
    for dtype, dims in _SHAPE.findall(type_text):
        bits = _BITS.get(dtype) or int(dtype[1:])
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * bits // 8
    return total


@dataclasses.dataclass(frozen=True)
class Fusion:
    name: str                 # the instruction in the optimized HLO's entry computation
    kind: str                 # "fusion (kLoop)", "custom-call (__onednn$matmul)", "dot", ...
    nodes: tuple[int, ...]    # graph positions (IR line indices) it computes
    ops: tuple[str, ...]      # their ATen ops, in graph order, each once ("aten.mul")
    modules: tuple[str, ...]
    lines: tuple[str, ...]    # "cell line 4"
    out_bytes: int            # the size of what it writes (from its shape)
    # XLA's cost analysis of this fusion alone (1.4; None: not a fusion, or not analysed)
    flops: float | None = None
    transcendentals: float | None = None
    bytes_accessed: float | None = None

    @property
    def text(self) -> str:
        parts = [", ".join(self.ops) or "no ATen op recorded"]
        if self.modules:
            parts.append(", ".join(self.modules))
        if self.lines:
            parts.append(", ".join(self.lines))
        return f"{self.name}: " + "; ".join(parts)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("nodes", "ops", "modules", "lines"):
            d[k] = list(d[k])
        d["text"] = self.text
        return d


def _positions(line: str, names: list | None = None) -> list[int]:
    """Graph positions named in the instruction's op_name; `names` collects ATen op names of origins
    without one (an executable from JAX's disk cache, compiled by a version that did not name positions)."""
    m = _OP_NAME.search(line)
    if not m:
        return []
    found = [int(p) for p in _ORIGIN.findall(m.group(1))]
    if not found and names is not None:
        names += _OP_ONLY.findall(m.group(1))
    return found


def _ordered(values) -> tuple:
    return tuple(dict.fromkeys(v for v in values if v))


def fusions(optimized: str, lines, costs=()) -> tuple[Fusion, ...]:
    """The entry computation's fusions, custom calls and other heavy instructions, with origins;
    `costs` is the Compile event's `fusion_costs` ((name, flops, transcendentals, bytes), ...)."""
    if not optimized:
        return ()
    cost_of = {c[0]: c[1:] for c in costs}
    comps, entry = computations(optimized)
    if entry is None:
        return ()
    by_index = {line.index: line for line in lines}
    scoped = any(line.scope is not None for line in lines if not line.is_input)   # module scopes recorded
    found = []
    for line in comps[entry][1]:
        m = _INSTR.match(line)
        if not m or m.group(3) not in LISTED:
            continue
        name, type_text, opcode = m.groups()
        unplaced: list[str] = []
        positions = _positions(line, unplaced)
        called: dict = {}
        for callee in CALLS.findall(line):
            reachable(comps, callee, called)
        positions += [p for c in called for inner in comps[c][1] for p in _positions(inner, unplaced)]
        nodes = tuple(sorted(set(p for p in positions if p in by_index)))
        kind = opcode
        if opcode == "fusion" and (k := _KIND.search(line)):
            kind = f"fusion ({k.group(1)})"
        elif opcode == "custom-call" and (t := _CUSTOM_TARGET.search(line)):
            kind = f"custom-call ({t.group(1)})"
        irs = [by_index[p] for p in nodes]
        ops = _ordered([f"aten.{short_op(i.op)}" if i.op.startswith("aten::") else short_op(i.op) for i in irs]
                       + [".".join(n.split(".")[:2]) for n in unplaced])
        modules = _ordered(scope_label(i.scope) for i in irs if scoped)
        where = _ordered(i.location for i in irs)
        found.append(Fusion(name, kind, nodes, ops, modules, where, _bytes(type_text),
                            *cost_of.get(name, (None, None, None))))
        if len(found) >= MAX_FUSIONS:
            break
    return tuple(found)
