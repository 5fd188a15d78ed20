"""Recording an ATen call as a node: argument conversion, scalar lifting, shape inference.

Shape and dtype come from torch's own meta kernels, so errors are torch's errors,
raised at the user's line. Meta kernels are slow in Python (tens of microseconds), so
their results are memoised by (op, input metas, constant arguments); lifted scalars
enter that key by type and range (capture/nodes.py's scalar_class: CPU refuses some values its
kernel converts to the tensor's dtype).
"""

from __future__ import annotations

import warnings

import jax
import torch

from xlanb.capture import rng
from xlanb.capture.checks import (check_dtype_arguments, check_representable, check_x64, check_select_from_empty_dim,
                                  raise_cpu_verdict_on_empty)
from xlanb.capture.frames import outside_level, user_location
from xlanb.capture.verdict import (PROBED, check_once, cpu_answer, cpu_verdict, has_out, is_verdict, raise_cpu_error,
                                   runs_on_cpu, with_cpu_dtypes)
from xlanb.capture.nodes import lift, make_node, scalar_class
from xlanb.capture.tensor import LazyTensor, new_tensor, value
from xlanb.ir.node import Meta, Node, Scalar, data_node, meta_of
from xlanb.lower.dtypes import to_jax_dtype, to_torch_dtype
from xlanb.lower.fallback import host_dispatch, probe_on_cpu, with_warnings
from xlanb.lower.registry import lookup
from xlanb.lower.rules.pointwise import POW_FAST
from xlanb.runtime.transfer import upload
from xlanb.state import runtime_state

_rt = runtime_state()

TENSOR, TENSORS, NUMBER, NUMBERS, OTHER, EXPONENT = range(6)
_META_DEVICE = torch.device("meta")
_default_dtype = torch.get_default_dtype


class NoMetaKernel(Exception):
    """The op cannot be shape-inferred (no meta kernel, or data-dependent output)."""


def _kind(arg_type) -> int:
    text = str(arg_type)
    if text in ("Tensor", "Optional[Tensor]"):
        return TENSOR
    if text in ("List[Tensor]", "List[Optional[Tensor]]"):
        return TENSORS
    if text in ("number", "Optional[number]"):
        return NUMBER
    if text == "List[number]":
        return NUMBERS
    return OTHER


# A scalar exponent that selects the algorithm of CPU's kernel (lower/rules/pointwise.py's POW_FAST: x * x,
# x * x * x, 1 / (x * x), sqrt, rsqrt) stays a constant of the graph, so that XLA compiles the one it
# selects (a lifted exponent computes powf and every fast path, then selects: 5% of W7's replayed step);
# any other exponent is lifted, as numbers are
_EXPONENT_AT = {"aten.pow.Tensor_Scalar": 1, "aten.pow_.Scalar": 1, "aten.pow.Tensor_Scalar_out": 1}


def kept_exponent(x) -> bool:
    """Whether an EXPONENT argument stays a constant of the graph (a fast path's exponent)."""
    t = type(x)
    return (t is float or t is int) and x in POW_FAST


class OpPlan:
    """What record needs to know about an op, computed once."""

    __slots__ = ("name", "positional", "keyword", "rule", "meta_cache", "returns_list", "warns", "numbers")

    def __init__(self, func):
        schema = func._schema
        self.name = str(func)
        self.positional = tuple(_kind(a.type) for a in schema.arguments if not a.kwarg_only)
        self.keyword = {a.name: _kind(a.type) for a in schema.arguments if a.kwarg_only}
        at = _EXPONENT_AT.get(self.name)
        if at is not None:
            self.positional = self.positional[:at] + (EXPONENT,) + self.positional[at + 1:]
        self.rule = lookup(self.name)
        self.meta_cache: dict = {}
        self.returns_list = len(schema.returns) == 1 and str(schema.returns[0].type).startswith("List")
        self.warns: dict = {}       # meta_cache keys whose kernels warn -> their warnings, given at each call
        # the number parameters (positions, then keyword names) when there are two or more: CPU checks
        # how they compare (histc: "max must be larger than min"), which their ranges do not tell
        numbers = [i for i, k in enumerate(self.positional) if k == NUMBER]
        names = [name for name, k in self.keyword.items() if k == NUMBER]
        self.numbers = (tuple(numbers), tuple(names)) if len(numbers) + len(names) > 1 else None


def plan_of(func) -> OpPlan:
    try:
        return func._xlanb_plan
    except AttributeError:
        p = func._xlanb_plan = OpPlan(func)
        return p


def cpu_input(t: torch.Tensor) -> Node:
    """A CPU tensor used by an xla op: uploaded once, as a graph input."""
    return data_node(upload(t), meta_of(t))


def _convert(x, kind, plan):
    t = type(x)
    if t is LazyTensor:
        return value(x)
    if kind == TENSOR or kind == NUMBER or kind == OTHER:
        if isinstance(x, torch.Tensor):
            if x.dim() and plan is not None:
                check_device(plan, x)
            return cpu_input(x)
        if kind == OTHER:
            return tuple(x) if t is list else x
        return lift(x)
    if kind == TENSORS:
        return tuple(_convert(y, TENSOR, plan) for y in x)
    if kind == NUMBERS:
        return tuple(lift(y) for y in x)
    if kind == EXPONENT:
        return x if kept_exponent(x) else _convert(x, NUMBER, plan)
    return x


# As on CUDA: indices may be CPU tensors; other ops take CPU tensors of 0 dims only (as numbers).
_TAKE_CPU_TENSORS = {"aten.index.Tensor", "aten.index_put.default", "aten.index_put_.default",
                     "aten._index_put_impl_.default", "aten._unsafe_index.Tensor", "aten._unsafe_index_put.default"}


def check_device(plan: OpPlan, x: torch.Tensor) -> None:
    """An op on xla tensors refuses a CPU tensor with dimensions, as torch refuses mixing CUDA and
    CPU (0-dim tensors are numbers; CPU index tensors may index)."""
    if plan.name not in _TAKE_CPU_TENSORS:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, "
            f"{_rt.device} and {x.device}! ({plan.name} got a {x.device} tensor of shape {list(x.shape)}: "
            f"move it with .to('{_rt.device}'); a 0-dim CPU tensor or a Python number may stay)")


def to_node_args(plan: OpPlan, args, kwargs, cpu_inputs: bool = False):
    """Node arguments for `args`/`kwargs`; CPU tensors with dimensions are refused unless
    `cpu_inputs` (tests that record ops on CPU tensors: each is uploaded as a graph input)."""
    kinds = plan.positional
    check = None if cpu_inputs else plan
    nargs = tuple(_convert(a, kinds[i] if i < len(kinds) else OTHER, check) for i, a in enumerate(args))
    if not kwargs:
        return nargs, None
    keyword = plan.keyword
    # a generator is no constant of the graph: its draw becomes the op's key (rng.take_key)
    nkwargs = {k: None if k == "generator" else _convert(v, keyword.get(k, OTHER), check) for k, v in kwargs.items()}
    return nargs, (nkwargs or None)


def meta_key(x):
    t = type(x)
    if t is Node:
        return x.meta
    if t is Scalar:
        return scalar_class(x.value)
    if t is tuple:
        return tuple(meta_key(y) for y in x)
    if t is dict:
        return tuple((k, meta_key(v)) for k, v in x.items())
    if t is float or t is int or t is bool:
        return (t, "nan") if x != x else (t, x)   # 1 == 1.0 == True, but not to torch
    return x


def _order(numbers: tuple, nargs: tuple, nkwargs) -> tuple:
    """How an op's lifted numbers compare, pair by pair (-1, 0, 1): part of the meta cache's key."""
    positions, names = numbers
    values = [a.value for a in (nargs[i] for i in positions if i < len(nargs)) if type(a) is Scalar]
    if nkwargs:
        values += [a.value for a in (nkwargs.get(name) for name in names) if type(a) is Scalar]
    return tuple((a > b) - (a < b) for i, a in enumerate(values) for b in values[i + 1:])


def _to_meta(x):
    t = type(x)
    if t is Node:
        return x.meta.empty()
    if t is Scalar:
        return x.value
    if t is tuple:
        return [_to_meta(y) for y in x]
    if t is torch.device:
        return _META_DEVICE
    return x


def follows_default_dtype(nargs) -> bool:
    """Whether the result dtype of an op on `nargs` may be torch's default dtype: an integer or
    bool tensor meets a float (`u8 + 5.5`, `sqrt(i64)`), or a number is complex. Float tensors
    keep their own dtype whatever the default."""
    for a in nargs:
        t = type(a)
        if t is Node:
            if not (a.meta.dtype.is_floating_point or a.meta.dtype.is_complex):
                return True
        elif t is complex or (t is Scalar and type(a.value) is complex):
            return True
    return False


def infer_meta(func, plan: OpPlan, nargs, nkwargs, on_miss=None, rewritten: bool = False):
    """Output Meta (or tuple of Meta/None) of func on these node arguments (and the default
    dtype, which decides the result dtype of integer inputs promoted to float). `on_miss(margs,
    mkwargs)`, run when the meta kernel runs, makes the caller's own checks. The warnings its
    kernels raise are given as CPU gives them, at every call (`give_warnings`), unless the op is xlanb's
    rewriting of the user's (`rewritten`: the functional form of an in-place op, whose warnings the
    in-place op gave)."""
    key = (meta_key(nargs), meta_key(nkwargs) if nkwargs else None, _default_dtype())
    if plan.numbers is not None:
        key += (_order(plan.numbers, nargs, nkwargs),)
    try:
        meta = plan.meta_cache[key]
    except KeyError:
        pass
    except TypeError:          # an unhashable constant: infer without the cache
        key = None
    else:
        if plan.warns:
            given = plan.warns.get(key)
            if given is not None:
                give_warnings(given)
        return meta
    outer, _rt.kernel_warnings = _rt.kernel_warnings, []
    try:
        meta = _infer_on_miss(func, plan, nargs, nkwargs, on_miss)
    finally:
        found, _rt.kernel_warnings = _rt.kernel_warnings, outer
        if found and not rewritten:
            found = _each_text_once(found)
            give_warnings(found)
    if key is not None:
        plan.meta_cache[key] = meta
        if found and not rewritten:
            if len(plan.warns) > 1000:
                plan.warns.clear()
            plan.warns[key] = found
    return meta


def _each_text_once(found: list) -> tuple:
    """The warnings an op's meta kernel and CPU probes raised (random_'s bound warning comes from both), each text once."""
    seen: set = set()
    kept = []
    for w in found:
        text = (w.category, str(w.message))
        if text not in seen:
            seen.add(text)
            kept.append(w.message)
    return tuple(kept)


def give_warnings(messages: tuple) -> None:
    """Gives the warnings of an op's signature at the innermost frame outside xlanb, where torch shows a
    kernel's warning (the line that called the op), at each call: the kernels run on the signature's
    first call only (the meta cache), their warnings are kept and given again (plan.warns), as CPU's
    kernel warns at every call. Their C++ warnings are caught by lower/fallback.with_warnings: under
    the user's op they would wait for it to return, past any filter, probes' included. Python's filters
    apply at the user's line (the default one shows a warning once per line). A TORCH_WARN_ONCE is
    given at each call too (CPU: once per process)."""
    level = outside_level()
    for message in messages:
        warnings.warn(message, stacklevel=level)


def _infer_on_miss(func, plan: OpPlan, nargs, nkwargs, on_miss):
    """infer_meta on a signature not in the meta cache."""
    margs = tuple(_to_meta(a) for a in nargs)
    mkwargs = {k: _to_meta(v) for k, v in nkwargs.items()} if nkwargs else {}
    check_dtype_arguments(plan.name, margs, mkwargs)
    if func._schema.is_mutable and not has_out(func):
        # an in-place op's meta kernel may be a ref with out= rules, which resizes the meta self it writes
        # to the broadcast shape (atan2_, pow_, clamp_); CPU refuses that. CPU is asked on arguments as given
        probe = (tuple(_to_meta(a) for a in nargs), {k: _to_meta(v) for k, v in nkwargs.items()} if nkwargs else {})
    else:
        probe = None
    try:
        out = _meta_kernel(func, margs, mkwargs, quiet=probe is not None or has_out(func))
    except NotImplementedError as e:
        out = _backward_meta(func, plan, margs)
        if out is None:
            out = _meta_from_rule(plan, margs, mkwargs)
        if out is None:
            if not has_out(func):                  # out= ops: their callers check the out= tensors on CPU
                check_once(func, margs, mkwargs)   # a meta kernel's refusal that CPU makes too (polar of int64);
                                                   # once per signature: an op with no meta kernel misses every call
            raise NoMetaKernel(str(e)) from e
    except RuntimeError as e:
        text = str(e)
        if "meta tensor" in text or "data-dependent" in text:   # needs the data, not a shape error
            raise NoMetaKernel(text) from e
        out = cpu_answer(func, margs, mkwargs)     # CPU's error, or CPU's result where CPU accepts
        if out is None:
            raise
        out = tuple(o.to("meta") if isinstance(o, torch.Tensor) else o for o in out) \
            if isinstance(out, (tuple, list)) else out.to("meta") if isinstance(out, torch.Tensor) else out
    except (IndexError, ValueError, TypeError, AttributeError, AssertionError):   # a meta kernel's Python error: CPU's type wins
        # where CPU has no kernel (the fused LSTM cell without biases, whose meta kernel reads a None
        # bias's device), no CPU words exist: the rule answers
        out = None if runs_on_cpu(func) else _meta_from_rule(plan, margs, mkwargs)
        if out is None:
            raise_cpu_error(func, margs, mkwargs)
            raise
    check_representable(plan.name, out, x64=False)
    if probe is not None:
        margs, mkwargs = probe
    tensors = [a for a in margs if isinstance(a, torch.Tensor)]
    if any(a.dim() > 64 for a in tensors):        # CPU's kernels take up to 64 dims; meta kernels do not check
        raise_cpu_error(func, margs, mkwargs)
    if tensors and all(a.numel() == 0 and a.dtype in PROBED for a in tensors):
        raise_cpu_verdict_on_empty(func, margs, mkwargs)
    if on_miss is not None:
        on_miss(margs, mkwargs)
    if _POINTWISE in func.tags:
        if all(a.dtype in PROBED for a in tensors):
            out = _pointwise_on_cpu(func, margs, mkwargs, out, sum(a.numel() for a in tensors) <= 4096)
    else:
        out = with_cpu_dtypes(func, out, cpu_verdict(func, margs, mkwargs, out))
    fix = _CPU_META.get(plan.name)
    if fix is not None:
        out = fix(func, margs, mkwargs, out)
    check_x64(plan.name, out)                      # after CPU's verdict: its error first
    return _out_meta(out)


RESIZED = "An output with one or more elements was resized"     # the start of torch's warning


def _meta_kernel(func, margs, mkwargs, quiet: bool):
    """func's meta kernel; quiet: without the warning of a meta kernel that resizes the tensor it
    writes, which runs only on the meta cache's miss: an out= op's resize_out words torch's warning
    on every call, and CPU refuses an in-place op's resized self (the probe on the arguments as
    given says so)."""
    out, caught = with_warnings(func, *margs, **mkwargs)
    _rt.kernel_warnings.extend(w for w in caught if not (quiet and str(w.message).startswith(RESIZED)))
    return out


def _nansum_meta(func, margs, mkwargs, out):
    """nansum(x, dim=[]) reduces every dim on CPU; torch's meta kernel reduces none."""
    dim = margs[1] if len(margs) > 1 else mkwargs.get("dim")
    if dim is None or len(dim) != 0:
        return out
    keepdim = margs[2] if len(margs) > 2 else mkwargs.get("keepdim", False)
    return func(margs[0], None, keepdim, **{k: v for k, v in mkwargs.items() if k not in ("dim", "keepdim")})


def _grad_dtype_meta(func, margs, mkwargs, out):
    """CPU's softmax backward returns grad_output's dtype; the meta kernel (CUDA's rule) input_dtype's."""
    return out.to(margs[0].dtype)


def _cpu_checks_meta(func, margs, mkwargs, out):
    """Ops whose meta kernel skips argument checks CPU makes (searchsorted's side and sorter dtype,
    bucketize's boundaries rank): run once per signature on CPU zeros, CPU's error raised."""
    raise_cpu_error(func, margs, mkwargs)
    return out


def _select_meta(func, margs, mkwargs, out):
    """index_select/gather of a size-0 dim: CPU's out-of-bounds error (the meta kernel has none)."""
    check_select_from_empty_dim(func._schema.name.split("::")[1], margs[0], margs[1], margs[2])
    return out


# Ops whose meta kernel disagrees with torch's CPU kernel, which is the reference.
_CPU_META = {
    "aten.index_select.default": _select_meta,
    "aten.gather.default": _select_meta,
    "aten.nansum.default": _nansum_meta,
    "aten.searchsorted.Tensor": _cpu_checks_meta,
    "aten.searchsorted.Scalar": _cpu_checks_meta,
    "aten.bucketize.Tensor": _cpu_checks_meta,
    "aten.bucketize.Scalar": _cpu_checks_meta,
    "aten._softmax_backward_data.default": _grad_dtype_meta,
    "aten._log_softmax_backward_data.default": _grad_dtype_meta,
}


def _backward_meta(func, plan: OpPlan, margs):
    """A backward op without a meta kernel (multi_margin_loss_backward, ...) whose rule exists:
    its one result is the gradient of `self`/`input`, of that tensor's shape and dtype."""
    schema = func._schema
    if plan.rule is None or not schema.name.endswith("_backward") or len(schema.returns) != 1 \
            or str(schema.returns[0].type) != "Tensor":
        return None
    for i, a in enumerate(schema.arguments):
        if a.name in ("self", "input") and i < len(margs) and isinstance(margs[i], torch.Tensor):
            return torch.empty_like(margs[i])
    return None


def _meta_from_rule(plan: OpPlan, margs, mkwargs):
    """An op with a rule and no meta kernel (`_thnn_fused_gru_cell`): its outputs' shapes and dtypes
    from the rule itself, traced abstractly (jax.eval_shape; None for an output it does not compute).
    Rules that promote their operands or draw random numbers are left to their meta kernels."""
    rule = plan.rule
    if rule is None or rule.promote or rule.rng:
        return None

    def abstract(x):
        if isinstance(x, torch.Tensor):
            return jax.ShapeDtypeStruct(tuple(x.shape), to_jax_dtype(x.dtype))
        return [abstract(y) for y in x] if isinstance(x, list) else x
    traced = [isinstance(a, (torch.Tensor, list)) for a in margs]

    def call(*arrays):
        given = iter(arrays)
        return rule.fn(*[next(given) if t else a for a, t in zip(margs, traced)], **mkwargs)
    with jax.enable_x64(True):
        shapes = jax.eval_shape(call, *[abstract(a) for a, t in zip(margs, traced) if t])

    def meta(s):
        return None if s is None else torch.empty(s.shape, dtype=to_torch_dtype(s.dtype), device="meta")
    return tuple(meta(s) for s in shapes) if isinstance(shapes, (tuple, list)) else meta(shapes)


_POINTWISE = torch.Tag.pointwise
_PROBE_ERRORS = (RuntimeError, NotImplementedError, TypeError)


def _one(x, laid_out: bool):
    """A CPU tensor of ones for a meta tensor: of its shape and strides, or of one element."""
    if isinstance(x, torch.Tensor):
        if laid_out:            # as_strided over ones: expanded (stride-0) layouts need no fill
            extent = 1 + sum((n - 1) * st for n, st in zip(x.shape, x.stride()) if n > 0)
            return torch.ones(extent, dtype=x.dtype).as_strided(x.shape, x.stride())
        return torch.ones((1,) * x.dim(), dtype=x.dtype)
    if isinstance(x, list):
        return [_one(y, laid_out) for y in x]
    if isinstance(x, torch.device):
        return torch.device("cpu")
    return x


def _pointwise_on_cpu(func, margs, mkwargs, out, small: bool):
    """Pointwise meta kernels skip the dtype checks that CPU kernels make (`-` on bool, `&` on
    float, abs of bool), and for some layouts pick other output strides than CPU's
    TensorIterator (size-1 dims with odd strides). The op runs once per new signature on CPU
    ones: of the real shapes and strides when the inputs are small (CPU's output layout is then
    taken), else of one element (any shape broadcasts with them). CPU's error is raised, and CPU's
    result dtype taken where the meta kernel's differs (prims.signbit)."""
    try:
        with torch.no_grad(), host_dispatch():     # the probes made at top-level state too
            cpu = probe_on_cpu(func, *[_one(a, small) for a in margs], **{k: _one(v, small) for k, v in mkwargs.items()})
    except _PROBE_ERRORS as cpu_error:
        if not is_verdict(func, cpu_error, margs, mkwargs):
            return out
        raise type(cpu_error)(str(cpu_error)) from None
    if (small and isinstance(out, torch.Tensor) and isinstance(cpu, torch.Tensor) and cpu.shape == out.shape
            and cpu.stride() != out.stride() and not func._schema.is_mutable):
        return torch.empty_strided(cpu.shape, cpu.stride(), dtype=cpu.dtype, device="meta")
    return with_cpu_dtypes(func, out, cpu)


def _out_meta(out):
    """Meta, or a tuple of Meta (None for an output the op did not compute, e.g. masked grads).

    An op that returns nothing (in-place foreach ops, checks) gets the empty tuple."""
    if out is None:
        return ()
    if isinstance(out, torch.Tensor):
        return meta_of(out)
    if isinstance(out, (tuple, list)) and all(o is None or isinstance(o, torch.Tensor) for o in out):
        return tuple(None if o is None else meta_of(o) for o in out)
    raise NoMetaKernel(f"output of type {type(out).__name__} needs the data")


def record_node(func, args, kwargs, cpu_inputs: bool = False) -> Node:
    """Records func as one node (multi-output ops: a node with a tuple meta)."""
    plan = plan_of(func)
    nargs, nkwargs = to_node_args(plan, args, kwargs, cpu_inputs)
    meta = infer_meta(func, plan, nargs, nkwargs)
    if plan.rule is not None and plan.rule.rng:
        nargs = rng.keyed(nargs, args, kwargs)
    loc = user_location() if _rt.track_locations else None
    return make_node(func, plan.name, nargs, nkwargs, meta, loc)


def outputs_of(node: Node):
    """Node -> the tensors torch expects back (one, a tuple, or a list)."""
    meta = node.meta
    if isinstance(meta, Meta):
        return new_tensor(node, meta)
    if meta == ():
        return None
    outs = [None if m is None else new_tensor(getitem(node, i), m) for i, m in enumerate(meta)]
    return outs if plan_of(node.op).returns_list else tuple(outs)


def output_nodes(node: Node) -> tuple:
    """Node -> one node per output (None where the op computes nothing)."""
    if isinstance(node.meta, Meta):
        return (node,)
    return tuple(None if m is None else getitem(node, i) for i, m in enumerate(node.meta))


def getitem(node: Node, i: int) -> Node:
    return make_node("xlanb.getitem", "xlanb.getitem", (node, i), None, node.meta[i], node.location)


def record(func, args, kwargs):
    return outputs_of(record_node(func, args, kwargs))
