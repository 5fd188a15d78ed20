"""new_graph: pending roots -> Graph, under the settings in force; run_graph: CacheKey -> cached
executable (lower + compile on a miss) -> launch.

Execution is asynchronous: the returned arrays are futures; `wait()` blocks on every
launch not yet known to be finished. Every miss emits CompileStart, then Compile (plain
data: the key's digest, the IR lines, the recompile explanation, timings, and the HLO
texts and analyses while someone asked for them); every launch emits Execute.
"""

from __future__ import annotations

import contextlib
import gc
import re
import time
import warnings

import jax
import numpy as np

from xlanb import events
from xlanb.ir.graph import Graph, Settings, build_graph, graph_lines
from xlanb.ir.node import Meta, Node
from xlanb.ir.precision import matmul_precision
from xlanb.lower.dtypes import to_jax_dtype
from xlanb.lower.registry import fallback_ops
from xlanb.lower.to_jax import build_function
from xlanb.runtime import device_errors, ir_context, nans, partition
from xlanb.runtime.cache import persistent_cache
from xlanb.runtime.explain import explain
from xlanb.runtime.outside import jax_entry
from xlanb.runtime.stages import Compiled, Lowered
from xlanb.state import emit, note_stage, runtime_state

_rt = runtime_state()
OP_GRAPH_NODES = 4      # an eager graph of at most this many ops is one op's (stages.compile_options)
_COST_PART = re.compile(r"\d+\{\}$|out\{\}$")     # per-operand entries of XLA's cost analysis


def _info(meta) -> events.TensorInfo:
    if isinstance(meta, Meta):
        return events.TensorInfo(meta.shape, meta.text.split("[")[0])
    return events.TensorInfo((), "tuple")


def _module_name(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", name) or "graph"


def settings() -> Settings:
    """What a graph built now is built under besides its nodes (each a CacheKey ingredient)."""
    cfg = _rt.config
    return Settings(matmul_precision(), cfg.compile_effort, cfg.platform, cfg.debug_nans)


def new_graph(roots: list[Node], name: str, donatable=None) -> Graph:
    """The graph behind `roots` under the settings in force now (ir/graph.py's build_graph, which
    reads none itself); `donatable(node)` names the inputs whose buffers its outputs may reuse. On a
    mesh, inputs still on one device are placed on it here, before the graph's key is handed out."""
    graph = build_graph(roots, name, settings(), donatable)
    return partition.normalize_inputs(graph) if graph.key.shardings else graph


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector off for the block (as it was after). Lowering makes hundreds
    of thousands of short-lived objects (jaxpr equations, MLIR operations), which the collector keeps
    counting towards its passes: W7's first lazy step ran 159 young and one full pass during it, the
    full one 0.27 s over every object of the process (torch, transformers, jax), in a 0.8 s lowering.
    Paused, those objects are freed by their reference counts before any pass looks at them (26 young
    passes, no full one; lowering 0.5 s). Cyclic garbage made meanwhile waits for the next pass."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


@jax_entry
def lower_graph(graph: Graph) -> Lowered:
    """Graph -> StableHLO through the lowering table (with the garbage collector paused)."""
    with collector_paused():
        return _lower(graph)


def _lower(graph: Graph) -> Lowered:
    fn, floats, ints = build_function(graph)
    fn.__name__ = fn.__qualname__ = _module_name(graph.name)
    if graph.key.nan_check:         # debug_nans: one more output, any float output is NaN
        fn = nans.with_nan_flag(fn, graph)
    mesh = partition.graph_mesh(graph)
    avals = partition.input_avals(graph, mesh)
    if floats:
        avals.append(partition.scalar_aval((len(floats),), np.float64, mesh))
    if ints:
        avals.append(partition.scalar_aval((len(ints),), np.int64, mesh))
    donate = graph.donate
    recycled = graph.key.recycled
    if recycled:        # buffers it does not read, donated: XLA writes outputs of their shape into them
        used = len(avals)
        avals += [jax.ShapeDtypeStruct(m.shape, to_jax_dtype(m.dtype)) for m in recycled]
        donate = donate + tuple(range(used, len(avals)))
        fn = _ignoring_after(fn, used)
    # one device: the configured platform's (jit lowers for jax's default device when no input names
    # one, and that is the first platform jax found: a TPU, where `platform="cpu"` put the inputs on the CPU)
    on_device = jax.default_device(_rt.jax_device()) if mesh is None else contextlib.nullcontext()
    with jax.enable_x64(True), on_device, ir_context.shared_context(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
        lowered = jax.jit(fn, donate_argnums=donate, keep_unused=bool(recycled)).lower(*avals)
    return Lowered(graph.name, graph.digest(), lowered, len(floats), len(ints), mesh)


def _ignoring_after(fn, used: int):
    def recycling(*args):
        return fn(*args[:used])
    recycling.__name__ = recycling.__qualname__ = fn.__name__
    return recycling


@jax_entry
def compile_graph(graph: Graph, *, eager: bool, cause: str = "", frames=()) -> Compiled:
    """Lowers `graph` through the table to StableHLO and compiles it; emits its Compile event."""
    emit(events.CompileStart(name=graph.name, eager=eager, nodes=graph.compute_nodes))
    persistent_cache.enable()
    start = time.perf_counter_ns()
    what = f"graph '{graph.name}' ({graph.compute_nodes} ops)"
    try:
        if _rt.faults:
            _rt.fault("lowering")
        lowered = lower_graph(graph)
    except BaseException as error:
        note_stage(error, f"lowering {what} to StableHLO")
        raise
    lowered_at = time.perf_counter_ns()
    hits = persistent_cache.hits()
    try:
        if _rt.faults:
            _rt.fault("compilation")
        compiled = lowered.compile(graph.key.compile_effort, op_graph=eager and graph.compute_nodes <= OP_GRAPH_NODES)
    except BaseException as error:
        note_stage(error, f"compiling {what} with XLA")
        raise
    done = time.perf_counter_ns()
    platform = _rt.jax_device().platform
    fallbacks = fallback_ops(graph.order, platform)
    compiled.host_calls = bool(fallbacks)
    texts = _texts(lowered, compiled, eager) if _rt.want_texts or _rt.config.debug >= 4 else {}
    emit(events.Compile(
        name=graph.name, key=compiled.digest, eager=eager, nodes=graph.compute_nodes,
        inputs=tuple(_info(n.meta) for n in graph.inputs),
        outputs=tuple(_info(n.meta) for n in graph.roots),
        scalars=len(graph.scalars), lower_ns=lowered_at - start, compile_ns=done - lowered_at,
        persistent_hit=persistent_cache.hits() > hits, cause=cause, frames=tuple(frames),
        fallback_ops=fallbacks,
        recompile=explain(graph, frames), ir=graph_lines(graph), matmul_precision=graph.key.matmul_precision,
        compile_effort=graph.key.compile_effort,
        **texts))
    if lowered.mesh is not None:
        emit(partition.partition_event(graph, compiled, lowered.mesh))
    return compiled


def _texts(lowered: Lowered, compiled: Compiled, eager: bool) -> dict:
    """What a report shows of the stages, copied out as plain data (per-fusion costs not for an
    eager op: its one fusion is the op, and every new op shape would pay the analysis)."""
    cost = compiled.cost_analysis() or {}
    memory = compiled.memory_analysis() or {}
    optimized = compiled.as_text()
    return {
        "stablehlo": lowered.as_text(),
        "optimized": optimized,
        "fusion_costs": compiled.fusion_costs(optimized) if cost and not eager else (),
        "cost": tuple((k, float(v)) for k, v in cost.items()
                      if isinstance(v, (int, float)) and not _COST_PART.search(k)),
        "memory": tuple((k, int(v)) for k, v in memory.items()),
    }


def scalar_vectors(graph: Graph) -> list:
    """The lifted numbers' values as the executable takes them: [float64 vector], [int64 vector]."""
    floats, ints = [], []
    for s in graph.scalars:
        (floats if type(s.value) is float else ints).append(s.value)
    vectors = []
    if floats:
        vectors.append(np.array(floats, dtype=np.float64))
    if ints:
        vectors.append(np.array(ints, dtype=np.int64))
    return vectors


def run_graph(graph: Graph, *, eager: bool, cause: str = "", frames=()) -> tuple:
    """Runs `graph` and returns one device array per root (launched, maybe not finished; with
    debug_nans on, its NaN check is pending, or read already when eager: runtime/nans.py)."""
    return run(graph, eager=eager, cause=cause, frames=frames)[2]


@jax_entry
def run(graph: Graph, *, eager: bool, cause: str = "", frames=()) -> tuple[Graph, Compiled, tuple]:
    """run_graph, also returning the graph as it ran and its executable (a traced replay keeps them)."""
    graph, compiled, cached = executable(graph, eager=eager, cause=cause, frames=frames)
    args = graph_args(graph, compiled)
    outs = launch(compiled, graph.name, args, eager=eager, cached=cached, donated=len(graph.donate))
    return graph, compiled, nans.check(graph, outs, args, now=eager) if graph.key.nan_check else outs


def executable(graph: Graph, *, eager: bool, cause: str = "", frames=()) -> tuple[Graph, Compiled, bool]:
    """The graph as it runs, its executable from the cache or compiled now, and whether it was
    cached (the one function that puts into the cache). With debug_nans on, the graph is the checked one
    (runtime/nans.py; new_graph builds it so, a graph made before debug_nans turned on is made so here):
    its launch's outputs go through `nans.check`."""
    cache = _rt.cache
    if _rt.config.debug_nans and not graph.key.nan_check:
        graph = graph.checking_nans()
    compiled = cache.get(graph.key)
    cached = compiled is not None
    if compiled is None:
        compiled = compile_graph(graph, eager=eager, cause=cause, frames=frames)
        cache.put(graph.key, compiled)
    return graph, compiled, cached


def graph_args(graph: Graph, compiled: Compiled) -> list:
    """What the executable is called with: the input buffers, then the lifted numbers' vectors."""
    args = [n.buffer for n in graph.inputs]
    args.extend(scalar_vectors(graph))
    if compiled.in_shardings is not None:
        args = partition.place_args(compiled.in_shardings, args)
    return args


@jax_entry
def launch(compiled: Compiled, name: str, args: list, *, eager: bool, cached: bool, donated: int = 0) -> tuple:
    """Calls the executable on device buffers (and scalar vectors); emits Execute."""
    start = time.perf_counter_ns()
    outs = call(compiled, name, args, "running")
    emit(events.Execute(name=name, key=compiled.digest, eager=eager, ns=time.perf_counter_ns() - start,
                        cached=cached, donated=donated))
    return outs


@jax_entry
def call(compiled: Compiled, name: str, args: list, doing: str = "replaying") -> tuple:
    """The executable on `args`, tracked for wait(), no event: `launch` emits Execute, a replayed
    call (replay/function.py) one Replay event."""
    cpu_mesh = compiled.in_shardings is not None and _rt.jax_device().platform == "cpu" and jax.local_device_count() > 1
    if cpu_mesh:
        _wait_last_cpu_mesh_launch()
    try:
        if _rt.faults:
            _rt.fault("execution")
        outs = compiled(*args)
        # torch's error in a CPU fallback op must come here, before the outputs are bound, so that the
        # pending work stays (an asynchronous device reports it at a read, with every output poisoned)
        if compiled.host_calls:
            jax.block_until_ready(outs)
    except BaseException as error:
        fallback = device_errors.torch_error(error, name)   # torch raised in a CPU fallback op: its error
        note_stage(fallback or error, f"{doing} graph '{name}' on the device")
        if fallback is not None:
            raise fallback from None
        raise
    _track(outs)
    if cpu_mesh:
        _rt.last_cpu_mesh_launch = list(outs)
    return outs


def _wait_last_cpu_mesh_launch() -> None:
    """One program over several CPU devices in flight at a time: XLA's CPU runtime runs the devices
    of one process on a shared thread pool, and two such programs in flight whose collectives wait
    for each other's threads deadlock (XLA aborts after 40 s waiting at its all-reduce rendezvous;
    eager mode on a mesh launches one such program per op). Plain JAX does the same when it
    dispatches several of them asynchronously with xla_force_host_platform_device_count=8 on 2 cores."""
    pending = [a for a in _rt.last_cpu_mesh_launch if isinstance(a, jax.Array) and not a.is_deleted()]
    _rt.last_cpu_mesh_launch = []
    if pending:
        jax.block_until_ready(pending)


def _track(outs) -> None:
    """Remembers a launch's outputs for wait(). The finished ones are dropped when the list passes its
    limit, which then becomes twice what is still running: each array is asked once or twice in all,
    not at every launch while the device runs behind the host (a replayed decode loop asked 64 of
    them per token, 70 us)."""
    outstanding = _rt.outstanding
    if len(outstanding) > _rt.outstanding_limit:
        outstanding[:] = [a for a in outstanding if not _is_ready(a)]
        _rt.outstanding_limit = max(64, 2 * len(outstanding))
    outstanding.extend(outs)


def _is_ready(a) -> bool:
    try:
        return a.is_ready()
    except RuntimeError:   # deleted (donated) arrays are finished by definition
        return True


@jax_entry
def wait() -> None:
    """Blocks until every launched execution has finished."""
    _rt.wait()
