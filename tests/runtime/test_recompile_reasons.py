"""Every kind of cache miss is named by the ingredient of the CacheKey that changed
(xlanb.runtime.explain), in the Compile event and in `xlanb.debug.explain_recompiles()`."""

import os

import pytest
import torch

import xlanb
from xlanb import events, hooks
from xlanb._config import override
from xlanb.state import runtime_state

THIS_FILE = os.path.basename(__file__)


def xla(t):
    return t.to("xla")


def recompiles(name: str = "reason") -> list[events.Recompile]:
    return [e.recompile for e in runtime_state().log.all()
            if isinstance(e, events.Compile) and e.name == name and e.recompile is not None]


def compiled_twice(first, second) -> list[events.Change]:
    """Runs `first()` then `second()`, each as the graph "reason"; the changes of the second compile."""
    keep = []
    for body in (first, second):
        with xlanb.compile(name="reason"):
            keep.append(body())
    (recompile,) = recompiles()
    return list(recompile.changes)


def only(changes: list[events.Change]) -> events.Change:
    assert len(changes) == 1, [str(c) for c in changes]
    return changes[0]


def test_input_shape_change():
    c = only(compiled_twice(lambda: xla(torch.ones(4, 4)) * 2.5, lambda: xla(torch.ones(5, 5)) * 2.5))
    assert c.kind == "input" and str(c) == "input 0: f32[4,4] -> f32[5,5]"
    assert "input 0: f32[4,4] -> f32[5,5]" in xlanb.debug.explain_recompiles()


def test_input_dtype_change():
    c = only(compiled_twice(lambda: xla(torch.ones(4, 4)) * 2.5,
                            lambda: xla(torch.ones(4, 4, dtype=torch.float64)) * 2.5))
    assert c.kind == "input" and str(c) == "input 0: f32[4,4] -> f64[4,4]"


def test_input_layout_change_names_the_strides():
    from xlanb.capture.torch_versions import backend_key
    if backend_key("xla") == "XLA":
        pytest.skip("torch 2.9 copies a CPU tensor to its XLA device type contiguously (Device::supports_as_strided "
                    "is false for XLA), so the transposed input arrives row-major (docs/portability.md: torch 2.9)")
    c = only(compiled_twice(lambda: xla(torch.randn(4, 4)) * 2.5, lambda: xla(torch.randn(4, 4).t()) * 2.5))
    assert c.kind == "input"
    assert str(c) == "input 0: f32[4,4] strides (4, 1) -> f32[4,4] strides (1, 4)"


def test_op_change():
    x, y = xla(torch.randn(4)), xla(torch.randn(4))
    c = only(compiled_twice(lambda: x * y, lambda: x + y))
    assert c.kind == "op" and str(c).startswith("op 0: aten.mul.Tensor -> aten.add.Tensor")


def test_constant_change():
    x = xla(torch.randn(4, 4))
    c = only(compiled_twice(lambda: x.sum(0), lambda: x.sum(1)))
    assert c.kind == "constant"
    assert str(c).startswith("constant in op 0: aten.sum.dim_IntList (%, (0)) -> aten.sum.dim_IntList (%, (1))")


def test_baked_special_scalar_kind_change_is_a_constant():
    x = xla(torch.randn(4))
    c = only(compiled_twice(lambda: x * 1, lambda: x * 1.0))
    assert c.kind == "constant" and "(%, 1) -> aten.mul.Tensor (%, 1.0)" in str(c)


def test_operand_wiring_change():
    x, y = xla(torch.randn(4)), xla(torch.randn(4))
    c = only(compiled_twice(lambda: x * y + x, lambda: x * y + y))
    assert c.kind == "operands"
    assert str(c).startswith("op 1 operands: aten.add.Tensor(op 0, input 0) -> aten.add.Tensor(op 0, input 1)")


def test_aliasing_change_names_the_wiring_as_well_as_the_input_count():
    x, y = xla(torch.randn(4)), xla(torch.randn(4))
    changes = compiled_twice(lambda: x + x, lambda: x + y)
    assert [c.kind for c in changes] == ["inputs", "operands"]
    assert str(changes[0]) == "inputs: 1 inputs -> 2 inputs"
    assert str(changes[1]).startswith("op 0 operands: aten.add.Tensor(input 0, input 0) -> aten.add.Tensor(input 0, input 1)")


def test_output_count_change():
    x = xla(torch.randn(4))

    def one_output():
        a = x * 2.5
        return a.exp()

    def two_outputs():
        a = x * 2.5
        return a, a.exp()

    c = only(compiled_twice(one_output, two_outputs))
    assert c.kind == "outputs" and str(c) == "outputs: 1 -> 2"


def test_lifted_scalar_kind_change_is_named_once_as_a_scalar():
    x = xla(torch.randn(4))
    c = only(compiled_twice(lambda: x * 2.5, lambda: x * 3))
    assert c.kind == "scalar" and str(c) == "scalar 0: float -> int"
    assert "constant" not in xlanb.debug.explain_recompiles()


def test_lifted_scalar_becoming_a_baked_constant_names_both():
    x = xla(torch.randn(4))
    changes = compiled_twice(lambda: x * 2.5, lambda: x * 1)
    assert [c.kind for c in changes] == ["constant", "scalars"]
    assert "(%, <float>) -> aten.mul.Tensor (%, 1)" in str(changes[0])
    assert str(changes[1]) == "scalars: 1 -> 0"


def test_donation_change():
    x = xla(torch.zeros(4))
    x.add_(1)
    x.cpu()                       # a value access runs the graph without donating the old buffer
    x.add_(1)
    xlanb.sync()                  # a sync donates the overwritten buffer to the output
    (recompile,) = recompiles("sync")
    c = only(list(recompile.changes))
    assert c.kind == "donation" and str(c) == "donation changed: none -> inputs 0"
    assert [e.donated for e in runtime_state().log.all() if isinstance(e, events.Execute)] == [0, 1]
    assert x.cpu().tolist() == [2.0] * 4


def test_eviction():
    x = xla(torch.randn(4))
    with override(cache_size=1):
        for body in (lambda: x * 2.5, lambda: x.exp(), lambda: x * 2.5):
            with xlanb.compile(name="reason"):
                y = body()
    c = only(list(recompiles()[-1].changes))
    assert c.kind == "evicted"
    assert "reason: recompiled" in xlanb.debug.explain_recompiles().splitlines()[-1]
    assert "the same graph was evicted from the cache (cache size 1)" in xlanb.debug.explain_recompiles()


def test_eviction_is_named_even_after_the_cache_forgot_the_evicted_key():
    x = xla(torch.randn(4))
    with override(cache_size=1):
        for body in (lambda: x * 2.5, lambda: x.exp(), lambda: x.sin(), lambda: x * 2.5):
            with xlanb.compile(name="reason"):
                y = body()
    c = only(list(recompiles()[-1].changes))
    assert c.kind == "evicted"
    assert "cleared" not in xlanb.debug.explain_recompiles()


def test_cleared_cache():
    x = xla(torch.randn(4))
    with xlanb.compile(name="reason"):
        y = x * 2.5
    runtime_state().cache.clear()
    with xlanb.compile(name="reason"):
        y = x * 2.5
    c = only(list(recompiles()[-1].changes))
    assert c.kind == "cleared"
    text = xlanb.debug.explain_recompiles()
    assert "the in-memory cache was cleared since" in text and "evicted" not in text


def test_evicted_then_cleared_graphs_are_each_named_for_what_happened():
    x = xla(torch.randn(4))
    with override(cache_size=1):
        for body in (lambda: x * 2.5, lambda: x.exp()):        # x * 2.5 evicted by x.exp()
            with xlanb.compile(name="reason"):
                y = body()
        runtime_state().cache.clear()                           # x.exp() cleared
        for body in (lambda: x.exp(), lambda: x * 2.5):
            with xlanb.compile(name="reason"):
                y = body()
    assert [c.kind for r in recompiles()[-2:] for c in r.changes] == ["cleared", "evicted"]


# --- 5. explanations name notebook cells through the location namer ---------------------------

def test_explanation_uses_the_location_namer_for_the_line_and_the_op():
    x = xla(torch.randn(4))
    hooks.set_location_namer(lambda loc: "In [6] line 2" if loc.startswith(THIS_FILE) else loc)
    try:
        with hooks.recording_locations():
            for op in (torch.exp, torch.sin):
                with xlanb.compile(name="reason"):
                    y = op(x)
        text = xlanb.debug.explain_recompiles()
    finally:
        hooks.set_location_namer(None)
    assert text.startswith("reason: recompiled at In [6] line 2;")
    assert "op 0: aten.exp.default -> aten.sin.default (In [6] line 2)" in text
    assert THIS_FILE not in text
    assert THIS_FILE in xlanb.debug.explain_recompiles()            # without a namer: file:line


def test_a_platform_change_compiles_again_and_is_named():
    """The JAX backend is a key ingredient: an executable compiled under one platform setting is never
    served under another (here "" and "cpu" name the same device, so the values agree)."""
    platform = runtime_state().jax_device().platform
    x = torch.arange(4.0, device="xla")
    with xlanb.compile(name="plat"):
        y = x * 3
    with override(platform=platform):
        with xlanb.compile(name="plat"):
            z = x * 3
        w = x - 7                       # an eager op's remembered key is not taken across platforms
    v = x - 7
    assert y.cpu().tolist() == z.cpu().tolist() == [0.0, 3.0, 6.0, 9.0]
    assert w.cpu().tolist() == v.cpu().tolist()
    first, second = [e for e in runtime_state().log.all() if isinstance(e, events.Compile) and e.name == "plat"]
    (change,) = second.recompile.changes
    assert (change.kind, change.before, change.after) == ("platform", "JAX's default", platform)
    assert str(change).startswith(f"platform JAX's default -> {platform} ")
