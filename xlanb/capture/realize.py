"""Turning pending nodes into device buffers: sync, eager syncs and value access.

- `sync()` (torch_xla's mark_step) computes every live pending tensor as one graph.
  Buffers that the graph overwrites (old values of tensors written in place) are
  donated to its outputs.
- Eager mode syncs what each op made pending, right after the op.
- Value access (`.item()`, `.cpu()`, `print`) computes just the tensor asked for and
  *keeps* the result: asking twice runs nothing the second time.

A failed compile or execution changes nothing: every pending graph stays as it was.
"""

from __future__ import annotations

import weakref

import numpy as np
import torch
from jax.sharding import SingleDeviceSharding
from torch.utils import _pytree as pytree

from xlanb import events
from xlanb.capture import bounds, fills, tensor as _tensor
from xlanb.capture.frames import library_site, user_frames
from xlanb.capture.growth import host_cat
from xlanb.capture.tensor import (LazyTensor, base_node, holder_node, new_tensor, prune_pending, tensor_meta,
                                  view_chain, write)
from xlanb.ir.graph import build_graph, graph_lines
from xlanb.ir.node import Node, data_node
from xlanb.ir.precision import matmul_precision
from xlanb.lower.fallback import host_dispatch
from xlanb.lower.rules.sharding import is_manual, without_manual
from xlanb.runtime import executor, nans
from xlanb.runtime.transfer import download, upload
from xlanb.state import emit, runtime_state

_rt = runtime_state()


def check_execution(cause: str, frames) -> None:
    """Raises the full-graph violation when an execution is forced inside
    `xlanb.compile(full_graph=True)` (the active CompileScope words it)."""
    scope = _rt.compile_scope
    if scope is not None and not _rt.allow_execution:
        scope.violation(cause, frames)


def raise_nan(ready_only: bool = False) -> None:
    """debug_nans: reads the pending checks' flags (runtime/nans.py; with ready_only, those of the graphs
    that have finished: a sync does not wait) and raises the NaN found, once the graphs' outputs are
    stored and their pending entries handled, so later work runs as usual."""
    if _rt.nan_checks:
        nans.examine(ready_only)
    error = _rt.nan_error
    if error is not None:
        _rt.nan_error = None
        raise error


def raise_deferred() -> None:
    """Re-raises an error that happened inside the autograd engine (or a NaN found and not raised yet)."""
    if _rt.nan_error is not None or _rt.nan_checks:
        raise_nan(ready_only=True)
    if _rt.deferred:
        error = _rt.deferred[0]
        _rt.deferred.clear()
        raise RuntimeError(
            f"an error was raised inside backward: {type(error).__name__}: {error}\n"
            "xlanb keeps errors raised inside the autograd engine until the next sync or value "
            "access (raising there would kill the process). Tensors computed by that backward "
            "(e.g. .grad) are invalid: zero them (optimizer.zero_grad()) and run the step again."
        ) from error


def execute(roots: list[Node], *, name: str, eager: bool, cause: str, frames=(), donate: bool,
            graph=None) -> tuple:
    """Compiles (or fetches) and runs the graph behind `roots` (`graph`, when the caller built it),
    then stores the results; returns the graph as it ran and its executable."""
    if graph is None:
        graph = executor.new_graph(roots, name, donatable if donate else None)
    graph, compiled, outs = executor.run(graph, eager=eager, cause=cause, frames=frames)
    forget = not graph.key.nan_check or eager       # a NaN flag not read yet: nans.examine forgets them
    for root, buffer in zip(graph.roots, outs):
        root.release(buffer, forget)
    return graph, compiled


def donatable(node: Node) -> bool:
    """Whether a graph may donate an input's buffer: in-place writes overwrote it (its old value is
    read by this graph only) and no open xlanb.compare() region still reads it."""
    return node in _rt.overwritten and node not in _rt.kept


def pending_roots(refs=None) -> list[Node]:
    """Base nodes of the live pending holders in `refs` (default: all), deduplicated, in order."""
    seen = set()
    roots = []
    for ref in _rt.pending if refs is None else refs:
        h = ref()
        if h is None:
            continue
        n = holder_node(h)
        if n.buffer is None and n not in seen:
            seen.add(n)
            roots.append(n)
    if _rt.manual_used and roots:        # a manual value stays pending until it is brought back
        roots = without_manual(roots)
    return roots


def pending_node_count() -> int:
    """Nodes that the next sync would compute (0 when nothing is pending)."""
    roots = pending_roots()
    return build_graph(roots, "").compute_nodes if roots else 0       # structure only: no settings, no placing


def flush_pending(name: str, cause: str) -> None:
    """Syncs the pending work as graph `<name>_clear_pending` before compiled function `name` runs, so
    that its own graph holds its body only (xlanb.compile's scope, and a replayed call)."""
    previous = _rt.graph_name
    _rt.graph_name = f"{name}_clear_pending"
    try:
        sync(cause=cause)
    finally:
        _rt.graph_name = previous


def run_pending(name: str, cause: str, inspect=None) -> tuple | None:
    """A full sync's body: the graph of every live pending value, as graph `name`, donating the
    buffers in-place writes overwrote; `inspect(graph)` sees it before it runs. Returns the graph as
    it ran and its executable, None when nothing was pending (xlanb.sync; a traced call keeps them:
    replay/trace.py)."""
    raise_deferred()
    roots = pending_roots()
    frames = user_frames(_rt.config.max_frames) if roots else ()
    emit(events.Sync(kind="mark_step", name=name, roots=len(roots), cause=cause, frames=frames))
    ran = None
    if roots:
        if _rt.state_fills:
            fills.materialize()
        graph = executor.new_graph(roots, name, donatable)
        if inspect is not None:
            inspect(graph)
        ran = execute(roots, name=name, eager=False, cause=cause, frames=frames, donate=True, graph=graph)
    _rt.pending.clear()
    if _rt.nan_error is not None or _rt.nan_checks:     # the checks of graphs that have finished: no wait
        raise_nan(ready_only=True)
    return ran


def sync(wait: bool = False, cause: str = "xlanb.sync") -> None:
    """Compiles and launches the pending graph of all live tensors (torch_xla's mark_step)."""
    if type(wait) is not bool:
        raise TypeError(f"xlanb.sync(wait=...) must be True or False, got {type(wait).__name__} {wait!r}")
    run_pending(_rt.graph_name, cause)
    if wait:
        _wait()        # the function below: the argument shadows its name
    elif _rt.device_checks:
        bounds.raise_failed(ready_only=True)


def wait() -> None:
    """Blocks until every launched execution has finished (`xlanb.wait()`), then reads what the
    finished graphs left to check (debug_nans' flags, index checks) and raises what failed: the
    host has just waited for them, so the reads cost least here (a flag read after a step's trace
    pays PJRT's cold path, about twice as much on W3)."""
    executor.wait()
    if _rt.nan_checks or _rt.nan_error is not None:
        raise_nan()
    if _rt.device_checks:
        bounds.raise_failed()


_wait = wait


def sync_eager(mark: int, name: str, op: bool = True, cause: str = "") -> None:
    """Eager mode: computes what the last op made pending (_rt.pending[mark:]); an in-place op that
    the fast path may replay next time (`eager_write_memo`) has its graph's key remembered. `op=False`:
    what was made pending runs as a graph (a compiled graph's call under torch.compile, a backward
    pass: capture/dispatch.py), said by `cause`."""
    roots = pending_roots(_rt.pending[mark:])
    memo, _rt.eager_write_memo = _rt.eager_write_memo, None
    if roots:
        # donating is safe only when no other pending graph may still read the old buffers
        graph, compiled = execute(roots, name=name, eager=op,
                                  cause=cause or ("eager op" if op else "compiled graph call"), donate=(mark == 0))
        if memo is not None and mark == 0 and memo[0] == name:
            _, fast_key, inputs, scalars = memo
            if (len(graph.inputs) == len(inputs) and all(a is b for a, b in zip(graph.inputs, inputs))
                    and len(graph.scalars) == scalars and not graph.key.shardings and not _rt.config.debug_nans):
                _rt.eager_ops[fast_key] = compiled.key
    del _rt.pending[mark:]
    if _rt.nan_error is not None:           # at the op, as index checks are
        raise_nan()
    if _rt.device_checks:                   # eager mode raises an index check at the op
        bounds.raise_failed()


def sync_region(name: str, cause: str) -> None:
    """Eager mode: what a backward pass or an optimizer step recorded lazily (capture/dispatch.py) runs
    as one graph `name`, its state fills made device data first as a full sync makes them (fills.py:
    the first step's graph is then every later step's), its index checks and NaN flag read at once
    as an eager op's are."""
    if _rt.state_fills:
        fills.materialize()
    sync_eager(0, name, op=False, cause=cause)
    if _rt.nan_checks:           # debug_nans: eager mode raises a NaN before the user's next line
        raise_nan()


# The eager fast path -----------------------------------------------------------------
# A unary or binary op on computed, unaliased tensors is the same one-node graph whenever its
# op and input types are the same. The first time, it is recorded and run like any op and the
# graph's CacheKey is remembered under (op, input types); after that, the executable is looked
# up by that key (so the LRU, its bound and its counters stay exact) and called on the input
# buffers directly: no node, no graph walk, no key built. A key built under another float32 matmul
# precision, compile effort or platform takes the slow path, which compiles (or finds) the op under
# the settings in force now. While
# debug_nans is on nothing is remembered (and a change of it forgets every key: capture/nans.py),
# so each op runs through run_graph and is checked.

_F64, _I64 = np.dtype(np.float64), np.dtype(np.int64)
_SINGLE = SingleDeviceSharding


def eager_replay(fast_key, name: str, meta, buffers: tuple, scalar) -> LazyTensor | None:
    """The op's result if it ran before with these input types (None: take the slow path)."""
    out = eager_launch(fast_key, name, buffers, scalar)
    return None if out is None else new_tensor(data_node(out, meta), meta)


def eager_launch(fast_key, name: str, buffers: tuple, scalar):
    """The output buffer of the executable remembered under `fast_key`, launched on `buffers` (and the
    op's one lifted number), or None when there is none to replay (take the slow path)."""
    key = _rt.eager_ops.get(fast_key)
    if key is None:
        return None
    cfg = _rt.config
    if key.matmul_precision != matmul_precision() or key.compile_effort != cfg.compile_effort \
            or key.platform != cfg.platform:       # built under other settings: the slow path builds one now
        return None
    several = _rt.several_devices
    if several or (several is None and _rt.count_devices()):
        for b in buffers:                  # a sharded operand: the slow path keys its sharding
            if type(b.sharding) is not _SINGLE:
                return None
    compiled = _rt.cache.get(key)
    if compiled is None:                   # evicted: compile again through the slow path
        return None
    args = list(buffers)
    if scalar is not None:
        args.append(np.array((scalar,), _F64 if type(scalar) is float else _I64))
    (out,) = executor.launch(compiled, name, args, eager=True, cached=True, donated=len(key.donate))
    return out


def eager_run(node: Node, fast_key) -> LazyTensor:
    """The fast path's first time: runs the one-node graph now and remembers its key."""
    graph, compiled, (out,) = executor.run(executor.new_graph([node], node.name), eager=True, cause="eager op")
    node.release(out)
    if _rt.nan_error is not None:
        raise_nan()
    if not graph.key.shardings and not _rt.config.debug_nans:     # debug_nans: each op checked (capture/nans.py)
        _rt.eager_ops[fast_key] = compiled.key      # the cache's own key object: found by identity
    return new_tensor(node, node.meta)


def eager_mark() -> int:
    """Where this op's pending holders will start; prunes stale lazy entries first."""
    if _rt.pending:
        prune_pending()
    return len(_rt.pending)


def realize(t: LazyTensor, cause: str) -> Node:
    """Computes t's base value (a forced execution in lazy mode) and returns its node.

    Every other live tensor whose pending value that graph computes anyway comes out of it too
    and is kept as device data, so no pending work is computed twice (a decode loop that reads
    one value per step does not recompute every earlier step), and so does every node of it that
    pending work outside it consumes (`frontier`). Extra outputs are taken in the graph's
    post-order, so the same graph has the same key whatever order its tensors were made in."""
    raise_deferred()
    n = base_node(t)
    if n.buffer is None and _rt.manual_used and is_manual(n, {}):
        raise RuntimeError(f"{cause}: the tensor is manually sharded (one shard on each device, from "
                           "enable_manual_sharding): it has no one value; bring it back first with "
                           "disable_manual_sharding(t, mesh, partition_spec, full_shape)")
    if n.buffer is None:
        frames = user_frames(_rt.config.max_frames)
        site = library_site()
        if site:
            cause = f"{cause} in {site}"
        name = _rt.graph_name
        graph = executor.new_graph([n], name)
        if graph.inputs:
            check_execution(cause, frames)
        else:       # a value made from shapes and constants only: it cuts nothing, even in full_graph
            cause = f"{cause}, derivable from shapes (no graph cut)"
        inside = {node: i for i, node in enumerate(graph.order)}
        pending = pending_roots()
        extra = {r for r in pending if r in inside}
        extra.update(frontier(inside, pending))
        extra.discard(n)
        if _rt.manual_used:                 # a manual value leaves no graph (lower/rules/sharding.py)
            extra = set(without_manual(extra))
        roots = [n] + sorted(extra, key=lambda r: _position(r, inside))   # the same graph, the same key
        if _rt.device_checks:               # index checks not run yet, in the order made: raised at this read
            roots += [c for c in bounds.pending_checks() if c is not n and c not in extra]
        if len(roots) > 1:             # the same nodes, more outputs: walk again for the key
            graph = None
        emit(events.Sync(kind="value", name=name, roots=len(roots), cause=cause, frames=frames))
        execute(roots, name=name, eager=False, cause=cause, frames=frames, donate=False, graph=graph)
    if _rt.nan_error is not None or _rt.nan_checks:      # a value read: every check launched so far
        raise_nan()
    return n


def _position(node: Node, inside: dict) -> tuple:
    """Where an extra output sits in the graph's post-order (an element of a multi-output op
    taken outside the graph sits right after that op, in element order)."""
    i = inside.get(node)
    return (i, -1) if i is not None else (inside[node.args[0]], node.args[1])


def frontier(inside, pending: list[Node]) -> list[Node]:
    """Pending nodes of a graph (`inside`: a set or dict of its nodes) that pending work outside it
    consumes.

    A value read outputs them too, so the work after the read starts from device data instead of
    computing them again (a tensor replaced each step, `x = f(x)`, whose old value nobody holds
    but whose new value is still pending: without this, every step's graph would redo the chain)."""
    found: list[Node] = []
    taken: set = set()
    seen: set = set()
    for root in pending:
        if root in inside:
            continue
        stack = [root]
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            for o in node.operands:
                if type(o) is not Node or o.buffer is not None:
                    continue
                if o in inside:
                    if type(o.meta) is tuple:      # a multi-output op: output the element taken outside
                        o = node if node.name == "xlanb.getitem" else None
                    if o is not None and o not in taken:
                        taken.add(o)
                        found.append(o)
                elif o not in seen:
                    stack.append(o)
    return found


def copy_across(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """`dst.copy_(src)` where one side is a CPU tensor: CPU -> xla casts and broadcasts on the
    host and uploads once; xla -> CPU computes src and copies its value."""
    if type(dst) is not LazyTensor:
        return dst.copy_(to_cpu(src, cause="copy to CPU"))
    meta = tensor_meta(dst)
    host = src.detach().to(dtype=meta.dtype).expand(meta.shape)
    write(dst, data_node(upload(host), meta))
    return dst


def tree_to_cpu(data):
    """A copy of a pytree of tensors with each xla tensor replaced by its CPU copy (xm.save, the
    host collectives)."""
    return pytree.tree_map(lambda v: v.cpu() if type(v) is LazyTensor else v, data)


def to_cpu(t: LazyTensor, cause: str = "value access") -> torch.Tensor:
    """A CPU copy of t's value. Views are applied on the host: no compile for a view."""
    n = base_node(t)
    host = host_cat(n) if n.buffer is None else None
    if host is not None:             # the pieces of a grown tensor: joined on the host, kept as device data
        raise_deferred()
        n.release(upload(host))
    chain = view_chain(t)
    if host is None:
        n = realize(t, cause)
        host = _downloaded(n) if chain else download(n.buffer, n.meta.shape)
        if _rt.device_checks:
            bounds.raise_failed()
    if chain:
        host = with_layout(host, n.meta)
        with torch.no_grad(), host_dispatch():
            for step in chain:
                host = step.on_host(host)
                if host.is_conj() or host.is_neg():     # _conj / _neg_view: xla values carry no bits
                    host = host.resolve_conj().resolve_neg()
            host = host.clone()
    return host


def _downloaded(n: Node) -> torch.Tensor:
    """A computed node's value on the host, to read views of it from (never handed out itself): the
    last one downloaded is kept while its node lives, so that reading a tensor's items one by one
    downloads it once."""
    ref, host = _rt.last_download
    if ref is None or ref() is not n:
        host = download(n.buffer, n.meta.shape)
        _rt.last_download = (weakref.ref(n, _forget_download), host)
    return host


def _forget_download(ref) -> None:
    if _rt.last_download[0] is ref:
        _rt.last_download = (None, None)


def with_layout(host: torch.Tensor, meta) -> torch.Tensor:
    """`host` (a row-major copy of a value) laid out in memory as `meta` says, so that views
    replayed on it (`view`, `as_strided`) see the storage torch would."""
    if host.numel() == 0:              # no elements to copy; a download's empty array has any strides
        return meta.empty("cpu")
    if meta.mkstrides is None or any(st == 0 and d > 1 for d, st in zip(meta.shape, meta.strides)):
        return host                    # contiguous, or overlapping (no layout a copy could take)
    laid = meta.empty("cpu")
    laid.copy_(host)
    return laid


def pending_snapshot(namespace=None) -> events.PendingSnapshot | None:
    """The pending graph of all live tensors as plain data, with the names in `namespace` that hold
    a part of it; emitted as an event (the notebook takes one after each lazy cell)."""
    roots = pending_roots()
    if not roots:
        return None
    position = {n: i for i, n in enumerate(roots)}
    held = []
    for name, v in (namespace or {}).items():
        if type(v) is LazyTensor and not name.startswith("_"):
            i = position.get(base_node(v))
            if i is not None:
                held.append(events.PendingTensor(name, tensor_meta(v).text, i))
    snapshot = events.PendingSnapshot(ir=graph_lines(build_graph(roots, _rt.graph_name)), roots=len(roots),
                                      tensors=tuple(held))
    emit(snapshot)
    return snapshot


_tensor.computed = realize
