"""One handler per OpOverload, chosen once and stored on the op (`func._xlanb`).

Kinds, in the order they are tried:
  special     copy_, _to_copy to CPU, .item(), lift_fresh, ... (table below)
  view        a new tensor sharing the base's storage, with one more view step
  mutation    in-place and out= ops: record the functional op, write the result back
              (mutations.py)
  fast        unary and binary ops with a rule: no pytree, memoised meta, one node
  generic     any op with a rule (or with neither rule nor decomposition: CPU fallback)
  decompose   ops without a rule but with a torch decomposition into ops that have one
Ops whose output shape depends on the data (nonzero, masked_select, ...) are handled in
datadep.py: a count is computed and the op stays on the device, or (cpu_cut) the inputs are
computed, the op runs on CPU, and its outputs come back as device data.
"""

from __future__ import annotations

import torch
from torch._decomp import decomposition_table

from xlanb import events
from xlanb.capture import record as rec
from xlanb.capture.datadep import cpu_cut
from xlanb.capture.device_arguments import device_argument
from xlanb.capture.checks import check_tpu_reinterpret
from xlanb.lower.torch_versions import SOLVE_FACTORS_CONTIGUOUS_TRANSPOSE
from xlanb.capture.frames import user_frames, user_location
from xlanb.capture.views import _AS_STRIDED, _REINTERPRETING, as_strided_view, check_no_replayed_views
from xlanb.capture.mutations import lookup, mutation_handler, resize_, set_, set_storage, unsupported_mutation
from xlanb.capture.overlap import check_write_overlap
from xlanb.capture.realize import check_execution, copy_across, eager_replay, eager_run, to_cpu
from xlanb.capture.record import EXPONENT, NoMetaKernel, OpPlan, kept_exponent, plan_of
from xlanb.capture.verdict import check_once, raise_cpu_error
from xlanb.capture.tensor import (LazyTensor, ViewStep, computed_view, new_tensor, new_view, storage_of, tensor_meta,
                                  value, view_chain, write, write_value)
from xlanb.capture.nodes import lift, make_node, new_node, scalar_class
from xlanb.ir.node import Meta, Node, Scalar, const_key, intern_meta, local_key, meta_of
from xlanb.lower.fallback import host_dispatch
from xlanb.state import emit, runtime_state

_rt = runtime_state()

aten = torch.ops.aten
_default_dtype = torch.get_default_dtype


# Generic and fallback -----------------------------------------------------------------

def generic(func, args, kwargs):
    try:
        return rec.record(func, args, kwargs or {})
    except NoMetaKernel:
        return cpu_cut(func, args, kwargs)


def decompose_handler(decomp):
    def h(func, args, kwargs):
        try:
            out = decomp(*args, **(kwargs or {}))
        except (RuntimeError, IndexError, ValueError, TypeError):
            raise_cpu_error(func, args, kwargs or {})      # the op's own error, not its decomposition's
            raise
        if out is NotImplemented:
            return generic(func, args, kwargs)
        return out
    return h


# Views ---------------------------------------------------------------------------------

def view_handler(func, args, kwargs):
    base = args[0]
    if type(base) is not LazyTensor:
        return generic(func, args, kwargs)
    if func is _AS_STRIDED and not any(step.name in _REINTERPRETING for step in view_chain(base)):
        return as_strided_view(base, *args[1:], **(kwargs or {}))
    plan = plan_of(func)
    consts = tuple(tuple(a) if type(a) is list else a for a in args[1:])
    if func is _VIEW_DTYPE:
        check_tpu_reinterpret(plan.name, base.dtype, consts[0], tensor_meta(base).numel)
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
        out = new_view(storage, chain + (ViewStep(func, plan.name, consts, kwargs or None, meta),), meta)
        conj, neg = base.is_conj(), base.is_neg()
        if func is _CONJ:
            conj = not conj
        elif func is _NEG_VIEW:
            neg = not neg
        if conj or neg:
            set_bits(out, conj, neg)
        return out
    views = [new_view(storage, chain + (ViewStep(func, plan.name, consts, kwargs or None, m, i, meta),), m)
             for i, m in enumerate(meta)]
    if base.is_conj() or base.is_neg():
        for v in views:
            set_bits(v, base.is_conj(), base.is_neg())
    return views if plan.returns_list else tuple(views)


_CONJ, _NEG_VIEW = torch.ops.aten._conj.default, torch.ops.aten._neg_view.default
_VIEW_DTYPE = torch.ops.aten.view.dtype


def set_bits(t, conj: bool, neg: bool) -> None:
    """torch's conjugate and negative bits, as CPU sets them on a view. An xla tensor's values are
    always resolved (a conjugate view holds the conjugated values): the bits only tell torch what
    CPU would say (`is_conj()`, `is_neg()`), and torch resolves a tensor with a bit set by cloning
    it, which gives those values as they are."""
    if conj:
        torch._C._set_conj(t, True)
    if neg:
        torch._C._set_neg(t, True)


def alias_handler(func, args, kwargs):
    """detach/alias: the same value, sharing storage, with no extra view step."""
    base = args[0]
    meta = tensor_meta(base)
    return new_view(storage_of(base), view_chain(base), meta)


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


def inplace_view_handler(view_op):
    def h(func, args, kwargs):
        self = args[0]
        if self._storage is not None and self.requires_grad and self._base is None:
            check_no_replayed_views(self, func)
        view = view_handler(view_op, args, kwargs)
        with torch._C._DisableTorchDispatch():
            func(self, *args[1:], **(kwargs or {}))
        storage_of(self)
        self._views, self._view_version, self._view_node = view._views, -1, None
        return self
    return h


# Special ops ---------------------------------------------------------------------------

def copy_(func, args, kwargs):
    dst, src = args[0], args[1]
    if type(dst) is not LazyTensor or type(src) is not LazyTensor:     # one side on the CPU
        return copy_across(dst, src)
    tm = tensor_meta(dst)
    if tm.mkstrides is not None and torch._debug_has_internal_overlap(dst) == 1:
        check_once(func, args, kwargs)      # an expanded dst: CPU's overlap error, in its words
    if src.shape != dst.shape:
        check_once(func, args, kwargs)      # src must broadcast to dst's shape: CPU's error, in its words
    check_write_overlap(func, args, kwargs, (dst,))
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
    emit(events.Fallback(op="aten::_local_scalar_dense", reason="value access"))
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


def linalg_solve_ex(func, args, kwargs):
    """torch 2.9 and 2.10 factor a real A's transpose when A is contiguous, A itself when it is not
    (lower/torch_versions.py); the rule sees no strides and factors the transpose: a
    non-contiguous real A runs on the CPU there."""
    a = args[0]
    if (SOLVE_FACTORS_CONTIGUOUS_TRANSPOSE and type(a) is LazyTensor and not a.is_complex()
            and not a.is_contiguous()):
        return cpu_cut(func, args, kwargs)
    return generic(func, args, kwargs)


def pack_padded_sequence(func, args, kwargs):
    """`_pack_padded_sequence(input, lengths, batch_first)`: torch keeps the lengths and the batch
    sizes on the CPU (on CUDA too). CPU packs the positions of input's first two dims, checking the
    lengths in its own words; the data is input's rows gathered on the device in that order."""
    input, lengths = args[0], args[1]
    batch_first = args[2] if len(args) > 2 else kwargs["batch_first"]
    if type(input) is not LazyTensor or type(lengths) is LazyTensor or input.dim() < 2:
        return cpu_cut(func, args, kwargs)
    n0, n1 = input.shape[0], input.shape[1]
    with torch.no_grad(), host_dispatch():
        positions, batch_sizes = aten._pack_padded_sequence.default(torch.arange(n0 * n1).view(n0, n1), lengths,
                                                                   batch_first)
    rows = aten.reshape.default(input, [n0 * n1, *input.shape[2:]])
    return aten.index_select.default(rows, 0, positions.to(input.device)), batch_sizes


SPECIAL = {
    "aten._pack_padded_sequence.default": pack_padded_sequence,
    "aten.copy_.default": copy_,
    "aten._linalg_solve_ex.default": linalg_solve_ex,
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
    "aten.set_.source_Tensor": set_,
    "aten.set_.source_Storage": set_storage,
    "aten.set_.source_Storage_storage_offset": set_storage,
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
    if kinds == ["Tensor"]:             # keyword-only arguments (sum's dtype) given take the generic path
        return "unary"
    if len(kinds) == 2 and kinds[0] == "Tensor" and kinds[1] in ("Tensor", "number") and keyword in ([], ["alpha"]):
        return "binary"
    if len(kinds) > 1 and kinds[0] == "Tensor" and all(_unwrapped(k) in _CONSTANT_TYPES for k in kinds[1:]):
        return "constants"
    return None


# argument types that are part of an op's key, never lifted as graph inputs: dims, flags, names
_CONSTANT_TYPES = {"int", "List[int]", "SymInt", "List[SymInt]", "bool", "str"}     # a dtype is an int


def _unwrapped(kind: str) -> str:
    return kind[len("Optional["):-1] if kind.startswith("Optional[") else kind


def _constant_key(args) -> tuple | None:
    """An op's constant arguments as a key with their types (1 and True differ to torch), or None
    for any other argument (a float or a tensor: the generic path lifts or records it)."""
    key = []
    for a in args:
        t = type(a)
        if t is int or t is bool or t is str or a is None or t is torch.dtype:
            key.append((t, a))
        elif t is list or t is tuple or t is torch.Size:
            if not all(type(v) is int for v in a):
                return None
            key.append((t, tuple(a)))
        else:
            return None
    return tuple(key)


def _memo_entry(func, plan: OpPlan, name: str, nargs) -> tuple:
    """(output meta, local key, the default dtype it was inferred under, or None where the
    result dtype cannot follow the default) for the fast paths' memo."""
    m = rec.infer_meta(func, plan, nargs, None)
    default = _default_dtype() if rec.follows_default_dtype(nargs) else None
    return m, local_key(name, nargs, None, m), default


def make_unary(func, plan: OpPlan):
    memo: dict = {}         # input meta -> (output meta, local key, default dtype or None)
    name = plan.name

    def h(func, args, kwargs):
        if kwargs or len(args) != 1 or type(args[0]) is not LazyTensor:
            return generic(func, args, kwargs)
        a = args[0]
        na = a._node
        if na is None:
            na = value(a)
        try:
            m, key, default = memo[na.meta]
            if default is not None and default is not _default_dtype():
                raise KeyError(na.meta)
        except KeyError:
            try:
                m, key, default = memo[na.meta] = _memo_entry(func, plan, name, (na,))
            except NoMetaKernel:
                return cpu_cut(func, args, kwargs)
        args = (na,)
        if _rt.eager and _rt.observer is None:
            if na.buffer is not None:
                return _eager_op(func, name, args, args, m, key, (name, na.meta, default), (na.buffer,), None)
            source = computed_view(a)
            if source is not None:          # a view of a computed tensor: the view and the op in one launch
                base, chain = source
                return _eager_op(func, name, args, args, m, key, (name, na.meta, default, chain), (base.buffer,), None)
        location = user_location() if _rt.track_locations else None
        return new_tensor(new_node(func, name, args, None, args, m, key, location), m)
    return h


def make_binary(func, plan: OpPlan):
    memo: dict = {}         # (input meta, other meta or number kind) -> (output meta, local key, default dtype)
    name = plan.name
    exponent = plan.positional[1] == EXPONENT       # pow's: a fast path's exponent stays a constant

    def h(func, args, kwargs):
        if kwargs or len(args) != 2 or type(args[0]) is not LazyTensor:
            return generic(func, args, kwargs)
        a, b = args
        na = a._node
        if na is None:
            na = value(a)
        tb = type(b)
        if tb is LazyTensor:
            nb = b._node
            if nb is None:
                nb = value(b)
            kb = nb.meta
            operands = (na, nb)
        elif tb is float or tb is int or tb is bool:
            nb = b if exponent and kept_exponent(b) else lift(b)
            if type(nb) is Scalar:
                kb = scalar_class(b)        # CPU refuses some numbers out of the dtype's range (pow on float16)
                operands = (na, nb)
            else:
                kb = (tb, b)
                operands = (na,)
        else:
            return generic(func, args, kwargs)
        nargs = (na, nb)
        memo_key = (na.meta, kb)
        try:
            m, key, default = memo[memo_key]
            if default is not None and default is not _default_dtype():
                raise KeyError(memo_key)
        except KeyError:
            try:
                m, key, default = memo[memo_key] = _memo_entry(func, plan, name, nargs)
            except NoMetaKernel:
                return cpu_cut(func, args, kwargs)
        if _rt.eager and _rt.observer is None:
            if na.buffer is not None:
                out = _eager_binary(func, name, na, nb, nargs, operands, m, key, (memo_key, default))
            else:
                source = computed_view(a)
                out = None if source is None else _eager_binary(func, name, source[0], nb, nargs, operands, m, key,
                                                                (memo_key, default, source[1]))
            if out is not None:
                return out
        location = user_location() if _rt.track_locations else None
        return new_tensor(new_node(func, name, nargs, None, operands, m, key, location), m)
    return h


def make_constants(func, plan: OpPlan):
    """An op of one tensor and constant arguments (`x.sum(dim=0)`, `softmax(x, 1)`, `x.flip([0])`):
    in eager mode on a computed tensor, the executable remembered for the tensor's type and the
    constants is replayed, as the unary ops' is; anything else takes the generic path."""
    memo: dict = {}         # (input meta, constants key) -> (constant node args, out meta, local key, default) or None
    name = plan.name

    def h(func, args, kwargs):
        if kwargs or type(args[0]) is not LazyTensor or not _rt.eager or _rt.observer is not None:
            return generic(func, args, kwargs)
        na = args[0]._node
        if na is None or na.buffer is None:
            return generic(func, args, kwargs)
        consts = _constant_key(args[1:])
        if consts is None:
            return generic(func, args, kwargs)
        memo_key = (na.meta, consts)
        try:
            entry = memo[memo_key]
            if entry is not None and entry[3] is not None and entry[3] is not _default_dtype():
                raise KeyError(memo_key)        # inferred under another default dtype
        except KeyError:
            entry = memo[memo_key] = _constants_entry(func, plan, name, args)
        if entry is None:
            return generic(func, args, kwargs)
        tail, m, key, default = entry
        nargs = (na,) + tail
        return _eager_op(func, name, nargs, (na,), m, key, (name, memo_key, default), (na.buffer,), None)
    return h


def _constants_entry(func, plan: OpPlan, name: str, args) -> tuple | None:
    """(the node's constant arguments, out meta, local key, default dtype or None), or None where
    the generic path must record the op (an argument it lifts, an op with no meta kernel)."""
    nargs, _ = rec.to_node_args(plan, args, None)
    if any(type(a) is Node or type(a) is Scalar for a in _flat(nargs[1:])):
        return None
    try:
        m, key, default = _memo_entry(func, plan, name, nargs)
    except NoMetaKernel:
        return None
    return (nargs[1:], m, key, default) if isinstance(m, Meta) else None


def _flat(args):
    for a in args:
        if type(a) is tuple:
            yield from _flat(a)
        else:
            yield a


def _eager_binary(func, name, na, nb, nargs, operands, m, key, memo_key):
    """Eager mode on computed inputs: replay the op's executable, or run it once (None: not eligible).
    `na` is the first operand's node, or the computed base of the view it reads (`computed_view`)."""
    scalar = None
    if type(nb) is Node:
        if nb.buffer is None:
            return None
        alias = nb is na
        buffers = (na.buffer,) if alias else (na.buffer, nb.buffer)
    else:
        alias = False
        buffers = (na.buffer,)
        if type(nb) is Scalar:
            scalar = nb.value
    return _eager_op(func, name, nargs, operands, m, key, (name, memo_key, alias), buffers, scalar)


def _eager_op(func, name, nargs, operands, m, key, fast_key, buffers, scalar):
    """Replays the op's executable on its input buffers, or the first time records and runs it."""
    out = eager_replay(fast_key, name, m, buffers, scalar)
    if out is not None:
        return out
    location = user_location() if _rt.track_locations else None     # debug_nans names the line
    return eager_run(new_node(func, name, nargs, None, operands, m, key, location), fast_key)


# Choosing a handler --------------------------------------------------------------------

def choose_handler(func):
    from xlanb.capture.bounds import bounded
    from xlanb.capture.datadep import HANDLERS
    from xlanb.capture.growth import HANDLERS as GROWTH
    handler = _choose(func)
    name = str(func)
    wrap = HANDLERS.get(name) or GROWTH.get(name) or bounded(func._schema.name.split("::")[-1])
    handler = handler if wrap is None else wrap(handler)
    device_at = next((i for i, a in enumerate(func._schema.arguments) if a.name == "device"), None)
    return handler if device_at is None else device_argument(func, handler, device_at)


def _choose(func):
    name = str(func)
    if name in SPECIAL:
        return SPECIAL[name]
    schema = func._schema
    if name in _INPLACE_VIEWS:
        return inplace_view_handler(lookup(_INPLACE_VIEWS[name]))
    if schema.is_mutable:
        handler = mutation_handler(func)
        if handler is not None:
            return handler
        decomp = decomposition_table.get(func)
        if decomp is not None and not func.is_view:   # e.g. _batch_norm_with_update: copy_ into the stats
            return decompose_handler(decomp)
        if func._can_decompose():                     # __iand__ -> bitwise_and_, ...
            return decompose_handler(func.decompose)
        return unsupported_mutation
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
        if kind == "constants":
            return make_constants(func, plan)
        return generic
    decomp = decomposition_table.get(func)
    if decomp is not None:
        return decompose_handler(decomp)
    if func._can_decompose():
        return decompose_handler(func.decompose)
    return fallback      # no rule, no decomposition: recorded, lowered as a CPU fallback


def fallback(func, args, kwargs):
    if not _rt.allow_execution:
        cause = f"CPU fallback op {func} (no lowering)"
        frames = user_frames(_rt.config.max_frames)
        check_execution(cause, frames)
    return generic(func, args, kwargs)
