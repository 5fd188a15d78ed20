"""Execution modes: lazy (the default), eager, and compiled functions (xlanb.compile).

`xlanb.compile` follows torch_xla.compile: eager mode off inside; pending work flushed
first as graph `<name>_clear_pending`; the body traced as one graph named `<name>` and
synced on exit; every piece of state restored in `finally`. Differences, on purpose:
- a body that raises (or is interrupted) is not synced: its partial graph stays pending
  and valid, and the original error is what the user sees;
- a compiled function called inside another compiled body runs inline, as part of the
  outer graph, instead of cutting it in three;
- max_different_graphs is counted per compiled function (or per name for the context
  manager form), not process-wide.
"""

from __future__ import annotations

import contextlib
import functools
import numbers

import numpy as np

from xlanb import events
from xlanb.capture import realize
from xlanb.capture.detector import Detector
from xlanb.state import emit, runtime_state

_rt = runtime_state()


def check_flag(what: str, value) -> bool:
    """`value` if it is a bool (numpy's too), else a TypeError naming the argument."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def eager_mode(enable: bool) -> None:
    """In eager mode every op is compiled (once per op shape, cached) and run at once."""
    _rt.eager = check_flag("xlanb.eager_mode(enable)", enable)


def is_eager_mode() -> bool:
    return _rt.eager


@contextlib.contextmanager
def eager_mode_context(enable: bool):
    """Sets eager mode for a block; yields the previous mode and restores it, also on errors."""
    enable = check_flag("xlanb.eager_mode_context(enable)", enable)
    previous = _rt.eager
    _rt.eager = enable
    try:
        yield previous
    finally:
        _rt.eager = previous


class UnexpectedExecution(RuntimeError):
    """Raised when a full_graph=True body forces an execution."""

    xlanb_user_error = True


class CompileScope:
    """One traced call of a compiled function (also the context-manager form)."""

    device_checks = True          # index bounds may be checked in the graph (not in a replayed function's trace)
    replay = False                # a replayed function's traced call

    def __init__(self, name: str, full_graph: bool, detector: Detector | None):
        self.name, self.full_graph, self.detector = name, full_graph, detector
        self._saved = None
        self._inline = False
        # what a normal exit runs instead of realize.sync(cause=...), given the cause: a replayed
        # function's traced call syncs keeping the graph and its executable (replay/trace.py)
        self.end = None

    def violation(self, cause: str, frames) -> None:
        """An execution was forced inside a full_graph body: raise, naming the user's line."""
        lines = [
            "=" * 80,
            "Unexpected Execution Analysis",
            f"  Graph Name: {self.name}",
            f"  Cause: {cause}",
            "  Python Frame Triggered Execution:",
        ]
        lines += [f"    {f.function} ({f.filename}:{f.lineno})" + (f"  {f.line}" if f.line else "") for f in frames]
        lines.append("=" * 80)
        report = "\n".join(lines)
        emit(events.Sync(kind="violation", name=self.name, roots=0, cause=cause, frames=tuple(frames)))
        where = f" at {frames[0].filename}:{frames[0].lineno} ({frames[0].function})" if frames else ""
        raise UnexpectedExecution(
            f"Unexpected execution happens inside the compiled function, exiting: '{self.name}' made a {cause}{where}. "
            "With full_graph=True the body must trace as one graph: move value access (.item(), print, "
            "bool()) and data-dependent ops after the compiled function, or use full_graph=False.\n" + report)

    def __enter__(self):
        if _rt.compile_scope is not None:      # nested: trace inline into the outer graph
            self._inline = True
            return self
        self._saved = (_rt.eager, _rt.graph_name, _rt.allow_execution, _rt.track_locations,
                       _rt.observer)
        _rt.eager = False
        try:
            realize.flush_pending(self.name, f"xlanb.compile: pending work flushed before '{self.name}'")
        except BaseException:
            self._restore()
            raise
        _rt.graph_name = self.name
        _rt.compile_scope = self
        _rt.allow_execution = not self.full_graph
        _rt.track_locations = _rt.track_locations or self.detector is not None or _rt.config.debug > 0
        if self.detector is not None:
            self.detector.start()
            _rt.observer = self.detector.observe
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._inline:
            return False
        try:
            if exc_type is None:
                if self.detector is not None:
                    _rt.observer = None
                    self.detector.end()
                _rt.allow_execution = True
                cause = f"end of compiled function '{self.name}'"
                if self.end is None:
                    realize.sync(cause=cause)
                else:
                    self.end(cause)
            elif self.detector is not None:
                self.detector.abort()
        finally:
            self._restore()
        return False

    def _restore(self) -> None:
        (_rt.eager, _rt.graph_name, _rt.allow_execution, _rt.track_locations,
         _rt.observer) = self._saved
        _rt.compile_scope = None


class Compiler:
    """What `xlanb.compile(...)` returns without a function: a decorator and a context manager.
    `wrap(f)` makes the decorated function (a traced one here, a replayed one in xlanb/replay)."""

    def __init__(self, name, full_graph, max_different_graphs, wrap=None, replay=False):
        self.name, self.full_graph, self.max_graphs = name, full_graph, max_different_graphs
        self.wrap = wrap or (lambda f: _wrap(f, name, full_graph, max_different_graphs))
        self.replay = replay
        self._scope = None

    def __call__(self, f):
        return self.wrap(f)

    def __enter__(self):
        if self.replay:
            raise TypeError("xlanb.compile(replay=True) replays a function: use it as a decorator or "
                            "xlanb.compile(step, replay=True), not as a `with` block")
        name = self.name or "compiled"
        detector = None
        if self.max_graphs is not None:
            detector = _rt.detectors.get(name)
            if detector is None or detector.max_graphs != self.max_graphs:
                detector = _rt.detectors[name] = Detector(self.max_graphs, name)
        self._scope = CompileScope(name, self.full_graph, detector)
        return self._scope.__enter__()

    def __exit__(self, *exc):
        return self._scope.__exit__(*exc)


def function_detector(max_graphs: int | None, graph_name: str):
    """A function's detector getter: its Detector of distinct graphs (made on first use, under a
    key of its own in runtime_state().detectors, so reset() forgets its graphs), or None."""
    token = object()

    def detector() -> Detector | None:
        if max_graphs is None:
            return None
        d = _rt.detectors.get(token)
        if d is None:
            d = _rt.detectors[token] = Detector(max_graphs, graph_name)
        return d
    return detector


def _wrap(f, name, full_graph, max_graphs):
    graph_name = name or getattr(f, "__name__", "compiled")
    detector = function_detector(max_graphs, graph_name)

    @functools.wraps(f)
    def compiled(*args, **kwargs):
        with CompileScope(graph_name, full_graph, detector()):
            return f(*args, **kwargs)
    compiled.graph_name = graph_name
    return compiled


def check_compile_arguments(name, full_graph, max_different_graphs) -> None:
    check_flag("xlanb.compile(full_graph=...)", full_graph)
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise TypeError(f"xlanb.compile(name=...) must be a non-empty string, got {type(name).__name__} {name!r}")
    if max_different_graphs is not None:
        if isinstance(max_different_graphs, bool) or not isinstance(max_different_graphs, numbers.Integral):
            raise TypeError(f"max_different_graphs must be an int or None, got "
                            f"{type(max_different_graphs).__name__} {max_different_graphs!r}")
        if max_different_graphs < 1:
            raise ValueError(f"max_different_graphs must be >= 1, got {max_different_graphs}")


def compile(f=None, *, name: str | None = None, full_graph: bool = False,
            max_different_graphs: int | None = None):
    """Runs `f` (or a `with` block) as one named graph, like torch_xla.compile.

    Decorator (`@xlanb.compile` or `@xlanb.compile(name=..., full_graph=True)`), wrapper
    (`xlanb.compile(f)`), or context manager (`with xlanb.compile(name="step"):`).
    full_graph=True turns any forced execution inside into an error that names the
    line; max_different_graphs=N raises when an (N+1)-th distinct graph is traced.
    (`xlanb.compile` itself is xlanb/replay's, which adds replay=True.)
    """
    check_compile_arguments(name, full_graph, max_different_graphs)
    if f is None:
        return Compiler(name, full_graph, max_different_graphs)
    if not callable(f):
        raise TypeError(f"xlanb.compile expects a function, got {type(f).__name__}")
    return _wrap(f, name, full_graph, max_different_graphs)
