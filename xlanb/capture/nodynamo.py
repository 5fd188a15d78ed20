"""Keeping `torch._dynamo` unimported until torch.compile is used (it costs ~1 s to import).

torch wraps ~290 of its own functions (reference meta kernels, `Optimizer.zero_grad`,
`torch.optim.adam`, ...) with `torch._compile._disable_dynamo`, whose wrapper imports
`torch._dynamo` on its first call to build `torch._dynamo.disable(fn)`, and caches the result
on `fn.__dynamo_disable`. The first xla op reaches one of them (through a meta kernel), so
every process would pay the import on its first op.

`install()` gives each such `fn` a stand-in for that cached attribute: while `torch._dynamo` is
not imported, no frame can be under dynamo, so calling `fn` directly is what the disabled
wrapper would do; once anything imports `torch._dynamo` (torch.compile does), the stand-in
builds the real `torch._dynamo.disable(fn, recursive, wrapping=False)`, stores it, and uses
it from then on. Private torch API: written against torch 2.9-2.13 (`_disable_dynamo`'s
closure holds `fn` and `recursive`); tests/capture/test_nodynamo.py fails loudly if a torch
upgrade changes it, and `install()` does nothing when the shape is not the one expected.

Every torch optimizer's `step` is wrapped by `torch.optim.optimizer._use_grad_for_differentiable`,
whose wrapper runs `import torch._dynamo` on every call (for two `torch._dynamo.graph_break()`
calls, no-ops unless dynamo is tracing): the first `optimizer.step()` paid the import, on CPU
too. `install()` gives each such wrapper the code of `_use_grad` below: the same grad-mode
switch, with the import and the graph breaks only under `torch.compiler.is_compiling()`, where
dynamo sees exactly torch's wrapper. Its code is marked as coming from outside xlanb (xlanb's
files are on dynamo's skip list) so that dynamo inlines it as it inlined torch's.
"""

from __future__ import annotations

import functools
import gc
import sys
import types

import torch

_ATTRIBUTE = "__dynamo_disable"     # where torch's wrapper caches torch._dynamo.disable(fn)


class _DynamoDisabled:
    """`fn.__dynamo_disable` until torch._dynamo is imported; then the real disabled wrapper."""

    __slots__ = ("fn", "recursive")

    def __init__(self, fn, recursive: bool):
        self.fn, self.recursive = fn, recursive

    def __call__(self, *args, **kwargs):
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is None or not hasattr(dynamo, "disable"):
            return self.fn(*args, **kwargs)
        real = dynamo.disable(self.fn, self.recursive, wrapping=False)
        setattr(self.fn, _ATTRIBUTE, real)      # a string: `self.fn.__x` would be name-mangled here
        return real(*args, **kwargs)


def _wrapper_code():
    from torch._compile import _disable_dynamo
    probe = _disable_dynamo(lambda: None)
    code = getattr(probe, "__code__", None)
    if code is None or code.co_freevars != ("fn", "recursive"):
        return None
    return code


def _make_use_grad(func):
    def _use_grad(*args, **kwargs):
        self = args[0]
        prev_grad = torch.is_grad_enabled()
        compiling = torch.compiler.is_compiling()      # then torch._dynamo is imported
        try:
            torch.set_grad_enabled(self.defaults["differentiable"])
            if compiling:
                torch._dynamo.graph_break()
            ret = func(*args, **kwargs)
        finally:
            if compiling:
                torch._dynamo.graph_break()
            torch.set_grad_enabled(prev_grad)
        return ret
    return _use_grad


@functools.cache
def _use_grad_codes():
    """(torch's `_use_grad` code, the stand-in's) or None when torch's wrapper looks different."""
    from torch.optim import optimizer
    probe = getattr(optimizer, "_use_grad_for_differentiable", lambda f: f)(lambda self: None)
    code = getattr(probe, "__code__", None)
    if code is None or code.co_freevars != ("func",) or "_dynamo" not in code.co_names:
        return None
    ours = _make_use_grad(None).__code__
    return code, ours.replace(co_filename="<xlanb nodynamo: torch.optim.optimizer._use_grad>")


def install() -> int:
    """Gives every `_disable_dynamo` wrapper that exists now a stand-in, and every optimizer step's
    `_use_grad` wrapper the import-free code; returns how many functions changed."""
    if "torch._dynamo" in sys.modules:
        return 0
    code = _wrapper_code()
    use_grad = _use_grad_codes()
    count = 0
    for obj in gc.get_objects():
        if type(obj) is not types.FunctionType:
            continue
        if obj.__code__ is code:
            fn, recursive = (cell.cell_contents for cell in obj.__closure__)
            if getattr(fn, _ATTRIBUTE, None) is None:
                setattr(fn, _ATTRIBUTE, _DynamoDisabled(fn, recursive))
                count += 1
        elif use_grad is not None and obj.__code__ is use_grad[0] and obj.__globals__.get("torch") is torch:
            obj.__code__ = use_grad[1]
            count += 1
    return count
