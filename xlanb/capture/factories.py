"""Factory functions on the device's backend key (PrivateUse1; torch 2.9: XLA): tensors created directly on the device.

`torch.zeros(3, device="xla")` and friends reach `empty.memory_format` (then `zero_`
arrives through __torch_dispatch__); ops without tensor arguments that cannot go that
way (arange, eye, linspace, ...) are recorded directly. `_copy_from` serves
`torch.tensor(data, device="xla")` and CPU <-> xla copies.
"""

from __future__ import annotations

import numpy as np
import torch

from xlanb.capture import bounds, realize
from xlanb.capture.checks import check_representable, unsupported
from xlanb.capture.device import refuse_other_index
from xlanb.capture.frames import user_location
from xlanb.capture.growth import lift_fill
from xlanb.capture.nodes import make_node
from xlanb.capture.realize import copy_across
from xlanb.capture.rng import take_key
from xlanb.capture.tensor import LazyTensor, new_tensor
from xlanb.capture.torch_versions import backend_key, fill_backend_gaps
from xlanb.capture.verdict import VERDICT_ELEMENTS, raise_remembered, rng_kept
from xlanb.ir.node import data_node, meta_of
from xlanb.lower.fallback import host_dispatch, probe_on_cpu
from xlanb.lower.registry import lookup
from xlanb.runtime.transfer import upload
from xlanb.state import runtime_state

_rt = runtime_state()

aten = torch.ops.aten
_library: list = []


def _record_factory(op, args: tuple, kwargs: dict):
    """A node with no operands; shape and dtype from the op on the meta device."""
    device = kwargs.get("device")
    if device is not None:
        refuse_other_index(device)
    generator = kwargs.get("generator")       # the op's key comes from it (rng.take_key); None in its place
    kwargs = {k: None if k == "generator" else v for k, v in kwargs.items() if k not in ("device", "pin_memory", "layout")}
    args = tuple(tuple(a) if isinstance(a, list) else a for a in args)
    try:
        out = op(*args, **kwargs, device="meta")
    except _CPU_ERRORS:
        _cpu_verdict(op, args, kwargs)      # CPU's words where the meta kernel words it otherwise
        raise
    if out.numel() <= VERDICT_ELEMENTS:
        _cpu_verdict(op, args, kwargs)
    else:
        _large_verdict(op, args, kwargs)
    check_representable(str(op), out)
    meta = meta_of(out)
    if _rt.eager and meta.numel <= VERDICT_ELEMENTS and _exact_on_host(op, meta):
        return new_tensor(data_node(upload(_made_on_cpu(op, args, kwargs)), meta), meta)
    if op is aten.full.default:
        args = lift_fill(args, kwargs)
    rule = lookup(str(op))
    if rule is not None and rule.rng:
        args = (take_key(generator),) + args
    mark = realize.eager_mark() if _rt.eager else 0
    loc = user_location() if _rt.track_locations else None
    t = new_tensor(make_node(op, str(op), args, kwargs or None, meta, loc), meta)
    if _rt.eager and op not in _UNSPECIFIED:
        realize.sync_eager(mark, str(op))
    return t


# In eager mode a small factory whose values any implementation gives exactly (a fill, an identity, an
# integer range) is made by torch on the CPU and uploaded: no executable per new shape (one was 20-30 ms
# of XLA's compile and 5-10 ms of lowering), CPU's own values, and an upload costs no more than a launch.
_FILLS = frozenset({aten.full.default, aten.zeros.default, aten.ones.default, aten.scalar_tensor.default,
                    aten.eye.default, aten.eye.m})
_RANGES = frozenset({aten.arange.default, aten.arange.start, aten.arange.start_step})


def _exact_on_host(op, meta) -> bool:
    return op in _FILLS or (op in _RANGES and not meta.dtype.is_floating_point and not meta.dtype.is_complex)


def _made_on_cpu(op, args: tuple, kwargs: dict) -> torch.Tensor:
    with torch.no_grad(), host_dispatch():
        return op(*args, **kwargs, device="cpu")


# Factories whose values are unspecified run nothing in eager mode: what fills the tensor next replaces
# its node (`.to("xla")`'s and `torch.tensor(..., device="xla")`'s upload, `zero_` and the other fills,
# an `out=`), and an op that reads it before that computes it inside that op's graph. Run on its own,
# each new shape cost an executable: 40-50 ms of lowering and compile for every parameter shape of a
# model moved to the device.
_UNSPECIFIED = frozenset({aten.empty.memory_format, aten.empty_strided.default})


_CPU_ERRORS = (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError)
_verdicts: dict = {}        # (op, args, kwargs) -> the error CPU raised for that call, or None


def _cpu_verdict(op, args: tuple, kwargs: dict) -> None:
    """CPU's verdict on a factory call: its arguments are all constants, so the call itself is run on
    CPU, once per call (the meta kernels skip the checks of a value against the dtype:
    `full((2,), 300, dtype=int8)`, `randperm(3000, dtype=float16)`), and CPU's error is raised. Up to
    VERDICT_ELEMENTS elements (the caller's choice): a large result is not made twice."""
    raise_remembered(_verdicts, (op, args, tuple(sorted(kwargs.items()))), lambda: _run_on_cpu(op, args, kwargs))


# factories whose size is their first argument, and those whose size arguments are counts
_SIZED = frozenset({"empty", "zeros", "ones", "full", "empty_strided", "_efficientzerotensor"})
_COUNTS = {"linspace": (2,), "logspace": (2,), "eye": (0, 1), "tril_indices": (0, 1), "triu_indices": (0, 1)}


def _large_verdict(op, args: tuple, kwargs: dict) -> None:
    """CPU's verdict on a factory call past VERDICT_ELEMENTS, without making its result on CPU: the call
    at a few elements, as CPU's checks of a value against the dtype read no size (`full((5000,), 300,
    dtype=int8)`: the fill value; `linspace`: its ends), and for randperm, whose n is the value
    checked, CPU's check before it makes the permutation. arange's size is its values: not asked."""
    name = op.overloadpacket.__name__
    if name == "randperm":
        raise_remembered(_verdicts, (op, args, tuple(sorted(kwargs.items()))), lambda: _randperm_error(args[0], kwargs))
        return
    if name in _SIZED:
        standin = (tuple(min(n, 2) for n in args[0]),) + args[1:]      # CPU fills one element unchecked
    elif name in _COUNTS:
        standin = tuple(min(a, 2) if i in _COUNTS[name] else a for i, a in enumerate(args))
    else:
        return
    _cpu_verdict(op, standin, kwargs)


def _randperm_error(n: int, kwargs: dict):
    """The error CPU raises for randperm(n) in this dtype, or None: CPU checks n against the dtype
    before it resizes its out= tensor, which here cannot grow (numpy's memory), so no permutation of n
    is made; that resize's refusal is no verdict."""
    dtype = kwargs.get("dtype") or torch.int64
    same_size = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64, 16: np.complex128}[dtype.itemsize]
    out = torch.from_numpy(np.empty(0, same_size)).view(dtype)
    try:
        with torch.no_grad(), host_dispatch():
            torch.randperm(n, out=out)
    except _CPU_ERRORS as e:
        return None if "not resizable" in str(e) else e
    return None


def _run_on_cpu(op, args: tuple, kwargs: dict):
    """The error CPU raises for this factory call, or None."""
    try:
        with torch.no_grad(), host_dispatch(), rng_kept(op):
            probe_on_cpu(op, *args, **kwargs, device="cpu")
    except _CPU_ERRORS as e:
        return e
    return None


def _factory(op):
    def impl(*args, **kwargs):
        return _record_factory(op, args, kwargs)
    return impl


def _copy_from(src, dst, non_blocking=False):
    if type(src) is not LazyTensor:
        check_representable("copy to xla (.to('xla'))", src)
    if (type(dst) is LazyTensor) != (type(src) is LazyTensor):     # cpu -> xla or xla -> cpu
        return copy_across(dst, src)
    if type(dst) is not LazyTensor:
        raise RuntimeError("xlanb cannot copy a tensor that torch's C++ made over an xla storage's address "
                           "(its bytes live in a device buffer): copy the xla tensor or storage itself, e.g. "
                           "t.cpu() or t.untyped_storage().cpu()")
    return dst.copy_(src)


def _copy_from_and_resize(src, dst):
    if tuple(dst.shape) != tuple(src.shape):
        raise RuntimeError("xlanb cannot resize a tensor in place; allocate the destination with the right shape")
    return _copy_from(src, dst)


FACTORIES = (
    "empty.memory_format", "empty_strided", "arange", "arange.start", "arange.start_step",
    "eye", "eye.m", "linspace", "logspace", "full", "zeros", "ones", "scalar_tensor",
    "randperm", "tril_indices", "triu_indices", "_efficientzerotensor",
)


# Tensors of quantized dtypes and sparse layouts dispatch to their own keys, where torch's own
# error names no remedy: xla refuses them with one that does.
_REFUSED = {
    "Quantized": ("empty.memory_format", "empty_strided", "empty_quantized", "_empty_affine_quantized",
                             "_empty_per_channel_affine_quantized"),
    "Sparse": ("empty.memory_format", "_sparse_coo_tensor_with_dims"),
    "SparseCsr": ("empty.memory_format",),
}


def _refuse(name: str, key: str):
    def impl(*args, **kwargs):
        layout = kwargs.get("layout") or (torch.sparse_coo if key.startswith("Sparse") else None)
        why = unsupported(f"aten.{name}", kwargs.get("dtype"), layout)
        raise NotImplementedError(why or unsupported(f"aten.{name}", torch.quint8))
    return impl


def register_factories() -> None:
    if _library:
        return
    backend = backend_key(_rt.device.type)
    lib = torch.library.Library("aten", "IMPL")
    for name in FACTORIES:
        packet, _, overload = name.partition(".")
        op = getattr(getattr(aten, packet), overload or "default")
        lib.impl(name, _factory(op), backend)
    for kind, names in _REFUSED.items():
        if backend == "XLA":
            break           # torch 2.9 parses no Quantized/Sparse XLA key: torch's own error stands
        for name in names:
            lib.impl(name, _refuse(name, kind), kind + backend)
    lib.impl("one_hot", bounds.one_hot, "Autograd" + backend)      # above their composites: check values
    lib.impl("quantile", bounds.q_checked(aten.quantile.default), "Autograd" + backend)
    lib.impl("nanquantile", bounds.q_checked(aten.nanquantile.default), "Autograd" + backend)
    lib.impl("_copy_from", _copy_from, backend)
    lib.impl("_copy_from_and_resize", _copy_from_and_resize, backend)
    fill_backend_gaps(lib, backend)
    _library.append(lib)
