"""CPU's verdict on an op signature: what torch's CPU kernel refuses for reasons that do not depend
on the values (dtypes, scalar types, internal overlap of a written tensor, unsupported dtype and
op pairs) is refused at the op, with CPU's exception type and text; and the result dtype is CPU's
where a meta kernel answers another (prims.signbit: float, CPU: bool).

The op runs on CPU probe tensors of the same dtypes, shapes, strides and storage offsets, once
per signature (the callers cache: record.infer_meta's meta cache, one dict for the data-dependent
ops). An error counts only when two fills give the same type and text: zeros (every index valid),
then ones for integers and a fixed normal sample for floats (a matrix that zeros make singular is
not). Integer tensors can carry values no fill satisfies (segment_reduce's lengths must sum to the
data's size): with one among the inputs, an error counts only when it is about types, overlap or
broadcasting (it names a dtype, a scalar type, a missing kernel, the written memory, or shapes that do
not broadcast, which no value changes). Small signatures (up to VERDICT_ELEMENTS elements in and out) run at their real shapes;
larger ones run at a stand-in of at most 2 per dim that keeps each expanded (stride-0) dim, and
only the verdicts no shape decides count there: a missing kernel for a dtype (NotImplementedError),
overlap of the written tensor, a number out of the range of the dtype it is converted to
(`fill_(300)` on int8), and an error about types (`masked_select` with a uint8 mask, `mm` of int64 and
float32: the same words at any size). A lifted number enters the callers' keys by its range (capture/nodes.py's
scalar_class), so a value past the range is asked again.

A backward op runs only at its real shapes with float tensors alone: its kernel trusts what its
forward computed (sizes, lengths, indices) and would read a stand-in, or integer values its forward
never made, out of bounds; its dtypes were judged at its forward.

A probe's storage holds at least as many elements as its tensor, so a CPU kernel that writes an
overlapping out= tensor without checking (torch's _softmax.out) stays inside it. Ops that draw
random numbers run with the CPU generator's state put back; views compute nothing and are not run.
"""

from __future__ import annotations

import contextlib
import functools
import re

import torch

from xlanb.lower.fallback import host_dispatch, probe_on_cpu

VERDICT_ELEMENTS = 4096
# dtypes whose CPU kernels are the reference (complex ones are complete, and refuse what no backend
# computes, floor or sign of a complex number). 16-bit floats are probed too, but CPU has fewer
# kernels for them than accelerators: a missing one (NotImplementedError) is no verdict there, every
# other refusal (mixed dtypes, a bool condition) is (`is_verdict`). float8 kernels: not probed.
HALF = frozenset({torch.float16, torch.bfloat16})
PROBED = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float32,
                    torch.float64, torch.complex64, torch.complex128}) | HALF
_ERRORS = (RuntimeError, IndexError, ValueError, TypeError, NotImplementedError)
OVERLAP = ("unsupported operation: more than one element of the written-to tensor",
            "unsupported operation: some elements of the input tensor and the written-to tensor")
# a number checked against the dtype it is converted to (fill_'s value, random_'s bounds): no shape decides it
SCALAR_RANGE = ("value cannot be converted to type ", "from is out of bounds for ", "to - 1 is out of bounds for ",
                "random_ expects 'from' to be less than 'to'")
_ABOUT_TYPES = re.compile(r"\b(bool|byte|char|short|int|long|float|double|half|bfloat16|complex\w*|u?int(8|16|32|64)(_t)?"
                          r"|dtypes?)(tensor)?\b|scalar type|converted to type|memory location", re.IGNORECASE)
# shapes that do not broadcast (an in-place op's self smaller than the broadcast, a mask wider than
# the tensor it selects from): CPU's kernels check them from the shapes alone, before reading a value
_ABOUT_BROADCAST = re.compile(r"doesn't match the broadcast shape|^expand\(.*the number of sizes provided"
                              r"|must match the size of tensor b|expanded size of the tensor")
_NOT_RUN = frozenset({"_local_scalar_dense", "_assert_async", "_assert_scalar", "_print", "record_stream",
                      "sym_constrain_range", "sym_constrain_range_for_size", "_functional_sym_constrain_range",
                      "set_", "_make_dep_token", "lift_fresh", "lift_fresh_copy"})


class _Unprobeable(Exception):
    """An argument no CPU probe stands for (a storage, a generator)."""


def raise_remembered(memo: dict, key, answer) -> None:
    """Raises the error `answer()` returns for `key` (None: no error), asking once per key: `memo`
    keeps the answers (an unhashable key is asked every time; past 10,000 keys the memo starts over)."""
    try:
        found = memo.get(key, False)
    except TypeError:
        key, found = None, False
    if found is False:
        found = answer()
        if key is not None:
            if len(memo) > 10_000:
                memo.clear()
            memo[key] = found
    if found is not None:
        raise type(found)(str(found)) from None


def tensors_in(x):
    """The tensors in an argument structure (nested lists and tuples)."""
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from tensors_in(y)


def _sample(n: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(n)
    return torch.randn(n, generator=g, dtype=torch.float64).to(dtype)


def _probe(x: torch.Tensor, fill: int, standin: bool) -> torch.Tensor:
    shape, strides, offset = tuple(x.shape), tuple(x.stride()), x.storage_offset()
    if standin:             # at most 2 per dim; an expanded dim stays expanded, the others contiguous
        shape = tuple(min(n, 2) for n in shape)
        expanded = [s == 0 and n > 1 for n, s in zip(shape, strides)]
        strides, step = [0] * len(shape), 1
        for i in reversed(range(len(shape))):
            if not expanded[i]:
                strides[i], step = step, step * shape[i]
        strides, offset = tuple(strides), 0
    numel = 1
    for n in shape:
        numel *= n
    extent = offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if numel else offset
    size = max(extent, offset + numel, 1)
    if fill == 0 or x.dtype == torch.bool or not (x.dtype.is_floating_point or x.dtype.is_complex):
        base = torch.full((size,), fill, dtype=x.dtype)
    else:
        base = _sample(size, x.dtype)
    return base.as_strided(shape, strides, offset)


def _probes(x, fill: int, standin: bool):
    if isinstance(x, torch.Tensor):
        return _probe(x, fill, standin)
    if isinstance(x, (list, tuple)):
        return type(x)(_probes(y, fill, standin) for y in x)
    if isinstance(x, torch.device):
        return torch.device("cpu")
    if isinstance(x, (torch.UntypedStorage, torch.TypedStorage, torch.Generator)):
        raise _Unprobeable
    return x


def rng_kept(func):
    if torch.Tag.nondeterministic_seeded in func.tags:
        return torch.random.fork_rng(devices=[])
    return contextlib.nullcontext()


def is_verdict(func, error: Exception, args, kwargs) -> bool:
    """Whether CPU's error refuses the signature. A CPU kernel missing for a 16-bit float does not,
    unless float32 has none either (bitwise_and of floats, which no backend computes)."""
    if not isinstance(error, NotImplementedError) or not any(t.dtype in HALF for t in tensors_in((args, tuple(kwargs.values())))):
        return True

    def as_float32(x):
        if isinstance(x, torch.Tensor):
            return torch.ones((), dtype=torch.float32 if x.dtype in HALF else x.dtype).expand(x.shape)
        return type(x)(as_float32(y) for y in x) if isinstance(x, (list, tuple)) else x
    try:
        with torch.no_grad(), host_dispatch():     # the probes made at top-level state too
            probe_on_cpu(func, *as_float32(tuple(args)), **{k: as_float32(v) for k, v in kwargs.items()})
    except NotImplementedError:
        return True
    except Exception:       # noqa: BLE001 - any other answer: float32 has a kernel, or the probe says nothing
        return False
    return False


def runs_on_cpu(func) -> bool:
    """Whether the verdict runs this op at all (not a view, a value read or an assertion, and not an op
    CPU has no kernel for at all: the fused RNN cells are an accelerator's)."""
    namespace = getattr(func, "namespace", "")
    return (namespace in ("aten", "prims") and not func.is_view
            and func._schema.name.split("::")[-1] not in _NOT_RUN
            and (namespace == "prims" or _has_cpu_kernel(func.name())))


_CPU_KEYS = ("CPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd", "CompositeExplicitAutogradNonFunctional")


@functools.cache
def _has_cpu_kernel(name: str) -> bool:
    """Whether CPU can run the op `name` ("aten::add.Tensor"): a CPU kernel or a composite one."""
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for key in _CPU_KEYS)


def cpu_verdict(func, args, kwargs, out=None):
    """Raises what CPU raises for this signature whatever the values; returns CPU's result on the
    first probe, of the stand-in's shapes for a large signature (None when the op did not run, or its
    error depends on the values)."""
    if not runs_on_cpu(func):
        return None
    tensors = list(tensors_in((args, tuple(kwargs.values()))))
    if not tensors or any(t.dtype not in PROBED for t in tensors):
        return None
    total = sum(t.numel() for t in tensors) + sum(t.numel() for t in tensors_in(out))
    standin = total > VERDICT_ELEMENTS
    if "backward" in func._schema.name and (standin or not all(t.dtype.is_floating_point or t.dtype.is_complex
                                                                 for t in tensors)):
        # a backward kernel trusts its forward's results, sizes and lengths (_ctc_loss_backward indexes
        # its log_alpha by the input_lengths it is given; _segment_reduce_backward reads data by the
        # lengths): on a stand-in of at most 2 per dim, or integer values its forward never made, it
        # reads out of bounds. Float tensors of their real shapes are no index (leaky_relu_backward's
        # check of its slope runs); otherwise its dtypes were judged at its forward
        return None
    kwargs = _outs_that_fit(func, kwargs, out)
    first = None
    for fill in (0, 1):
        try:
            with torch.no_grad(), host_dispatch(), rng_kept(func):
                result = probe_on_cpu(func, *_probes(tuple(args), fill, standin),
                                      **{k: _probes(v, fill, standin) for k, v in kwargs.items()})
        except _Unprobeable:
            return None
        except _ERRORS as e:
            if standin and not _shape_free(e):
                return None
            if not is_verdict(func, e, args, kwargs):
                return None
            if first is None:
                first = e
                continue
            if type(e) is type(first) and str(e) == str(first) and _value_free(e, _read_tensors(func, args, kwargs)):
                raise type(e)(str(e)) from None
            return None
        return None if first is not None else result     # a stand-in's result: its dtypes are the signature's
    return None


def _outs_that_fit(func, kwargs, out) -> dict:
    """out= tensors of another shape than the result probed empty: CPU would resize them and warn,
    and a warning raised under a dispatch reaches the user's line (the op warns once, at the
    write). A resized out= tensor takes the result's layout, so no overlap is lost."""
    results = list(tensors_in(out))
    if not results:                 # no result known (split_copy.out returns nothing): as given
        return kwargs
    fitted = dict(kwargs)
    for a in func._schema.arguments:
        if not (a.kwarg_only and a.alias_info is not None and a.alias_info.is_write):
            continue
        given = [t for t in tensors_in(fitted.get(a.name)) if t is not None]
        if not given:
            continue
        match = all(i < len(results) and tuple(t.shape) == tuple(results[i].shape) for i, t in enumerate(given))
        if not match:
            fitted[a.name] = type(fitted[a.name])(t.new_empty(0) for t in given) \
                if isinstance(fitted[a.name], (list, tuple)) else given[0].new_empty(0)
    return fitted


def has_out(func) -> bool:
    """Whether the op writes out= arguments."""
    return any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def _read_tensors(func, args, kwargs) -> list:
    """The tensor arguments the op reads (a written one's values decide no error)."""
    written = {a.name for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write}
    names = [a.name for a in func._schema.arguments if not a.kwarg_only]
    read = [a for i, a in enumerate(args) if i >= len(names) or names[i] not in written]
    read += [v for k, v in kwargs.items() if k not in written]
    return list(tensors_in(read))


def _shape_free(error: Exception) -> bool:
    """Whether an error at a stand-in's shapes is the signature's whatever its shapes: a missing kernel,
    overlap of the written tensor, a number out of its dtype's range, or an error about types."""
    text = str(error)
    return (isinstance(error, NotImplementedError) or text.startswith(OVERLAP + SCALAR_RANGE)
            or bool(_ABOUT_TYPES.search(text)) and not _ABOUT_BROADCAST.search(text))


def _value_free(error: Exception, tensors) -> bool:
    """Whether an error both fills gave is the signature's, not the values' (see the module doc)."""
    if all(t.dtype.is_floating_point or t.dtype.is_complex for t in tensors):
        return True
    text = str(error)
    return isinstance(error, NotImplementedError) or bool(_ABOUT_TYPES.search(text) or _ABOUT_BROADCAST.search(text))


def with_cpu_dtypes(func, out, cpu):
    """The meta kernel's output with CPU's dtypes where they differ (`cpu`: of the same ranks, of
    the same shapes or a stand-in's)."""
    if cpu is None or func._schema.is_mutable:
        return out
    if isinstance(out, torch.Tensor):
        if isinstance(cpu, torch.Tensor) and cpu.dtype != out.dtype and cpu.dim() == out.dim():
            return torch.empty_strided(out.shape, out.stride(), dtype=cpu.dtype, device="meta")
        return out
    if isinstance(out, (tuple, list)) and isinstance(cpu, (tuple, list)) and len(out) == len(cpu):
        return type(out)(with_cpu_dtypes(func, o, c) for o, c in zip(out, cpu))
    return out


def _on_cpu(x):
    if isinstance(x, torch.Tensor):
        return torch.zeros(x.shape, dtype=x.dtype)
    if isinstance(x, list):
        return [_on_cpu(y) for y in x]
    if isinstance(x, torch.device):
        return torch.device("cpu")
    return x


def raise_cpu_error(func, margs, mkwargs) -> None:
    """Re-raises a shape or dtype error with the message torch gives on CPU (meta kernels
    word some errors differently). Only for small inputs; otherwise the meta error stands."""
    cpu_answer(func, margs, mkwargs)


def cpu_answer(func, margs, mkwargs):
    """The op run on CPU zeros of the same shapes and dtypes: CPU's error raised as CPU raises it,
    or CPU's result where CPU accepts what a meta kernel refused (a meta kernel can be stricter
    than the CPU kernel: torch 2.15's all.out takes only a bool out, CPU's a uint8 one too).
    None for inputs too large to run (the meta verdict stands)."""
    tensors = [a for a in margs if isinstance(a, torch.Tensor)]
    if sum(t.numel() for t in tensors) > 1 << 20:
        return None
    try:
        return func(*[_on_cpu(a) for a in margs], **{k: _on_cpu(v) for k, v in mkwargs.items()})
    except (RuntimeError, IndexError, ValueError, TypeError) as cpu_error:
        raise type(cpu_error)(str(cpu_error)) from None


_checked: dict = {}         # signatures whose verdict an op's own handler asked for (data-dependent ops)


def _signature(x):
    if isinstance(x, torch.Tensor):
        return (tuple(x.shape), x.stride(), x.storage_offset(), x.dtype)
    if isinstance(x, (list, tuple)):
        return tuple(_signature(y) for y in x)
    return (type(x), x)


def check_once(func, args, kwargs) -> None:
    """cpu_verdict for ops with no meta kernel (their handlers record other ops), once per signature."""
    try:
        key = (func, _signature(args), _signature(tuple(sorted(kwargs.items()))) if kwargs else None)
        if key in _checked:
            return
    except TypeError:          # an unhashable argument: checked every time
        key = None
    cpu_verdict(func, args, kwargs or {})
    if key is not None:
        if len(_checked) > 10_000:
            _checked.clear()
        _checked[key] = True
