"""Replay: a steady step run again without its Python body (`xlanb.compile(fn, replay=True)`).

A floor above capture/ and runtime/: the first calls trace through capture's CompileScope
(`trace.py`, with `holders.py` finding who held each input and output), and once two traced calls
did the same thing, `function.py`'s ReplayedFunction checks the plan's guards, launches the cached
executable through the runtime and rebinds the outputs.

`compile` below is the public `xlanb.compile`: without replay it is capture.modes.compile (a
traced function, or a `with` block, as one named graph); with replay=True it makes a
ReplayedFunction.
"""

from __future__ import annotations

from xlanb.capture import modes
from xlanb.replay.function import ReplayedFunction


def compile(f=None, *, name: str | None = None, full_graph: bool = False,
            max_different_graphs: int | None = None, replay: bool = False, retrace_every: int | None = None):
    """Runs `f` (or a `with` block) as one named graph, like torch_xla.compile.

    Decorator (`@xlanb.compile` or `@xlanb.compile(name=..., full_graph=True)`), wrapper
    (`xlanb.compile(f)`), or context manager (`with xlanb.compile(name="step"):`).
    full_graph=True turns any forced execution inside into an error that names the
    line; max_different_graphs=N raises when an (N+1)-th distinct graph is traced.
    replay=True (a function only) replays a steady call without running its Python;
    retrace_every=N runs the body again every N replayed calls to check the plan still holds.
    """
    if not replay:
        return modes.compile(f, name=name, full_graph=full_graph, max_different_graphs=max_different_graphs)
    modes.check_compile_arguments(name, full_graph, max_different_graphs)

    def replayed(fn):
        graph_name = name or getattr(fn, "__name__", "compiled")
        return ReplayedFunction(fn, graph_name, full_graph, modes.function_detector(max_different_graphs, graph_name),
                                retrace_every)
    if f is None:
        return modes.Compiler(name, full_graph, max_different_graphs, wrap=replayed, replay=True)
    if not callable(f):
        raise TypeError(f"xlanb.compile expects a function, got {type(f).__name__}")
    return replayed(f)
