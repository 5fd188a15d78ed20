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

from xlanb.runtime.hlo_text import computations, reachable, top_level

try:
    from jax._src.lib import xla_client
    from jaxlib import _hlo
    _analyse, _parse = xla_client._xla.hlo_module_cost_analysis, _hlo.hlo_module_from_text
except (ImportError, AttributeError):      # a jaxlib without them: no per-fusion costs
    _analyse = _parse = None

_FUSION = re.compile(r"^\s*(?:ROOT )?%(\S+) = (.*?) fusion\(.*\bkind=(k\w+)\b.*\bcalls=%([\w.-]+)")
FIELDS = ("flops", "transcendentals", "bytes accessed")
MAX_FUSIONS = 200                    # the report lists at most this many entry instructions


def _module(comps: dict, name: str, result: str, kind: str, called: str) -> str:
    params = [p.split(":", 1)[1].strip() for p in top_level(comps[called][0].group(3))]
    needed = reachable(comps, called)
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
