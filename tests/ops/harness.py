"""Runs one OpInfo sample on `xla` and on torch CPU and compares them.

Shared by tests/ops/test_opinfo.py (pytest) and tools/ops_sweep.py (the full sweep that
writes docs/ops.md). Per sample:

- inputs are generated on CPU (seeded), copied to `xla` (requires_grad kept) and cloned
  for the CPU reference run;
- forward: `op(input, *args, **kwargs)` on both, the xla outputs are copied back (this
  runs the graph), `sample.output_process_fn_grad` is applied to both (as torch's
  test_compare_cpu does), and torch.testing.assert_close compares them with the
  tolerances of `tolerances()`;
- backward: the outputs that require grad, times a fixed random cotangent, are
  differentiated (torch.autograd.grad) w.r.t. every input that requires grad, through
  `op.gradcheck_wrapper` as torch's gradient tests do; the gradients are compared.

Each sample is classified by what xlanb did: `lowered` (every ATen op had a rule),
`decomposed` (some op went through a torch decomposition), `fallback` (some op ran on
torch CPU: xlanb's Fallback events, which also mark data-dependent cuts). The dispatch
log is read by wrapping LazyTensor.__torch_dispatch__ for the sample only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import time
import traceback

import torch

import xlanb
from xlanb import events
from xlanb.capture import dispatch as _dispatch
from xlanb.state import runtime_state
from xlanb.capture.tensor import LazyTensor

from compare import as_close_as_torch, compare, compare_ties, full_name, leaves
from skips import METADATA_ONLY, RANDOM_WHEN, TIES, skip_reason

XLA = xlanb.device()

DTYPES = {
    "float32": torch.float32,
    "int64": torch.int64,
    "bool": torch.bool,
    "bfloat16": torch.bfloat16,
    "complex64": torch.complex64,
}

@dataclasses.dataclass
class Result:
    op: str                       # OpInfo name (with .variant)
    dtype: str
    direction: str                # "fwd" | "bwd"
    index: int                    # sample index
    status: str                   # pass | fail | error | skip | cpu_error | n/a
    kind: str = ""                # lowered | decomposed | fallback
    fallback_ops: tuple = ()
    cut: bool = False             # a data-dependent op materialised its inputs
    message: str = ""
    seconds: float = 0.0

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["fallback_ops"] = list(self.fallback_ops)
        return d


# Inputs ------------------------------------------------------------------------------------

def _walk(x, f):
    if isinstance(x, torch.Tensor):
        return f(x)
    if isinstance(x, list):
        return [_walk(y, f) for y in x]
    if isinstance(x, tuple):
        return tuple(_walk(y, f) for y in x)
    if isinstance(x, dict):
        return {k: _walk(v, f) for k, v in x.items()}
    return x


def _is_cpu_device(x) -> bool:
    return (isinstance(x, torch.device) and x.type == "cpu") or (isinstance(x, str) and x in ("cpu", "cpu:0"))


def _is_meta_device(x) -> bool:
    return (isinstance(x, torch.device) and x.type == "meta") or (isinstance(x, str) and x == "meta")


def _copy(t: torch.Tensor, device) -> torch.Tensor:
    with torch.no_grad():
        c = t.detach().to(device) if device != "cpu" else t.detach().clone()
    if t.requires_grad:
        c.requires_grad_(True)
    return c


def _pair(x, m, device):
    """x from the CPU sample, m the same place of the sample generated for `meta` (or None).

    Tensors and device arguments that follow the test device (meta in m) go to `device`;
    those the OpInfo pins to CPU (torch.tensor(...) without a device) stay on CPU."""
    if isinstance(x, torch.Tensor):
        if m is not None and isinstance(m, torch.Tensor) and m.device.type == "cpu":
            return _copy(x, "cpu")
        return _copy(x, device)
    if isinstance(x, (list, tuple)):
        ms = m if isinstance(m, (list, tuple)) and len(m) == len(x) else [None] * len(x)
        out = [_pair(y, n, device) for y, n in zip(x, ms)]
        return out if isinstance(x, list) else tuple(out)
    if isinstance(x, dict):
        ms = m if isinstance(m, dict) else {}
        return {k: _pair(v, ms.get(k), device) for k, v in x.items()}
    if _is_cpu_device(x) and _is_meta_device(m):
        return torch.device(device)
    return x


def _same_structure(x, m) -> bool:
    if isinstance(x, torch.Tensor):
        return isinstance(m, torch.Tensor) and x.shape == m.shape and x.dtype == m.dtype
    if isinstance(x, (list, tuple)):
        return isinstance(m, (list, tuple)) and len(x) == len(m) and all(map(_same_structure, x, m))
    if isinstance(x, dict):
        return isinstance(m, dict) and x.keys() == m.keys() and all(_same_structure(x[k], m[k]) for k in x)
    return not isinstance(m, torch.Tensor)


def place(sample, device, meta_sample=None):
    """(input, args, kwargs): fresh copies of the sample's tensors on `device`.

    `meta_sample` (the same sample generated for device "meta") tells which tensors and
    device arguments follow the test device; without it every tensor moves, and a
    `device=` keyword follows."""
    if device == "cpu":
        f = lambda t: _copy(t, "cpu")  # noqa: E731
        return _walk(sample.input, f), _walk(sample.args, f), {k: _walk(v, f) for k, v in sample.kwargs.items()}
    if meta_sample is not None:
        return (_pair(sample.input, meta_sample.input, device), _pair(sample.args, meta_sample.args, device),
                _pair(sample.kwargs, meta_sample.kwargs, device))
    f = lambda t: _copy(t, device)  # noqa: E731
    kwargs = {k: (torch.device(device) if k == "device" and _is_cpu_device(v) else _walk(v, f))
              for k, v in sample.kwargs.items()}
    return _walk(sample.input, f), _walk(sample.args, f), kwargs


def to_cpu(x):
    def f(t):
        if type(t) is LazyTensor:
            return t.detach().cpu()
        if t.device.type != "cpu":
            raise AssertionError(f"output on device {t.device}")
        return t.detach()
    return _walk(x, f)


def _outputs_on_xla(x) -> str | None:
    bad = []

    def f(t):
        if type(t) is not LazyTensor:
            bad.append(str(t.device))
        return t
    _walk(x, f)
    return f"an output is on {bad[0]}, not xla" if bad else None


def _uses_xla(x) -> bool:
    if type(x) is LazyTensor or (isinstance(x, torch.device) and x.type == XLA.type):
        return True
    if isinstance(x, (list, tuple)):
        return any(_uses_xla(y) for y in x)
    if isinstance(x, dict):
        return any(_uses_xla(y) for y in x.values())
    return False


def _tensors(x) -> list:
    out = []
    _walk(x, lambda t: out.append(t))
    return out


# Watching xlanb ---------------------------------------------------------------------------

class Watch:
    """ATen ops dispatched on xla tensors, and xlanb's Fallback/GraphCut events, in a scope."""

    def __init__(self):
        self.funcs: list = []
        self.mark = 0

    @contextlib.contextmanager
    def __call__(self):
        funcs = self.funcs
        original = LazyTensor.__dict__["__torch_dispatch__"]

        def tracing(cls, func, types, args=(), kwargs=None):
            funcs.append(func)
            return _dispatch.dispatch(cls, func, types, args, kwargs)
        LazyTensor.__torch_dispatch__ = classmethod(tracing)
        try:
            yield self
        finally:
            LazyTensor.__torch_dispatch__ = original

    def start(self):
        self.funcs.clear()
        self.mark = xlanb.runtime_state().log.mark()

    def classify(self) -> tuple[str, tuple, bool]:
        evs = xlanb.runtime_state().log.since(self.mark)
        fallbacks = sorted({e.op for e in evs if isinstance(e, events.Fallback) and e.reason != "value access"})
        cut = any(isinstance(e, events.GraphCut) for e in evs)
        if fallbacks:
            return "fallback", tuple(fallbacks), cut
        for func in self.funcs:
            handler = getattr(func, "_xlanb", None)
            if handler is not None and "decompose_handler" in getattr(handler, "__qualname__", ""):
                return "decomposed", (), cut
        return "lowered", (), cut


def reset_runtime() -> None:
    runtime_state().pending.clear()
    runtime_state().deferred.clear()
    runtime_state().eager = False


# Running ---------------------------------------------------------------------------------

def samples(op, dtype, requires_grad: bool, limit: int | None) -> list[tuple]:
    """[(sample, meta twin or None)]: the CPU samples (seeded), each with the same sample
    generated for the meta device when that works (it tells which tensors follow the device)."""
    torch.manual_seed(0)
    gen = op.sample_inputs("cpu", dtype, requires_grad=requires_grad)
    cpu = list(itertools.islice(gen, limit)) if limit else list(gen)
    try:
        torch.manual_seed(0)
        gen = op.sample_inputs("meta", dtype, requires_grad=requires_grad)
        meta = list(itertools.islice(gen, len(cpu)))
    except Exception:
        meta = []
    out = []
    for i, s in enumerate(cpu):
        m = meta[i] if i < len(meta) else None
        if m is not None and not _same_structure((s.input, s.args, s.kwargs), (m.input, m.args, m.kwargs)):
            m = None
        out.append((s, m))
    return out


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip()
    text = " ".join(text.split())
    return text[:400]


def _call(op, sample, device, meta_sample=None):
    inp, args, kwargs = place(sample, device, meta_sample)
    return op(inp, *args, **kwargs)


def run_forward(op, sample, meta_sample, dtype, watch: Watch) -> tuple[str, str]:
    try:
        expected = sample.output_process_fn_grad(to_cpu(_call(op, sample, "cpu")))
    except Exception as e:   # the sample is invalid for CPU too
        return "cpu_error", _short(e)
    if not _uses_xla(place(sample, XLA, meta_sample)):
        return "n/a", "the sample has no xla tensor or device argument (e.g. torch.arange(3))"
    reset_runtime()
    watch.start()
    with watch():
        out = _call(op, sample, XLA, meta_sample)
        bad = _outputs_on_xla(out)
        actual = to_cpu(out)
    if bad:
        raise AssertionError(bad)
    actual = sample.output_process_fn_grad(actual)
    try:
        if full_name(op) in TIES:
            compare_ties(op, sample, actual, expected)
        else:
            compare(op, actual, expected, "fwd", metadata_only=_metadata_only(op, sample))
    except AssertionError:
        if dtype in (torch.bfloat16, torch.float16):
            if not _matches_float_reference(op, sample, actual, expected):
                raise
        elif dtype != torch.float32 or _metadata_only(op, sample) or full_name(op) in TIES or \
                not as_close_as_torch(op, actual, expected, _float64_forward(op, sample), "fwd"):
            raise
    return "pass", ""


def _upcast(t):
    c = t.detach().clone()
    if c.dtype == torch.float32:
        c = c.double()
    if t.requires_grad:
        c.requires_grad_(True)
    return c


def _float64_forward(op, sample):
    out = op(_walk(sample.input, _upcast), *_walk(sample.args, _upcast),
             **{k: _walk(v, _upcast) for k, v in sample.kwargs.items()})
    return sample.output_process_fn_grad(to_cpu(out))


def _matches_float_reference(op, sample, actual, expected) -> bool:
    """Half-precision results are also accepted when they match torch's answer computed in
    float32 (the same inputs, upcast) and rounded once: torch's CPU kernels round some
    intermediate results to bfloat16, XLA computes in float32 and rounds at the end."""
    half = lambda t: t.dtype in (torch.bfloat16, torch.float16)  # noqa: E731
    up = lambda t: _copy(t, "cpu").float() if half(t) else _copy(t, "cpu")  # noqa: E731
    try:
        out = op(_walk(sample.input, up), *_walk(sample.args, up), **{k: _walk(v, up) for k, v in sample.kwargs.items()})
        ref = leaves(sample.output_process_fn_grad(to_cpu(out)), [])
        exp = leaves(expected, [])
        if len(ref) != len(exp):
            return False
        ref = [r.to(e.dtype) if isinstance(r, torch.Tensor) and isinstance(e, torch.Tensor) else r
               for r, e in zip(ref, exp)]
        compare(op, actual, ref, "fwd")
        return True
    except Exception:
        return False


def _metadata_only(op, sample) -> bool:
    name = full_name(op)
    if name in METADATA_ONLY:
        return True
    when = RANDOM_WHEN.get(name)
    return bool(when and when[0](sample))


def _grad_run(op, sample, device, meta_sample=None, cotangent_seed=1, upcast=False):
    inp, args, kwargs = place(sample, device, meta_sample)
    if upcast:
        inp, args, kwargs = _walk(inp, _upcast), _walk(args, _upcast), {k: _walk(v, _upcast) for k, v in kwargs.items()}
    leaves = [t for t in _tensors((inp, args, kwargs)) if t.requires_grad]
    out = op.gradcheck_wrapper(op.get_op(), inp, *args, **kwargs)
    out = sample.output_process_fn_grad(out)
    outs = [t for t in _tensors(out) if t.requires_grad]
    gen = torch.Generator().manual_seed(cotangent_seed)
    cots = [torch.randn(o.shape, generator=gen, dtype=torch.complex64 if o.dtype.is_complex else torch.float32)
            .to(o.dtype) if o.dtype.is_floating_point or o.dtype.is_complex else None for o in outs]
    pairs = [(o, c) for o, c in zip(outs, cots) if c is not None]
    if not leaves or not pairs:
        return None
    outs, cots = [p[0] for p in pairs], [p[1].to(device) if device != "cpu" else p[1] for p in pairs]
    return torch.autograd.grad(outs, leaves, cots, allow_unused=True)


def run_backward(op, sample, meta_sample, dtype, watch: Watch) -> tuple[str, str]:
    try:
        expected = _grad_run(op, sample, "cpu")
    except Exception as e:
        return "cpu_error", _short(e)
    if expected is None:
        return "n/a", "no differentiable input or output"
    reset_runtime()
    watch.start()
    with watch():
        grads = _grad_run(op, sample, XLA, meta_sample)
        bad = _outputs_on_xla([g for g in grads if g is not None])
        actual = to_cpu(list(grads))
    if bad:
        raise AssertionError(bad)
    try:
        compare(op, actual, list(expected), "bwd", metadata_only=_metadata_only(op, sample))
    except AssertionError:
        if _metadata_only(op, sample) or not as_close_as_torch(op, actual, list(expected),
                                                                list(_grad_run(op, sample, "cpu", upcast=True)), "bwd"):
            raise
    return "pass", ""


def run_op(op, dtype_name: str, direction: str, limit: int | None, watch: Watch | None = None,
           on_result=None) -> list[Result]:
    """Every sample of `op` (at most `limit`) in one dtype and direction."""
    dtype = DTYPES[dtype_name]
    name = full_name(op)
    watch = watch or Watch()
    reason = skip_reason(op.name, op.variant_test_name, dtype_name, direction)
    if reason is not None:
        res = [Result(name, dtype_name, direction, -1, "skip", message=reason)]
        if on_result:
            on_result(res[0])
        return res
    results = []
    try:
        items = samples(op, dtype, direction == "bwd", limit)
    except Exception as e:
        items = []
        results.append(Result(name, dtype_name, direction, -1, "cpu_error",
                              message="sample generation: " + _short(e)))
    runner = run_forward if direction == "fwd" else run_backward
    for i, (sample, meta_sample) in enumerate(items):
        t0 = time.perf_counter()
        kind, fallback_ops, cut = "", (), False
        try:
            status, message = runner(op, sample, meta_sample, DTYPES[dtype_name], watch)
            if status == "pass":
                kind, fallback_ops, cut = watch.classify()
        except AssertionError as e:
            status, message = "fail", _short(e)
            kind, fallback_ops, cut = watch.classify()
        except Exception as e:
            status, message = "error", _short(e)
            if not message:
                message = traceback.format_exc(limit=3)
        finally:
            reset_runtime()
        r = Result(name, dtype_name, direction, i, status, kind, fallback_ops, cut, message,
                   round(time.perf_counter() - t0, 4))
        results.append(r)
        if on_result:
            on_result(r)
    return results


def supports(op, dtype_name: str, direction: str) -> bool:
    dtype = DTYPES[dtype_name]
    if dtype not in op.supported_dtypes("cpu"):
        return False
    if direction == "bwd":
        return bool(op.supports_autograd) and dtype in op.supported_backward_dtypes("cpu")
    return True
