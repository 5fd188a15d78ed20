"""`torch.compile(backend="xlanb")`: FX graphs as lazy macro-nodes (docs/torch_compile.md).

    import torch, xlanb
    step = torch.compile(train_step, backend="xlanb")
    for x, y in batches:
        step(x, y)
        xlanb.sync()            # forward, backward and optimizer step: one executable

`prepare()` installs the private dynamo hooks (dynamo/_torch_hooks.py, which names the torch
versions it is tested on) and makes the backend. torch finds "xlanb" through the package's
`torch_dynamo_backends` entry point (pyproject.toml, dynamo/entry.py): the first torch.compile that
names it imports xlanb and this module, and registers what `prepare()` returns, before dynamo
traces anything. So `backend="xlanb"` works after a plain `pip install`, in a process that never
imported xlanb, and neither `import xlanb` nor this module patches torch.compile. `register()`
registers it by hand (a source tree on sys.path, without the installed package's metadata).
"""

from __future__ import annotations

from xlanb.dynamo._torch_hooks import TESTED_TORCH, DynamoHookMissing, check

__all__ = ["prepare", "register", "backend", "TESTED_TORCH", "DynamoHookMissing", "check"]

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


def prepare():
    """Installs the dynamo hooks and makes the backend (once); returns it. Raises DynamoHookMissing,
    naming what is missing, on a torch without the private hooks."""
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
    fn = make_backend()
    install_listeners()
    import torch._dynamo
    from xlanb.runtime import outside
    outside.use_disable(torch._dynamo.disable)
    _backend.append(fn)
    return fn


def register():
    """`prepare()`, and "xlanb" registered with torch unless its entry point already was; returns the
    backend."""
    fn = prepare()
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend
    if "xlanb" not in _COMPILER_FNS:
        register_backend(compiler_fn=fn, name="xlanb")
    return fn


def backend(gm, example_inputs):
    """The backend itself (`torch.compile(fn, backend=xlanb.dynamo.backend)` works too)."""
    return prepare()(gm, example_inputs)
