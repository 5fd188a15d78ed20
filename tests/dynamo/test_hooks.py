"""The private dynamo hooks (xlanb/dynamo/_torch_hooks.py): present on the torch versions they are
tested on, and a clear error (not a crash) on a torch without them."""

import sys

import pytest
import torch

import xlanb
import xlanb.dynamo
from xlanb.dynamo import _torch_hooks


def test_every_private_hook_is_present():
    """A feature check, not a version list: on a torch release not yet named in TESTED_TORCH this
    passes as long as each hook is there (TESTED_TORCH only words the error for a torch without them)."""
    assert _torch_hooks.check() == []
    from torch._dynamo.variables.builder import VariableBuilder
    from xlanb.capture.tensor import LazyTensor
    xlanb.dynamo.register()
    for trace_numpy in (False, True):
        assert VariableBuilder._type_dispatch_impl(trace_numpy)[LazyTensor] is VariableBuilder.wrap_tensor


def test_a_torch_without_the_hook_gets_a_clear_error(monkeypatch):
    from torch._dynamo.variables.builder import VariableBuilder
    monkeypatch.delattr(VariableBuilder, "_type_dispatch_impl")
    monkeypatch.setattr(_torch_hooks, "_installed", [False])
    monkeypatch.setattr(xlanb.dynamo, "_backend", [])
    from torch._dynamo.backends import registry          # as in a fresh process: torch loads the entry point
    from importlib.metadata import entry_points
    (entry,) = [e for e in entry_points(group="torch_dynamo_backends") if e.name == "xlanb"]
    registry._lazy_import()
    monkeypatch.delitem(registry._COMPILER_FNS, "xlanb", raising=False)
    monkeypatch.setitem(registry._BACKENDS, "xlanb", entry)
    monkeypatch.delitem(sys.modules, "xlanb.dynamo.entry", raising=False)
    assert _torch_hooks.check() == ["VariableBuilder._type_dispatch_impl"]
    with pytest.raises(xlanb.dynamo.DynamoHookMissing) as info:
        torch.compile(lambda x: x + 1, backend="xlanb")
    text = str(info.value)
    assert "needs private dynamo API that torch" in text
    assert "VariableBuilder._type_dispatch_impl" in text
    assert f"tested on torch {', '.join(_torch_hooks.TESTED_TORCH)}" in text
    assert "xlanb.compile" in text
    x = torch.ones(3, device="xla")                      # the lazy path is unaffected
    assert (x + 1).cpu().tolist() == [2.0, 2.0, 2.0]


def test_a_changed_hook_signature_is_reported_too(monkeypatch):
    from torch._dynamo.variables.builder import VariableBuilder
    monkeypatch.setattr(VariableBuilder, "_type_dispatch_impl", classmethod(lambda cls: {}))
    missing = _torch_hooks.check()
    assert len(missing) == 1 and missing[0].startswith("VariableBuilder._type_dispatch_impl(trace_numpy) (TypeError")


def test_dynamo_never_traces_xlanb_or_jax():
    """At a graph break, dynamo compiles the frames it meets; xlanb's and JAX's are on its skip list."""
    import jax.numpy as jnp
    from torch._dynamo import trace_rules
    import xlanb.capture.dispatch as dispatch
    xlanb.dynamo.register()
    assert trace_rules.check_verbose(dispatch.dispatch.__code__).skipped
    assert trace_rules.check_verbose(jnp.zeros.__code__).skipped


def test_a_repr_while_torch_compile_compiles_reads_no_value():
    """dynamo 2.10 reprs every object a guard matches by identity: an optimizer's tensor lr and
    state would each run a graph on the first compile."""
    import torch._guards as guards
    from xlanb import hooks
    x = torch.ones(3, device="xla") * 2
    mark = hooks.mark()
    with guards.compile_context(guards.CompileContext(None)):
        text, scalar = repr(x), f"{x.sum()}"
    assert [e for e in hooks.since(mark) if type(e).__name__ == "Execute"] == []
    assert text.startswith("<xla tensor") and "xla:0" in text and scalar.startswith("<xla tensor")
    assert repr(x).startswith("tensor([2., 2., 2.]") and f"{x.sum():.1f}" == "6.0"
