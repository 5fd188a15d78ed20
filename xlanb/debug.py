"""Text dumps of pending work (IR, HLO), recompile explanations, and XLANB_DEBUG printing.

XLANB_DEBUG levels (docs/config.md): 1 each compile with its cause and graph name,
2 + each execution, 3 + IR text, 4 + StableHLO, 5 + optimized HLO. Output goes to stderr.
"""

from __future__ import annotations

import sys


from xlanb import events
from xlanb.capture.tensor import LazyTensor, value
from xlanb.ir.graph import graph_text
from xlanb.runtime.executor import lower_graph, new_graph
from xlanb.state import runtime_state

_rt = runtime_state()


def _graph(tensors):
    for t in tensors:
        if type(t) is not LazyTensor:
            raise TypeError(f"expected xla tensors, got {type(t).__name__} on {getattr(t, 'device', '?')}")
    return new_graph([value(t) for t in tensors], _rt.graph_name)


def ir_text(*tensors) -> str:
    """The pending IR behind `tensors`, one node a line (`ROOT=i` marks the i-th tensor)."""
    return graph_text(_graph(tensors))


def hlo_text(*tensors, stage: str = "stablehlo") -> str:
    """The graph behind `tensors` as StableHLO, HLO, or optimized HLO, through the runtime's own
    lowering (the optimized HLO of a cached graph comes from its executable; else it compiles)."""
    if stage not in ("stablehlo", "hlo", "optimized"):
        raise ValueError(f"stage must be 'stablehlo', 'hlo' or 'optimized', got {stage!r}")
    graph = _graph(tensors)
    if stage == "optimized":
        compiled = _rt.cache.peek(graph.key)
        return (compiled or lower_graph(graph).compile(graph.key.compile_effort)).as_text()
    return lower_graph(graph).as_text(stage)


def explain_recompiles(include_eager: bool = False) -> str:
    """Every recompile in the event log, with what changed against the nearest earlier graph.

    Eager-mode op graphs compile once per op shape by design; they are left out unless asked for.
    Source lines in notebook cells read `In [6] line 2` once the notebook extension is loaded.
    """
    lines = []
    for e in _rt.log.all():
        if isinstance(e, events.Compile) and e.recompile is not None and (include_eager or not e.eager):
            lines.append(e.recompile.text(_rt.location_namer))
    return "\n".join(lines) if lines else "no recompiles: every graph compiled once"


def _frame_text(frames) -> str:
    return f" at {frames[0]}" if frames else ""


def _print_debug(e: events.Event) -> None:
    level = _rt.config.debug
    if level <= 0:
        return
    out = sys.stderr
    if isinstance(e, events.Compile):
        print(f"xlanb: compile {e.name} [{e.key}] cause: {e.cause}{_frame_text(e.frames)}; {e.nodes} ops, "
              f"{len(e.inputs)} inputs, {len(e.outputs)} outputs; lower {e.lower_ns / 1e6:.1f} ms, "
              f"compile {e.compile_ns / 1e6:.1f} ms" + (" (disk cache hit)" if e.persistent_hit else ""), file=out)
        if e.recompile is not None:
            print(f"xlanb:   {e.recompile.text(_rt.location_namer)}", file=out)
        if level >= 3:
            print(events.lines_text(e.ir), file=out)
        if level >= 4:
            print(e.stablehlo, file=out)
        if level >= 5:
            print(e.optimized, file=out)
    elif isinstance(e, events.Execute) and level >= 2:
        print(f"xlanb: execute {e.name} [{e.key}]{' (cached)' if e.cached else ''} launch {e.ns / 1e3:.0f} us",
              file=out)



def install() -> None:
    _rt.subscribe(_print_debug)
