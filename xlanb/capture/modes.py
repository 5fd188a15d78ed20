"""Execution modes: lazy (the default), eager, and compiled functions (xlanb.compile)."""

from __future__ import annotations

import contextlib

from xlanb.capture.state import state


def eager_mode(enable: bool) -> None:
    """In eager mode every op is compiled (once per op shape, cached) and run at once."""
    state.eager = bool(enable)


def is_eager_mode() -> bool:
    return state.eager


@contextlib.contextmanager
def eager_mode_context(enable: bool):
    """Sets eager mode for a block; yields the previous mode and restores it, also on errors."""
    previous = state.eager
    state.eager = bool(enable)
    try:
        yield previous
    finally:
        state.eager = previous
