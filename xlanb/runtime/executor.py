"""run_graph: graph key -> cached executable (lower + compile on a miss) -> launch.

Execution is asynchronous: the returned arrays are futures; `wait()` blocks on every
launch not yet known to be finished.
"""

from __future__ import annotations

import re
import time
import warnings

import jax
import numpy as np

from xlanb import events
from xlanb.ir.graph import Graph, graph_lines
from xlanb.ir.node import Meta
from xlanb.lower.registry import has_rule
from xlanb.lower.to_jax import build_function
from xlanb.runtime.cache import compiled_cache, persistent_cache
from xlanb.runtime.stages import Compiled

_outstanding: list = []


def _info(meta) -> events.TensorInfo:
    if isinstance(meta, Meta):
        return events.TensorInfo(meta.shape, meta.text.split("[")[0])
    return events.TensorInfo((), "tuple")


def _module_name(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", name) or "graph"


def lower_graph(graph: Graph):
    """Graph -> jax Lowered (StableHLO), and the number of float and int scalars."""
    fn, floats, ints = build_function(graph)
    fn.__name__ = fn.__qualname__ = _module_name(graph.name)
    avals = [jax.ShapeDtypeStruct(n.buf.shape, n.buf.dtype) for n in graph.inputs]
    if floats:
        avals.append(jax.ShapeDtypeStruct((len(floats),), np.float64))
    if ints:
        avals.append(jax.ShapeDtypeStruct((len(ints),), np.int64))
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
        lowered = jax.jit(fn, donate_argnums=graph.donate).lower(*avals)
    return lowered, floats, ints


def compile_graph(graph: Graph, *, eager: bool, cause: str = "", frames=(), explain=None) -> Compiled:
    """Lowers `graph` through the table to StableHLO and compiles it."""
    persistent_cache.enable()
    start = time.perf_counter_ns()
    lowered, floats, ints = lower_graph(graph)
    lowered_at = time.perf_counter_ns()
    with jax.enable_x64(True):
        hits = persistent_cache.hits()
        executable = lowered.compile()
    done = time.perf_counter_ns()
    compiled = Compiled(executable, lowered, len(floats), len(ints), graph.name, graph.digest())
    fallback_ops = tuple(sorted({n.name for n in graph.order if n.buf is None and _is_fallback(n)}))
    events.emit(events.Compile(
        name=graph.name, key=compiled.digest, eager=eager, nodes=graph.compute_nodes,
        inputs=tuple(_info(n.meta) for n in graph.inputs),
        outputs=tuple(_info(n.meta) for n in graph.roots),
        scalars=len(graph.scalars), lower_ns=lowered_at - start, compile_ns=done - lowered_at,
        persistent_hit=persistent_cache.hits() > hits, cause=cause, frames=tuple(frames),
        fallback_ops=fallback_ops, recompile=explain(graph) if explain else None, stages=compiled,
        ir=graph_lines(graph)))
    return compiled


def _is_fallback(node) -> bool:
    return not has_rule(node.name)


def scalar_vectors(graph: Graph) -> list:
    floats, ints, seen = [], [], set()
    for s in graph.scalars:
        if id(s) in seen:
            continue
        seen.add(id(s))
        (floats if type(s.value) is float else ints).append(s.value)
    vectors = []
    if floats:
        vectors.append(np.array(floats, dtype=np.float64))
    if ints:
        vectors.append(np.array(ints, dtype=np.int64))
    return vectors


def run_graph(graph: Graph, *, eager: bool, cause: str = "", frames=(), explain=None) -> tuple:
    """Runs `graph` and returns one device array per root (launched, maybe not finished)."""
    compiled = compiled_cache.get(graph.key)
    cached = compiled is not None
    if compiled is None:
        compiled = compile_graph(graph, eager=eager, cause=cause, frames=frames, explain=explain)
        compiled_cache.put(graph.key, compiled)
    args = [n.buf for n in graph.inputs]
    args.extend(scalar_vectors(graph))
    start = time.perf_counter_ns()
    with jax.enable_x64(True):
        outs = compiled.executable(*args)
    events.emit(events.Execute(name=graph.name, key=compiled.digest,
                               eager=eager, ns=time.perf_counter_ns() - start, cached=cached,
                               donated=len(graph.donate)))
    _track(outs)
    return outs


def _track(outs) -> None:
    if len(_outstanding) > 64:
        _outstanding[:] = [a for a in _outstanding if not _is_ready(a)]
    _outstanding.extend(outs)


def _is_ready(a) -> bool:
    try:
        return a.is_ready()
    except RuntimeError:   # deleted (donated) arrays are finished by definition
        return True


def wait() -> None:
    """Blocks until every launched execution has finished."""
    pending = [a for a in _outstanding if not a.is_deleted()]
    _outstanding.clear()
    if pending:
        jax.block_until_ready(pending)
