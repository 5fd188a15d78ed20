"""Step replay: `xlanb.compile(fn, replay=True)`.

The first calls of `fn` trace as `xlanb.compile` does, and each traced call is recorded in the
terms replay needs (`replay/trace.py`): where every graph input comes from (an argument,
a tensor that existed before the call, a constant made inside), who holds every output (a tensor
or storage that existed before, a fresh `.grad`, a returned tensor), and what the call read from
Python (modules' training flags, optimizers' hyperparameters, scalar arguments, numbers in the
function's globals and closure). Once two consecutive traced calls did the same thing, that record
becomes the call's plan: later calls check the plan's guards, hand the current device buffers to
the cached executable (asynchronously, donating what the traced sync donated), rebind the outputs
and return, without running `fn`'s Python body, as CUDA Graphs and `jax.jit` do.

A failed guard traces the call again (its graph is cached: no compile) and says why (a
`ReplayMiss` event and counter); a trace that cannot be replayed says why once (`NotReplayable`).
"""

from __future__ import annotations

import sys
import time

import torch
from torch.utils import _pytree as pytree

from xlanb import events
from xlanb.capture import realize
from xlanb.capture.torch_versions import CPP_REFS
from xlanb.replay.holders import follow, path_text
from xlanb.replay.trace import (ARG, ARG_PATH, GRAD, HOLDER, REBIND_PATH, REBIND_STORAGE, REBIND_TENSOR,
                                        Trace, differs, hyperparameters, python_changed, python_values,
                                        trace_call)
from xlanb.capture.tensor import (LazyTensor, Storage, base_node, forget_view, holder_of, new_tensor, new_view,
                                  rebind_holder, tensor_meta)
from xlanb.ir.node import data_node
from xlanb.ir.precision import matmul_precision
from xlanb.runtime import executor, partition
from xlanb.state import emit, runtime_state

_rt = runtime_state()


MAX_PLANS = 8        # argument signatures a function keeps plans for (prefill and decode, the last batch)


class ReplayedFunction:
    """What `xlanb.compile(fn, replay=True)` returns: call it as `fn`.

    It keeps one plan per argument signature (the metas of its tensor arguments, the kinds of the
    others), so calls that alternate between shapes (a prefill and a decode step, an epoch's short
    last batch) each replay their own plan; the newest MAX_PLANS are kept."""

    def __init__(self, fn, name: str, full_graph: bool, detector, retrace_every: int | None):
        self.fn, self.name, self.full_graph = fn, name, full_graph
        self._detector = detector
        self.retrace_every = retrace_every
        self.graph_name = name
        self.plans: dict = {}                  # signature -> Trace (the plan)
        self._last: dict = {}                  # signature -> the latest traced call's Trace
        self._recent: Trace | None = None      # the plan replayed last (a miss's reason is said against it)
        self._reported: str | None = None      # the not-replayable reason said last (said once)
        self.calls = self.traced = self.replayed = 0
        self._since_trace = 0
        self._whole_heap = False               # the next trace looks for holders on the whole heap
        try:
            self.__wrapped__ = fn
            self.__name__ = getattr(fn, "__name__", name)
            self.__doc__ = getattr(fn, "__doc__", None)
        except AttributeError:
            pass

    @property
    def plan(self) -> Trace | None:
        """The plan replayed last (None while the function traces)."""
        return self._recent

    def __repr__(self) -> str:
        state = f"replaying ({len(self.plans)} plans)" if self.plans else "tracing"
        return (f"<xlanb.compile(replay=True) '{self.name}': {state}, {self.calls} calls, "
                f"{self.replayed} replayed>")

    def __get__(self, obj, objtype=None):
        """As a method decorator: bound per instance, one set of plans per instance."""
        if obj is None:
            return self
        key = "_xlanb_replay_" + self.name
        bound = obj.__dict__.get(key)
        if bound is None:
            bound = ReplayedFunction(self.fn.__get__(obj, objtype), self.name, self.full_graph,
                                     self._detector, self.retrace_every)
            obj.__dict__[key] = bound
        return bound

    def reset(self) -> None:
        """Forgets every plan: the next calls trace again."""
        self.plans.clear()
        self._last.clear()
        self._recent = None

    # --- a call ----------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if _rt.comparing is not None:
            raise RuntimeError(
                f"'{self.name}' is compiled with xlanb.compile(replay=True), called inside xlanb.compare(): a replayed "
                f"call runs no Python ops to compare. Call {self.name}.__wrapped__(...) inside compare() instead")
        self.calls += 1
        sig = signature(args, kwargs)
        if self.plans:
            recent = self._recent
            if recent is not None and recent.cache is not _rt.cache:     # xlanb.reset() since
                self.reset()
                self._miss("the runtime was reset (xlanb.reset())")
                return self._trace(args, kwargs, sig)
            plan = self.plans.get(sig)
            if plan is None:
                why = guard(recent, args, kwargs) if recent is not None else None
                self._miss(why or "no plan for these arguments yet")
            else:
                self._since_trace += 1
                if self.retrace_every and self._since_trace >= self.retrace_every:
                    return self._check_by_tracing(plan, args, kwargs, sig)
                why = guard(plan, args, kwargs)
                if why is None:
                    out = self._replay(plan, args, kwargs)
                    if out is not _MISSED:
                        self._recent = plan
                        return out
                else:
                    self._miss(why)
                self.plans.pop(sig, None)
                self._last.pop(sig, None)
        return self._trace(args, kwargs, sig)

    def _miss(self, why: str) -> None:
        emit(events.ReplayMiss(name=self.name, reason=f"replay guard failed: {why}"))

    def _trace(self, args, kwargs, sig):
        self.traced += 1
        self._since_trace = 0
        previous = self._last.get(sig)
        # the .grad-recycling executable is compiled by a call that may make the plan: one after a call
        # that could be a plan, or the second call (the first may have created state, as AdamW's moments),
        # so that a step replayed from call 3 compiles nothing after step 2
        recycling = previous is not None and (previous.reason is None or previous.first)
        out, trace = trace_call(self.fn, args, kwargs, self.name, self.full_graph, self._detector(),
                                self._whole_heap, recycling=recycling)
        trace.first = previous is None
        self._whole_heap = trace.needs_heap
        self._last[sig] = trace
        if trace.reason is None and previous is not None and previous.reason is None:
            why = differs(previous, trace)
            if why is None:
                self.plans[sig] = self._recent = trace
                while len(self.plans) > MAX_PLANS:
                    oldest = next(iter(self.plans))
                    del self.plans[oldest]
                    self._last.pop(oldest, None)
                self._reported = None
            else:
                self._not_replayable(f"two calls did different things: {why}")
        elif trace.reason is not None and previous is not None:
            self._not_replayable(trace.reason)     # the first call (state being created) may differ
        return out

    def _not_replayable(self, reason: str) -> None:
        """Said once per kind of reason (the words before its values in parentheses)."""
        kind = reason.split(" (", 1)[0]
        if kind != self._reported:
            self._reported = kind
            emit(events.NotReplayable(name=self.name, reason=reason))

    def _check_by_tracing(self, plan: Trace, args, kwargs, sig):
        """retrace_every: run the body again and check it still does what the plan does."""
        out = self._trace(args, kwargs, sig)
        trace = self._last[sig]
        why = trace.reason or differs(plan, trace)
        if why is not None:
            emit(events.ReplayMiss(name=self.name, reason=f"retrace check: the body changed: {why}"))
            self.plans.pop(sig, None)
        else:
            self.plans[sig] = self._recent = plan     # the same: keep the plan (and its uploaded scalars)
        return out

    # --- the replayed call -------------------------------------------------------------
    def _replay(self, plan: Trace, args, kwargs):
        start = time.perf_counter_ns()
        if _rt.pending:            # pending inputs (a scheduler's lr.fill_, a pending batch): as xlanb.compile
            realize.flush_pending(self.name, f"xlanb.compile: pending work flushed before replaying '{self.name}'")
        buffers, why = gather(plan, args, kwargs)
        if buffers is None:
            self._miss(why)
            return _MISSED
        cache = _rt.cache         # the plan's executables are the cache's: a use counts, an eviction is seen
        if cache.get(plan.key) is not plan.compiled or (
                plan.recycling is not None and cache.get(plan.recycling.key) is not plan.recycling):
            self._miss(f"its executable left the in-memory cache (evicted: cache_size {cache.limit})")
            return _MISSED
        if plan.in_shardings is not None:
            buffers = partition.place_args(plan.in_shardings, buffers)
        old = _old_grads(plan) if plan.recycling is not None else None
        if old is not None:
            outs = executor.call(plan.recycling, self.name, buffers + old[1])
        else:
            outs = executor.call(plan.compiled, self.name, buffers)
        result = rebind(plan, outs, args, kwargs, old[0] if old is not None else None)
        self.replayed += 1
        emit(events.Replay(name=self.name, key=plan.compiled.digest, ns=time.perf_counter_ns() - start,
                           donated=len(plan.donate)))
        return result


_MISSED = object()


def signature(args, kwargs) -> tuple:
    """Which plan a call takes: its tensor arguments' metas and the other arguments' types (their
    values are guards of the plan)."""
    sig = [tensor_meta(a) if type(a) is LazyTensor else type(a) for a in args]
    if kwargs:
        for k, a in kwargs.items():
            sig.append(k)
            sig.append(tensor_meta(a) if type(a) is LazyTensor else type(a))
    return tuple(sig)


def guard(plan: Trace, args, kwargs) -> str | None:
    """None when the plan may run now; else the failed guard, in words."""
    if _rt.eager is not plan.eager:
        return f"eager mode {'on' if plan.eager else 'off'} -> {'on' if _rt.eager else 'off'}"
    if _rt.compile_scope is not None:
        return "called inside another compiled function (it runs inline there)"
    if _rt.deferred:
        return "an error raised inside backward is pending"
    if torch.is_grad_enabled() is not plan.grad_mode:
        return f"grad mode {'on' if plan.grad_mode else 'off'} -> {'on' if not plan.grad_mode else 'off'}"
    if torch.is_autocast_enabled("cpu") is not plan.autocast or torch.is_autocast_enabled(
            _rt.device.type) is not plan.autocast_xla:
        return "autocast changed"
    if _rt.config.debug_nans:
        return "debug_nans is on: each call runs its body, so that its graph is checked for NaN"
    if plan.key is not None and plan.key.nan_check:
        return "debug_nans was on when the plan was traced"
    if plan.key is not None and plan.key.matmul_precision != matmul_precision():
        return f"float32 matmul precision {plan.key.matmul_precision!r} -> {matmul_precision()!r}"
    if plan.key is not None and plan.key.compile_effort != _rt.config.compile_effort:
        return f"compile_effort {plan.key.compile_effort!r} -> {_rt.config.compile_effort!r}"
    if _rt.rng is not plan.rng:
        return "the random-number state was replaced (xlanb.reset(), or the first random op)"
    if len(args) != len(plan.args) or (kwargs.keys() != plan.kwarg_names):
        return "the arguments' count or names changed"
    for i, (a, expected) in enumerate(zip(args, plan.args)):
        why = _argument(a, expected)
        if why is not None:
            return f"argument {i} {why}"
    for k, expected in plan.kwargs:
        why = _argument(kwargs[k], expected)
        if why is not None:
            return f"argument {k}= {why}"
    for module, flag in plan.training:
        if module.training is not flag:
            return f"{type(module).__name__}.training {flag} -> {module.training} (model.train()/eval())"
    for opt, hyper in plan.hyper:
        if _hyper_changed(opt, hyper):
            now = hyperparameters(opt)
            return f"{type(opt).__name__} hyperparameters changed ({_first_change(hyper, now)})"
    for holder_dict, key, value, requires_grad in plan.slots:
        if holder_dict.get(key) is not value:
            return f"parameter or buffer '{key}' was replaced"
        if value.requires_grad is not requires_grad:
            return f"'{key}'.requires_grad {requires_grad} -> {value.requires_grad} (the autograd graph changed)"
    for p, none in plan.grad_none:
        if (p.grad is None) is not none:
            return f".grad of a {tensor_meta(p).text} parameter {'is set' if none else 'is None'} now"
    if plan.python and python_changed(plan.python_sources, plan.python):
        now = python_values(plan.python_sources)
        return f"a Python value the body reads by name changed ({_first_change(plan.python, now)})"
    return None


def _argument(a, expected) -> str | None:
    kind, value = expected
    if kind == "sharded":
        meta, sharding = value
        why = _argument(a, ("tensor", meta))
        if why is None:
            b = base_node(a).buffer
            if b is not None and sharding is not None and b.sharding != sharding:
                return f"sharding {_sharding_text(sharding)} -> {_sharding_text(b.sharding)}"
        return why
    if kind == "tensor":
        if type(a) is not LazyTensor:
            return f"is {type(a).__name__}, not an xla tensor"
        m = tensor_meta(a)
        if m is not value:
            if m.shape != value.shape:
                return f"shape {value.shape} -> {m.shape}"
            if m.dtype != value.dtype:
                return f"dtype {value.dtype} -> {m.dtype}".replace("torch.", "")
            return f"strides {value.strides} -> {m.strides}"
        return None
    if kind == "value":
        if type(a) is not type(value) or not (a == value or (a != a and value != value)):
            return f"{value!r} -> {a!r} (a Python value is part of the plan)"
        return None
    if kind == "type":
        if type(a) is not value:
            return f"is a {type(a).__name__}, not a {value.__name__}"
        return None
    if a is not value:
        return f"is another {type(a).__name__} object"
    return None


def _sharding_text(s) -> str:
    """A NamedSharding's partition spec as a tuple, `('data', None)`; else the sharding's kind."""
    spec = getattr(s, "spec", None)
    return repr(tuple(spec)) if spec is not None else type(s).__name__


def _resolve(where, args, kwargs):
    """The holder at an object argument's path now (None when the path leads elsewhere)."""
    key, path = where
    try:
        t = follow(args[key] if type(key) is int else kwargs[key], path)
    except (LookupError, AttributeError, TypeError):
        return None
    if type(t) is not LazyTensor:
        return None
    return holder_of(t)


def _hyper_changed(opt, hyper) -> bool:
    """hyperparameters(opt) != hyper, without building the tuples (every replayed call asks)."""
    groups = opt.param_groups
    if len(groups) != len(hyper):
        return True
    for group, items in zip(groups, hyper):
        if len(group) - 1 != len(items) and hyperparameters(opt) != hyper:
            return True
        for k, v in items:
            now = group.get(k, _MISSED)
            if now is not v and not (type(now) is type(v) and now == v):
                return True
    return False


def _first_change(before, after) -> str:
    flat_b, flat_a = _flat(before), _flat(after)
    for x, y in zip(flat_b, flat_a):
        if x != y:
            return f"{x[0]} {x[1]!r} -> {y[1]!r}" if type(x) is tuple and len(x) == 2 else f"{x!r} -> {y!r}"
    return f"{len(flat_b)} -> {len(flat_a)} entries"


def _flat(x) -> list:
    if type(x) is tuple and not (len(x) == 2 and type(x[0]) is str):
        return [y for z in x for y in _flat(z)]
    return [x]


def gather(plan: Trace, args, kwargs):
    """The current buffers of the plan's inputs (and its scalars), or (None, why)."""
    buffers = []
    for kind, source, meta in plan.sources:
        if kind == HOLDER:
            n = source._node if type(source) is LazyTensor else source.node
            if n is None:
                return None, "a tensor the step reads became a view's base since the plan was made"
        elif kind == ARG:
            a = args[source] if type(source) is int else kwargs[source]
            n = base_node(a)
        elif kind == ARG_PATH:
            h = _resolve(source, args, kwargs)
            if h is None:
                return None, f"argument {source[0]}'s tensors are not where they were ({path_text(source[1])})"
            n = h._node if type(h) is LazyTensor else h.node
        else:
            buffers.append(source)
            continue
        if n.meta is not meta:
            return None, f"an input changed to {n.meta.text} (was {meta.text})"
        b = n.buffer
        if b is None:
            return None, "an input is still pending"
        buffers.append(b)
    for t in plan.view_users:     # their memo (a cache, stale once the version moves) holds the old base
        forget_view(t)
    for i in plan.donate:
        kind, source, meta = plan.sources[i]
        if kind == ARG:
            return None, "an argument's buffer would be donated"
        h = source if kind == HOLDER else _resolve(source, args, kwargs)
        n = h._node if type(h) is LazyTensor else h.node
        if sys.getrefcount(n) > HOLDER_REFS:
            return None, f"a donated input ({meta.text}) is shared with another live tensor"
    for where, storage in plan.path_outputs:
        if type(_resolve(where, args, kwargs)) is not (Storage if storage else LazyTensor):
            return None, f"argument {where[0]}'s tensors are not where they were ({path_text(where[1])})"
    buffers.extend(plan.scalar_args)
    return buffers, None


HOLDER_REFS = 3      # the holder's slot, the local `n` and getrefcount's argument


def _old_grads(plan: Trace):
    """A plan whose step makes fresh `.grad` tensors (zero_grad(set_to_none=True) inside) has a
    second executable (compiled by the trace that became the plan) that takes the previous step's
    `.grad` buffers, donated, after its arguments: XLA writes the new gradients into them, so a
    replayed step allocates and frees no gradient memory (freeing a computed 1 MiB buffer costs
    ~0.1 ms on the CPU) and the same `.grad` tensors are rebound.

    ({output position: the .grad tensor to rebind}, [their buffers]) when every fresh .grad of
    the plan can be recycled: the parameter's .grad is an xla tensor of the output's meta, computed,
    with no views and nothing else holding it or its node (donating it would change what another
    reference sees); else None (the plain executable runs)."""
    reuse, buffers = {}, []
    outputs = plan.outputs
    for j, p, chain in plan.recycle:
        g = p.grad
        if type(g) is not LazyTensor or sys.getrefcount(g) > _GRAD_REFS:
            return None
        n = g._node
        if n is None:           # a view of its own storage (a transposed gradient): the same views again
            s = g._storage
            if g._views != chain or sys.getrefcount(s) > HOLDER_REFS:
                return None
            n = s.node
        elif chain:
            return None
        if n.buffer is None or n.meta is not outputs[j].meta or sys.getrefcount(n) > HOLDER_REFS:
            return None
        reuse[j] = g
        buffers.append(n.buffer)
    return reuse, buffers


_GRAD_REFS = 2 + CPP_REFS    # the local `g`, getrefcount's argument and torch's own for the .grad (2.10+)


def rebind(plan: Trace, outs, args, kwargs, reuse: dict | None = None):
    """The launched outputs into the plan's holders; the call's return value. `reuse`: output
    position -> the .grad tensor that takes it (its buffer was recycled into the output)."""
    leaves = list(plan.return_leaves)
    for j, key in plan.return_args:
        leaves[j] = args[key] if type(key) is int else kwargs[key]
    for j, ((bindings, meta), buffer) in enumerate(zip(plan.outputs, outs)):
        node = data_node(buffer, meta)
        if reuse is not None and j in reuse:
            rebind_holder(reuse[j], node)
            continue
        for binding in bindings:
            kind = binding.kind
            if kind == REBIND_STORAGE or kind == REBIND_TENSOR:
                rebind_holder(binding.holder, node)
            elif kind == REBIND_PATH:                 # found by gather() a moment ago
                rebind_holder(_resolve(binding.holder, args, kwargs), node)
            else:                                      # FRESH: a new tensor, or a storage and its views
                storage = Storage(node) if binding.storage else None
                for place in binding.places:
                    t = new_view(storage, place.views, place.meta) if storage is not None else new_tensor(node, place.meta)
                    if place.to == GRAD:
                        place.target.grad = t
                    else:
                        leaves[place.target] = t
    if plan.return_spec is None:
        return leaves[0] if leaves else None
    return pytree.tree_unflatten(leaves, plan.return_spec)

