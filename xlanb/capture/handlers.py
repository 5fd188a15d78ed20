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
from xlanb.capture.record import NoMetaKernel, OpPlan, cpu_input, plan_of
from xlanb.capture.tensor import (LazyTensor, ViewStep, new_tensor, new_view, storage_of, value, view_chain,
                                  write)
from xlanb.capture.rng import take_key
from xlanb.capture.state import state
from xlanb.ir.node import Meta, Node, Scalar, const_key, data_node, intern_meta, lift, make_node, meta_of
from xlanb.lower.fallback import counter_name
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
    if type(x) in (list, tuple):
        return type(x)(_to_device(y) for y in x)
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
    with torch.no_grad():
        out = func(*host_args, **host_kwargs)
    if func._schema.is_mutable:     # an in-place op: write the CPU result back
        _write_back_host(func, args, host_args, host_kwargs)
        return args[0] if func._schema.returns else None
    return _to_device(out)


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


def functional_variant(func):
    """The out-of-place op that computes what the in-place / out= op writes."""
    name = str(func)
    if name in _RANDOM_FUNCTIONAL:
        return _lookup(_RANDOM_FUNCTIONAL[name])
    schema = func._schema
    base = schema.name.split("::")[1]
    written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    if written and all(a.kwarg_only for a in written):          # out= variant
        packet = getattr(aten, base, None)
        if packet is None:
            return None
        inputs = [a.name for a in schema.arguments if not a.kwarg_only or a.name not in {w.name for w in written}]
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if op._schema.is_mutable:
                continue
            if [a.name for a in op._schema.arguments] == inputs:
                return op
        return None
    if base.endswith("_"):
        packet = getattr(aten, base[:-1], None)
        overload = func._overloadname
        if packet is not None and overload in packet.overloads():
            op = getattr(packet, overload)
            if not op._schema.is_mutable:
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
        return lambda f, args, kwargs: unsupported_mutation(f, args, kwargs)
    out_names = {a.name for _, a in written if a.kwarg_only}
    fplan = plan_of(functional)
    iplan = plan_of(func)

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
        try:
            meta = rec.infer_meta(functional, fplan, nargs, nkwargs)
        except NoMetaKernel:
            return cpu_cut(func, args, kwargs)
        if fplan.rule is not None and fplan.rule.rng:
            nargs = (take_key(),) + nargs
        loc = user_location() if state.track_locations else None
        node = make_node(functional, fplan.name, nargs, nkwargs, meta, loc)
        for target, out in zip(targets, rec.output_nodes(node)):
            write_value(target, out)
        if not schema.returns:
            return None
        if out_names:
            return targets[0] if len(targets) == 1 else tuple(targets)
        return args[written[0][0]]
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


def native_batch_norm(func, args, kwargs):
    """BatchNorm updates its running stats in place although the schema says it does not:
    record the functional form and write the new stats back."""
    input, weight, bias, running_mean, running_var, training, momentum, eps = args
    if running_mean is None or running_var is None:
        op = aten._native_batch_norm_legit.no_stats
        return rec.record(op, (input, weight, bias, training, momentum, eps), {})
    if not training:
        op = aten._native_batch_norm_legit_no_training.default
        return rec.record(op, (input, weight, bias, running_mean, running_var, momentum, eps), {})
    op = aten._native_batch_norm_legit_functional.default
    node = rec.record_node(op, (input, weight, bias, running_mean, running_var, True, momentum, eps), {})
    outs = rec.output_nodes(node)
    write_value(running_mean, outs[3])
    write_value(running_var, outs[4])
    return tuple(new_tensor(n, n.meta) for n in outs[:3])


SPECIAL = {
    "aten.copy_.default": copy_,
    "aten._to_copy.default": to_copy,
    "aten._local_scalar_dense.default": local_scalar_dense,
    "aten.lift_fresh.default": lift_fresh,
    "aten.detach.default": alias_handler,
    "aten.alias.default": alias_handler,
    "aten.native_batch_norm.default": native_batch_norm,
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
    name = str(func)
    if name in SPECIAL:
        return SPECIAL[name]
    schema = func._schema
    if schema.is_mutable:
        return mutation_handler(func)
    if func.is_view:
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
