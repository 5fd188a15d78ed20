"""The user's Python frames: where an op, a compile or a forced execution came from."""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig

import torch

from xlanb.events import Frame, in_package
from xlanb.state import runtime_state

_rt = runtime_state()

_XLANB_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")
# torch, xlanb itself, the standard library, and every installed package (IPython, jax, ...)
_LIBRARY_DIRS = tuple(dict.fromkeys(
    os.path.join(p, "") for p in (
        os.path.dirname(torch.__file__),
        _XLANB_DIR,
        os.path.dirname(os.__file__),
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
    )))
_HIDDEN_FILES = ("<frozen ", "contextlib.py", "<xlanb ")     # "<xlanb ": our copies of torch functions


_library_files: dict[str, bool] = {}     # filename -> is_library (a pure memo: files do not move)


def is_library(filename: str) -> bool:
    """Not the user's code: torch, xlanb, the standard library, or any installed package."""
    known = _library_files.get(filename)
    if known is None:
        known = _library_files[filename] = (filename.startswith(_LIBRARY_DIRS) or filename.startswith(_HIDDEN_FILES)
                                            or in_package(filename))
    return known


_frames: dict[tuple, Frame] = {}     # (file, line, function) -> Frame: a pure memo, one object per line


def _frame(filename: str, lineno: int, function: str) -> Frame:
    """The Frame of a source line; the same object every time, so events that repeat each step
    (a sync in a training loop) share their frames instead of copying them."""
    key = (filename, lineno, function)
    frame = _frames.get(key)
    if frame is None:
        if len(_frames) > 100_000:
            _frames.clear()
        frame = _frames[key] = Frame(filename, lineno, function, linecache.getline(filename, lineno).strip())
    return frame


def user_frames(limit: int = 8, skip_library: bool = True) -> tuple[Frame, ...]:
    """The innermost `limit` user frames, innermost first (library frames hidden)."""
    frames = []
    f = sys._getframe(1)
    while f is not None and len(frames) < limit:
        code = f.f_code
        if not (skip_library and is_library(code.co_filename)):
            frames.append(_frame(code.co_filename, f.f_lineno, code.co_name))
        f = f.f_back
    return tuple(frames)


def user_location() -> tuple[str, int] | None:
    """(filename, line) of the innermost user frame; cheap enough for every op when enabled (the
    notebook records every op's line: the memo is read inline, a call per frame cost a third more).
    Inside an op's dispatch the walk starts at the frame that called the op (`op_caller`; False: no
    Python frame called it), skipping xlanb's own frames below it (W3's 18 walks a step: 28 -> 16.5 us)."""
    f = _rt.op_caller
    if f is None:
        f = sys._getframe(2)
    elif f is False:
        return None
    known = _library_files
    while f is not None:
        filename = f.f_code.co_filename
        library = known.get(filename)
        if library is None:
            library = is_library(filename)
        if not library:
            return (filename, f.f_lineno)
        f = f.f_back
    return None


def outside_level() -> int:
    """The `stacklevel` that makes a `warnings.warn` in the caller name the innermost frame outside
    xlanb: where torch's C++ would have shown a kernel's warning (the frame that called the op)."""
    f = sys._getframe(2)
    level = 2
    while f is not None and (f.f_code.co_filename.startswith(_XLANB_DIR) or f.f_code.co_filename.startswith("<xlanb ")):
        f = f.f_back
        level += 1
    return level


# the runtime's own code: a value read's "library frame" is the innermost frame outside these
_RUNTIME_DIRS = tuple(dict.fromkeys(os.path.join(p, "") for p in (
    os.path.dirname(torch.__file__),
    _XLANB_DIR,
    os.path.dirname(os.__file__),
)))
_SITE_DIRS = tuple(dict.fromkeys(os.path.join(p, "") for p in (sysconfig.get_paths()["purelib"],
                                                                 sysconfig.get_paths()["platlib"])))


def library_site() -> str:
    """Where library code (an installed package other than torch, e.g. transformers) asked for a
    value: `"transformers/masking_utils.py:292 (_ignore_causal_mask_sdpa)"`, or "" when the user's
    own code asked directly (the first non-runtime frame is the user's)."""
    f = sys._getframe(1)
    while f is not None:
        filename = f.f_code.co_filename
        if not filename.startswith(_RUNTIME_DIRS) and not filename.startswith(_HIDDEN_FILES):
            if not is_library(filename):
                return ""
            short = filename
            for d in _SITE_DIRS:
                if filename.startswith(d):
                    short = filename[len(d):]
                    break
            return f"{short}:{f.f_lineno} ({f.f_code.co_name})"
        f = f.f_back
    return ""
