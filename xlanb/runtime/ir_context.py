"""One MLIR context for the runtime's lowerings on a thread, instead of a new one per lowering.

jax 0.10 makes a fresh MLIR context for every `jit(...).lower()` and loads its dialects into it:
~2.4 ms of the ~5.5 ms that lowering a one-op function takes (pure JAX, jax 0.10.2, a 2-core VM),
and eager mode lowers one graph per new op and shape (W6's first eager generate() lowers 450). In a
context made once, the same lowering takes 1.45 ms. jax 0.12's make_ir_context does the same itself
(a thread's context, used 10 times). Many modules may live in one context; what a context keeps of
them (types, attributes, locations, interned once) goes with it, so a thread's context is replaced
after `ROTATE` lowerings (2,000 one-op lowerings grew the process by 27 MB in one context, 39 MB with
a context each). A module keeps the context it was made in alive.

Only lowerings inside `shared_context()` (runtime/executor.py's) take it: JAX's own, and another
thread's, keep JAX's behaviour. Where this JAX has no `make_ir_context` to ask, or shares a context
itself (two calls give one context), nothing changes.
"""

from __future__ import annotations

import contextlib
import threading

try:
    from jax._src.interpreters import mlir as _mlir
    _make_fresh = _mlir.make_ir_context
except (ImportError, AttributeError):         # another JAX: its own context per lowering
    _mlir = _make_fresh = None

ROTATE = 100           # lowerings per context
_local = threading.local()
_hooked: bool | None = None      # whether shared_context() shares (decided at its first use)


def _make_ir_context(*args, **kwargs):
    """JAX's make_ir_context while the hook is installed: this thread's shared context inside
    `shared_context()`, a fresh one (JAX's) anywhere else or when asked for anything particular."""
    if args or kwargs or not getattr(_local, "sharing", False):
        return _make_fresh(*args, **kwargs)
    uses = getattr(_local, "uses", ROTATE)
    if uses >= ROTATE:
        _local.context, uses = _make_fresh(), 0
    _local.uses = uses + 1
    return _local.context


@contextlib.contextmanager
def shared_context():
    """Lowerings in the block make their modules in this thread's shared MLIR context."""
    if not hooked():
        yield
        return
    before = getattr(_local, "sharing", False)
    _local.sharing = True
    try:
        yield
    finally:
        _local.sharing = before


def hooked() -> bool:
    """Whether `shared_context()` shares a context: JAX has a make_ir_context, which makes a new context
    at each call (jax 0.10; jax 0.12's reuses a thread's own). Installs the hook the first time."""
    global _hooked
    if _hooked is None:
        _hooked = _mlir is not None and _make_fresh() is not _make_fresh()
        if _hooked:
            _mlir.make_ir_context = _make_ir_context
    return _hooked
