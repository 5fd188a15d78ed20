"""In-place and out= ops: the functional op is recorded and its result written back into
the written arguments (through their views); out= tensors of another shape are resized."""

from __future__ import annotations

import warnings

import torch

from xlanb.capture import record as rec
from xlanb.capture.checks import check_out_on_cpu, user_stacklevel
from xlanb.capture import realize
from xlanb.capture.datadep import cpu_cut
from xlanb.capture.frames import user_location
from xlanb.capture.record import NoMetaKernel, plan_of
from xlanb.capture.rng import keyed
from xlanb.capture.storages import storage_for
from xlanb.state import runtime_state
from xlanb.capture.tensor import (LazyTensor, computed_view, new_view, rebind_holder, storage_of, tensor_meta, value,
                                  view_chain, write_value)
from xlanb.capture.nodes import lift, make_node, scalar_class
from xlanb.capture.overlap import check_write_overlap
from xlanb.capture.views import as_strided_view
from xlanb.ir.node import Scalar, contiguous_strides, data_node

_rt = runtime_state()

aten = torch.ops.aten


_RANDOM_FUNCTIONAL = {
    "aten.normal_.default": "normal_functional.default",
    "aten.bernoulli_.float": "bernoulli.p",
}


def _signature(arguments) -> list:
    return [(a.name, str(a.type)) for a in arguments]


def functional_variant(func):
    """The out-of-place op that computes what the in-place / out= op writes: the overload of
    the base name whose arguments (names and types) are the same, minus the out= ones."""
    name = str(func)
    if name in _RANDOM_FUNCTIONAL:
        return lookup(_RANDOM_FUNCTIONAL[name])
    schema = func._schema
    base = schema.name.split("::")[1]
    written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    if written and all(a.kwarg_only for a in written):          # out= variant
        written_names = {w.name for w in written}
        packet = getattr(aten, base, None)
        want = _signature([a for a in schema.arguments if a.name not in written_names])
        overload = None
    elif base.endswith("_"):
        packet = getattr(aten, base[:-1], None)
        want = _signature(schema.arguments)
        overload = func._overloadname
    else:
        return None
    if packet is None:
        return None
    candidates = []
    for o in packet.overloads():
        op = getattr(packet, o)
        if not op._schema.is_mutable and _signature(op._schema.arguments) == want:
            candidates.append(op)
    for op in candidates:
        if op._overloadname == overload:
            return op
    if candidates:
        return candidates[0]
    for o in packet.overloads():      # factories: zeros.out -> zeros (dtype=, device=, ... defaulted)
        op = getattr(packet, o)
        args = [a for a in op._schema.arguments if not (a.kwarg_only and a.has_default_value())]
        if not op._schema.is_mutable and _signature(args) == want:
            return op
    return None


def lookup(qualified: str):
    packet, overload = qualified.split(".")
    return getattr(getattr(aten, packet), overload)


def mutation_handler(func):
    """In-place and out= ops through their functional op, or None where there is none."""
    functional = functional_variant(func)
    schema = func._schema
    written = [(i, a) for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
    if functional is None or func.is_view or len(written) > 1 and not all(a.kwarg_only for _, a in written):
        return None
    out_names = {a.name for _, a in written if a.kwarg_only}
    defaults = []
    for a in schema.arguments:
        if a.kwarg_only:
            continue
        if not a.has_default_value():
            defaults.append(None)
        else:
            d = a.default_value
            defaults.append(tuple(d) if isinstance(d, list) else d)
    defaults = tuple(defaults)
    fplan = plan_of(functional)
    iplan = plan_of(func)
    if out_names and not any(str(a.type).startswith(("Tensor", "Optional[Tensor]", "List[Tensor]"))
                             for a in functional._schema.arguments):
        return _factory_out(functional, out_names)

    # the eager fast path for `self.op_(other)`: one output, written to self, nothing random
    fast = not out_names and written[0][0] == 0 and len(schema.returns) == 1 and fplan.rule is not None \
        and not fplan.rule.rng
    exponent = rec.EXPONENT in iplan.positional       # pow_: a fast path's exponent stays a constant
    name = str(func)

    def h(func, args, kwargs):
        write = None
        if fast and _rt.eager and not kwargs and _rt.observer is None and not _rt.pending:
            write = _fast_write(args, exponent)
            if write is not None:
                fast_key, buffers, scalar, _, holder, old = write
                out = realize.eager_launch((name, fast_key), name, buffers, scalar)
                if out is not None:
                    rebind_holder(holder, data_node(out, old.meta))
                    return args[0]
        kwargs = kwargs or {}
        targets = _written_targets(written, args, kwargs)
        for t in targets:
            if type(t) is not LazyTensor:
                return cpu_cut(func, args, kwargs)
        check_write_overlap(func, args, kwargs, targets)
        nargs, nkwargs = rec.to_node_args(iplan, args, kwargs)
        on_miss = None
        if out_names:
            def on_miss(margs, mkwargs):
                check_out_on_cpu(func, functional, margs, mkwargs, out_names)
        try:
            written_metas = rec.infer_meta(func, iplan, nargs, nkwargs, on_miss)   # torch's checks and messages
        except NoMetaKernel:
            if out_names:
                return _out_through_functional(func, functional, out_names, targets, args, kwargs)
            return cpu_cut(func, args, kwargs)
        if out_names and nkwargs:
            nkwargs = {k: v for k, v in nkwargs.items() if k not in out_names} or None
        if len(nargs) < len(defaults):      # the functional form may lack the in-place defaults
            nargs = nargs + defaults[len(nargs):]
        try:
            meta = rec.infer_meta(functional, fplan, nargs, nkwargs, rewritten=True)
        except NoMetaKernel:
            return cpu_cut(func, args, kwargs)
        if fplan.rule is not None and fplan.rule.rng:
            nargs = keyed(nargs, args, kwargs)
        loc = user_location() if _rt.track_locations else None
        node = make_node(functional, fplan.name, nargs, nkwargs, meta, loc)
        outs = rec.output_nodes(node)
        if out_names:
            written_metas = written_metas if type(written_metas) is tuple else (written_metas,)
            for target, out_meta in zip(targets, written_metas):
                if out_meta is not None:
                    resize_out(target, out_meta.shape, out_meta.strides)
        for target, out in zip(targets, outs):
            write_value(target, out)
        if write is not None:       # the graph's key is remembered by realize.sync_eager when it runs
            _rt.eager_write_memo = (name, (name, write[0]), write[3], 0 if write[2] is None else 1)
        if not schema.returns:
            return None
        if out_names:
            return targets[0] if len(targets) == 1 else tuple(targets)
        return args[written[0][0]]
    return h


def _fast_write(args, exponent: bool = False) -> tuple | None:
    """Eager mode, `self.op_()` or `self.op_(other)` on computed values: (the fast key, the input
    buffers, the lifted number or None, the input nodes, what holds self's value, self's node or its
    view's base), or None when the op takes the slow path. self may be a view of a computed tensor
    (the view, the op and the write back into the base are one executable on the base's buffer);
    other is a computed tensor with a value of its own, self itself, or a Python number. Everything
    torch checks about such a write (dtypes, the number's range, internal overlap) is a function of
    the key: the first time runs those checks on the slow path. With `exponent` (pow_), a number that
    selects one of CPU's algorithms stays a constant, as record.kept_exponent keeps it on the slow path."""
    target = args[0]
    if type(target) is not LazyTensor or len(args) > 2:
        return None
    own = target._node
    if own is not None:
        if own.buffer is None:
            return None
        old, holder, where = own, target, own.meta
    else:
        source = computed_view(target)
        if source is None or target._storage.replay_hazard is not None:
            return None
        (old, where), holder = source, target._storage
    key = [where, torch.get_default_dtype()]
    buffers, inputs, scalar = [old.buffer], [old], None
    if len(args) == 2:
        b = args[1]
        tb = type(b)
        if b is target:
            key.append("self")
        elif tb is LazyTensor:
            nb = b._node
            if nb is None or nb.buffer is None:
                return None
            if nb is old:
                key.append("self")
            else:
                key.append(nb.meta)
                buffers.append(nb.buffer)
                inputs.append(nb)
        elif tb is float or tb is int or tb is bool:
            if not (exponent and rec.kept_exponent(b)) and type(lift(b)) is Scalar:
                key.append(scalar_class(b))
                scalar = b
            else:
                key.append((tb, b))
        else:
            return None
    return tuple(key), tuple(buffers), scalar, inputs, holder, old


def resize_out(t: LazyTensor, shape, strides, warn: bool = True) -> None:
    """An out= tensor of another shape takes the result's shape and strides, as torch resizes
    and restrides it, with torch's warning when it had elements (factories resize silently)."""
    old = tensor_meta(t)
    shape = tuple(shape)
    if old.shape == shape:
        return
    if old.numel and warn:
        warnings.warn(
            f"{rec.RESIZED} since it had shape {list(old.shape)}, which does not match the required output shape "
            f"{list(shape)}. This behavior is deprecated, and in a future PyTorch release outputs will not be "
            "resized unless they have zero elements. You can explicitly reuse an out tensor t by resizing it, "
            "inplace, to zero elements with t.resize_(0).", UserWarning, stacklevel=user_stacklevel())
    resize_value(t, shape, tuple(strides))


def _out_through_functional(func, functional, out_names, targets, args, kwargs):
    """An out= op whose functional op has no meta kernel (nonzero, masked_select): torch's
    checks of the out= tensors on CPU, then the functional op as any op (data-dependent ops keep
    their device path), its results written into the resized out= tensors."""
    check_out_on_cpu(func, functional, args, kwargs, out_names)
    result = functional(*args, **{k: v for k, v in kwargs.items() if k not in out_names})
    results = result if isinstance(result, (tuple, list)) else (result,)
    for target, r in zip(targets, results):
        resize_out(target, r.shape, r.stride())
        write_value(target, value(r))
    return targets[0] if len(targets) == 1 else tuple(targets)


def _factory_out(functional, out_names):
    """zeros(..., out=t), arange(..., out=t): the factory (constant arguments), written into t."""
    from xlanb.capture.factories import _record_factory

    def h(func, args, kwargs):
        kwargs = dict(kwargs or {})
        target = kwargs.pop(next(iter(out_names)))
        if type(target) is not LazyTensor:
            return cpu_cut(func, args, {**kwargs, next(iter(out_names)): target})
        made = _record_factory(functional, tuple(args), {**kwargs, "dtype": target.dtype})
        if functional._schema.name in _RANGES and tensor_meta(target).numel == made.numel():
            made = made.view(target.shape)      # CPU keeps such an out= (a strided view too), filled in order
        else:
            resize_out(target, made.shape, made.stride(), warn=False)
        write_value(target, value(made))
        return target
    return h


# factories of a 1-d run whose out= keeps its shape and strides when it has as many elements
_RANGES = frozenset({"aten::arange", "aten::linspace", "aten::logspace", "aten::range"})


def _written_targets(written, args, kwargs) -> list:
    targets = []
    for i, a in written:
        t = args[i] if i < len(args) and not a.kwarg_only else kwargs.get(a.name)
        if isinstance(t, (list, tuple)):
            targets.extend(t)
        elif t is not None:
            targets.append(t)
    return targets


def resize_value(t: LazyTensor, shape, strides=None) -> None:
    """Gives `t` the shape `shape` and `strides` (default row-major) in place (resize_, and
    out= tensors of another shape): as on CPU, t becomes the dense run of `shape` from its
    storage offset, in memory order (a view of its storage, so other views stay in step). A
    storage too small is reallocated, as CPU does: its elements first, then new ones (zeros), in
    a new storage that t's other views do not share."""
    shape = tuple(int(d) for d in shape)
    strides = contiguous_strides(shape) if strides is None else tuple(strides)
    meta = tensor_meta(t)
    if meta.shape == shape and meta.strides == strides:
        return
    extent = 0 if 0 in shape else 1 + sum((n - 1) * st for n, st in zip(shape, strides))
    root = t._node.meta if t._node is not None else t._storage.node.meta
    base = t if meta.offset + extent <= root.numel else _grown_storage(t, root, meta.offset + extent)
    view = as_strided_view(base, shape, strides, meta.offset)
    with torch._C._DisableTorchDispatch():
        t.data = view                        # the wrapper's sizes and strides, not a value
    t._node, t._storage = None, view._storage
    t._views, t._view_version, t._view_node = view._views, -1, None


def _grown_storage(t: LazyTensor, root, size: int) -> LazyTensor:
    """A 1-d tensor of `size` elements: t's storage in memory order, then zeros."""
    zeros = aten.zeros.default([size - root.numel], dtype=root.dtype, device=t.device)
    if root.numel == 0:
        return zeros
    flat = as_strided_view(t, (root.numel,), (1,), 0)
    return aten.cat.default([flat, zeros])


def resize_(func, args, kwargs):
    self = args[0]
    shape = tuple(args[1].shape) if str(func).startswith("aten.resize_as_") else tuple(args[1])
    if type(self) is not LazyTensor:
        return cpu_cut(func, args, kwargs)
    memory_format = (kwargs or {}).get("memory_format")
    if memory_format == torch.preserve_format and str(func).startswith("aten.resize_as_"):
        memory_format = _suggested_format(args[1])
    if memory_format is None:                   # CPU keeps the strides of a tensor of the same shape
        if tuple(self.shape) != tuple(int(d) for d in shape):
            resize_value(self, shape)
    elif memory_format == torch.contiguous_format:
        resize_value(self, shape)
    else:
        resize_value(self, shape, torch.empty(shape, memory_format=memory_format, device="meta").stride())
    return self


def _suggested_format(t) -> torch.memory_format:
    """torch's suggest_memory_format: channels-last when t is laid out so, else contiguous."""
    for fmt, dims in ((torch.channels_last, 4), (torch.channels_last_3d, 5)):
        if t.dim() == dims and not t.is_contiguous() and t.is_contiguous(memory_format=fmt):
            return fmt
    return torch.contiguous_format


def set_(func, args, kwargs):
    """`t.set_(src)`: t shares src's storage and takes its shape, strides and offset (views of
    t's old storage keep it); writes through either are seen by both, as on CPU."""
    self, src = args[0], args[1]
    if type(self) is not LazyTensor or type(src) is not LazyTensor:
        return cpu_cut(func, args, kwargs)
    storage = storage_of(src)
    with torch._C._DisableTorchDispatch():
        self.data = src                      # the wrapper's sizes, strides and storage, not a value
    self._node, self._storage = None, storage
    self._views, self._view_version, self._view_node = view_chain(src), -1, None
    return self


def set_storage(func, args, kwargs):
    """`t.set_(storage, offset, size, stride)`: t becomes a view of the xla storage whose
    untyped_storage() that is (whole, as 1-d, when no layout is given), as on CPU."""
    self, untyped = args[0], args[1]
    kw = dict(zip(("storage_offset", "size", "stride"), args[2:]), **(kwargs or {}))
    storage = storage_for(untyped, self.dtype) if untyped.device == self.device else None
    if type(self) is not LazyTensor or storage is None:
        raise RuntimeError(
            f"set_() of an xla tensor takes the untyped_storage() of an xla tensor; got a storage on "
            f"{untyped.device}: move the tensor it came from to '{self.device}' first")
    root = storage.node.meta
    whole = new_view(storage, (), root)
    numel = root.numel
    if root.dtype != self.dtype:            # the storage's bytes as self's dtype (UntypedStorage.cpu())
        numel = root.numel * root.dtype.itemsize // self.dtype.itemsize
        whole = aten.view.dtype(as_strided_view(whole, (root.numel,), (1,), 0), self.dtype)
    size = tuple(kw.get("size", (numel,)))
    stride = kw.get("stride")
    stride = contiguous_strides(size) if stride is None or len(stride) == 0 and size else tuple(stride)
    offset = int(kw.get("storage_offset", 0))
    if root.dtype == self.dtype:
        view = as_strided_view(whole, size, stride, offset)
    else:
        view = aten.as_strided.default(whole, size, stride, offset)
    with torch._C._DisableTorchDispatch():
        self.data = view                     # the wrapper's sizes, strides and storage, not a value
    self._node, self._storage = None, storage
    self._views, self._view_version, self._view_node = view._views, -1, None
    return self


def optimization_barrier_(tensors) -> None:
    """torch_xla's `xm.optimization_barrier_`: each xla tensor becomes its output of one XLA optimization
    barrier over them all (no computation moves across it: what a rematerialisation relies on). In eager
    mode the barrier runs at once, as an op does."""
    tensors = [t for t in tensors if type(t) is LazyTensor]
    if not tensors:
        return
    mark = realize.eager_mark() if _rt.eager else 0
    loc = user_location() if _rt.track_locations else None
    metas = tuple(tensor_meta(t) for t in tensors)
    node = make_node("xlanb.optimization_barrier", "xlanb.optimization_barrier", tuple(value(t) for t in tensors), None,
                     metas, loc)
    for t, out in zip(tensors, rec.output_nodes(node)):
        write_value(t, out)
    if _rt.eager:
        realize.sync_eager(mark, "xlanb.optimization_barrier")


def unsupported_mutation(func, args, kwargs):
    name = str(func)
    if func.is_view:
        raise NotImplementedError(
            f"{name} changes a tensor's shape in place, which xla tensors cannot do; "
            f"use the out-of-place form (e.g. `x = x.{name.split('.')[1].rstrip('_')}(...)`)")
    return cpu_cut(func, args, kwargs)
