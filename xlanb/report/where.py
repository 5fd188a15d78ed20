"""Where in the user's code: frames and `file:line` locations, named by notebook cell.

IPython compiles each cell under a made-up filename (`<ipython-input-3-...>`, or
`/tmp/ipykernel_*/NNN.py` in a kernel) and remembers which execution count it belongs
to. Given that map, a frame in a cell reads `cell line 3` (the current cell) or
`In [2] line 3` (an earlier one); any other frame reads `file.py:12`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Mapping

from xlanb.events import in_package



@dataclasses.dataclass(frozen=True)
class Where:
    """One user source line, named for the reader."""
    text: str                  # "cell line 3", "In [2] line 4 (step)", "train.py:12 (step)"
    filename: str = ""
    lineno: int = 0
    function: str = ""
    source: str = ""           # the line itself, stripped
    cell: int | None = None    # execution count, when the line is in a notebook cell

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Cells:
    """Filenames of notebook cells -> execution count; `current` is the cell being reported."""
    files: Mapping[str, int] = dataclasses.field(default_factory=dict)
    current: int | None = None

    def line_text(self, filename: str, lineno: int) -> str | None:
        count = self.files.get(filename)
        if count is None:
            count = self._by_basename.get(os.path.basename(filename))
        if count is None:
            return None
        if self.current is None or count == self.current:
            return f"cell line {lineno}"
        return f"In [{count}] line {lineno}"

    @functools.cached_property
    def _by_basename(self) -> dict[str, int]:
        return {os.path.basename(f): n for f, n in self.files.items()}


_MAGIC_CALL = re.compile(r"get_ipython\(\)\.run_(cell|line)_magic\('(\w+)', '((?:[^'\\]|\\.)*)'")


def display_source(line: str) -> str:
    """A source line as the user typed it: IPython's `run_cell_magic('x', 'args', ...)` -> `%%x args`."""
    line = (line or "").strip()
    m = _MAGIC_CALL.match(line)
    if m:
        kind, name, args = m.groups()
        return f"{'%%' if kind == 'cell' else '%'}{name} {args}".rstrip()
    return line


def where_of_frame(frame, cells: Cells) -> Where:
    text = cells.line_text(frame.filename, frame.lineno)
    in_cell = text is not None
    if text is None:
        text = f"{os.path.basename(frame.filename)}:{frame.lineno}"
    if frame.function and frame.function != "<module>":
        text += f" ({frame.function})"
    count = None
    if in_cell:
        count = cells.files.get(frame.filename, cells._by_basename.get(os.path.basename(frame.filename)))
    return Where(text, frame.filename, frame.lineno, frame.function, display_source(frame.line), count)


def user_where(frames, cells: Cells) -> Where | None:
    """The frame a reader wants: the innermost one in a cell, else outside installed packages."""
    if not frames:
        return None
    for f in frames:
        if cells.line_text(f.filename, f.lineno) is not None:
            return where_of_frame(f, cells)
    for f in frames:
        if not in_package(f.filename):
            return where_of_frame(f, cells)
    return where_of_frame(frames[0], cells)


def location_text(location: str, cells: Cells) -> str:
    """`"1234.py:7"` (an IR node's location) -> `"cell line 7"` when that file is a cell."""
    if not location:
        return ""
    name, _, line = location.rpartition(":")
    if name and line.isdigit():
        text = cells.line_text(name, int(line))
        if text is not None:
            return text
    return location


def rewrite_locations(text: str, cells: Cells) -> str:
    """Replaces `<cell file>:<line>` (full path or basename) in a message by `cell line L`."""
    if not cells.files or not text:
        return text
    names = set(cells.files) | {os.path.basename(f) for f in cells.files}
    pattern = re.compile("(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r"):(\d+)")

    def replace(m: re.Match) -> str:
        return cells.line_text(m.group(1), int(m.group(2))) or m.group(0)
    return pattern.sub(replace, text)
