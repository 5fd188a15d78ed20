"""`LazyTensor.__torch_dispatch__`: every ATen op on an xla tensor comes through here.

The handler for an op is looked up as an attribute on the OpOverload (a dict lookup
keyed by OpOverload costs ~80 ns through its Python __hash__; the attribute ~12 ns).

Nothing may raise out of here inside the autograd engine: with a Python device guard
that ends the process (std::terminate). Errors in backward are kept and re-raised at
the next sync or value access; the op returns a placeholder.
"""

from __future__ import annotations

from time import perf_counter_ns as _ns

import contextlib
import functools
import sys

import torch

from xlanb import events
from xlanb._config import config
from xlanb.capture import realize
from xlanb.capture.handlers import choose_handler
from xlanb.capture.nodes import make_node
from xlanb.capture.record import outputs_of
from xlanb.capture.tensor import LazyTensor, holder_node, tensor_meta
from xlanb.capture.torch_versions import keep_state_through_gc
from xlanb.ir.node import Node, intern_meta
from xlanb.state import emit, note_stage, runtime_state

_rt = runtime_state()

_in_backward = torch._C._current_graph_task_id
_getframe = sys._getframe


def dispatch(cls, func, types, args=(), kwargs=None):
    """LazyTensor's __torch_dispatch__. While lines are recorded, the frame that called the op is
    kept for the op's duration (`runtime_state().op_caller`): the user's line is looked for from
    there, past none of the frames below it, which are all xlanb's (capture/frames.user_location)."""
    try:
        handler = func._xlanb
    except AttributeError:
        handler = func._xlanb = choose_handler(func)
    located = _rt.track_locations
    if located:
        outer = _rt.op_caller
        try:
            _rt.op_caller = _getframe(1)
        except ValueError:      # called from C++ with no Python frame above: the autograd engine's thread
            _rt.op_caller = False
    try:
        if not _rt.eager:
            return handler(func, args, kwargs)
        mark = realize.eager_mark()
        out = handler(func, args, kwargs)
        if len(_rt.pending) > mark:
            realize.sync_eager(mark, str(func))
        return out
    except BaseException as error:
        if _in_backward() == -1:
            if isinstance(error, KeyboardInterrupt):
                note_stage(error, f"recording {func}")
            else:
                _raised_at_the_op(error, func)
            raise
        return defer(error, func, args, kwargs)
    finally:
        if located:
            _rt.op_caller = outer


# errors torch itself raises for a wrong program (CPU's own types): shown as CPU shows them, with no note
_TORCH_ERRORS = (RuntimeError, IndexError, ValueError, TypeError, NotImplementedError)


def _raised_at_the_op(error: BaseException, func) -> None:
    """The traceback ends at the user's line, as an ATen op's error does on CPU: the frames below this
    op boundary (xlanb's, and torch's meta and reference kernels it ran) are dropped, as JAX drops
    its own. The op is kept on the error for the notebook's failure report. With
    `tracebacks="full"` (XLANB_TRACEBACKS=full, or %xla_debug 1 and up) nothing is dropped; an error
    that is not torch's kind of verdict on the program (an xlanb bug) says how to see them."""
    if getattr(error, "_xlanb_op", None) is None:
        try:
            error._xlanb_op = str(func)
        except AttributeError:
            return
    cfg = config()
    if cfg.tracebacks == "full" or cfg.debug:
        return
    user_error = type(error) in _TORCH_ERRORS or getattr(type(error), "xlanb_user_error", False)
    if error.__traceback__ is not None and not user_error and not getattr(error, "_xlanb_hidden", False):
        error._xlanb_hidden = True
        error.add_note("xlanb: its own frames are left out of this traceback; XLANB_TRACEBACKS=full or "
                       "%xla_debug 1 shows them")
    error.with_traceback(None)


def _listened_dispatch(cls, func, types, args=(), kwargs=None):
    """dispatch, and then `runtime_state().op_listener(func, ns)` with the time the op took to record
    (set while torch_xla's per-op counters are asked for: xlanb.compat.counters)."""
    t0 = _ns()
    try:
        return dispatch(cls, func, types, args, kwargs)
    finally:
        listener = _rt.op_listener
        if listener is not None:
            listener(func, _ns() - t0)


def use_dispatch() -> None:
    """Installs the dispatch in force: the listened one while an op listener is set."""
    LazyTensor.__torch_dispatch__ = classmethod(_listened_dispatch if _rt.op_listener is not None else dispatch)


def _faulting_dispatch(cls, func, types, args=(), kwargs=None):
    """dispatch, with the armed capture fault raised first (outside backward, where nothing may raise)."""
    use_dispatch()
    if _in_backward() == -1:
        try:
            _rt.fault("capture")
        except BaseException as error:
            note_stage(error, f"recording {func}")
            raise
    return dispatch(cls, func, types, args, kwargs)


def _arm_capture_fault() -> None:
    LazyTensor.__torch_dispatch__ = classmethod(_faulting_dispatch)


def defer(error: BaseException, func, args, kwargs):
    """Keeps `error` for the next sync and returns placeholders shaped like torch expects."""
    _rt.deferred.append(error)
    emit(events.DeferredError(message=f"{func}: {type(error).__name__}: {error}"))
    schema = func._schema
    if schema.is_mutable:
        return args[0] if schema.returns else None
    first = next((a for a in args if type(a) is LazyTensor), None)
    meta = tensor_meta(first) if first is not None else intern_meta((), torch.float32)
    count = len(schema.returns)
    node_meta = meta if count == 1 else tuple(meta for _ in range(count))
    return outputs_of(make_node(func, "xlanb.error", (), None, node_meta))


def _raising_after_backward(run_backward):
    """torch.autograd's one entry into the engine (backward() and autograd.grad() both call it), which
    raises an error that an op raised inside the engine, and `defer` kept, once the engine has returned:
    at the user's `backward()` line, as CPU raises it, not at the next sync.

    In eager mode the backward pass is one graph: the engine's ops are recorded lazily and run as graph
    'backward' when the engine returns, still at the user's line. Nothing between them can read a
    value but the engine's own hooks (which a value read serves as in lazy mode), and an error inside
    the engine waits for the engine's end either way; op by op, W7's first step compiled 36 graphs
    more for it (docs/performance.md)."""
    def engine_run_backward(*args, **kwargs):
        whole = _rt.eager and _in_backward() == -1      # eager mode, not a backward inside another's hook
        if whole:
            _rt.eager = False
        try:
            out = run_backward(*args, **kwargs)
        finally:
            if whole:
                _rt.eager = True
        if _rt.deferred and _in_backward() == -1:
            error = _rt.deferred[0]
            _rt.deferred.clear()
            _drop_placeholders()
            if whole:                   # what the failed ops did not reach runs, as it had op by op
                with contextlib.suppress(Exception):
                    realize.sync_region("backward", "eager mode's backward pass, which raised")
            error.add_note("xlanb: raised inside the autograd engine, by the op named above; tensors that "
                           "backward computed (e.g. .grad) are invalid: zero them and run the step again")
            raise error.with_traceback(None)
        if whole:
            realize.sync_region("backward", "eager mode's backward pass")
        return out
    engine_run_backward._xlanb_raising = True
    return engine_run_backward


def _drop_placeholders() -> None:
    """Takes what the failed ops' placeholders (`defer`'s outputs) reach out of the pending work (a
    `.grad` that backward wrote through them): the next sync computes the rest, and reading one of
    them raises its own error. Walks the pending graph: this runs only after such a failure."""
    tainted: dict = {}

    def reaches_error(n) -> bool:
        stack, opened = [n], set()
        while stack:                               # post-order without recursion: graphs can be deep
            m = stack.pop()
            if m in tainted or m.buffer is not None:
                continue
            operands = [o for o in m.operands if type(o) is Node and o not in tainted and o.buffer is None]
            if operands and m not in opened:
                opened.add(m)
                stack.append(m)
                stack.extend(operands)
                continue
            tainted[m] = m.name == "xlanb.error" or any(type(o) is Node and tainted.get(o) for o in m.operands)
        return tainted.get(n, False)

    def keep(ref) -> bool:
        h = ref()
        return h is None or not reaches_error(holder_node(h))
    _rt.pending[:] = [ref for ref in _rt.pending if keep(ref)]


def _step_as_one_graph(step):
    """An optimizer class's step (torch's own wrapper of it: `Optimizer.profile_hook_step`, which calls
    the step hooks) as one graph 'optimizer step' in eager mode: its ops are recorded lazily and run
    when it returns, still at the user's line; op by op, AdamW's first step on W7 compiled 16 graphs
    (its 7 foreach updates over all the parameters, 1.0 s of XLA's time, and its state's zeros), and
    every step launched its updates one by one (docs/performance.md). A step that raises runs what it
    recorded too, then raises."""
    @functools.wraps(step)
    def step_as_one_graph(*args, **kwargs):
        if not _rt.eager or _in_backward() != -1:
            return step(*args, **kwargs)
        _rt.eager = False
        try:
            out = step(*args, **kwargs)
        except BaseException:
            _rt.eager = True
            with contextlib.suppress(Exception):
                realize.sync_region("optimizer step", "eager mode's optimizer step, which raised")
            raise
        _rt.eager = True
        realize.sync_region("optimizer step", "eager mode's optimizer step")
        return out
    return step_as_one_graph


def _wrapping_steps(profile_hook_step):
    """torch.optim.Optimizer.profile_hook_step, which each optimizer class's step goes through once
    (`_patch_step_function`), with `_step_as_one_graph` around what it makes."""
    def hook_step(func):
        return _step_as_one_graph(profile_hook_step(func))
    hook_step._xlanb_step = True
    return staticmethod(hook_step)


def install() -> None:
    use_dispatch()
    keep_state_through_gc(LazyTensor)      # torch 2.9: a collection emptied a tensor autograd holds
    _rt.arm_capture_fault = _arm_capture_fault
    original = getattr(torch.autograd, "_engine_run_backward", None)
    if original is not None and not getattr(original, "_xlanb_raising", False):
        torch.autograd._engine_run_backward = _raising_after_backward(original)
    hook_step = getattr(torch.optim.Optimizer, "profile_hook_step", None)
    if hook_step is not None and not getattr(hook_step, "_xlanb_step", False):
        torch.optim.Optimizer.profile_hook_step = _wrapping_steps(hook_step)
