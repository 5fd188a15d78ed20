"""The error that stopped a cell, as the report's Failure: the ATen op it was recording (read
from the traceback, where xlanb's dispatch holds the op) and the innermost cell line."""

from __future__ import annotations

import os

from xlanb.events import Frame
from xlanb.report.model import Failure
from xlanb.report.where import Cells, where_of_frame

_CAPTURE = os.path.join("xlanb", "capture") + os.sep


def _frames(tb):
    while tb is not None:
        yield tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next


def failing_op(error: BaseException) -> str:
    """The op being recorded when `error` was raised ("aten.mm.default"), or "". The op boundary
    keeps it on the error (xlanb's frames are left out of its traceback); with full tracebacks it
    is also read from the frames."""
    op = getattr(error, "_xlanb_op", None) or ""
    for frame, _ in _frames(error.__traceback__):
        if _CAPTURE in frame.f_code.co_filename:
            func = frame.f_locals.get("func")
            if func is not None and hasattr(func, "_schema"):
                op = str(func)
    return op


def failure_of(error: BaseException, cells: Cells, lines) -> Failure:
    """`lines` are the pending IR lines (locations named by cell): those at the failing line are highlighted."""
    where = None
    for frame, lineno in _frames(error.__traceback__):
        filename = frame.f_code.co_filename
        if cells.line_text(filename, lineno) is not None:
            import linecache
            where = where_of_frame(Frame(filename, lineno, frame.f_code.co_name,
                                         linecache.getline(filename, lineno).strip()), cells)
    text = where.text.split(" (")[0] if where else None
    highlight = tuple(line.index for line in lines if text and line.location == text)
    message = f"{type(error).__name__}: {error}".strip()
    return Failure(message.splitlines()[0] if message else type(error).__name__, failing_op(error), where, highlight)
