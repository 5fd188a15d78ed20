"""The executable caches: the in-memory LRU and JAX's persistent compilation cache below it.

The LRU is `runtime_state().cache`, a CompiledCache: the Runtime holds it (reset() gives it a
fresh one) and this module defines it and its policy. Only runtime/executor.py's `executable` puts
into it. Below it sits JAX's disk cache: an evicted graph, or a graph seen by an earlier process, is lowered again
and its XLA compile comes from disk. `XLANB_PERSISTENT_CACHE` and `XLANB_CACHE_DIR` are read
at every compile, so `override(...)` of either takes effect at the next compile.
"""

from __future__ import annotations

import collections
import os
import threading
import warnings

import jax
from jax._src import compilation_cache

from xlanb._config import config
from xlanb.state import Runtime, runtime_state


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


def _max_map_count() -> int | None:
    """The kernel's limit on one process's memory maps (Linux's vm.max_map_count), None elsewhere."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _map_count() -> int:
    """How many memory maps this process holds now (a line of /proc/self/maps each; ~1 ms per 10k)."""
    with open("/proc/self/maps", "rb") as f:
        return f.read().count(b"\n")


class CompiledCache:
    """The in-memory LRU {CacheKey -> Compiled}; its size is read from the config at each put.

    It remembers the keys `clear()` dropped (as many as it can hold), so the explainer can tell a
    graph compiled again because the cache was cleared from one the LRU evicted.

    Each XLA CPU executable holds about a dozen memory maps (its JIT code, section by section), and Linux
    kills a process that asks for more than vm.max_map_count (65530 by default) with a segfault
    inside the next compile: 2048 executables of a program that compiles a graph per shape were
    enough. So every `MAP_CHECK_EVERY` puts the cache counts the process's maps, and past
    `MAP_BUDGET` of the limit it drops its older half and keeps that smaller size (`limit`), with
    one warning that says how to raise the limit.
    """

    MAP_CHECK_EVERY = 64
    MAP_BUDGET = 0.6
    MAP_FLOOR = 32          # never trimmed below this many executables

    def __init__(self):
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._cleared: collections.OrderedDict = collections.OrderedDict()
        self._puts = 0
        self._map_limit: int | None = None   # the size the memory-map budget allows (None: no bound yet)
        self._warned = False

    @property
    def limit(self) -> int:
        """Executables kept at most: the configured `cache_size`, or less where the maps budget says so."""
        size = config().cache_size
        return size if self._map_limit is None else max(1, min(size, self._map_limit))

    def get(self, key):
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def peek(self, key):
        """The entry without counting as a use (debugging looks must not change what is evicted)."""
        return self._entries.get(key)

    def put(self, key, compiled) -> None:
        compiled.key = key
        self._entries[key] = compiled
        self._entries.move_to_end(key)
        self._cleared.pop(key, None)
        self._puts += 1
        if self._puts % self.MAP_CHECK_EVERY == 0:
            self._check_maps()
        limit = self.limit
        while len(self._entries) > limit:
            self._entries.popitem(last=False)

    def _check_maps(self) -> None:
        most = _max_map_count()
        if most is None or _map_count() <= self.MAP_BUDGET * most:
            return
        keep = max(self.MAP_FLOOR, len(self._entries) // 2)
        if keep >= len(self._entries):
            return
        self._map_limit = keep
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"xlanb: the compiled XLA executables hold most of this process's memory maps (Linux allows "
                f"{most}: vm.max_map_count); the in-memory cache now keeps at most {keep} of them (older ones "
                f"are compiled again if needed). Raise the limit (sysctl -w vm.max_map_count=262144) to keep "
                f"more, or compile fewer distinct shapes.", RuntimeWarning, stacklevel=2)

    def was_cleared(self, key) -> bool:
        return key in self._cleared

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._cleared.update(dict.fromkeys(self._entries))
        while len(self._cleared) > config().cache_size:
            self._cleared.popitem(last=False)
        self._entries.clear()


Runtime.new_cache = CompiledCache
if runtime_state().cache is None:         # the Runtime was made before this module was imported
    runtime_state().cache = CompiledCache()
