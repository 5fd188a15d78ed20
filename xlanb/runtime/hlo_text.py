"""An HLO module's text (an executable's `as_text()`) read as a table of its computations.

runtime/fusion_cost.py cuts each fusion out of it with what it calls; report/fusions.py places each
instruction of the entry computation back on the graph's nodes.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^(ENTRY )?%(\S+) \((.*)\) -> (.*) \{\s*$")
CALLS = re.compile(r"(?:calls|to_apply|body|condition|branch_computations)=\{?%([\w.-]+)")
_FRAME = re.compile(r",? stack_frame_id=\d+")         # refers to the whole module's frame table


def top_level(text: str) -> list[str]:
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
    included)}, the entry computation's name)."""
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


def reachable(comps: dict, name: str, out: dict | None = None) -> dict:
    """{computation: None} for `name` and every computation it calls, directly or not, callers first."""
    out = {} if out is None else out
    if name in out or name not in comps:
        return out
    out[name] = None
    for line in comps[name][1]:
        for callee in CALLS.findall(line):
            reachable(comps, callee, out)
    return out
