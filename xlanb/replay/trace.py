"""One traced call of a replayed function, recorded in the terms replay needs (replay/function.py).

The call runs as `xlanb.compile` runs it (a CompileScope: pending work flushed first, the body
lazy), with three things added, all paid on traced calls only:
- before the body, one walk of the heap (`gc.get_objects`) lists every live xla tensor and
  storage, so each graph input can be traced back to the tensor that held it when the call
  started (a parameter, optimizer state, an argument), and each output to who holds it after;
- while the body runs, global module and optimizer hooks note which modules and optimizers it
  uses (their training flags and hyperparameters become guards), and an event listener notes
  what makes a body not replayable (a value read, a graph cut, a CPU fallback);
- the scope's exit sync is realize.run_pending with a look at the graph before it runs (the scope's
  `end` hook), so that the graph, its executable and the holder of each output are kept.
"""

from __future__ import annotations

import gc
from typing import NamedTuple

import jax
import numpy as np
import torch
from torch.optim.lr_scheduler import LRScheduler
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.utils import _pytree as pytree

from xlanb import events
from xlanb.capture import realize
from xlanb.capture.modes import CompileScope
from xlanb.replay.holders import Holders, code_names, find_holders, object_paths, path_object, path_text
from xlanb.capture.tensor import LazyTensor, Storage, holder_node, tensor_meta
from xlanb.ir.node import Meta
from xlanb.lower.registry import fallback_ops
from xlanb.runtime import executor
from xlanb.state import runtime_state

_rt = runtime_state()

ARG, HOLDER, CONST, ARG_PATH = 0, 1, 2, 3           # where a graph input comes from
REBIND_TENSOR, REBIND_STORAGE, FRESH, REBIND_PATH = 0, 1, 2, 3   # who holds a graph output
RETURN, GRAD = "return", "grad"                      # where a fresh output tensor goes
_PLAIN = (int, float, bool, str, type(None))


class Source(NamedTuple):
    """Where a graph input comes from. `kind` ARG: `where` is the argument's position or keyword;
    ARG_PATH: `where` is (argument, path) into one; HOLDER: `where` is the tensor or storage that
    held it when the call started; CONST: `where` is the buffer the body made on the host."""
    kind: int
    where: object
    meta: Meta


class Place(NamedTuple):
    """Where a fresh output tensor goes: `to` RETURN (`target`: its position among the returned
    leaves) or GRAD (`target`: the parameter whose .grad it becomes). `views`: its view chain on a
    fresh storage (empty for a tensor of its own)."""
    views: tuple
    meta: Meta
    to: str
    target: object


class Binding(NamedTuple):
    """Who holds a graph output after the call. `kind` REBIND_TENSOR / REBIND_STORAGE: `holder`, a
    tensor or storage that existed before; REBIND_PATH: `holder` is its (argument, path) and
    `storage` says whether a storage is found there; FRESH: a new tensor (`storage` False) or a new
    storage and its views, one per place in `places`."""
    kind: int
    holder: object = None
    storage: bool = False
    places: tuple = ()


class Output(NamedTuple):
    """Graph output j: who holds it after the call, and its meta."""
    bindings: tuple
    meta: Meta


class Trace:
    """What one traced call read and wrote. `reason` is None when it can become a plan."""

    def __init__(self):
        self.reason: str | None = None
        # the call's state outside the graph (_state): modes, the cache and RNG it ran with, the arguments
        self.eager = False
        self.grad_mode = self.autocast = self.autocast_xla = False
        self.cache = None
        self.rng = None
        self.args: tuple = ()
        self.kwarg_names: frozenset = frozenset()
        self.kwargs: tuple = ()
        self.needs_heap = False       # a holder was not reached: the next traced call walks the whole heap
        self.python = ()
        self.python_sources = None
        self.training = self.hyper = self.slots = self.grad_none = ()
        self.sources: list[Source] = []
        self.outputs: list[Output] = []
        self.view_users = ()
        self.path_outputs = ()
        self.donate = ()
        self.key = None
        self.compiled = None
        self.in_shardings = None
        self.scalar_args: list = []
        self.scalar_values = ()
        self.const_values: list = []
        self.return_leaves = ()
        self.return_args = ()         # (leaf position, argument position or keyword): returned arguments
        self.return_spec = None
        self.recycle = ()             # (output position, parameter, view chain): fresh .grad outputs, written into the old .grad
        self.recycling = None         # the executable that takes the old .grad buffers (donated) after its arguments
        self.first = False            # the first call of its signature (it may create state: optimizer moments)

    def fail(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason


def trace_call(fn, args, kwargs, name: str, full_graph: bool, detector, whole_heap: bool = False,
               recycling: bool = False):
    """Runs `fn` as `xlanb.compile` does; returns (its result, the Trace). whole_heap: find the
    holders of its inputs on the whole heap, not only among what the function reaches. recycling:
    the call is likely to become a plan (the one before it could): also compile the executable that
    writes its fresh .grad outputs into the previous .grad buffers (replay/function.py)."""
    trace = Trace()
    if _rt.compile_scope is not None:          # nested: inline in the outer graph, as xlanb.compile does
        trace.fail("called inside another compiled function")
        return fn(*args, **kwargs), trace
    _state(trace, args, kwargs, fn)
    scope = CompileScope(name, full_graph, detector)
    scope.device_checks = False      # a check left in the graph would be a tensor the call made and kept
    scope.replay = True              # xlanb.compare() refuses to open inside it
    watcher = _Watcher(trace)
    with scope:
        before = find_holders(fn, args, kwargs, whole_heap)
        arg_nodes = _arg_nodes(args, kwargs)
        _rt.subscribe(watcher.event)
        hooks = (torch.nn.modules.module.register_module_forward_pre_hook(watcher.module),
                 register_optimizer_step_pre_hook(watcher.optimizer))
        engine = _count_backward(watcher)
        schedule = _refuse_schedulers(trace)
        try:
            out = fn(*args, **kwargs)
        finally:
            for h in hooks:
                h.remove()
            _rt.unsubscribe(watcher.event)
            if engine is not None:
                torch.autograd._engine_run_backward = engine
            LRScheduler.step = schedule

        def end(cause: str) -> None:      # the scope's sync, keeping what ran
            _guards(trace, watcher, fn, args, kwargs)
            _sync(trace, name, cause, out, before, arg_nodes, watcher, args, kwargs, recycling)
        scope.end = end
    return out, trace


def _refuse_schedulers(trace: Trace):
    """An LR scheduler stepped inside the body makes it not replayable: its Python state (the epoch
    count) would not advance on replayed calls, and a schedule that is flat for a while would then
    replay a frozen learning rate. Returns the original step to put back."""
    original = LRScheduler.step

    def step(self, *args, **kwargs):
        trace.fail(f"{type(self).__name__}.step() runs inside the body: its Python state would not advance on "
                   "replayed calls; step the scheduler after the replayed function")
        return original(self, *args, **kwargs)
    LRScheduler.step = step
    return original


def _count_backward(watcher: "_Watcher"):
    """Counts backward passes run by the body (torch.autograd's one entry into the engine, which
    backward() and autograd.grad() both call); returns the original to put back (None: this
    torch has no such entry, and returned tensors are not checked)."""
    original = getattr(torch.autograd, "_engine_run_backward", None)
    if original is None:
        watcher.backward = None
        return None

    def counted(*args, **kwargs):
        watcher.backward += 1
        return original(*args, **kwargs)
    torch.autograd._engine_run_backward = counted
    return original


def _state(trace: Trace, args, kwargs, fn) -> None:
    """The call's state outside the graph: modes, the RNG storage, the arguments."""
    trace.eager = _rt.eager
    trace.grad_mode = torch.is_grad_enabled()
    trace.autocast = torch.is_autocast_enabled("cpu")
    trace.autocast_xla = torch.is_autocast_enabled(_rt.device.type)
    trace.cache = _rt.cache
    trace.args = tuple(_expect(a) for a in args)
    trace.kwarg_names = frozenset(kwargs)
    trace.kwargs = tuple((k, _expect(v)) for k, v in kwargs.items())
    for i, (kind, value) in enumerate(trace.args + tuple(e for _, e in trace.kwargs)):
        if kind == "object" and isinstance(value, (list, tuple, dict)) and _has_tensor(value):
            trace.fail(f"argument {i} is a {type(value).__name__} holding tensors: pass tensors as arguments")
    trace.python_sources = python_sources(fn)
    trace.python = python_values(trace.python_sources)


def _expect(a) -> tuple:
    if type(a) is LazyTensor:
        if _rt.several_devices or (_rt.several_devices is None and _rt.count_devices()):   # on a mesh: the argument's sharding is part of the plan
            return ("sharded", (tensor_meta(a), _sharding(a)))
        return ("tensor", tensor_meta(a))
    if type(a) in _PLAIN:
        return ("value", a)
    if path_object(a):            # its tensors are read by path: another object of its type will do
        return ("type", type(a))
    return ("object", a)


def _sharding(t):
    """The sharding of a computed tensor's buffer (None while it is pending)."""
    b = holder_node(t).buffer
    return None if b is None else b.sharding


def _has_tensor(x) -> bool:
    return any(isinstance(leaf, torch.Tensor) for leaf in pytree.tree_leaves(x))


def _arg_nodes(args, kwargs) -> dict:
    """Argument tensors' base nodes (after the flush) -> their position or keyword."""
    found = {}
    for i, a in enumerate(args):
        if type(a) is LazyTensor:
            found.setdefault(holder_node(a), i)
    for k, a in kwargs.items():
        if type(a) is LazyTensor:
            found.setdefault(holder_node(a), k)
    return found


class _Watcher:
    """Notes, while the body runs, the modules and optimizers it uses and what it must not do."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.modules: dict = {}
        self.optimizers: dict = {}
        self.backward = 0          # backward passes the body ran (None: not counted)
        self.uploads = 0           # host tensors moved to the device inside the body

    def event(self, e) -> None:
        t = type(e)
        if t is events.Sync and e.kind in ("value", "mark_step") and e.roots:
            where = f" at {e.frames[0].filename}:{e.frames[0].lineno}" if e.frames else ""
            what = "a value read" if e.kind == "value" else "xlanb.sync()"
            self.trace.fail(f"{what} inside the body cuts its graph ({e.cause}{where})")
        elif t is events.Transfer:
            if e.direction == "from_device":
                self.trace.fail("a value is read back to the host inside the body")
            else:
                self.uploads += 1
        elif t is events.GraphCut:
            self.trace.fail(f"the data-dependent op {e.op} cuts the graph")

    def module(self, module, inputs) -> None:
        self.modules.setdefault(id(module), module)

    def optimizer(self, opt, args, kwargs) -> None:
        """Optimizer state on the device (capturable) and a tensor learning rate, as the
        torch.compile backend sets them: a CPU step counter would be read back each step, and a
        scheduler's new float each step would make every call's graph differ."""
        self.optimizers.setdefault(id(opt), opt)
        for group in opt.param_groups:
            params = group.get("params", [])
            if "capturable" not in group or not params or any(type(p) is not LazyTensor for p in params):
                continue
            if all(p not in opt.state for p in params):
                group["capturable"] = True
            if group["capturable"] and type(group.get("lr")) is float:
                group["lr"] = torch.tensor(group["lr"], dtype=torch.float32, device=_rt.device)


def hyperparameters(opt) -> tuple:
    """An optimizer's Python-valued hyperparameters (a float lr is part of the graph)."""
    return tuple(tuple((k, v) for k, v in g.items() if k != "params" and not isinstance(v, torch.Tensor))
                 for g in opt.param_groups)


def python_sources(fn) -> tuple:
    """What the body can read by name: its globals (those its code names) and closure cells that
    hold numbers, strings, bools or None (guarded by value), or tensors, modules and optimizers
    (guarded by identity: a global rebound to another tensor is noticed)."""
    f = getattr(fn, "__func__", fn)
    code = getattr(f, "__code__", None)
    if code is None:
        return ({}, (), ())
    g = f.__globals__
    watched = tuple(sorted(n for n in code_names(code) if n in g and _watched(g[n])))
    cells = []
    for var, cell in zip(code.co_freevars, f.__closure__ or ()):
        try:
            if _watched(cell.cell_contents):
                cells.append((var, cell))
        except ValueError:        # an empty cell
            pass
    return (g, watched, tuple(cells))


def _watched(x) -> bool:
    return type(x) in _PLAIN or isinstance(x, (torch.Tensor, torch.nn.Module, torch.optim.Optimizer))


class Same:
    """An object compared by identity in a guard's tuple of values."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other) -> bool:
        return type(other) is Same and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        return f"a {type(self.obj).__name__} object"


def python_values(sources) -> tuple:
    g, names, cells = sources
    values = [(n, g.get(n)) for n in names] + [(v, c.cell_contents) for v, c in cells]
    return tuple((n, v if type(v) in _PLAIN else Same(v)) for n, v in values)


def python_changed(sources, expected: tuple) -> bool:
    """python_values(sources) != expected, without building the tuple (every replayed call asks)."""
    g, names, cells = sources
    k = 0
    for n in names:
        if _differs(g.get(n), expected[k][1]):
            return True
        k += 1
    for _, c in cells:
        if _differs(c.cell_contents, expected[k][1]):
            return True
        k += 1
    return False


def _differs(v, want) -> bool:
    if type(want) is Same:
        return v is not want.obj
    return type(v) is not type(want) or not (v == want or (v != v and want != want))


def _guards(trace: Trace, watcher: _Watcher, fn, args, kwargs) -> None:
    """The modules and optimizers the body used: their flags, hyperparameters and tensors."""
    modules = dict(watcher.modules)
    roots = list(args) + list(kwargs.values())
    if hasattr(fn, "__self__"):
        roots.append(fn.__self__)
    for r in roots:
        if isinstance(r, torch.nn.Module):
            for m in r.modules():
                modules.setdefault(id(m), m)
    trace.training = tuple((m, m.training) for m in modules.values())
    trace.hyper = tuple((o, hyperparameters(o)) for o in watcher.optimizers.values())
    slots = []
    for m in modules.values():
        for d in (m._parameters, m._buffers):
            slots.extend((d, k, v, v.requires_grad) for k, v in d.items() if v is not None)
    trace.slots = tuple(slots)


def _sync(trace: Trace, name: str, cause: str, out, before: Holders, arg_nodes: dict, watcher: "_Watcher", args,
          kwargs, recycling: bool = False) -> None:
    """The scope's sync (realize.run_pending), keeping the graph, its executable, its inputs' sources
    and its outputs' holders."""
    holders: dict = {}
    for ref in _rt.pending:
        h = ref()
        if h is None:
            continue
        n = holder_node(h)
        if n.buffer is None:
            found = holders.setdefault(n, [])
            if not any(x is h for x in found):
                found.append(h)

    def inspect(graph) -> None:        # before it runs: where its inputs come from, where its outputs go
        platform = _rt.jax_device().platform
        fallbacks = fallback_ops(graph.order, platform)
        if fallbacks:
            trace.fail(f"it runs {', '.join(fallbacks)} on the CPU (no lowering)")
        _sources(trace, graph, before, arg_nodes, watcher.uploads)
        if trace.reason is not None:   # a trace that cannot be a plan needs no output bindings (they cost a heap walk)
            return
        _outputs(trace, graph, holders, out, before, arg_nodes, watcher.backward != 0, args, kwargs)
        trace.recycle = tuple((j, b.places[0].target, b.places[0].views) for j, (bindings, _) in enumerate(trace.outputs)
                              for b in bindings if len(bindings) == 1 and b.kind == FRESH
                              and len(b.places) == 1 and b.places[0].to == GRAD)
        if recycling and trace.reason is None and trace.recycle and not graph.key.shardings:
            metas = tuple(trace.outputs[j].meta for j, _, _ in trace.recycle)
            _, trace.recycling, _ = executor.executable(     # cached: a later traced call takes it from there
                graph.with_recycling(metas), eager=False,
                cause=f"replay of '{name}': its gradients written into the previous step's .grad buffers")

    ran = realize.run_pending(name, cause, inspect)
    if ran is None:
        trace.fail("the body computes nothing on the device")
        return
    graph, compiled = ran
    trace.key, trace.donate, trace.compiled = compiled.key, graph.donate, compiled     # the cache's own key object
    trace.in_shardings = compiled.in_shardings
    trace.scalar_values = tuple((type(s.value), repr(s.value)) for s in graph.scalars)
    with jax.enable_x64(True):   # uploaded once: a replayed call passes the same numbers
        trace.scalar_args = [jax.device_put(v, _rt.jax_device()) for v in executor.scalar_vectors(graph)]
    trace.rng = _rt.rng


def _sources(trace: Trace, graph, before: Holders, arg_nodes: dict, uploads: int) -> None:
    unknown = 0
    for i, n in enumerate(graph.inputs):
        if n in arg_nodes:
            trace.sources.append(Source(ARG, arg_nodes[n], n.meta))
        elif n in before.holder:
            h = before.holder[n]
            where = before.paths.get(id(h))
            trace.sources.append(Source(ARG_PATH, where, n.meta) if where is not None else Source(HOLDER, h, n.meta))
        else:
            unknown += 1
            if i in graph.donate:
                trace.fail(f"a tensor {n.meta.text} made inside the body is written in place")
            trace.sources.append(Source(CONST, n.buffer, n.meta))
            trace.const_values.append(np.asarray(n.buffer))
    if unknown > uploads and not before.whole_heap:
        trace.needs_heap = True
        trace.fail("an input's tensor is not reachable from the function's arguments, closure or globals "
                   "(the next call looks for it on the whole heap)")


def _outputs(trace: Trace, graph, holders: dict, out, before: Holders, arg_nodes: dict, backward_ran: bool,
             args, kwargs) -> None:
    leaves, spec = pytree.tree_flatten(out)
    returned = {id(x): j for j, x in enumerate(leaves) if type(x) is LazyTensor}
    trace.return_spec = None if spec.is_leaf() else spec
    fresh_leaves = {j for j, x in enumerate(leaves) if type(x) is LazyTensor and id(x) not in before.ids}
    trace.return_leaves = tuple(None if j in fresh_leaves else x for j, x in enumerate(leaves))
    # an argument returned (an HF cache in the model's output): the call's own argument on replay
    passed = [(i, a) for i, a in enumerate(args) if type(a) not in _PLAIN] + \
        [(k, a) for k, a in kwargs.items() if type(a) not in _PLAIN]
    trace.return_args = tuple((j, key) for j, x in enumerate(leaves) if type(x) not in _PLAIN
                              for key, a in passed if a is x)
    grads = {id(p.grad): p for p in before.params if p.grad is not None}
    arg_holders = {id(h) for h in _holders_of_nodes(arg_nodes, before)}
    fresh_storages = [h for hs in holders.values() for h in hs if type(h) is Storage and id(h) not in before.ids]
    users = _tensors_of(fresh_storages)
    grad_none = []
    unplaced: list = []
    placed: set = set()
    for root in graph.roots:
        bindings = []
        for h in holders.get(root, ()):
            if id(h) in before.ids:
                if id(h) in arg_holders:
                    trace.fail(f"it writes into its argument {tensor_meta(h).text if type(h) is LazyTensor else ''} "
                               "in place: pass the tensor it updates as a captured variable instead")
                where = before.paths.get(id(h))
                if where is not None:
                    bindings.append(Binding(REBIND_PATH, where, type(h) is Storage))
                else:
                    bindings.append(Binding(REBIND_STORAGE if type(h) is Storage else REBIND_TENSOR, h))
                continue
            aliased = type(h) is Storage
            places = []
            for t in (users.get(id(h), ()) if aliased else (h,)):
                if id(t) in returned:
                    to, target = RETURN, returned[id(t)]
                    placed.add(returned[id(t)])
                elif id(t) in grads:
                    to, target = GRAD, grads[id(t)]
                    grad_none.append((target, before.grads[id(target)] is None))
                else:
                    unplaced.append(t)
                    continue
                places.append(Place(t._views if aliased else (), tensor_meta(t), to, target))
            if places:
                bindings.append(Binding(FRESH, None, aliased, tuple(places)))
        trace.outputs.append(Output(tuple(bindings), root.meta))
    if unplaced:
        stored = object_paths(args, kwargs)        # made inside and kept in an argument: surely fresh
        where = next((stored[t] for t in unplaced if t in stored), None)
        if where is None and not before.whole_heap:
            trace.needs_heap = True                # or a holder the walk missed: look at the whole heap
        held = (f"stored in argument {where[0]} at {path_text(where[1]) or 'its top'}" if where is not None
                else f"held by {_referrers(unplaced)}")
        trace.fail(f"a tensor {tensor_meta(unplaced[0]).text} made inside the body outlives the call, and is "
                   f"neither returned nor a .grad nor written in place ({held}"
                   + (f"; {len(unplaced) - 1} more such tensors" if len(unplaced) > 1 else "") + ")")
    for j in fresh_leaves - placed:
        trace.fail(f"it returns a tensor {tensor_meta(leaves[j]).text} that its graph does not compute")
    for x in leaves:
        if type(x) is LazyTensor and x.grad_fn is not None and not backward_ran:
            trace.fail("it returns a tensor attached to an autograd graph that backward did not run on inside "
                       "the body (a replayed call has no autograd graph): call backward inside, or return "
                       "a detached tensor")
    trace.grad_none = tuple(grad_none)
    trace.path_outputs = tuple((b.holder, b.storage) for bindings, _ in trace.outputs for b in bindings
                               if b.kind == REBIND_PATH)
    rebound = {id(b.holder) for bindings, _ in trace.outputs for b in bindings if b.kind == REBIND_STORAGE}
    trace.view_users = tuple(t for t in before.views if id(t._storage) in rebound)


def _holders_of_nodes(arg_nodes: dict, before: Holders) -> list:
    return [before.holder[n] for n in arg_nodes if n in before.holder]


def _tensors_of(storages: list) -> dict:
    """id(storage) -> the live tensors that view it (one heap walk for all of them)."""
    found: dict = {}
    if not storages:
        return found
    wanted = {id(s) for s in storages}
    for r in gc.get_referrers(*storages):
        if type(r) is LazyTensor and r._node is None and id(r._storage) in wanted:
            found.setdefault(id(r._storage), []).append(r)
    return found


def _referrers(tensors: list) -> str:
    """What holds these tensors, by type (one heap walk for all of them)."""
    kinds = sorted({type(r).__name__ for r in gc.get_referrers(*tensors)} - {"frame", "list_iterator"})
    return ", ".join(kinds) if kinds else "no Python object"


def differs(a: Trace, b: Trace) -> str | None:
    """None when two traced calls did the same thing; else what differs, in words."""
    if a.key != b.key:
        return "their graphs differ"
    if a.scalar_values != b.scalar_values:
        changed = ", ".join(f"{x[1]} -> {y[1]}" for x, y in zip(a.scalar_values, b.scalar_values) if x != y)
        return (f"a Python number in the graph changed ({changed}): make it a tensor (a learning rate: "
                "torch.tensor(lr, device='xla')) or keep it constant")
    consts = iter(zip(a.const_values, b.const_values))
    for (ka, sa, _), (kb, sb, _) in zip(a.sources, b.sources):
        if ka != kb:
            return "an input comes from somewhere else"
        if ka == CONST:
            va, vb = next(consts)
            if va.shape != vb.shape or not np.array_equal(va, vb):
                return "a tensor made on the host inside the body has a new value each call"
        elif sa is not sb and sa != sb:
            return "an input is read from another tensor"
    for (ba, _), (bb, _) in zip(a.outputs, b.outputs):
        if len(ba) != len(bb):
            return "its outputs go to other tensors"
        for x, y in zip(ba, bb):
            if x.kind != y.kind or (x.kind != FRESH and x.holder is not y.holder and x.holder != y.holder):
                return "its outputs go to other tensors"
            if x.kind == FRESH:
                if x.storage != y.storage or len(x.places) != len(y.places):
                    return "its new tensors are laid out differently"
                for pa, pb in zip(x.places, y.places):
                    if pa.meta is not pb.meta or tuple(s.spec() for s in pa.views) != tuple(s.spec() for s in pb.views):
                        return "its new tensors are laid out differently"
                    if pa.to != pb.to or pa.target is not pb.target and pa.target != pb.target:
                        return "its new tensors go elsewhere (.grad or returned)"
    if a.return_spec != b.return_spec:
        return "its return value's structure changed"
    if a.return_args != b.return_args:
        return "it returned other arguments"
    returned_args = {j for j, _ in a.return_args}
    for j, (x, y) in enumerate(zip(a.return_leaves, b.return_leaves)):
        if x is not y and j not in returned_args and not (type(x) is type(y) and type(x) in _PLAIN and x == y):
            return f"it returned another Python value ({type(x).__name__} at position {j} of its result)"
    for attr in ("training", "hyper", "python"):
        if _plain(getattr(a, attr)) != _plain(getattr(b, attr)):
            return f"its {attr} state changed between the calls"
    return None


def _plain(pairs) -> tuple:
    return tuple((id(x) if not isinstance(x, (str, int)) else x, y) for x, y in pairs)
