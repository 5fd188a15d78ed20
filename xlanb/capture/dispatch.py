"""`LazyTensor.__torch_dispatch__`: every ATen op on an xla tensor comes through here.

The handler for an op is looked up as an attribute on the OpOverload (a dict lookup
keyed by OpOverload costs ~80 ns through its Python __hash__; the attribute ~12 ns).

Nothing may raise out of here inside the autograd engine: with a Python device guard
that ends the process (std::terminate). Errors in backward are kept and re-raised at
the next sync or value access; the op returns a placeholder.
"""

from __future__ import annotations

import torch

from xlanb import events
from xlanb.capture import realize
from xlanb.capture.handlers import choose_handler
from xlanb.capture.record import outputs_of
from xlanb.state import emit, note_stage, runtime_state
from xlanb.capture.tensor import LazyTensor, tensor_meta
from xlanb.ir.node import intern_meta, make_node

_rt = runtime_state()

_in_backward = torch._C._current_graph_task_id


def dispatch(cls, func, types, args=(), kwargs=None):
    try:
        handler = func._xlanb
    except AttributeError:
        handler = func._xlanb = choose_handler(func)
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
            raise
        return defer(error, func, args, kwargs)


def _faulting_dispatch(cls, func, types, args=(), kwargs=None):
    """dispatch, with the armed capture fault raised first (outside backward, where nothing may raise)."""
    LazyTensor.__torch_dispatch__ = classmethod(dispatch)
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


def install() -> None:
    LazyTensor.__torch_dispatch__ = classmethod(dispatch)
    _rt.arm_capture_fault = _arm_capture_fault
