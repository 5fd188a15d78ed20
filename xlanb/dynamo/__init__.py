"""`torch.compile(backend="xlanb")`: FX graphs as lazy macro-nodes (docs/torch_compile.md).

    import torch, xlanb
    step = torch.compile(train_step, backend="xlanb")
    for x, y in batches:
        step(x, y)
        xlanb.sync()            # forward, backward and optimizer step: one executable

`register()` installs the private dynamo hooks (dynamo/_torch_hooks.py, which names the torch
versions it is tested on) and registers the backend; `import xlanb` arranges for it to run the
first time torch.compile is called, so `backend="xlanb"` works without importing this module.
"""

from __future__ import annotations

from xlanb.dynamo._torch_hooks import TESTED_TORCH, DynamoHookMissing, check

__all__ = ["register", "backend", "TESTED_TORCH", "DynamoHookMissing", "check"]

_backend = []
# never traced by dynamo: xlanb, and what its runtime calls in Python while a compiled function runs
SKIPPED = ("xlanb", "jax", "jaxlib", "ml_dtypes", "opt_einsum")


def _coerce_same_metadata_as_tangent(self, expected_metadata, expected_type=None):
    """AOTAutograd traced the backward with dense fake tensors; an xla tangent stands for one."""
    import torch
    if expected_type in (None, torch.Tensor):
        return self
    return None


def _is_xla(t) -> bool:
    from xlanb.capture.tensor import LazyTensor
    return type(t) is LazyTensor


def _xla_lr(lr: float):
    import torch
    from xlanb.state import runtime_state
    return torch.tensor(lr, dtype=torch.float32, device=runtime_state().device)


def register():
    """Installs the dynamo hooks and registers the "xlanb" backend (idempotent); returns the backend.
    Raises DynamoHookMissing, naming what is missing, on a torch without the private hooks."""
    if _backend:
        return _backend[0]
    from xlanb.capture import scopes
    from xlanb.capture.tensor import LazyTensor
    from xlanb.dynamo import _torch_hooks
    from xlanb.dynamo.backend import make_backend
    from xlanb.dynamo.breaks import install_listeners
    _torch_hooks.install(LazyTensor, _is_xla, _xla_lr, SKIPPED)
    _torch_hooks.trace_module_scopes(scopes.let_dynamo_trace)
    LazyTensor.__coerce_same_metadata_as_tangent__ = _coerce_same_metadata_as_tangent
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend
    fn = make_backend()
    if "xlanb" not in _COMPILER_FNS:
        register_backend(compiler_fn=fn, name="xlanb")
    install_listeners()
    import torch._dynamo
    from xlanb.runtime import outside
    outside.use_disable(torch._dynamo.disable)
    _backend.append(_COMPILER_FNS["xlanb"])
    return _backend[0]


def backend(gm, example_inputs):
    """The backend itself (`torch.compile(fn, backend=xlanb.dynamo.backend)` works too)."""
    return register()(gm, example_inputs)
