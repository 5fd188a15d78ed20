"""Process-wide capture state: the mode flags and the registry of pending tensors.

One object, so tests and the notebook can see (and restore) everything that matters.
"""

from __future__ import annotations

import weakref


class State:
    def __init__(self):
        self.eager = False                 # every op is synced at once (xlanb.eager_mode)
        self.graph_name = "sync"           # name given to the next lazily synced graph
        self.allow_execution = True        # False inside xlanb.compile(full_graph=True)
        self.track_locations = False       # record the user's source line on every node
        # weakrefs to holders (LazyTensor or Storage) whose value may be pending, in
        # first-pending order; deduplicated and cleared at each full sync
        self.pending: list[weakref.ref] = []
        self.prune_at = 4096
        # computed nodes overwritten by in-place writes: their buffers may be donated
        self.overwritten: weakref.WeakSet = weakref.WeakSet()
        # errors raised inside the autograd engine, re-raised at the next sync
        self.deferred: list[BaseException] = []
        self.compile_scope = None          # the active xlanb.compile scope, if any
        self.observer = None               # called with each new pending node (graph limits)


state = State()
