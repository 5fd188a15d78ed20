"""CPU fallback: an op with no lowering runs in torch on the host through jax.pure_callback.

The result is exactly torch's. Every execution is reported (events.Fallback), which
metrics counts as `aten::<op>` and `executed_fallback_ops()` lists.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import torch

from xlanb import events
from xlanb.state import emit, runtime_state
from xlanb.lower.dtypes import from_words, numpy_to_torch, to_jax_dtype, to_words, torch_to_numpy
from xlanb.lower.float64 import EMULATED
from xlanb.lower.tree import join, split

_rt = runtime_state()


def aten_op(name: str):
    """The OpOverload an ATen overload name ("aten.slice.Tensor") names."""
    _, packet, overload = name.split(".")
    return getattr(getattr(torch.ops.aten, packet), overload)


def _key_set(names):
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.Undefined)
    for name in names:
        key = getattr(torch._C.DispatchKey, name, None)
        if key is not None:
            keys = keys | torch._C.DispatchKeySet(key)
    return keys


# The dispatch state of top-level code: autocast keys excluded (the op reaching a fallback has its
# final dtypes already), ADInplaceOrView and BackendSelect included; Python keys off on the host.
_HOST_INCLUDE = _key_set(("BackendSelect", "ADInplaceOrView"))
_HOST_EXCLUDE = (_key_set([k for k in dir(torch._C.DispatchKey) if k.startswith("Autocast")]
                          + ["Python", "PythonTLSSnapshot"])
                 | torch._C._dispatch_tls_local_exclude_set())     # import time: top level


def host_dispatch():
    """torch on the host as at top level. Inside __torch_dispatch__ (a cpu_cut, or a fallback
    that runs while a value access is being dispatched) torch excludes the Conjugate, Negative,
    ZeroTensor and ADInplaceOrView keys; CPU kernels that rely on them (complex lstsq) then
    compute wrong numbers."""
    return torch._C._ForceDispatchKeyGuard(_HOST_INCLUDE, _HOST_EXCLUDE)


class _OwnWarnings(torch.autograd.Function):
    """A torch call that runs Python. torch keeps the C++ warnings a kernel raises (TORCH_WARN) until
    the torch call they were raised under returns: under the user's op, a probe's warnings would wait
    for the op to return, past every `warnings.catch_warnings` in xlanb's code. Under this call they
    are given when it returns."""

    @staticmethod
    def forward(ctx, call):
        call()


# Function.apply less its Python wrapper, which sends the call to functorch's custom_function_call
# while a transform (vmap, grad) is active: this Function has no setup_context for it
_own_warnings = super(torch.autograd.Function, _OwnWarnings).apply


def with_warnings(fn, *args, **kwargs) -> tuple:
    """(fn(*args, **kwargs), the warnings it raised): C++ kernels' included (see _OwnWarnings); none
    of them is shown. fn's exception is raised here, once the torch call has returned: leaving it
    with a warning held, torch words the exception as a SystemError ("returned a result with an
    exception set")."""
    outcome = []

    def call():
        try:
            outcome.append((fn(*args, **kwargs), None))
        except BaseException as e:      # noqa: BLE001 - raised below, as it was
            outcome.append((None, e))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _own_warnings(call)
    result, error = outcome.pop()
    if error is not None:
        try:
            raise error
        finally:        # no cycle between the error and this frame: collected as garbage, it would take the
            error = None    # tensors its frames hold (torch 2.9 clears a subclass's slots while autograd holds it)
    return result, caught


def probe_on_cpu(fn, *args, **kwargs):
    """fn(*args, **kwargs) as a probe of CPU's kernels (their verdict, their dtypes); the caller holds
    `torch.no_grad()` and `host_dispatch()`, under which it also makes the probe tensors. Its warnings are
    not the user's: inside infer_meta's scope (runtime_state().kernel_warnings a list) they are collected
    there, to be given as CPU gives them (capture/record.py's give_warnings); elsewhere dropped."""
    result, caught = with_warnings(fn, *args, **kwargs)
    collected = _rt.kernel_warnings
    if collected is not None:
        collected.extend(caught)
    return result


def run_on_cpu(op, args, kwargs):
    """Calls `op` on torch CPU tensors at top-level dispatch state; returns what `op` returns."""
    with torch.no_grad(), host_dispatch():
        out = op(*args, **kwargs)
    return out


# JAX converts a callback's arguments and results to 32 bits when the thread that runs it has x64 off,
# and XLA runs a launched program's callbacks on its own threads (the launch's x64 setting does not
# reach them): 64-bit values cross the callback as words of 32 bits (dtypes.to_words) and are put back
# on each side. On the host numpy's views do it: a complex's parts are in memory order there too.
_WIDE = {np.dtype(t) for t in (np.int64, np.uint64, np.float64, np.complex128)}


def _words_host(a):
    """A host array's uint32 words, shape a.shape + (itemsize // 4,), as to_words gives on the device."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint32).reshape(a.shape + (a.itemsize // 4,))


def _widen_host(words, dtype):
    """Inverse of _words_host: uint32 words back to `dtype` (a numpy view, no copy)."""
    words = np.asarray(words)
    return np.ascontiguousarray(words).reshape(-1).view(dtype).reshape(words.shape[:-1])


# XLA:TPU emulates float64 as two float32s (the value is hi + lo), and its bitcast of a float64 gives
# those two floats' bits, not IEEE's (on a TPU v5e, -0.99 reached the host as -0.0078): there a
# float64 crosses as its two float32 parts, added up on the host; a result goes back the same way.
_PAIRED = EMULATED
_F64 = np.dtype(np.float64)


def _split_host(a):
    """float64 -> float32 (hi, lo) in a last axis of 2, hi + lo == a where a float32 pair can hold it.
    An infinite hi (an infinity, or a float64 past float32's range) has lo 0: a - hi would be NaN
    there, and the infinity would come back NaN."""
    hi = a.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        lo = np.where(np.isinf(hi), 0, a - hi.astype(np.float64)).astype(np.float32)
    return np.stack([hi, lo], axis=-1)


def _join_host(parts):
    parts = np.asarray(parts)
    return parts[..., 0].astype(np.float64) + parts[..., 1].astype(np.float64)


def _split_device(x):
    hi = x.astype(jnp.float32)
    lo = jnp.where(jnp.isinf(hi), 0, x - hi.astype(jnp.float64)).astype(jnp.float32)
    return jnp.stack([hi, lo], axis=-1)


def _join_device(parts):
    return parts[..., 0].astype(jnp.float64) + parts[..., 1].astype(jnp.float64)


def _crossing(dtype: np.dtype, paired: bool) -> str:
    """How a value of `dtype` crosses the host call: "pair" (float64 on a platform that emulates it),
    "words" (other 64-bit types), or "" (as it is)."""
    if paired and dtype == _F64:
        return "pair"
    return "words" if dtype in _WIDE else ""


def _on_device(x, how: str):
    return _split_device(x) if how == "pair" else to_words(x, 4) if how == "words" else x


def _from_device(x, how: str, dtype):
    return _join_device(x) if how == "pair" else from_words(x, dtype) if how == "words" else x


def _on_host(a, how: str, dtype):
    return _join_host(a) if how == "pair" else _widen_host(a, dtype) if how == "words" else a


def _from_host(r, how: str):
    return _split_host(r) if how == "pair" else _words_host(r) if how == "words" else r


def _crossing_spec(s, how: str):
    if how == "pair":
        return jax.ShapeDtypeStruct(tuple(s.shape) + (2,), jnp.float32)
    if how == "words":
        return jax.ShapeDtypeStruct(tuple(s.shape) + (s.dtype.itemsize // 4,), jnp.uint32)
    return s


def lower_fallback(op, name: str, args, kwargs, meta, why: str = "no lowering"):
    """Lowers an op with no rule (or one XLA cannot compile on this platform: `why`) to a
    jax.pure_callback that runs it in torch on the host; each execution emits a Fallback event
    (counted as `aten::<op>`)."""
    if not isinstance(op, torch._ops.OpOverload):
        raise NotImplementedError(f"xlanb: no lowering for {name}; see docs/adding_ops.md")
    leaves: list = []
    skeleton = split((args, kwargs), leaves)
    # lifted scalars arrive as 0-d arrays; torch wants Python numbers where the schema says Scalar
    scalar_leaf = [getattr(getattr(leaf, "aval", None), "weak_type", False) for leaf in leaves]
    multi = isinstance(meta, tuple)
    metas = meta if multi else (meta,)
    specs = tuple(jax.ShapeDtypeStruct(m.shape, to_jax_dtype(m.dtype)) for m in metas if m is not None)
    counter = events.counter_name(name)

    paired = runtime_state().jax_device().platform in _PAIRED
    leaf_dtypes = [np.dtype(leaf.dtype) for leaf in leaves]
    leaf_how = [_crossing(dtype, paired) for dtype in leaf_dtypes]
    out_how = [_crossing(np.dtype(s.dtype), paired) for s in specs]

    def host(*arrays):
        arrays = [_on_host(a, how, dtype) for a, dtype, how in zip(arrays, leaf_dtypes, leaf_how)]
        values = [np.asarray(a).item() if is_scalar else numpy_to_torch(np.asarray(a))
                  for a, is_scalar in zip(arrays, scalar_leaf)]
        a, kw = join(skeleton, values)
        try:
            out = run_on_cpu(op, a, kw)
        except Exception as error:     # torch's verdict on these values: the launch raises it (executor.call)
            runtime_state().fallback_errors.append((name, error))     # runtime/device_errors.py
            raise
        outs = out if isinstance(out, (tuple, list)) else (out,)
        outs = [o for o, m in zip(outs, metas) if m is not None]
        emit(events.Fallback(op=counter, reason=why))
        results = (np.ascontiguousarray(torch_to_numpy(o)).reshape(s.shape) for o, s in zip(outs, specs))
        return tuple(_from_host(r, how) for r, how in zip(results, out_how))

    crossed = jax.pure_callback(host, tuple(_crossing_spec(s, how) for s, how in zip(specs, out_how)),
                                *[_on_device(leaf, how) for leaf, how in zip(leaves, leaf_how)])
    results = iter(_from_device(w, how, s.dtype) for w, s, how in zip(crossed, specs, out_how))
    values = tuple(next(results) if m is not None else None for m in metas)
    return values if multi else values[0]
