"""debug_nans in capture: what the runtime's NaN check (runtime/nans.py) needs from the ops.

While `debug_nans` is on, every op records the user's line and the nn.Module path that ran it (the
same recording the notebook's report turns on), so that the op that made a NaN can be named; the
eager fast path remembers no executable, so each eager op is checked. It takes effect when the
setting changes (`_config.watch`), not where an op reads it: an op pays nothing more while it is off.
"""

from __future__ import annotations

import contextlib

from xlanb._config import Config, config, watch
from xlanb.capture.scopes import recording_modules
from xlanb.runtime.nans import examine
from xlanb.state import runtime_state

_rt = runtime_state()
_recording: list = []        # the open recording scopes while debug_nans is on (one ExitStack)


def follow(old: Config, new: Config) -> None:
    """Opens the recording scopes when debug_nans turns on, closes them when it turns off."""
    if old.debug_nans == new.debug_nans:
        return
    _rt.eager_ops.clear()        # executables the eager fast path remembered run unchecked
    if _rt.nan_checks:           # read while their roots still know their operands (an unchecked root forgets them)
        examine(ready_only=False)
    if new.debug_nans:
        scopes = contextlib.ExitStack()
        scopes.enter_context(recording_modules())
        scopes.enter_context(_rt.recording_locations())
        _recording.append(scopes)
    elif _recording:
        _recording.pop().close()


def install() -> None:
    """Follows debug_nans from now on (once per process), and XLANB_DEBUG_NANS=1 at once."""
    watch(follow)
    follow(Config(), config())
