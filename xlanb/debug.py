"""Text dumps of pending work: the IR (torch_xla-like) and the HLO it lowers to."""

from __future__ import annotations

import jax

from xlanb.capture.state import state
from xlanb.capture.tensor import LazyTensor, value
from xlanb.ir.graph import build_graph, graph_text
from xlanb.runtime.cache import compiled_cache
from xlanb.runtime.executor import lower_graph


def _graph(tensors):
    for t in tensors:
        if type(t) is not LazyTensor:
            raise TypeError(f"expected xla tensors, got {type(t).__name__} on {getattr(t, 'device', '?')}")
    return build_graph([value(t) for t in tensors], state.graph_name)


def ir_text(*tensors) -> str:
    """The pending IR behind `tensors`, one node a line (`ROOT=i` marks the i-th tensor)."""
    return graph_text(_graph(tensors))


def hlo_text(*tensors, stage: str = "stablehlo") -> str:
    """The graph behind `tensors` as StableHLO, HLO, or optimized HLO (compiles it)."""
    if stage not in ("stablehlo", "hlo", "optimized"):
        raise ValueError(f"stage must be 'stablehlo', 'hlo' or 'optimized', got {stage!r}")
    graph = _graph(tensors)
    compiled = compiled_cache.get(graph.key)
    if compiled is not None:
        return compiled.as_text(stage)
    lowered, _, _ = lower_graph(graph)
    if stage == "stablehlo":
        return lowered.as_text()
    if stage == "hlo":
        return lowered.as_text(dialect="hlo")
    with jax.enable_x64(True):
        return lowered.compile().as_text()
