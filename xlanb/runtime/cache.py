"""Compiled executables: an in-memory LRU keyed by graph key, and JAX's disk cache.

Eviction is never an error: an evicted graph is simply lowered and compiled again
(from the disk cache, when it is on, that costs no XLA compile).
"""

from __future__ import annotations

import collections
import os
import threading

import jax

from xlanb._config import config


class CompiledCache:
    def __init__(self):
        self._entries: collections.OrderedDict = collections.OrderedDict()

    def get(self, key):
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key, compiled) -> None:
        self._entries[key] = compiled
        self._entries.move_to_end(key)
        limit = config().cache_size
        while len(self._entries) > limit:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


compiled_cache = CompiledCache()


class _PersistentCache:
    """Turns on JAX's persistent compilation cache once, and counts its hits."""

    def __init__(self):
        self._enabled_dir: str | None = None
        self._lock = threading.Lock()
        self._local = threading.local()
        self._listening = False

    def enable(self) -> None:
        cfg = config()
        if not cfg.persistent_cache or self._enabled_dir == cfg.cache_dir:
            return
        with self._lock:
            if jax.config.jax_compilation_cache_dir is None:   # respect a directory the user chose
                os.makedirs(cfg.cache_dir, exist_ok=True)
                jax.config.update("jax_compilation_cache_dir", cfg.cache_dir)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
            if not self._listening:
                jax.monitoring.register_event_listener(self._on_event)
                self._listening = True
            self._enabled_dir = cfg.cache_dir

    def _on_event(self, event: str, **kwargs) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            self._local.hits = getattr(self._local, "hits", 0) + 1

    def hits(self) -> int:
        """Hits seen on this thread so far (compare before and after a compile)."""
        return getattr(self._local, "hits", 0)


persistent_cache = _PersistentCache()
