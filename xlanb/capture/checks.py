"""torch's argument checks that the meta kernels skip, made at the op with CPU's exception type
and message: a program that CPU refuses must not compute something on xla, nor fail later at
lowering (leaving its tensors unreadable).

Each check reads shapes and dtypes only, never values, so nothing is computed."""

from __future__ import annotations

import sys
import warnings

import torch

from xlanb.capture import bounds
from xlanb.capture.frames import is_library
from xlanb.capture.verdict import is_verdict, tensors_in
from xlanb.lower import float64
from xlanb.lower.dtypes import TORCH_TO_NUMPY
from xlanb.lower.fallback import host_dispatch, probe_on_cpu
from xlanb.state import runtime_state

aten = torch.ops.aten

_CPU_ERRORS = (RuntimeError, IndexError, ValueError, TypeError, NotImplementedError)


def user_stacklevel() -> int:
    """The stacklevel that makes a warning point at the innermost user frame, as torch's do."""
    f, level = sys._getframe(1), 1
    while f is not None and is_library(f.f_code.co_filename):
        f, level = f.f_back, level + 1
    return level


def is_mask(i) -> bool:
    return isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)


def check_indices(x, indices) -> None:
    """x[indices] (aten.index / index_put): masks of the indexed dims' shape, no index into a
    size-0 dim, index tensors that broadcast together; the uint8-mask deprecation warning."""
    dim = 0
    shapes = []
    for i in indices:
        if i is None:
            dim += 1
            continue
        if is_mask(i):
            if i.dtype == torch.uint8:
                warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool "
                              "instead.", UserWarning, stacklevel=user_stacklevel())
            _check_mask(x, dim, i)
            dim += i.dim()
            continue
        if dim < x.dim() and x.shape[dim] == 0 and i.numel() > 0:
            raise IndexError("index is out of bounds for dimension with size 0")
        if dim < x.dim():
            _check_bounds(i, len(shapes), x.shape[dim])       # CPU numbers the indexed dims
        shapes.append(tuple(i.shape))
        dim += 1
    try:
        torch.broadcast_shapes(*shapes)
    except RuntimeError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                         + ", ".join(str(list(s)) for s in shapes)) from None


def _check_bounds(i, dim: int, size: int) -> None:
    def errors():
        return lambda v, at: IndexError(f"index {v} is out of bounds for dimension {dim} with size {size}")
    bounds.check(i, -size, size, errors)


def _check_mask(x, dim: int, mask) -> None:
    for j in range(mask.dim()):
        if dim + j >= x.dim():
            raise IndexError(f"too many indices for tensor of dimension {x.dim()}")
        if mask.shape[j] != x.shape[dim + j]:
            raise IndexError(f"The shape of the mask {list(mask.shape)} at index {j} does not match the shape "
                             f"of the indexed tensor {list(x.shape)} at index {dim + j}")


def check_index_put(x, indices, values) -> None:
    """x[indices] = values with integer indices: the same dtype, and values that broadcast to
    the indexing result's shape (CPU's order of checks)."""
    if not isinstance(values, torch.Tensor):
        return
    if any(is_mask(i) for i in indices if i is not None):
        if values.numel() != 1:
            return              # checked once the masks are integer indices (the shape comes first)
    else:
        result = _index_shape(x, indices)
        try:
            fits = torch.broadcast_shapes(tuple(values.shape), result) == result
        except RuntimeError:
            fits = False
        if not fits:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast "
                               f"to indexing result of shape {list(result)}")
    if values.dtype != x.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_name(x.dtype)} for the destination and {_name(values.dtype)} for the source.")


_index_shapes: dict = {}     # (x's shape, index shapes and dtypes) -> x[indices].shape: a pure memo


def _index_shape(x, indices) -> tuple:
    key = (tuple(x.shape), tuple(None if i is None else (tuple(i.shape), i.dtype) for i in indices))
    shape = _index_shapes.get(key)
    if shape is None:
        meta = [None if i is None else torch.empty(i.shape, dtype=i.dtype, device="meta") for i in indices]
        shape = tuple(aten.index.Tensor(torch.empty(x.shape, dtype=x.dtype, device="meta"), meta).shape)
        if len(_index_shapes) > 10_000:
            _index_shapes.clear()
        _index_shapes[key] = shape
    return shape


def _name(dtype: torch.dtype) -> str:
    """torch's C++ name of a dtype (Float, Long, ...), as its messages print it."""
    try:
        return torch.empty(0, dtype=dtype).type().split(".")[-1].removesuffix("Tensor")
    except (RuntimeError, TypeError):
        return str(dtype).removeprefix("torch.")


def check_select_from_empty_dim(name: str, x, dim: int, index) -> None:
    """index_select/gather along a size-0 dim with a non-empty index: every index is out of
    bounds (CPU's message; no value is needed to know it)."""
    if x.dim() == 0 or index.numel() == 0 or x.shape[dim] != 0:
        return
    if name == "index_select":
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    raise RuntimeError(f"index 0 is out of bounds for dimension {dim % x.dim()} with size 0")


def raise_cpu_verdict_on_empty(func, margs, mkwargs) -> None:
    """An op whose tensors all have zero elements runs on CPU as it is (no data to read, so
    CPU's answer is exact): what CPU refuses (max over a size-0 dim) is refused here."""
    def cpu(x):
        if isinstance(x, torch.Tensor):
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype)
        if isinstance(x, (list, tuple)):
            return type(x)(cpu(y) for y in x)
        return torch.device("cpu") if isinstance(x, torch.device) else x
    try:
        with torch.no_grad(), host_dispatch():     # the probes made at top-level state too
            probe_on_cpu(func, *cpu(tuple(margs)), **{k: cpu(v) for k, v in mkwargs.items()})
    except _CPU_ERRORS as cpu_error:
        if is_verdict(func, cpu_error, margs, mkwargs):
            raise type(cpu_error)(str(cpu_error)) from None


def check_out_on_cpu(func, functional, args, kwargs, out_names) -> None:
    """An out= op on CPU zeros of its inputs' shapes (small ones only), with empty out= tensors
    (no resize warning can leak from an empty one), then with out= tensors of their own shapes
    (split_copy does not resize): when CPU refuses both but computes the functional op, the
    refusal is about the out= tensors (all(out=<float>)), and is raised with CPU's message."""
    if sum(t.numel() for t in tensors_in((args, tuple(kwargs.values())))) > 4096:
        return

    def probe(x, empty: bool):
        if isinstance(x, torch.Tensor):
            return torch.zeros(0 if empty else x.shape, dtype=x.dtype)
        if isinstance(x, (list, tuple)):
            return type(x)(probe(y, empty) for y in x)
        return torch.device("cpu") if isinstance(x, torch.device) else x
    with torch.no_grad(), host_dispatch():         # the probes made at top-level state too
        host_args = probe(tuple(args), False)
        for empty in (True, False):
            try:
                probe_on_cpu(func, *host_args, **{k: probe(v, empty and k in out_names) for k, v in kwargs.items()})
                return
            except _CPU_ERRORS as e:
                error = e
        try:
            probe_on_cpu(functional, *host_args, **{k: probe(v, False) for k, v in kwargs.items() if k not in out_names})
        except _CPU_ERRORS:
            return              # the inputs' zeros, not the out= tensors, are what CPU refused
    raise type(error)(str(error)) from None


_QUANTIZED = {torch.quint8, torch.qint8, torch.qint32, torch.quint4x2, torch.quint2x4}


def unsupported(op: str, dtype: torch.dtype | None = None, layout: torch.layout | None = None) -> str | None:
    """Why a result of this dtype or layout cannot be an xla tensor (None when it can)."""
    if layout is not None and layout != torch.strided:
        return (f"{op}: the {str(layout).removeprefix('torch.')} layout is not supported on xla (xla tensors are "
                "dense). Run this op on the CPU: move its inputs with .cpu(), or keep the tensor dense "
                "(.to_dense()) on xla")
    if dtype is None or dtype in TORCH_TO_NUMPY:
        return None
    if dtype in _QUANTIZED:
        kind = "quantized dtypes have no XLA type"
    elif dtype == torch.complex32:
        kind = "XLA has no complex32 (ComplexHalf) type; torch.complex64 is the smallest complex dtype on xla"
    else:
        kind = "XLA has no such type"
    return (f"{op}: dtype {dtype} is not supported on xla ({kind}). Run this op on the CPU: move its inputs "
            "with .cpu(), and bring the result back in a supported dtype (.to('xla', torch.float32))")


def check_representable(op: str, out, *, x64: bool = True) -> None:
    """Results of sparse layouts, quantized dtypes or complex32 are refused at the op, naming it;
    on a TPU, 64-bit floats are named at the op too (check_x64; `x64=False` leaves that to the
    caller, which asks CPU's verdict first: CPU's error for complex(float32, float64) comes before
    the TPU's complex128 refusal)."""
    for t in (out if isinstance(out, (list, tuple)) else (out,)):
        if isinstance(t, torch.Tensor):
            why = unsupported(op, t.dtype, t.layout)
            if why is not None:
                raise NotImplementedError(why)
    if x64:
        check_x64(op, out)


def check_x64(op: str, out) -> None:
    for t in (out if isinstance(out, (list, tuple)) else (out,)):
        if isinstance(t, torch.Tensor) and t.dtype in _X64_FLOATS:
            check_tpu_x64(op, t.dtype)


_X64_FLOATS = (torch.float64, torch.complex128)


def check_tpu_x64(op: str, dtype: torch.dtype) -> None:
    """TPUs have no 64-bit floating point. XLA:TPU emulates float64 in 32-bit operations (slower,
    float32's exponent range: 1e300 became inf on a TPU v5e, and some ops fail to compile: a one-time
    warning at the op) and refuses complex128 (an error at the op, instead of XLA's at compile
    time). Other platforms compute both natively."""
    if runtime_state().jax_device().platform != "tpu":
        return
    if dtype == torch.complex128:
        raise NotImplementedError(
            f"{op}: dtype torch.complex128 is not supported on a TPU (XLA:TPU has no 128-bit complex type); "
            "use torch.complex64: .to(torch.complex64)")
    warnings.warn(f"{op}: torch.float64 on a TPU is emulated by XLA in 32-bit operations: much slower than "
                  "float32, with float32's exponent range (values past about 3.4e38 become inf), and some ops "
                  "fail to compile; use float32 (.to(torch.float32)) unless you need the precision",
                  UserWarning, stacklevel=user_stacklevel())


def check_tpu_reinterpret(op: str, source: torch.dtype, target: torch.dtype, numel: int) -> None:
    """XLA:TPU's float64 is a pair of float32s, whose bits are not IEEE's: `view(dtype)` to or from
    float64 would give other bits, silently (a TPU v5e gave [0, 3] for CPU's [0, 2.125]). Refused
    at the op there, unless there are no elements; other platforms reinterpret as the CPU does."""
    if source == target or torch.float64 not in (source, target) or numel == 0 or not float64.emulated():
        return
    other = target if source == torch.float64 else source
    raise NotImplementedError(
        f"{op}: the bits of torch.float64 cannot be reinterpreted as {other} on a TPU (XLA:TPU emulates "
        "float64 as two float32s, whose bits are not IEEE's). Do it on the CPU: t.cpu().view(...), and "
        "bring the result back with .to('xla')")


def check_dtype_arguments(op: str, args, kwargs) -> None:
    """An op asked for a dtype or layout no xla tensor has (quantize_per_tensor(..., torch.quint8),
    whose meta kernel answers float32) is refused at the op, naming it."""
    for a in (*args, *kwargs.values()):
        why = (unsupported(op, dtype=a) if isinstance(a, torch.dtype)
               else unsupported(op, layout=a) if isinstance(a, torch.layout) else None)
        if why is not None:
            raise NotImplementedError(why)
