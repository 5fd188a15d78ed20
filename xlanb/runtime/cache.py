"""JAX's persistent compilation cache, set up from the config at each compile.

The in-memory LRU of executables is `runtime_state().cache` (xlanb/state.py). Below it sits
JAX's disk cache: an evicted graph, or a graph seen by an earlier process, is lowered again
and its XLA compile comes from disk. `XLANB_PERSISTENT_CACHE` and `XLANB_CACHE_DIR` are read
at every compile, so `override(...)` of either takes effect at the next compile.
"""

from __future__ import annotations

import os
import threading

import jax
from jax._src import compilation_cache

from xlanb._config import config


class _PersistentCache:
    """Points JAX's disk cache at the configured directory (or turns it off), and counts its hits.

    It mirrors process-wide JAX settings, so it is not part of the Runtime's reset. A directory
    the user gave JAX themselves (jax_compilation_cache_dir set before xlanb's first compile)
    is respected.
    """

    def __init__(self):
        self._applied: tuple | None = None     # (enabled, directory) last given to JAX
        self._user_dir: str | None = None
        self._first = True
        self._lock = threading.Lock()
        self._local = threading.local()

    def enable(self) -> None:
        cfg = config()
        wanted = (cfg.persistent_cache, cfg.cache_dir)
        if wanted == self._applied:
            return
        with self._lock:
            if self._first:
                self._first = False
                self._user_dir = jax.config.jax_compilation_cache_dir
                jax.monitoring.register_event_listener(self._on_event)
            directory = self._user_dir or cfg.cache_dir
            if cfg.persistent_cache:
                os.makedirs(directory, exist_ok=True)
                jax.config.update("jax_compilation_cache_dir", directory)
                jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
                jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
            jax.config.update("jax_enable_compilation_cache", cfg.persistent_cache)
            compilation_cache.reset_cache()        # JAX reads its cache settings once, at first use
            self._applied = wanted

    def directory(self) -> str | None:
        """The directory JAX's disk cache uses now (None when it is off)."""
        return jax.config.jax_compilation_cache_dir if jax.config.jax_enable_compilation_cache else None

    def _on_event(self, event: str, **kwargs) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            self._local.hits = getattr(self._local, "hits", 0) + 1

    def hits(self) -> int:
        """Hits seen on this thread so far (compare before and after a compile)."""
        return getattr(self._local, "hits", 0)


persistent_cache = _PersistentCache()
