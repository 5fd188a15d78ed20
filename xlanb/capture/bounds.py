"""Values CPU refuses raise CPU's error: indices out of range, never a clamped value, and the other
checks torch's CPU kernels make on values (below).

XLA clamps an out-of-range gather index and drops an out-of-range scatter; CPU raises. Every op
that reads or writes through index values (x[i], index_select, gather, scatter, take,
embedding, embedding_bag, index_add/copy/fill/reduce, index_put) or takes class indices (nll_loss
and cross_entropy's targets, but ignore_index; multi_margin_loss's) is checked:

- at the op, when the index's values cost nothing to read (a CPU tensor, or computed xla data in
  host memory): CPU's own error is raised, found by running the op on CPU with the real index
  and zeros for the data;
- otherwise (an index computed in the pending graph, or resident on an accelerator) the graph
  computes the check itself, one small node (any value out of range, the first such value and its
  position), and the error is raised when a value is next read (`.item()`, `.cpu()`, `print`,
  `xlanb.sync(wait=True)`) or by a sync that finds the check done, or at the op itself in eager
  mode. An XLA program cannot raise
  mid-way, so this is as close to the op as a lazy device gets (CUDA reports its device-side
  asserts the same way). The tensors that op computed hold clamped values.

The same two ways check the other values CPU's kernels refuse, each error worded by CPU's own kernel
run on a probe holding the bad value (`cpu_raises`):
- integer division by zero (div with a rounding mode, floor_divide, remainder, fmod, computed in an
  integer dtype): CPU raises `RuntimeError: ZeroDivisionError`, XLA gives -1 or the dividend; a
  Python number divisor is checked at the op;
- float arguments with a range (`_FLOAT_RANGES`: binary_cross_entropy's input, bernoulli and
  multinomial probabilities, normal's std, poisson's rates; quantile's q), a float check node;
- counts (masked_scatter's mask against its source), linalg's `info` (`_linalg_check_errors`), and
  `_assert_async`, torch's own check off the CPU;
- one_hot and quantile, whose values torch checks on CPU only, are registered above autograd for xla
  (capture/factories.py): checked here, then torch's composite runs.

Ops whose other integer arguments' values decide whether CPU raises (segment_reduce's lengths
must sum to the data's size) are checked the first way only, when those values are host-readable;
otherwise the op, a CPU fallback, raises torch's error when its program runs (runtime/executor.py).

A replayed call does not run the body, so it checks nothing; its traced calls check at the op
only (a check left in the graph would be a tensor the call made and kept).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from xlanb.capture.frames import user_location
from xlanb.capture.nodes import make_node
from xlanb.capture.tensor import LazyTensor, new_tensor, value
from xlanb.capture.verdict import raise_cpu_error
from xlanb.ir.node import intern_meta
from xlanb.lower.fallback import host_dispatch, probe_on_cpu
from xlanb.state import runtime_state

_rt = runtime_state()
aten = torch.ops.aten

_CPU_ERRORS = (RuntimeError, IndexError, ValueError, TypeError)
_INTEGER = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
_MAX_READ = 4096            # index elements read on the host at the op
_MAX_PROBE = 1 << 20        # data elements for which CPU's own message is asked for

# op -> (the dim argument's position, or None: the flat element count; -1: the last dim; the index
#        argument's position or keyword; whether negative values count from the end)
_OPS = {
    "index_select": (1, 2, False), "gather": (1, 2, False), "scatter": (1, 2, False),
    "scatter_": (1, 2, False), "scatter_add": (1, 2, False), "scatter_add_": (1, 2, False),
    "scatter_reduce": (1, 2, False), "scatter_reduce_": (1, 2, False),
    "index_add": (1, 2, False), "index_add_": (1, 2, False), "index_copy": (1, 2, False),
    "index_copy_": (1, 2, False), "index_fill": (1, 2, True), "index_fill_": (1, 2, True),
    "take": (None, 1, True), "embedding": (0, 1, False),
    "searchsorted": (-1, "sorter", False),       # sorter indexes sorted_sequence's last dim
    "index_reduce": (1, 2, False), "index_reduce_": (1, 2, False),
    "_embedding_bag": (0, 1, False), "_embedding_bag_forward_only": (0, 1, False),
    "multi_margin_loss": (-1, 1, False),
    "nll_loss_forward": (1, 1, False), "nll_loss2d_forward": (1, 1, False),
}
_WEIGHT_ROWS = frozenset({"embedding", "_embedding_bag", "_embedding_bag_forward_only"})     # index rows of args[0]
_CLASSES = frozenset({"nll_loss_forward", "nll_loss2d_forward"})     # class dim 1 (0 for 1-d input); ignore_index


def known_values(i) -> np.ndarray | None:
    """An index's values when reading them costs no device work: a CPU tensor, or a computed
    xla tensor whose buffer is in host memory (the CPU platform). A small buffer still in flight
    there (an upload JAX copies asynchronously) is waited for: which way an index is checked
    decides the graph, and must not depend on the timing of a copy (a recompile would)."""
    if type(i) is not LazyTensor:
        return i.numpy() if i.device.type == "cpu" and i.numel() <= _MAX_READ * 256 else None
    node = i._node
    if node is None or node.buffer is None or i.numel() > _MAX_READ:
        return None
    buf = node.buffer
    if not buf.is_fully_addressable or any(dev.platform != "cpu" for dev in buf.devices()):
        return None                 # on an accelerator, or partly in another process: checked in the graph
    return np.asarray(buf)          # waits for it when it is not ready


def check(i, lo: int, hi: int, errors, inside: bool = False, ignore: int | None = None, what=None) -> None:
    """Index tensor `i` must hold values in [lo, hi) (with `inside`, none there: a divisor, [0, 1)),
    or `ignore`. `what`: (what `i` is, what the op's outputs hold then) for a deferred check's note.
    `errors()` gives `error_for`, where `error_for(v, at)` is the exception CPU raises when
    v, at flat position `at`, is the first value out of range (asked for only when needed). Raised now,
    or left to the graph (module docstring)."""
    if (i.dtype not in _INTEGER and not (inside and i.dtype == torch.bool)) or i.numel() == 0:
        return
    buffer = i._node.buffer if type(i) is LazyTensor and i._node is not None else None
    passed = (id(buffer), lo, hi, inside, ignore)
    if buffer is not None and _rt.passed_checks.get(passed) is buffer:      # a step's targets, checked last step
        return
    values = known_values(i)
    if values is not None:
        flat = values.reshape(-1)
        bad = (flat >= lo) & (flat < hi) if inside else (flat < lo) | (flat >= hi)
        if ignore is not None:
            bad &= flat != ignore
        if bad.any():
            at = int(bad.argmax())
            error = errors()(int(flat[at]), at)
            if error is not None:
                raise error
        elif buffer is not None:        # a buffer's values never change: it passes the same check again
            if len(_rt.passed_checks) >= 256:       # at most 256 small buffers (known_values reads <= _MAX_READ)
                _rt.passed_checks.clear()
            _rt.passed_checks[passed] = buffer
        return
    if type(i) is LazyTensor:
        what = what or (("divisor", "XLA's quotients (-1 or the dividend)") if inside else ("index", "clamped values"))
        _defer(errors, "xlanb.bounds_check", (value(i), lo, hi, inside, ignore), torch.int64, *what)


def check_floats(x, lo: float, hi: float, errors) -> None:
    """Float tensor `x` must hold values in [lo, hi] (NaN is outside). `errors()` gives `error_for`,
    where `error_for(v, at)` is CPU's exception for value v at flat position `at`, or None when CPU
    takes it (CPU's own kernel has the last word: the range only says when to ask it)."""
    if not x.is_floating_point() or x.numel() == 0:
        return
    values = known_values(x)
    if values is not None:
        flat = values.reshape(-1)
        bad = ~((flat >= lo) & (flat <= hi))
        if bad.any():
            at = int(bad.argmax())
            error = errors()(float(flat[at]), at)
            if error is not None:
                raise error
        return
    if type(x) is LazyTensor:
        _defer(errors, "xlanb.range_check", (value(x), lo, hi), torch.float64, "values", "what XLA computed")


@dataclasses.dataclass(eq=False)
class DeviceCheck:
    """A check computed in the graph: `result` is [any value out of range, the first such value, its
    flat position]. Equal only to itself (comparing the tensors would ask a tensor for a bool)."""
    result: LazyTensor
    error_for: object
    where: tuple | None
    what: str = "index"                 # what the op's checked argument is, for the error's note
    held: str = "clamped values"        # what the tensors that op computed hold


def _defer(errors, op: str, args: tuple, dtype: torch.dtype, what: str, held: str) -> None:
    scope = _rt.compile_scope
    if scope is not None and not scope.device_checks:
        return
    error_for = errors()
    node = make_node(op, op, args, None, intern_meta((3,), dtype))
    _rt.device_checks.append(DeviceCheck(new_tensor(node, node.meta), error_for, user_location(), what, held))


def raise_failed(ready_only: bool = False) -> None:
    """Raises the first failed device check whose graph has run (each is examined once); with
    ready_only, only those whose result is ready (a sync that does not wait examines what it can,
    so a loop that never reads a value keeps no growing list)."""
    checks = _rt.device_checks
    if not checks:
        return
    done = [c for c in checks if c.result._node is not None and c.result._node.buffer is not None
            and (not ready_only or c.result._node.buffer.is_ready())]
    if not done:
        return
    for c in done:
        checks.remove(c)
    for c in done:
        buf = c.result._node.buffer
        if not buf.is_fully_addressable:        # over several processes: replicated, each holds the answer
            buf = buf.addressable_data(0)
        flag, v, at = np.asarray(buf).tolist()
        error = c.error_for(v, int(at)) if flag else None
        if error is not None:
            where = f" at {c.where[0]}:{c.where[1]}" if c.where else ""
            error.add_note(f"xlanb: raised by the op{where}, whose {c.what} was computed on the device: an XLA program "
                           "cannot raise mid-way, so the check ran in the graph and is raised at this value read; "
                           f"the tensors that op computed hold {c.held}")
            raise error


def pending_checks() -> list:
    """Nodes of device checks not computed yet: a value read outputs them too, so a check is
    raised at the first value read after its op."""
    return [n for n in (c.result._node for c in _rt.device_checks) if n is not None and n.buffer is None]


# --- the ops -----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Zeros:
    """A tensor argument of the CPU probe: zeros of this shape and dtype (the data's values never
    decide whether an index is in range)."""
    shape: tuple
    dtype: torch.dtype


def probe_spec(args, kwargs):
    """`args` and `kwargs` with tensors replaced by their shapes and dtypes (nothing kept alive),
    or None when the data is too large to probe on CPU."""
    tensors = [a for a in (*args, *(kwargs or {}).values()) if isinstance(a, torch.Tensor)]
    if sum(t.numel() for t in tensors) > _MAX_PROBE:
        return None

    def spec(x):
        if isinstance(x, torch.Tensor):
            return _Zeros(tuple(x.shape), x.dtype)
        return torch.device("cpu") if isinstance(x, torch.device) else x
    return tuple(spec(a) for a in args), {k: spec(v) for k, v in (kwargs or {}).items()}


def cpu_error(func, spec, index_pos: int, index_values: np.ndarray, fallback: BaseException):
    """The exception CPU raises for `func` with this index and zeros for the data; `fallback`
    when the data was too large to probe (spec None) or CPU does not raise."""
    if spec is None:
        return fallback
    args, kwargs = spec

    def cpu(x, pos):
        if pos == index_pos:
            return torch.from_numpy(np.array(index_values)).to(x.dtype).reshape(x.shape)   # a writable copy
        return torch.zeros(x.shape, dtype=x.dtype) if type(x) is _Zeros else x
    error = cpu_raises(func, lambda: ([cpu(a, p) for p, a in enumerate(args)], {k: cpu(v, k) for k, v in kwargs.items()}))
    return fallback if error is None else error


def cpu_raises(func, make) -> BaseException | None:
    """CPU's exception for `func` on the arguments `make()` returns, (args, kwargs), made inside the
    probe's state (no grad, top-level dispatch): a fresh exception of its type and words, or None when
    CPU takes them."""
    try:
        with torch.no_grad(), host_dispatch():
            args, kwargs = make()
            probe_on_cpu(func, *args, **kwargs)
    except _CPU_ERRORS as e:
        return type(e)(str(e))
    return None


def _one_value(shape: tuple, dtype: torch.dtype, v, at: int) -> torch.Tensor:
    """Zeros of `shape` with `v` at flat position `at`: a probe holding one value out of range."""
    probe = torch.zeros(shape, dtype=dtype)
    if probe.numel():
        probe.view(-1)[at] = v
    return probe


# ops whose other integer arguments' values decide whether CPU raises (segment lengths must sum to
# the data's size): when those values are host-readable, the op runs on CPU with them and zeros for
# the data, and CPU's error, if any, is raised at the op
_VALUE_CHECKED = {"segment_reduce": ("lengths", "offsets")}


def _value_checked(keys: tuple):
    def wrap(inner):
        def h(func, args, kwargs):
            kwargs = kwargs or {}
            if not kwargs.get("unsafe", False):
                for key in keys:
                    t = kwargs.get(key)
                    values = known_values(t) if isinstance(t, torch.Tensor) else None
                    if values is not None:
                        error = cpu_error(func, probe_spec(args, kwargs), key, values, None)
                        if error is not None:
                            raise error
            return inner(func, args, kwargs)
        return h
    return wrap


# integer division ops (in-place and out= forms share the name): CPU raises when a divisor is 0
_DIVISIONS = frozenset({"div", "div_", "floor_divide", "floor_divide_", "remainder", "remainder_", "fmod", "fmod_"})


def _divisor_checked(inner):
    def h(func, args, kwargs):
        dtype = _integer_division(func, args, kwargs or {}) if len(args) > 1 else None
        if dtype is not None:
            d = args[1]
            if isinstance(d, torch.Tensor):
                def errors():
                    spec, shape = probe_spec(args, kwargs), tuple(d.shape)

                    def error_for(v, at):
                        fallback = RuntimeError("ZeroDivisionError")
                        return cpu_error(func, spec, 1, np.zeros(shape, dtype=np.int64), fallback)
                    return error_for
                check(d, 0, 1, errors, inside=True)
            elif d % (1 << torch.iinfo(dtype).bits) == 0:    # 0 in the division's dtype (256 in int8: CPU wraps it)
                raise_cpu_error(func, args, kwargs or {})
        return inner(func, args, kwargs)
    return h


def _integer_division(func, args, kwargs) -> torch.dtype | None:
    """The integer dtype the op divides in, None if it does not: true division (div without a rounding
    mode) never does."""
    if func._schema.name in ("aten::div", "aten::div_") and kwargs.get("rounding_mode") is None:
        return None
    x, d = args[0], args[1]
    if not isinstance(x, (torch.Tensor, int)) or not isinstance(d, (torch.Tensor, int)):
        return None         # a float or complex number: a float computation
    dtype = torch.result_type(x, d)
    return None if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool else dtype


# ops whose float argument CPU checks against a range: op name -> {overload: (argument position,
# lo, hi, a value inside the range for the probe's other elements)}. A Python number there is
# checked at the op; a tensor as an index is
_FLOAT_RANGES = {
    "binary_cross_entropy": {"default": (0, 0.0, 1.0, 0.5), "out": (0, 0.0, 1.0, 0.5)},
    "bernoulli": {"default": (0, 0.0, 1.0, 0.5), "p": (1, 0.0, 1.0, 0.5), "out": (0, 0.0, 1.0, 0.5)},
    "bernoulli_": {"Tensor": (1, 0.0, 1.0, 0.5), "float": (1, 0.0, 1.0, 0.5)},
    "multinomial": {"default": (0, 0.0, float("inf"), 1.0), "out": (0, 0.0, float("inf"), 1.0)},
    "normal": {"Tensor_Tensor": (1, 0.0, float("inf"), 1.0), "float_Tensor": (1, 0.0, float("inf"), 1.0),
               "Tensor_float": (1, 0.0, float("inf"), 1.0), "Tensor_Tensor_out": (1, 0.0, float("inf"), 1.0),
               "float_Tensor_out": (1, 0.0, float("inf"), 1.0), "Tensor_float_out": (1, 0.0, float("inf"), 1.0)},
    "normal_": {"default": (2, 0.0, float("inf"), 1.0)},
    "poisson": {"default": (0, 0.0, float("inf"), 1.0)},
}


def _float_ranged(overloads: dict):
    def wrap(inner):
        def h(func, args, kwargs):
            spec = overloads.get(func._overloadname)
            if spec is not None:
                pos, lo, hi, fill = spec
                v = args[pos] if len(args) > pos else (kwargs or {}).get(func._schema.arguments[pos].name)
                if isinstance(v, torch.Tensor):
                    check_floats(v, lo, hi, lambda: _error_for_value(func, args, kwargs, pos, v, fill))
                elif isinstance(v, (int, float)) and not lo <= v <= hi:
                    raise_cpu_error(func, args, kwargs or {})
            return inner(func, args, kwargs)
        return h
    return wrap


def _error_for_value(func, args, kwargs, pos: int, v, fill: float):
    """error_for(value, at): CPU's error for the op with `value` at flat position `at` of argument `pos`
    (the rest `fill`), or None when CPU takes it."""
    spec, shape = probe_spec(args, kwargs), tuple(v.shape)

    def error_for(bad, at):
        if spec is None:
            return None
        probe = np.full(shape, fill, dtype=np.float64)
        probe.reshape(-1)[at] = bad
        return cpu_error(func, spec, pos, probe, None)
    return error_for


def _source_counted(inner):
    """masked_scatter: CPU refuses a mask with more ones than the source has elements; the count is
    checked as an index is (at most the source's size)."""
    def h(func, args, kwargs):
        if len(args) > 2 and isinstance(args[1], torch.Tensor) and isinstance(args[2], torch.Tensor):
            mask, source = args[1], args[2]
            try:
                shape = torch.broadcast_shapes(args[0].shape, mask.shape)     # the ones of the broadcast mask count
            except RuntimeError:
                shape = None                                                  # the op raises CPU's error itself
            if mask.dtype == torch.bool and mask.numel() and shape is not None:
                count = aten.sum.default(aten.expand.default(mask, list(shape)), dtype=torch.int64)
                size = source.numel()

                def errors():
                    def error_for(v, at):
                        return cpu_raises(func, lambda: ((torch.zeros(v), torch.ones(v, dtype=torch.bool),
                                                          torch.zeros(size)), {}))
                    return error_for
                check(count, 0, size + 1, errors)
        return inner(func, args, kwargs)
    return h


def _info_checked(inner):
    """_linalg_check_errors (linalg.inv, solve, cholesky, lu_factor... call it with their `info`): CPU
    raises LinAlgError for a singular or not positive-definite input; XLA's factorization gives inf or
    NaN. `info` is checked as an index is, and CPU's own check words the error."""
    def h(func, args, kwargs):
        info = args[0]
        if isinstance(info, torch.Tensor) and info.numel():
            def errors():
                shape = tuple(info.shape)

                def error_for(v, at):
                    return cpu_raises(func, lambda: ((_one_value(shape, torch.int32, v, at), *args[1:]), kwargs or {}))
                return error_for
            check(info, 0, 1, errors, what=("factorization's info", "what XLA computed (inf or NaN)"))
        return inner(func, args, kwargs)
    return h


def one_hot(self, num_classes: int = -1):
    """aten.one_hot for xla tensors (registered above autograd: capture/factories.py). torch checks the
    class values on CPU only and leaves them to a device assert elsewhere; xla checks them as an index,
    then runs torch's own composite (its Python form, which checks no dtype: CPU's check is asked)."""
    if self.dtype != torch.int64 or (num_classes == -1 and not self.numel()):
        raise_cpu_error(aten.one_hot.default, (self, num_classes), {})
    if self.numel():
        hi = num_classes if num_classes >= 0 else 1 << 62      # -1: torch counts max + 1 itself

        def errors():
            shape = tuple(self.shape)

            def error_for(v, at):
                classes = num_classes if num_classes >= 0 else max(v + 1, 1)
                return cpu_raises(aten.one_hot.default, lambda: ((_one_value(shape, torch.int64, v, at), classes), {}))
            return error_for
        check(self, 0, hi, errors, what=("class values", "what XLA computed"))
    return aten.one_hot.default.decompose(self, num_classes)


def _asserted(inner):
    """_assert_async(t[, msg]): torch's own check of a value off the CPU (quantile's q, for one), which
    raises when t is zero; checked as an index is (at the op when t is host-readable)."""
    def h(func, args, kwargs):
        t = args[0]
        if isinstance(t, torch.Tensor) and t.numel() == 1:
            def errors():
                def error_for(v, at):
                    return cpu_raises(func, lambda: ((torch.zeros((), dtype=t.dtype), *args[1:]), {}))
                return error_for
            check(aten.ne.Scalar(t, 0), 0, 1, errors, inside=True, what=("asserted value", "what XLA computed"))
            return None
        return inner(func, args, kwargs)
    return h


def q_checked(op):
    """aten.quantile / nanquantile with a tensor q, for xla tensors (registered above autograd, as
    one_hot): torch checks q's values on CPU only; xla checks them as a range, then runs torch's
    composite."""
    def quantile(self, q, dim=None, keepdim=False, *, interpolation="linear"):
        def errors():
            return _error_for_value(op, (self, q, dim, keepdim), {"interpolation": interpolation}, 1, q, 0.5)
        check_floats(q, 0.0, 1.0, errors)
        return op.decompose(self, q, dim, keepdim, interpolation=interpolation)
    return quantile


def bounded(name: str):
    """A handler wrapper checking the index of op `name` (one of _OPS) or the divisor of an integer
    division, or None."""
    if name in _DIVISIONS:
        return _divisor_checked
    if name == "_assert_async":
        return _asserted
    if name == "_linalg_check_errors":
        return _info_checked
    if name in ("masked_scatter", "masked_scatter_"):
        return _source_counted
    if name in _FLOAT_RANGES:
        return _float_ranged(_FLOAT_RANGES[name])
    if name in _VALUE_CHECKED:
        return _value_checked(_VALUE_CHECKED[name])
    spec = _OPS.get(name)
    if spec is None:
        return None
    dim_pos, index_pos, wraps = spec

    def wrap(inner):
        def h(func, args, kwargs):
            i = (kwargs or {}).get(index_pos) if type(index_pos) is str else (
                args[index_pos] if len(args) > index_pos else None)
            if isinstance(i, torch.Tensor) and isinstance(args[0], torch.Tensor):
                x = args[0]
                if i.is_floating_point() or i.is_complex():
                    # CPU refuses a non-integer index; some meta kernels do not (embedding on torch 2.9)
                    raise_cpu_error(func, args, kwargs or {})
                ignore = None
                if dim_pos is None:
                    size, dim = x.numel(), 0
                elif name in _WEIGHT_ROWS:
                    size, dim = x.shape[0] if x.dim() else 1, 0
                elif name in _CLASSES:
                    dim = 1 if x.dim() >= 2 else 0
                    size, ignore = x.shape[dim] if x.dim() else 1, args[4] if len(args) > 4 else -100
                elif dim_pos == -1:
                    size, dim = x.shape[-1] if x.dim() else 1, max(x.dim() - 1, 0)
                else:
                    d = args[dim_pos] if len(args) > dim_pos else None
                    if type(d) is not int:           # a dimname overload: checked by the op it becomes
                        return inner(func, args, kwargs)
                    dim = d % max(x.dim(), 1)
                    size = x.shape[dim] if x.dim() else 1

                def errors():
                    spec, shape = probe_spec(args, kwargs), tuple(i.shape)

                    def error_for(v, at):
                        probe = np.zeros(shape, dtype=np.int64)      # the first value out of range, the rest 0
                        if probe.size:
                            probe.reshape(-1)[at] = v
                        fallback = IndexError(f"index {v} is out of bounds for dimension {dim} with size {size}")
                        return cpu_error(func, spec, index_pos, probe, fallback)
                    return error_for
                check(i, -size if wraps else 0, size, errors, ignore=ignore)
            return inner(func, args, kwargs)
        return h
    return wrap
