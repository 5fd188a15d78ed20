"""The one frozen configuration object; the only reader of XLANB_* environment variables.

Every variable is listed in docs/config.md. Tests and notebooks change settings for a
scope with `override(...)`, never by editing the environment after import.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from pathlib import Path


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "xlanb" / "jax-compilation-cache")


@dataclasses.dataclass(frozen=True)
class Config:
    cache_size: int = 2048          # XLANB_CACHE_SIZE: compiled executables kept in memory (LRU)
    cache_dir: str = ""             # XLANB_CACHE_DIR: JAX persistent compilation cache ("" = default)
    persistent_cache: bool = True   # XLANB_PERSISTENT_CACHE=0 turns the disk cache off
    device_name: str = "xla"        # XLANB_DEVICE_NAME: the torch device type name (PrivateUse1)
    platform: str = ""              # XLANB_PLATFORM: jax backend (cpu, gpu, tpu); "" = jax's default
    debug: int = 0                  # XLANB_DEBUG: 0..5, see docs/config.md
    report: str = "on"              # XLANB_REPORT: on | off | compact | full (notebook cell report)
    max_frames: int = 8             # XLANB_MAX_FRAMES: user frames shown in reports
    special_scalars: bool = True    # XLANB_SPECIAL_SCALARS=0 lifts 0 and +-1 as graph inputs too
    memory_warning: float = 0.5     # XLANB_MEMORY_WARNING: the report warns when a graph's temporaries
                                    # take more than this share of the device's memory
    slow_compile: float = 30.0      # XLANB_SLOW_COMPILE: seconds after which the notebook says a compile is
                                    # still running and how to interrupt it
    tracebacks: str = "user"        # XLANB_TRACEBACKS: user (an op's error ends at the user's line) | full
    debug_nans: bool = False        # XLANB_DEBUG_NANS=1: a graph whose float outputs hold a NaN raises, naming
                                    # the op that made it (JAX's jax_debug_nans, per PyTorch op)
    compile_effort: str = "default"  # XLANB_COMPILE_EFFORT: default | fast (XLA optimizes less: shorter compiles,
                                    # maybe slower steps; runtime/stages.py)
    host_memory_reuse: bool = True  # XLANB_HOST_MEMORY_REUSE=0 leaves glibc's malloc as it is, where xla:0 is a
                                    # CPU (state.py: reuse_host_memory)


COMPILE_EFFORTS = ("default", "fast")


def _env_bool(value: str) -> bool:
    return value.strip().lower() not in ("0", "false", "no", "off", "")


def from_environ(environ=os.environ) -> Config:
    """Reads XLANB_* once; unknown XLANB_ names are warned about so typos do not pass silently."""
    fields = {
        "XLANB_CACHE_SIZE": ("cache_size", int),
        "XLANB_CACHE_DIR": ("cache_dir", str),
        "XLANB_PERSISTENT_CACHE": ("persistent_cache", _env_bool),
        "XLANB_DEVICE_NAME": ("device_name", str),
        "XLANB_PLATFORM": ("platform", str),
        "XLANB_DEBUG": ("debug", int),
        "XLANB_REPORT": ("report", str),
        "XLANB_MAX_FRAMES": ("max_frames", int),
        "XLANB_SPECIAL_SCALARS": ("special_scalars", _env_bool),
        "XLANB_MEMORY_WARNING": ("memory_warning", float),
        "XLANB_SLOW_COMPILE": ("slow_compile", float),
        "XLANB_TRACEBACKS": ("tracebacks", str),
        "XLANB_DEBUG_NANS": ("debug_nans", _env_bool),
        "XLANB_COMPILE_EFFORT": ("compile_effort", str),
        "XLANB_HOST_MEMORY_REUSE": ("host_memory_reuse", _env_bool),
    }
    values = {}
    for name, raw in environ.items():
        if not name.startswith("XLANB_"):
            continue
        if name not in fields:
            known = ", ".join(sorted(fields))
            warnings.warn(f"xlanb ignores the unknown environment variable {name}; it reads: {known}",
                          stacklevel=2)
            continue
        field, parse = fields[name]
        try:
            values[field] = parse(raw)
        except ValueError:
            raise ValueError(f"{name}={raw!r} is not a valid {parse.__name__}") from None
    cfg = Config(**values)
    if not cfg.cache_dir:
        cfg = dataclasses.replace(cfg, cache_dir=_default_cache_dir())
    _validate(cfg)
    return cfg


def _validate(cfg: Config) -> None:
    if cfg.cache_size < 1:
        raise ValueError(f"cache_size must be >= 1, got {cfg.cache_size}")
    if not 0 <= cfg.debug <= 5:
        raise ValueError(f"debug level must be 0..5, got {cfg.debug}")
    if cfg.tracebacks not in ("user", "full"):
        raise ValueError(f"tracebacks must be 'user' or 'full', got {cfg.tracebacks!r}")
    if cfg.slow_compile <= 0:
        raise ValueError(f"slow_compile must be > 0 seconds, got {cfg.slow_compile}")
    if not 0 < cfg.memory_warning <= 1:
        raise ValueError(f"memory_warning must be a share in (0, 1], got {cfg.memory_warning}")
    if cfg.compile_effort not in COMPILE_EFFORTS:
        raise ValueError(f"compile_effort must be 'default' or 'fast', got {cfg.compile_effort!r}")
    if cfg.report not in ("on", "off", "compact", "full"):
        raise ValueError(f"report must be on, off, compact or full, got {cfg.report!r}")


_current = from_environ()
_fixed: dict[str, str] = {}      # fields that cannot change any more -> why
_watchers: list = []             # called with (old, new) after each change (see watch)


def config() -> Config:
    """The configuration in force now. Code reads it where a value is used, never at import."""
    return _current


def fix_field(name: str, reason: str) -> None:
    """From now on `name` cannot change (it was used once for good, e.g. to name the device)."""
    _fixed[name] = reason


def watch(watcher) -> None:
    """`watcher(old, new)` is called after every change of the configuration (set_config, override
    and its end), for settings that must take effect at once rather than where they are read
    (debug_nans turns location recording on: capture/nans.py)."""
    _watchers.append(watcher)


def _changed(old: Config, new: Config) -> None:
    for watcher in _watchers:
        watcher(old, new)


def set_config(**changes) -> Config:
    """Replaces settings for the rest of the process; returns the previous config."""
    global _current
    for name, value in changes.items():
        if name in _fixed and value != getattr(_current, name):
            env = "XLANB_" + name.upper()
            raise ValueError(f"{name} cannot change after xlanb is imported ({_fixed[name]}); "
                             f"set {env} before importing xlanb")
    previous = _current
    new = dataclasses.replace(_current, **changes)
    _validate(new)
    _current = new
    _changed(previous, new)
    return previous


@contextlib.contextmanager
def override(**changes):
    """`with override(cache_size=1): ...` changes settings for a scope."""
    global _current
    previous = set_config(**changes)
    try:
        yield _current
    finally:
        changed, _current = _current, previous
        _changed(changed, previous)
