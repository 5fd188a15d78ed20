"""CPU fallback: an op with no lowering runs in torch on the host through jax.pure_callback.

The result is exactly torch's. Every execution is reported (events.Fallback), which
metrics counts as `aten::<op>` and `executed_fallback_ops()` lists.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from xlanb import events
from xlanb.state import emit, runtime_state
from xlanb.lower.dtypes import numpy_to_torch, to_jax_dtype, torch_to_numpy
from xlanb.lower.tree import join, split


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


def run_on_cpu(op, args, kwargs):
    """Calls `op` on torch CPU tensors at top-level dispatch state; returns what `op` returns."""
    with torch.no_grad(), host_dispatch():
        out = op(*args, **kwargs)
    return out


# JAX converts a callback's arguments and results to 32 bits when the thread that runs it has x64 off,
# and XLA runs a launched program's callbacks on its own threads (the launch's x64 setting does not
# reach them): 64-bit values cross the callback as words of 32 bits and are put back on each side.
_WIDE = {np.dtype(t) for t in (np.int64, np.uint64, np.float64, np.complex128)}


def _narrow(x):
    """A traced array whose dtype JAX would shrink in a callback, as uint32 words (shape + (words,))."""
    return jax.lax.bitcast_convert_type(x, jnp.uint32) if np.dtype(x.dtype) in _WIDE else x


def _widen_host(a, dtype):
    """Inverse of _narrow on the host: uint32 words back to `dtype` (a numpy view, no copy)."""
    a = np.asarray(a)
    return np.ascontiguousarray(a).view(dtype).reshape(a.shape[:-1]) if np.dtype(dtype) in _WIDE else a


def _word_spec(spec):
    dtype = np.dtype(spec.dtype)
    if dtype not in _WIDE:
        return spec
    return jax.ShapeDtypeStruct(tuple(spec.shape) + (dtype.itemsize // 4,), jnp.uint32)


def lower_fallback(op, name: str, args, kwargs, meta):
    """Lowers an op with no rule to a jax.pure_callback that runs it in torch on the host; each
    execution emits a Fallback event (counted as `aten::<op>`)."""
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

    leaf_dtypes = [np.dtype(leaf.dtype) for leaf in leaves]

    def host(*arrays):
        arrays = [_widen_host(a, dtype) for a, dtype in zip(arrays, leaf_dtypes)]
        values = [np.asarray(a).item() if is_scalar else numpy_to_torch(np.asarray(a))
                  for a, is_scalar in zip(arrays, scalar_leaf)]
        a, kw = join(skeleton, values)
        try:
            out = run_on_cpu(op, a, kw)
        except Exception as error:     # torch's verdict on these values: the launch raises it (executor.call)
            runtime_state().fallback_error = (name, error)
            raise
        outs = out if isinstance(out, (tuple, list)) else (out,)
        outs = [o for o, m in zip(outs, metas) if m is not None]
        emit(events.Fallback(op=counter))
        results = (np.ascontiguousarray(torch_to_numpy(o).reshape(s.shape)) for o, s in zip(outs, specs))
        return tuple(r.view(np.uint32).reshape(w.shape) if w is not s else r
                     for r, s, w in zip(results, specs, word_specs))

    word_specs = tuple(_word_spec(s) for s in specs)
    words = jax.pure_callback(host, word_specs, *[_narrow(leaf) for leaf in leaves])
    results = iter(jax.lax.bitcast_convert_type(w, s.dtype) if w.dtype != s.dtype else w
                   for w, s in zip(words, specs))
    values = tuple(next(results) if m is not None else None for m in metas)
    return values if multi else values[0]
