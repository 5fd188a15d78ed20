"""XLA's cost analysis of each fusion of an optimized executable.

JAX gives the cost analysis of a whole executable only. XLA's cost model is per instruction, so
each fusion of the entry computation is cut out into a module of its own (a parameter per operand
and the one fusion instruction, calling its fused computation and what that calls) and analysed
with the executable's client: flops, transcendentals and bytes accessed as XLA counts them for
that fusion (its operands and output, not the values inside it). Costs are for visualisation;
anything this jaxlib does not offer gives no costs.
"""

from __future__ import annotations

import re

try:
    from jax._src.lib import xla_client
    from jaxlib import _hlo
    _analyse, _parse = xla_client._xla.hlo_module_cost_analysis, _hlo.hlo_module_from_text
except (ImportError, AttributeError):      # a jaxlib without them: no per-fusion costs
    _analyse = _parse = None

_HEADER = re.compile(r"^(ENTRY )?%(\S+) \((.*)\) -> (.*) \{\s*$")
_FUSION = re.compile(r"^\s*(?:ROOT )?%(\S+) = (.*?) fusion\(.*\bkind=(k\w+)\b.*\bcalls=%([\w.-]+)")
CALLS = re.compile(r"(?:calls|to_apply|body|condition|branch_computations)=\{?%([\w.-]+)")
_FRAME = re.compile(r",? stack_frame_id=\d+")         # refers to the whole module's frame table
FIELDS = ("flops", "transcendentals", "bytes accessed")
MAX_FUSIONS = 200                    # the report lists at most this many entry instructions


def _top_level(text: str) -> list[str]:
    """`a: f32[2], b: (f32[2], s32[])` -> its comma-separated parts, parentheses respected."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def computations(text: str) -> tuple[dict, str | None]:
    """An HLO module's text -> ({name: (header match, its lines, header and closing brace
    included)}, the entry computation's name). report/fusions.py reads the same table."""
    comps, entry, current = {}, None, None
    for line in _FRAME.sub("", text).splitlines():
        m = _HEADER.match(line)
        if m:
            current = m.group(2)
            comps[current] = (m, [line])
            if m.group(1):
                entry = current
        elif current is not None:
            comps[current][1].append(line)
            if line.startswith("}"):
                current = None
    return comps, entry


def _reachable(comps: dict, name: str, out: dict) -> None:
    if name in out or name not in comps:
        return
    out[name] = None
    for line in comps[name][1]:
        for callee in CALLS.findall(line):
            _reachable(comps, callee, out)


def _module(comps: dict, name: str, result: str, kind: str, called: str) -> str:
    params = [p.split(":", 1)[1].strip() for p in _top_level(comps[called][0].group(3))]
    needed: dict = {}
    _reachable(comps, called, needed)
    body = "\n".join(f"  %p{i} = {t} parameter({i})" for i, t in enumerate(params))
    operands = ", ".join(f"%p{i}" for i in range(len(params)))
    signature = ", ".join(f"p{i}: {t}" for i, t in enumerate(params))
    entry = (f"ENTRY %cost_of_{name} ({signature}) -> {result} {{\n{body}\n"
             f"  ROOT %{name} = {result} fusion({operands}), kind={kind}, calls=%{called}\n}}")
    return "HloModule cost_of_fusion\n\n" + "\n\n".join("\n".join(comps[c][1]) for c in reversed(needed)) \
        + "\n\n" + entry


def fusion_costs(optimized: str, client, limit: int) -> tuple:
    """((fusion name, flops, transcendentals, bytes accessed), ...) for the entry computation's first
    `limit` fusions; () where this jaxlib cannot parse HLO text or analyse a module."""
    if _analyse is None or not optimized:
        return ()
    comps, entry = computations(optimized)
    if entry is None:
        return ()
    out = []
    for line in comps[entry][1]:
        m = _FUSION.match(line)
        if m is None or m.group(4) not in comps:
            continue
        name, result, kind, called = m.groups()
        try:
            cost = _analyse(client, _parse(_module(comps, name, result, kind, called)))
        except Exception:     # a fusion this parser cannot take on its own: no cost for it
            continue
        out.append((name,) + tuple(float(cost.get(f, 0.0)) for f in FIELDS))
        if len(out) >= limit:
            break
    return tuple(out)
