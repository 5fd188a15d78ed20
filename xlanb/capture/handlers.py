"""One handler per OpOverload, chosen once and stored on the op (`func._xlanb`).

Kinds, in the order they are tried:
  special     copy_, _to_copy to CPU, .item(), lift_fresh, ... (table below)
  view        a new tensor sharing the base's storage, with one more view step
  mutation    in-place and out= ops: record the functional op, write the result back
  fast        unary and binary ops with a rule: no pytree, memoised meta, one node
  generic     any op with a rule (or with neither rule nor decomposition: CPU fallback)
  decompose   ops without a rule but with a torch decomposition into ops that have one
Ops whose output shape depends on the data (nonzero, masked_select, ...) are cut: the
inputs are computed, the op runs on CPU, and its outputs come back as device data.
"""

from __future__ import annotations

import torch
from torch._decomp import decomposition_table

from xlanb import events
from xlanb._config import config
from xlanb.capture import record as rec
from xlanb.capture.frames import user_frames, user_location
from xlanb.capture.realize import execution_guards, to_cpu
from xlanb.capture.record import NoMetaKernel, OpPlan, plan_of
from xlanb.capture.tensor import (LazyTensor, ViewStep, new_tensor, new_view, storage_of, value, view_chain,
                                  write)
from xlanb.capture.rng import take_key
from xlanb.capture.state import state
from xlanb.ir.node import Meta, Node, Scalar, const_key, data_node, intern_meta, lift, make_node, meta_of
from xlanb.lower.fallback import counter_name, host_dispatch
from xlanb.runtime.transfer import upload

aten = torch.ops.aten


def tensor_meta(t: LazyTensor) -> Meta:
    n = t._n
    if n is not None:
        return n.meta
    if t._v:
        return t._v[-1].meta
    return t._s.node.meta


# Generic and fallback -----------------------------------------------------------------

def generic(func, args, kwargs):
    try:
        return rec.record(func, args, kwargs or {})
    except NoMetaKernel:
        return cpu_cut(func, args, kwargs)


def _to_host(x, cause: str):
    if type(x) is LazyTensor:
        return to_cpu(x, cause=cause)
    if type(x) in (list, tuple):
        return type(x)(_to_host(y, cause) for y in x)
    if isinstance(x, torch.device):
        return torch.device("cpu")
    return x


def _to_device(x):
    if isinstance(x, torch.Tensor) and type(x) is not LazyTensor and x.device.type == "cpu":
        return new_tensor(data_node(upload(x), meta_of(x)), meta_of(x))
    if isinstance(x, (list, tuple)):      # torch.return_types (tuple subclasses) included
        return (list if isinstance(x, list) else tuple)(_to_device(y) for y in x)
    return x


def cpu_cut(func, args, kwargs):
    """Runs func on CPU with computed inputs; outputs return as device data."""
    name = str(func)
    frames = user_frames(config().max_frames)
    for guard in execution_guards:
        guard(f"data-dependent op {name}", frames)
    events.emit(events.GraphCut(op=name, frames=frames))
    events.emit(events.Fallback(op=counter_name(name), reason="data-dependent output shape"))
    cause = f"data-dependent op {name}"
    host_args = _to_host(args, cause)
    host_kwargs = {k: _to_host(v, cause) for k, v in (kwargs or {}).items()}
    with torch.no_grad(), host_dispatch():
        out = func(*host_args, **host_kwargs)
    if func._schema.is_mutable:     # an in-place op: write the CPU result back
        _write_back_host(func, args, host_args, host_kwargs)
        return _mutable_returns(func, args, kwargs, out)
    return _to_device(out)


def _mutable_returns(func, args, kwargs, out):
    """What a mutable op returns: its written arguments where a return aliases one, else the
    CPU result moved to the device."""
    returns = func._schema.returns
    if not returns:
        return None
    outs = out if len(returns) > 1 else (out,)
    by_alias = {}
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            by_alias[frozenset(a.alias_info.before_set)] = args[i] if i < len(args) else (kwargs or {}).get(a.name)
    values = []
    for r, o in zip(returns, outs):
        alias = frozenset(r.alias_info.before_set) if r.alias_info is not None else None
        values.append(by_alias[alias] if alias in by_alias else _to_device(o))
    return values[0] if len(returns) == 1 else tuple(values)


def _write_back_host(func, args, host_args, host_kwargs):
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            target = args[i] if i < len(args) else None
            host = host_args[i] if i < len(host_args) else host_kwargs.get(a.name)
            targets, hosts = (target, host) if isinstance(target, (list, tuple)) else ((target,), (host,))
            for t, h in zip(targets, hosts):
                if type(t) is LazyTensor:
                    write_value(t, data_node(upload(h), tensor_meta(t)))


def decompose_handler(decomp):
    def h(func, args, kwargs):
        out = decomp(*args, **(kwargs or {}))
        if out is NotImplemented:
            return generic(func, args, kwargs)
        return out
    return h


# Views ---------------------------------------------------------------------------------

def view_handler(func, args, kwargs):
    base = args[0]
    if type(base) is not LazyTensor:
        return generic(func, args, kwargs)
    plan = plan_of(func)
    consts = tuple(tuple(a) if type(a) is list else a for a in args[1:])
    key = (tensor_meta(base), const_key(consts), const_key(kwargs) if kwargs else None)
    try:
        meta = plan.meta_cache[key]
    except KeyError:
        out = func(tensor_meta(base).empty(), *consts, **(kwargs or {}))
        meta = meta_of(out) if isinstance(out, torch.Tensor) else tuple(meta_of(o) for o in out)
        plan.meta_cache[key] = meta
    storage = storage_of(base)
    chain = view_chain(base)
    if isinstance(meta, Meta):
        return new_view(storage, chain + (ViewStep(func, plan.name, consts, kwargs or None, meta),), meta)
    views = [new_view(storage, chain + (ViewStep(func, plan.name, consts, kwargs or None, m, i, meta),), m)
             for i, m in enumerate(meta)]
    return views if plan.returns_list else tuple(views)


def alias_handler(func, args, kwargs):
    """detach/alias: the same value, sharing storage, with no extra view step."""
    base = args[0]
    meta = tensor_meta(base)
    return new_view(storage_of(base), view_chain(base), meta)


# Mutations -----------------------------------------------------------------------------

def write_value(target: LazyTensor, node: Node) -> None:
    """Writes node into target, casting to target's dtype (in-place ops keep self's dtype)."""
    tm = tensor_meta(target)
    nm = node.meta
    if nm is not tm:
        if nm.shape != tm.shape:
            node = make_node(aten.expand.default, "aten.expand.default", (node, tm.shape), None,
                             _contiguous_like(nm.dtype, tm.shape))
        if nm.dtype != tm.dtype:
            node = make_node(aten._to_copy.default, "aten._to_copy.default", (node,), {"dtype": tm.dtype}, tm)
        elif node.meta is not tm:
            node = _relabel(node, tm)
    write(target, node)


def _contiguous_like(dtype, shape) -> Meta:
    return intern_meta(tuple(shape), dtype)


def _relabel(node: Node, meta: Meta) -> Node:
    """Same computation, the target's layout (strides are not part of the value)."""
    if node.buf is not None:
        return data_node(node.buf, meta)
    return make_node(node.op, node.name, node.args, node.kwargs, meta, node.loc)


_RANDOM_FUNCTIONAL = {
    "aten.normal_.default": "normal_functional.default",
    "aten.bernoulli_.float": "bernoulli.p",
}
_OUT_NAMES = ("out", "values", "indices", "out0", "out1", "out2", "mantissa", "exponent", "min", "max",
              "L", "info", "Q", "R", "U", "S", "V", "Vh", "eigenvalues", "eigenvectors", "solution",
              "LU", "pivots", "sign", "logabsdet", "cloned_coefficient", "output", "grad_input")


def _signature(arguments) -> list:
    return [(a.name, str(a.type)) for a in arguments]


def functional_variant(func):
    """The out-of-place op that computes what the in-place / out= op writes: the overload of
    the base name whose arguments (names and types) are the same, minus the out= ones."""
    name = str(func)
    if name in _RANDOM_FUNCTIONAL:
        return _lookup(_RANDOM_FUNCTIONAL[name])
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


def _lookup(qualified: str):
    packet, overload = qualified.split(".")
    return getattr(getattr(aten, packet), overload)


def mutation_handler(func):
    functional = functional_variant(func)
    schema = func._schema
    written = [(i, a) for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
    if functional is None or func.is_view or len(written) > 1 and not all(a.kwarg_only for _, a in written):
        decomp = decomposition_table.get(func)
        if decomp is not None and not func.is_view:   # e.g. _batch_norm_with_update: copy_ into the stats
            return decompose_handler(decomp)
        if func._can_decompose():                     # __iand__ -> bitwise_and_, ...
            return decompose_handler(func.decompose)
        return lambda f, args, kwargs: unsupported_mutation(f, args, kwargs)
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

    def h(func, args, kwargs):
        kwargs = kwargs or {}
        targets = _written_targets(written, args, kwargs)
        for t in targets:
            if type(t) is not LazyTensor:
                return cpu_cut(func, args, kwargs)
        nargs, nkwargs = rec.to_node_args(iplan, args, kwargs)
        try:
            rec.infer_meta(func, iplan, nargs, nkwargs)          # torch's checks and messages
        except NoMetaKernel:
            return cpu_cut(func, args, kwargs)
        if out_names and nkwargs:
            nkwargs = {k: v for k, v in nkwargs.items() if k not in out_names} or None
        if len(nargs) < len(defaults):      # the functional form may lack the in-place defaults
            nargs = nargs + defaults[len(nargs):]
        try:
            meta = rec.infer_meta(functional, fplan, nargs, nkwargs)
        except NoMetaKernel:
            return cpu_cut(func, args, kwargs)
        if fplan.rule is not None and fplan.rule.rng:
            nargs = (take_key(),) + nargs
        loc = user_location() if state.track_locations else None
        node = make_node(functional, fplan.name, nargs, nkwargs, meta, loc)
        outs = rec.output_nodes(node)
        if out_names:
            for target, out in zip(targets, outs):
                if out is not None and tensor_meta(target).shape != out.meta.shape:
                    resize_value(target, out.meta.shape)
        for target, out in zip(targets, outs):
            write_value(target, out)
        if not schema.returns:
            return None
        if out_names:
            return targets[0] if len(targets) == 1 else tuple(targets)
        return args[written[0][0]]
    return h


def _factory_out(functional, out_names):
    """zeros(..., out=t), arange(..., out=t): the factory (constant arguments), written into t."""
    from xlanb.capture.factories import _record_factory

    def h(func, args, kwargs):
        kwargs = dict(kwargs or {})
        target = kwargs.pop(next(iter(out_names)))
        if type(target) is not LazyTensor:
            return cpu_cut(func, args, {**kwargs, next(iter(out_names)): target})
        made = _record_factory(functional, tuple(args), {**kwargs, "dtype": target.dtype})
        if tensor_meta(target).shape != tuple(made.shape):
            resize_value(target, tuple(made.shape))
        write_value(target, value(made))
        return target
    return h


def _written_targets(written, args, kwargs) -> list:
    targets = []
    for i, a in written:
        t = args[i] if i < len(args) and not a.kwarg_only else kwargs.get(a.name)
        if isinstance(t, (list, tuple)):
            targets.extend(t)
        elif t is not None:
            targets.append(t)
    return targets


# In-place view ops change a tensor's shape and strides (matmul of a vector uses squeeze_):
# the new value is the out-of-place view, and torch's own kernel (Python dispatch off)
# changes the wrapper's sizes and strides within its storage.
_INPLACE_VIEWS = {
    "aten.squeeze_.default": "squeeze.default", "aten.squeeze_.dim": "squeeze.dim",
    "aten.squeeze_.dims": "squeeze.dims", "aten.unsqueeze_.default": "unsqueeze.default",
    "aten.transpose_.default": "transpose.int", "aten.swapdims_.default": "transpose.int",
    "aten.swapaxes_.default": "transpose.int", "aten.t_.default": "t.default",
    "aten.as_strided_.default": "as_strided.default",
}


def _restride(t: LazyTensor, size, stride, offset=0) -> None:
    """Sets the wrapper's sizes and strides (within its storage), as torch's kernels do."""
    with torch._C._DisableTorchDispatch():
        aten.as_strided_.default(t, list(size), list(stride), offset)


def inplace_view_handler(view_op):
    def h(func, args, kwargs):
        self = args[0]
        view = view_handler(view_op, args, kwargs)
        with torch._C._DisableTorchDispatch():
            func(self, *args[1:], **(kwargs or {}))
        storage_of(self)
        self._v, self._cv, self._cn = view._v, -1, None
        return self
    return h


def _contiguous_strides(shape) -> list:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return strides[::-1]


def resize_value(t: LazyTensor, shape) -> None:
    """Gives `t` the shape `shape` in place, keeping its first elements in order (resize_, and
    out= tensors of another shape). Only within the memory the tensor has: xla tensors
    cannot grow in place."""
    shape = tuple(int(d) for d in shape)
    meta = tensor_meta(t)
    if meta.shape == shape:
        return
    numel = 1
    for d in shape:
        numel *= d
    itemsize = torch.empty((), dtype=meta.dtype).element_size()
    if numel * itemsize > t.untyped_storage().nbytes() or t._n is None and t._s is not None:
        raise NotImplementedError(
            f"resizing an xla tensor of shape {list(meta.shape)} to {list(shape)} in place is not supported "
            "(xla tensors cannot grow, nor resize while views share their memory); allocate a tensor of "
            "the new shape instead (for out=, pass an out tensor of the result's shape)")
    flat = make_node(aten.reshape.default, "aten.reshape.default", (value(t), (-1,)), None,
                     intern_meta((meta.numel,), meta.dtype))
    part = make_node(aten.slice.Tensor, "aten.slice.Tensor", (flat, 0, 0, numel), None,
                     intern_meta((numel,), meta.dtype))
    new_meta = intern_meta(shape, meta.dtype)
    node = make_node(aten.reshape.default, "aten.reshape.default", (part, shape), None, new_meta)
    _restride(t, shape, _contiguous_strides(shape))
    t._n = node
    from xlanb.capture.tensor import mark_pending
    mark_pending(t)


def resize_(func, args, kwargs):
    self = args[0]
    shape = tuple(args[1].shape) if str(func).startswith("aten.resize_as_") else tuple(args[1])
    if type(self) is not LazyTensor:
        return cpu_cut(func, args, kwargs)
    resize_value(self, shape)
    return self


def unsupported_mutation(func, args, kwargs):
    name = str(func)
    if func.is_view:
        raise NotImplementedError(
            f"{name} changes a tensor's shape in place, which xla tensors cannot do; "
            f"use the out-of-place form (e.g. `x = x.{name.split('.')[1].rstrip('_')}(...)`)")
    return cpu_cut(func, args, kwargs)


# Special ops ---------------------------------------------------------------------------

def copy_(func, args, kwargs):
    dst, src = args[0], args[1]
    if type(dst) is not LazyTensor:                     # xla -> cpu
        return dst.copy_(to_cpu(src, cause="copy to CPU"))
    if type(src) is not LazyTensor:                     # cpu -> xla: cast and broadcast on the host
        meta = tensor_meta(dst)
        host = src.detach().to(dtype=meta.dtype).expand(meta.shape)
        write(dst, data_node(upload(host), meta))
        return dst
    tm = tensor_meta(dst)
    node = make_node(aten.copy.default, "aten.copy.default", (value(dst), value(src)), None, tm)
    write(dst, node)
    return dst


def to_copy(func, args, kwargs):
    device = (kwargs or {}).get("device")
    if device is not None and torch.device(device).type == "cpu":
        host = to_cpu(args[0], cause="copy to CPU (.cpu() / .to('cpu'))")
        dtype = kwargs.get("dtype")
        return host if dtype is None else host.to(dtype)
    return generic(func, args, kwargs)


def local_scalar_dense(func, args, kwargs):
    value_ = to_cpu(args[0], cause="value access (.item())").item()
    events.emit(events.Fallback(op="aten::_local_scalar_dense", reason="value access"))
    return value_


def lift_fresh(func, args, kwargs):
    return args[0]


_HALF = (torch.bfloat16, torch.float16)


def _cast_tensor(t, dtype):
    """t as `dtype` (a _to_copy node), for outputs whose dtype the meta kernel gets unlike CPU."""
    if t is None or t.dtype == dtype:
        return t
    meta = intern_meta(tuple(t.shape), dtype)
    return new_tensor(make_node(aten._to_copy.default, "aten._to_copy.default", (value(t),), {"dtype": dtype},
                                meta), meta)


def _cpu_stats_dtype(input, outs):
    """torch's CPU norm kernels return half-precision saved statistics for half inputs; the
    meta kernels (CUDA's convention) say float32. Follow CPU: its answer is the reference."""
    if input.dtype not in _HALF:
        return tuple(outs)
    return (outs[0],) + tuple(_cast_tensor(o, input.dtype) for o in outs[1:])


def native_batch_norm(func, args, kwargs):
    """BatchNorm updates its running stats in place although the schema says it does not:
    record the functional form and write the new stats back."""
    input, weight, bias, running_mean, running_var, training, momentum, eps = args
    if running_mean is None or running_var is None:
        op = aten._native_batch_norm_legit.no_stats
        return _cpu_stats_dtype(input, rec.record(op, (input, weight, bias, training, momentum, eps), {}))
    if not training:
        op = aten._native_batch_norm_legit_no_training.default
        out = rec.record(op, (input, weight, bias, running_mean, running_var, momentum, eps), {})
        # torch's CPU and CUDA kernels return empty saved statistics in eval mode
        dtype = input.dtype if input.dtype in _HALF else out[1].dtype
        empty = intern_meta((0,), dtype)
        stats = [new_tensor(make_node(aten.zeros.default, "aten.zeros.default", ((0,),), {"dtype": dtype}, empty),
                            empty) for _ in range(2)]
        return out[0], stats[0], stats[1]
    op = aten._native_batch_norm_legit_functional.default
    node = rec.record_node(op, (input, weight, bias, running_mean, running_var, True, momentum, eps), {})
    outs = rec.output_nodes(node)
    write_value(running_mean, outs[3])
    write_value(running_var, outs[4])
    return _cpu_stats_dtype(input, [new_tensor(n, n.meta) for n in outs[:3]])


def batch_norm_with_update(func, args, kwargs):
    input, weight, bias, running_mean, running_var, momentum, eps = args
    out = native_batch_norm(func, (input, weight, bias, running_mean, running_var, True, momentum, eps), None)
    empty = intern_meta((0,), torch.uint8)
    reserve = new_tensor(make_node(aten.zeros.default, "aten.zeros.default", ((0,),), {"dtype": torch.uint8}, empty),
                         empty)
    return tuple(out) + (reserve,)


def batch_norm_no_stats(func, args, kwargs):
    return _cpu_stats_dtype(args[0], generic(func, args, kwargs))


def native_layer_norm(func, args, kwargs):
    return _cpu_stats_dtype(args[0], generic(func, args, kwargs))


SPECIAL = {
    "aten.copy_.default": copy_,
    "aten._to_copy.default": to_copy,
    "aten._local_scalar_dense.default": local_scalar_dense,
    "aten.item.default": local_scalar_dense,
    "aten.lift_fresh.default": lift_fresh,
    "aten.detach.default": alias_handler,
    "aten.alias.default": alias_handler,
    "aten.native_batch_norm.default": native_batch_norm,
    "aten._native_batch_norm_legit.default": native_batch_norm,     # the same schema
    "aten.native_layer_norm.default": native_layer_norm,
    "aten._native_batch_norm_legit.no_stats": batch_norm_no_stats,
    "aten._batch_norm_with_update.default": batch_norm_with_update,
    "aten.resize_.default": resize_,
    "aten.resize_as_.default": resize_,
}


# Fast paths ----------------------------------------------------------------------------

def _fast_kind(func, plan: OpPlan) -> str | None:
    if plan.rule is None or plan.rule.rng:
        return None
    returns = func._schema.returns
    if len(returns) != 1 or str(returns[0].type) != "Tensor":
        return None
    args = func._schema.arguments
    kinds = [str(a.type) for a in args if not a.kwarg_only]
    keyword = [a.name for a in args if a.kwarg_only]
    if kinds == ["Tensor"] and not keyword:
        return "unary"
    if len(kinds) == 2 and kinds[0] == "Tensor" and kinds[1] in ("Tensor", "number") and keyword in ([], ["alpha"]):
        return "binary"
    return None


def make_unary(func, plan: OpPlan):
    cache: dict = {}
    name = plan.name

    def h(func, args, kwargs):
        if kwargs or len(args) != 1 or type(args[0]) is not LazyTensor:
            return generic(func, args, kwargs)
        a = args[0]
        na = a._n
        if na is None:
            na = value(a)
        try:
            m, lk = cache[na.meta]
        except KeyError:
            m = rec.infer_meta(func, plan, (na,), None)
            lk = (name, (const_key(na),), None, m)
            cache[na.meta] = (m, lk)
        n = Node()
        n.op, n.name, n.args, n.kwargs, n.ins, n.meta, n.lk = func, name, (na,), None, (na,), m, lk
        n.h = hash((lk, (na.h,)))
        n.buf = None
        n.loc = user_location() if state.track_locations else None
        return new_tensor(n, m)
    return h


def make_binary(func, plan: OpPlan):
    cache: dict = {}
    name = plan.name

    def h(func, args, kwargs):
        if kwargs or len(args) != 2 or type(args[0]) is not LazyTensor:
            return generic(func, args, kwargs)
        a, b = args
        na = a._n
        if na is None:
            na = value(a)
        tb = type(b)
        if tb is LazyTensor:
            nb = b._n
            if nb is None:
                nb = value(b)
            kb = nb.meta
            ins = (na, nb)
            hashes = (na.h, nb.h)
        elif tb is float or tb is int or tb is bool:
            nb = lift(b)
            if type(nb) is Scalar:
                kb = tb
                ins = (na, nb)
            else:
                kb = (tb, b)
                ins = (na,)
            hashes = (na.h,)
        else:
            return generic(func, args, kwargs)
        ckey = (na.meta, kb)
        try:
            m, lk = cache[ckey]
        except KeyError:
            m = rec.infer_meta(func, plan, (na, nb), None)
            lk = (name, const_key((na, nb)), None, m)
            cache[ckey] = (m, lk)
        n = Node()
        n.op, n.name, n.args, n.kwargs, n.ins, n.meta, n.lk = func, name, (na, nb), None, ins, m, lk
        n.h = hash((lk, hashes))
        n.buf = None
        n.loc = user_location() if state.track_locations else None
        return new_tensor(n, m)
    return h


# Choosing a handler --------------------------------------------------------------------

def choose_handler(func):
    from xlanb.capture.datadep import HANDLERS
    handler = _choose(func)
    wrap = HANDLERS.get(str(func))
    return handler if wrap is None else wrap(handler)


def _choose(func):
    name = str(func)
    if name in SPECIAL:
        return SPECIAL[name]
    schema = func._schema
    if name in _INPLACE_VIEWS:
        return inplace_view_handler(_lookup(_INPLACE_VIEWS[name]))
    if schema.is_mutable:
        return mutation_handler(func)
    if func.is_view:
        # a view op without a rule (to.dtype, real, narrow.Tensor, split.sizes, ...) is a
        # composite of ops that have one: a view step it names could not be lowered
        if plan_of(func).rule is None and func._can_decompose():
            return decompose_handler(func.decompose)
        return view_handler
    plan = plan_of(func)
    if plan.rule is not None:
        kind = _fast_kind(func, plan)
        if kind == "unary":
            return make_unary(func, plan)
        if kind == "binary":
            return make_binary(func, plan)
        return generic
    decomp = decomposition_table.get(func)
    if decomp is not None:
        return decompose_handler(decomp)
    if func._can_decompose():
        return decompose_handler(func.decompose)
    return fallback      # no rule, no decomposition: recorded, lowered as a CPU fallback


def fallback(func, args, kwargs):
    if not state.allow_execution:
        cause = f"CPU fallback op {func} (no lowering)"
        frames = user_frames(config().max_frames)
        for guard in execution_guards:
            guard(cause, frames)
    return generic(func, args, kwargs)
