"""CPU fallback: an op with no lowering runs in torch on the host through jax.pure_callback.

The result is exactly torch's. Every execution is reported (events.Fallback), which
metrics counts as `aten::<op>` and `executed_fallback_ops()` lists.
"""

from __future__ import annotations

import jax
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

    def host(*arrays):
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
        return tuple(torch_to_numpy(o).reshape(s.shape) for o, s in zip(outs, specs))

    results = iter(jax.pure_callback(host, specs, *leaves))
    values = tuple(next(results) if m is not None else None for m in metas)
    return values if multi else values[0]
