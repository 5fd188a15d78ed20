"""`torch_xla.debug.profiler` (xp): `Trace` and `StepTrace` as JAX trace annotations that also time
themselves (`.ns` after the block), `start_trace`/`stop_trace` as JAX's profiler (a TensorBoard
trace in `log_dir`). `StepTrace` ends with a sync, as torch_xla's does, and tells the parallel
loader so, which then skips its own sync for that step. `start_server` (the gRPC profiler server
that `xp.trace` connects to) is not provided: it returns None.
"""

from __future__ import annotations

import functools
import time

import jax

from xlanb.state import runtime_state

_rt = runtime_state()


def set_tracer_marked_step(value: bool) -> None:
    _rt.tracer_marked_step = bool(value)


def get_tracer_marked_step() -> bool:
    return _rt.tracer_marked_step


class Trace:
    """`with xp.Trace("forward"):` a named span in the JAX profile, timed in `self.ns`."""

    def __init__(self, name: str, **kwargs):
        self.name, self.kwargs = name, kwargs
        self.ns = 0
        self._annotation = None
        self._start = 0

    def _make(self):
        return jax.profiler.TraceAnnotation(self.name, **self.kwargs)

    def __enter__(self):
        self._annotation = self._make()
        self._annotation.__enter__()
        self._start = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        self.ns = time.perf_counter_ns() - self._start
        self._annotation.__exit__(*exc)
        return False


class StepTrace(Trace):
    """A training step's span (`step_num=` kwarg); its end syncs."""

    def _make(self):
        kwargs = dict(self.kwargs)
        return jax.profiler.StepTraceAnnotation(self.name, step_num=kwargs.pop("step_num", 0), **kwargs)

    def __exit__(self, *exc):
        if exc[0] is None:
            from xlanb.compat.steps import sync
            sync()
            set_tracer_marked_step(True)
        return super().__exit__(*exc)


def trace_me(scope: str):
    """Decorator: the function's calls as `Trace(scope)` spans."""
    def decorate(f):
        @functools.wraps(f)
        def traced(*args, **kwargs):
            with Trace(scope):
                return f(*args, **kwargs)
        return traced
    return decorate


def start_server(port: int, only_on_master: bool = True):
    """Not provided (see the module docstring): returns None."""
    return None


def start_trace(log_dir: str) -> None:
    jax.profiler.start_trace(str(log_dir))


def stop_trace() -> None:
    jax.profiler.stop_trace()
