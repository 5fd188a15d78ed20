"""Checks one lowering rule against torch on CPU, through the runtime's own capture and driver.

    check("aten.add.Tensor", torch.randn(3), 2.5, alpha=2)

The op is recorded as capture records it (`capture.record.record_node`: tensors uploaded as
device data, numbers in Scalar- or Tensor-typed slots lifted, output metas from torch's meta
kernels with capture's CPU fixes, the RNG key of `xlanb.manual_seed(rng_seed)` for random ops),
built into a Graph and run by `runtime.executor.run_graph`: the same lowering (promotion,
lifted scalars, output casts and shape checks), jit, compile and launch as any graph. The
result must match torch's (values, dtype, shape) within `atol`/`rtol` (widened to the platform's
arithmetic where it is not the CPU's: helpers.tolerance).
"""

from __future__ import annotations

import contextlib

import pytest
import torch

import xlanb
from xlanb.capture import record
from xlanb.ir.graph import build_graph
from xlanb.ir.node import Meta, make_node
from xlanb.lower.registry import lookup
from xlanb.runtime.executor import run_graph
from xlanb.runtime.transfer import download
from helpers import tolerance


@contextlib.contextmanager
def constant_args():
    """Lift no number at all (capture records tensor-less factories with constant arguments)."""
    lift = record.lift
    record.lift = lambda x: x
    try:
        yield
    finally:
        record.lift = lift


def run_rule(name: str, *args, rng_seed: int | None = None, **kwargs):
    """The rule's outputs as torch CPU tensors (a tensor, or a tuple), computed by the driver."""
    rule = lookup(name)
    assert rule is not None, f"no rule registered for {name}"
    op = _op(name)
    assert op is not None, f"{name}: rulecheck runs ATen ops only"
    if rule.rng:
        xlanb.manual_seed(rng_seed or 0)
    try:
        node = record.record_node(op, args, kwargs, cpu_inputs=True)
    except (record.NoMetaKernel, RuntimeError):      # no meta kernel (capture would cut to the CPU)
        node = _record_with_cpu_metas(op, name, args, kwargs)
    meta = node.meta
    if isinstance(meta, Meta) or meta == ():
        roots = [node]
    else:
        roots = [make_node("xlanb.getitem", "xlanb.getitem", (node, i), None, m) for i, m in enumerate(meta)
                 if m is not None]
    results = run_graph(build_graph(roots, "rulecheck"), eager=False)
    if meta == ():
        return ()
    outs = iter(download(b) for b in results)
    if isinstance(meta, Meta):
        return next(outs)
    return tuple(next(outs) if m is not None else None for m in meta)


def _record_with_cpu_metas(op, name, args, kwargs):
    """The node capture would record, with output metas from torch's CPU result."""
    plan = record.plan_of(op)
    nargs, nkwargs = record.to_node_args(plan, args, kwargs or {}, cpu_inputs=True)
    out = op(*args, **kwargs)
    meta = () if out is None else record.meta_of(out) if isinstance(out, torch.Tensor) else tuple(
        record.meta_of(o) if isinstance(o, torch.Tensor) else None for o in out)
    if plan.rule.rng:
        nargs = (record.rng.take_key(),) + nargs
    return make_node(op, name, nargs, nkwargs, meta)


# Overloads with a rule that some supported torch releases lack: (the first release that has it,
# the first that no longer has it). A rule for an overload the installed torch lacks is never
# called; tests of it skip there (require_op).
RELEASES = {
    "aten.rand_like.generator": ((2, 10), None),
    "aten.randn_like.generator": ((2, 10), None),
    "aten.randint_like.generator": ((2, 10), None),
    "aten.randint_like.low_generator_dtype": ((2, 10), None),
    "aten.randint_like.Tensor_generator": ((2, 10), None),
    "aten._foreach_powsum.Scalar": ((2, 11), None),
    "aten._foreach_clone.default": ((2, 12), None),
    "aten._foreach_mm.default": ((2, 13), None),
    "aten.cholesky.default": (None, (2, 14)),
}
TORCH = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


def exists(name: str) -> bool:
    ns, packet, overload = name.split(".")
    packet = getattr(getattr(torch.ops, ns), packet, None) if ns == "aten" else None
    return packet is not None and overload in packet.overloads()


def require_op(name: str) -> None:
    """Skips the test on a torch that lacks the overload (one RELEASES names)."""
    if not exists(name):
        first, gone = RELEASES.get(name, (None, None))
        since = f"added in torch {'.'.join(map(str, first))}" if first else (
            f"removed in torch {'.'.join(map(str, gone))}" if gone else "not in RELEASES")
        pytest.skip(f"{name} does not exist in torch {torch.__version__} ({since})")


def _op(name: str):
    ns, packet, overload = name.split(".")
    if ns != "aten":
        return None
    require_op(name)
    return getattr(getattr(torch.ops.aten, packet), overload)


def _cpu_reference(name: str, args, kwargs):
    """torch's CPU result. Where this torch's CPU has no kernel for a reduced-precision float dtype
    (trace of bfloat16 before torch 2.10), its float32 result rounded to that dtype."""
    op = _op(name)
    try:
        return op(*args, **kwargs)
    except NotImplementedError as e:
        low = [a.dtype for a in args if isinstance(a, torch.Tensor) and a.dtype in (torch.bfloat16, torch.float16)]
        if not low or "not implemented for" not in str(e):
            raise
    wide = [a.float() if isinstance(a, torch.Tensor) and a.dtype == low[0] else a for a in args]
    out = op(*wide, **kwargs)
    if isinstance(out, torch.Tensor):
        return out.to(low[0]) if out.dtype == torch.float32 else out
    return type(out)(o.to(low[0]) if isinstance(o, torch.Tensor) and o.dtype == torch.float32 else o for o in out)


def check(name: str, *args, atol: float = 1e-5, rtol: float = 1.3e-6, equal_nan: bool = True,
          nan_in_nan_out: bool = False, **kwargs):
    """Asserts that the rule for `name` gives torch's result on these arguments.

    nan_in_nan_out: for an elementwise op whose CPU kernels answer a NaN input differently on
    different CPUs (the vectorised loop and its scalar tail disagree, so the answer depends on the
    machine's vector width): where any same-shaped float input is NaN, the rule must give NaN,
    the mathematical answer, and torch is not asked; elsewhere it must give torch's result."""
    expected = _cpu_reference(name, args, kwargs)
    got = run_rule(name, *args, **kwargs)
    if nan_in_nan_out:
        expected, got = _nan_where_inputs_are(name, args, expected, got)
    if isinstance(expected, torch.Tensor):
        expected, got = (expected,), (got,)
    assert len(got) == len(expected), f"{name}: {len(got)} outputs, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        if not isinstance(e, torch.Tensor):
            continue
        assert g.dtype == e.dtype, f"{name} output {i}: dtype {g.dtype}, expected {e.dtype}"
        assert g.shape == e.shape, f"{name} output {i}: shape {tuple(g.shape)}, expected {tuple(e.shape)}"
        torch.testing.assert_close(g, e, **tolerance(e.dtype, rtol, atol), equal_nan=equal_nan,
                                   msg=lambda m: f"{name} output {i}: {m}")


def _nan_where_inputs_are(name, args, expected, got):
    """`expected` with NaN where an input is NaN, after checking `got` is NaN there."""
    outs = (expected,) if isinstance(expected, torch.Tensor) else expected
    gots = (got,) if isinstance(got, torch.Tensor) else got
    fixed = []
    for i, (e, g) in enumerate(zip(outs, gots)):
        nan = torch.zeros(e.shape, dtype=torch.bool)
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_floating_point() and a.shape == e.shape:
                nan |= a.isnan()
        assert nan.any(), f"{name}: nan_in_nan_out needs a NaN input"
        assert g[nan].isnan().all(), f"{name} output {i}: a NaN input gave {g[nan & ~g.isnan()].tolist()}, not NaN"
        fixed.append(torch.where(nan, torch.tensor(float("nan"), dtype=e.dtype), e))
    return (fixed[0] if isinstance(expected, torch.Tensor) else tuple(fixed)), got
