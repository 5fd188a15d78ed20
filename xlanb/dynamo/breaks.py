"""Graph breaks and guard failures as `DynamoBreak` events, for the report and the metrics.

dynamo words both itself; xlanb listens where dynamo puts them (both readers are in
dynamo/_torch_hooks.py with the other private API):
- a graph break is logged on dynamo's `graph_breaks` artifact logger ("Graph break in user code
  at f.py:12 / Graph Break Reason: ..."): a handler on that logger (not propagated, so nothing is
  printed that torch would not print) turns each into an event with its user line;
- a failed guard is appended to dynamo's guard-failure list of the code object; before each FX
  graph reaches the backend, and after each frame compile, the new entries become "recompile"
  events.
"""

from __future__ import annotations

import logging
import os
import re

from xlanb import events
from xlanb.state import emit

_AT = re.compile(r"Graph break (?:\(user stack suppressed due to duplicate graph break\) )?in user code at (.+):(\d+)")
_REASON = re.compile(r"Graph Break Reason: (.*?)(?:\n\s*User code traceback|\Z)", re.S)


def parse_graph_break(message: str) -> tuple[str, str] | None:
    """(reason, "file.py:12") from dynamo's graph-break log record, or None. The reason is dynamo's
    kind of break and its explanation: "Failed to trace builtin operator: Dynamo does not know
    how to trace builtin operator `print` ..."."""
    at = _AT.search(message)
    if at is None:
        return None
    found = _REASON.search(message)
    lines = [line.strip() for line in (found.group(1) if found else "").splitlines()]
    lines = [line for line in lines if line and not line.startswith("Encountered graph break")]
    kind = next((line for line in lines if not line.startswith(("Explanation:", "Hint:", "Developer"))), "")
    explanation = next((line.removeprefix("Explanation:").strip() for line in lines
                        if line.startswith("Explanation:")), "")
    reason = f"{kind}: {explanation}" if kind and explanation else (kind or explanation or "graph break")
    return reason, f"{os.path.basename(at.group(1))}:{at.group(2)}"


class _BreakHandler(logging.Handler):
    def emit(self, record):      # noqa: A003 (logging's name)
        try:
            parsed = parse_graph_break(record.getMessage())
        except Exception:         # a log line in an unknown shape: no event rather than an error
            return
        if parsed is not None:
            emit(events.DynamoBreak(kind="graph_break", reason=parsed[0], location=parsed[1]))


def recompile_reason(text: str) -> tuple[str, str]:
    """dynamo's guard-failure text ("0/0: tensor 'x' size mismatch ...") -> (reason, location)."""
    first = text.strip().splitlines()[0] if text.strip() else "a guard failed"
    reason = first.split(": ", 1)[1] if re.match(r"^\[?\d+/\d+\]?: ", first) else first
    return reason, ""


_seen: dict = {}


def collect_recompiles(*_args, **_kwargs) -> None:
    """New guard failures since the last call, as events. Called before each FX graph reaches the
    backend and after each frame compile (torch._dynamo.reset() drops that callback and empties
    dynamo's lists; a list shorter than last seen is read from its start)."""
    from xlanb.dynamo import _torch_hooks
    for code, reasons in list(_torch_hooks.guard_failures().items()):
        start = _seen.get(code, 0)
        if start > len(reasons):
            start = 0
        for text in reasons[start:]:
            reason, _ = recompile_reason(str(text))
            name = getattr(code, "co_name", "")
            filename = getattr(code, "co_filename", "")
            location = f"{os.path.basename(filename)}:{code.co_firstlineno}" if filename else ""
            emit(events.DynamoBreak(kind="recompile", reason=f"{name}: {reason}" if name else reason,
                                    location=location))
        _seen[code] = len(reasons)


_installed = [False]


def install_listeners() -> None:
    if _installed[0]:
        return
    from xlanb.dynamo import _torch_hooks
    _torch_hooks.listen(_BreakHandler(), collect_recompiles)
    _installed[0] = True
