"""Capture semantics the OpInfo sweep needed: in-place views, resizing, out=, functional
variants, data-dependent shapes, the device RNG state, conjugate views."""

import dataclasses

import pytest
import torch

import xlanb
from xlanb import events
from xlanb.capture.tensor import LazyTensor
from xlanb.lower import registry
from helpers import PLATFORM, assert_close, same_values

XLA = "xla"


def test_matmul_vector_matrix_has_torch_shape():
    a, b = torch.randn(10), torch.randn(10, 5)
    out = a.to(XLA) @ b.to(XLA)              # ATen: unsqueeze, mm, squeeze_ (an in-place view)
    assert out.shape == (5,)
    assert_close(out.cpu(), a @ b)


@pytest.mark.parametrize("op,args", [("unsqueeze_", (0,)), ("squeeze_", (0,)), ("t_", ()), ("transpose_", (0, 2)),
                                     ("swapdims_", (1, 2)), ("as_strided_", ((3, 1), (1, 3)))])
def test_inplace_view_ops_change_shape(op, args):
    x = torch.randn(1, 3, 1) if op != "t_" else torch.randn(2, 3)
    lazy = x.to(XLA)
    getattr(x, op)(*args)
    out = getattr(lazy, op)(*args)
    assert out is lazy
    assert lazy.shape == x.shape and lazy.stride() == x.stride()
    assert_close(lazy.cpu(), x)
    assert_close((lazy * 2).cpu(), x * 2)


def test_inplace_view_keeps_autograd():
    w = torch.randn(4, requires_grad=True)
    wx = w.detach().to(XLA).requires_grad_()
    (w * 3).unsqueeze_(0).sum().backward()
    y = (wx * 3).unsqueeze_(0)
    assert y.shape == (1, 4)
    y.sum().backward()
    assert_close(wx.grad.cpu(), w.grad)


def test_resize_shrinks_and_grows_as_cpu():
    z = torch.arange(12.0, device=XLA)
    z.resize_(2, 3)
    assert_close(z.cpu(), torch.arange(6.0).reshape(2, 3))
    z.resize_(5, 5)                          # a new storage: the old elements first
    assert z.shape == (5, 5)
    assert_close(z.reshape(-1)[:12].cpu(), torch.arange(12.0))


def test_out_tensor_of_another_shape_is_resized():
    a = torch.randn(3, device=XLA)
    out = torch.empty(2, 4, device=XLA)
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        torch.add(a, a, out=out)
    assert out.shape == (3,)
    assert_close(out.cpu(), 2 * a.cpu())
    grown = torch.empty(0, device=XLA)
    torch.add(a, a, out=grown)
    assert_close(grown.cpu(), 2 * a.cpu())
    assert_close((a + 1).cpu(), a.cpu() + 1)     # nothing was left pending and broken


def test_factory_out_variants():
    z = torch.empty(5, device=XLA)
    torch.arange(5, out=z)
    assert_close(z.cpu(), torch.arange(5.0))
    assert xlanb.metrics.executed_fallback_ops() == []


def test_inplace_ops_use_the_functional_overload_of_the_same_types():
    x = torch.rand(5) + 0.5
    lazy = x.to(XLA)
    lazy.pow_(2.5)                        # pow_.Scalar -> pow.Tensor_Scalar (not pow.Scalar)
    lazy.pow_(torch.full((5,), 0.5, device=XLA))
    assert_close(lazy.cpu(), x.pow(2.5).pow(0.5))
    m = torch.tensor([3, 6], device=XLA)
    m &= torch.tensor([1, 2], device=XLA)  # __iand__ decomposes to bitwise_and_
    assert m.cpu().tolist() == [1, 2]


def test_inplace_default_arguments_reach_the_functional_op():
    torch.manual_seed(0)
    x = torch.ones(1000, device=XLA)
    x.bernoulli_()                          # p defaults to 0.5; bernoulli.p has no default
    assert 300 < int(x.sum().item()) < 700


def test_data_dependent_ops_compute_on_device_after_one_count():
    x = torch.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]])
    lazy = x.to(XLA)
    mark = xlanb.runtime_state().log.mark()
    assert_close(torch.nonzero(lazy).cpu(), torch.nonzero(x))
    assert_close(lazy[lazy > 0.5].cpu(), x[x > 0.5])
    assert_close(torch.masked_select(lazy, lazy > 0.5).cpu(), torch.masked_select(x, x > 0.5))
    evs = xlanb.runtime_state().log.since(mark)
    assert any(isinstance(e, events.GraphCut) for e in evs)
    assert not [e for e in evs if isinstance(e, events.Fallback) and e.reason != "value access"]


def test_unique_and_repeat_interleave_count_once_then_stay_lazy():
    x = torch.tensor([3.0, 1.0, 3.0, float("nan"), 2.0, 1.0, 1.0])
    r = torch.tensor([2, 0, 1])
    lazy, lazy_r = x.to(XLA), r.to(XLA)
    mark = xlanb.runtime_state().log.mark()
    got = torch.unique(lazy, return_inverse=True, return_counts=True)
    got_c = torch.unique_consecutive(lazy, return_inverse=True, return_counts=True)
    rep = torch.repeat_interleave(lazy_r)
    cuts = [e for e in xlanb.runtime_state().log.since(mark) if isinstance(e, events.GraphCut)]
    assert len(cuts) == 3                  # one count per op; the ops themselves are recorded
    assert all(type(t) is LazyTensor for t in (*got, *got_c, rep))
    for a, b in zip(got + got_c + (rep,), torch.unique(x, return_inverse=True, return_counts=True)
                    + torch.unique_consecutive(x, return_inverse=True, return_counts=True)
                    + (torch.repeat_interleave(r),)):
        assert_close(a.cpu(), b, equal_nan=True)
    evs = xlanb.runtime_state().log.since(mark)
    assert not [e for e in evs if isinstance(e, events.Fallback) and e.reason != "value access"]


def test_equal_and_allclose_answer_on_device():
    a = torch.tensor([1.0, 2.0, 3.0], device=XLA)
    assert torch.equal(a, a.clone()) is True
    assert torch.equal(a, a + 1) is False
    assert torch.equal(a, a[:2]) is False
    assert torch.allclose(a, a + 1e-7) is True
    assert torch.allclose(a, a + 1e-3) is False


def test_boolean_mask_assignment():
    x = torch.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]])
    for value in (7.0, torch.tensor([10.0, 20.0, 30.0])):
        y, ly = x.clone(), x.to(XLA)
        y[y > 0.5] = value
        ly[ly > 0.5] = value.to(XLA) if isinstance(value, torch.Tensor) else value
        assert_close(ly.cpu(), y)
    mask = torch.tensor([True, False, True])
    y, ly = x.clone(), x.to(XLA)
    y[:, mask] += 1
    ly[:, mask.to(XLA)] += 1
    assert_close(ly.cpu(), y)


def test_rng_state_fork_and_restore():
    torch.manual_seed(3)
    with torch.random.fork_rng(device_type=XLA):
        a = torch.rand(3, device=XLA)
    b = torch.rand(3, device=XLA)
    assert_close(a.cpu(), b.cpu())
    state = torch.xla.get_rng_state()
    c = torch.rand(3, device=XLA)
    xlanb.sync()
    torch.xla.set_rng_state(state)
    d = torch.rand(3, device=XLA)
    assert_close(c.cpu(), d.cpu())
    torch.xla.set_rng_state(state.cpu())
    assert_close(torch.rand(3, device=XLA).cpu(), c.cpu())


def test_conj_views_read_back_resolved():
    x = torch.randn(3, 4, requires_grad=True)
    lx = x.detach().to(XLA).requires_grad_()
    (g,) = torch.autograd.grad(torch.fft.hfft(x, n=6).sum(), x)
    (lg,) = torch.autograd.grad(torch.fft.hfft(lx, n=6).sum(), lx)
    assert_close(lg.cpu(), g, atol=1e-4, rtol=1e-4)


def test_batch_norm_eval_returns_empty_statistics():
    x, w = torch.randn(3, 2, 4), torch.randn(2)
    rm, rv = torch.zeros(2), torch.ones(2)
    ref = torch.native_batch_norm(x, w, w, rm, rv, False, 0.1, 1e-5)
    out = torch.native_batch_norm(*(t.to(XLA) for t in (x, w, w, rm, rv)), False, 0.1, 1e-5)
    assert [tuple(o.shape) for o in out] == [tuple(r.shape) for r in ref]
    assert_close(out[0].cpu(), ref[0])


def test_a_cpu_fallback_inside_a_pending_graph_keeps_64_bit_values():
    """An op with no lowering runs on the host inside the graph; XLA runs a launched program's host
    calls on its own threads, where JAX's 64-bit switch is off: int64 and float64 values still cross
    exactly (they were cut to 32 bits: prims.sign raised a dtype error, wider values would change)."""
    xlanb.metrics.clear_all()
    # made on the device (pending), and large enough that XLA runs the program on its thread pool
    big = (torch.arange(-150_000, 150_000, device=XLA) * 3_000_000_001).reshape(600, 500)
    x = torch.linspace(-1, 1, 300_001, dtype=torch.float64, device=XLA) * (1 + 2 ** -40)
    sign, scaled = torch.ops.prims.sign(big), torch.ops.prims.bessel_i1e(x)
    cpu_big = (torch.arange(-150_000, 150_000) * 3_000_000_001).reshape(600, 500)
    assert sign.dtype == torch.int64 and torch.equal(sign.cpu(), torch.sign(cpu_big))
    assert scaled.dtype == torch.float64
    expected = torch.ops.prims.bessel_i1e(torch.linspace(-1, 1, 300_001, dtype=torch.float64) * (1 + 2 ** -40))
    assert same_values(scaled.cpu(), expected)     # exactly, where float64 is native (a TPU emulates it)
    assert {"prims::sign", "prims::bessel_i1e"} <= set(xlanb.metrics.executed_fallback_ops())


def test_float64_crosses_a_host_call_as_two_float32s_where_the_platform_pairs_them(monkeypatch):
    """XLA:TPU emulates float64 as two float32s, and its bitcast gives their bits, not IEEE's (on a TPU
    v5e, prims.bessel_i1e of -0.99 gave i1e(-0.0078)): there float64 crosses a fallback as hi + lo.
    Tried on this platform by pairing it: values a float32 pair holds cross exactly, both ways."""
    from xlanb.lower import fallback
    monkeypatch.setattr(fallback, "_PAIRED", {xlanb.runtime_state().jax_device().platform})
    xlanb.metrics.clear_all()
    grid = torch.arange(-150_000, 150_001, dtype=torch.float64) / 2 ** 17
    x = grid.to(XLA) * (1 + 2 ** -40)                 # pending; hi = grid, lo = grid * 2**-40
    out = torch.ops.prims.bessel_i1e(x)
    expected = torch.ops.prims.bessel_i1e(grid * (1 + 2 ** -40))
    assert out.dtype == torch.float64
    # the result comes back as a float32 pair too: within 2**-48 of CPU's, where CPU's has 53 bits
    assert_close(out.cpu(), expected, rtol=2 ** -47, atol=0)
    y = torch.ops.prims.sign(x) * 3                 # a result a pair holds exactly
    assert torch.equal(y.cpu(), torch.sign(grid) * 3)
    assert {"prims::bessel_i1e", "prims::sign"} <= set(xlanb.metrics.executed_fallback_ops())


def test_infinities_cross_a_paired_host_call_as_infinities(monkeypatch):
    """A float64 infinity split as hi + lo had lo = inf - inf = NaN, and came back NaN: slogdet of a
    singular matrix (-inf) and inv of one (inf), CPU fallbacks for float64 on a TPU, gave NaN there
    (the fourth TPU run). Both ways: an infinity going to the host, and one coming back."""
    from xlanb.lower import fallback
    monkeypatch.setattr(fallback, "_PAIRED", {xlanb.runtime_state().jax_device().platform})
    x = torch.tensor([float("inf"), -float("inf"), float("nan"), -2.5, 0.0, 1e-3], dtype=torch.float64)
    y = torch.ops.prims.sign(x.to(XLA) * 1)           # pending: the infinities go to the host in the graph
    assert same_values(y.cpu(), torch.sign(x))
    sing = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64)
    monkeypatch.setitem(registry.LOWERINGS, "aten._linalg_slogdet.default", dataclasses.replace(
        registry.lookup("aten._linalg_slogdet.default"),
        avoid=((f"{xlanb.runtime_state().jax_device().platform}:float64", "a test says so"),)))
    sign, logabsdet = torch.linalg.slogdet(sing.to(XLA))
    assert logabsdet.cpu().item() == -float("inf") and sign.cpu().item() == 0.0


@pytest.mark.skipif(PLATFORM == "tpu", reason="XLA:TPU has no complex128: refused at the op there")
def test_a_cpu_fallback_inside_a_pending_graph_keeps_complex128_values():
    """complex128 crosses the host call as the 32-bit words of its real and imaginary parts (lax's
    bitcast refuses complex: prims.sin of complex128 raised a TypeError)."""
    xlanb.metrics.clear_all()
    x = torch.complex(torch.linspace(-3, 3, 300_001, dtype=torch.float64, device=XLA),
                      torch.linspace(2, -2, 300_001, dtype=torch.float64, device=XLA)) * (1 + 2 ** -40)
    out = torch.ops.prims.sin(x)                  # pending, and large enough for XLA's thread pool
    assert out.dtype == torch.complex128 and torch.equal(out.cpu(), torch.ops.prims.sin(x.cpu()))
    assert "prims::sin" in xlanb.metrics.executed_fallback_ops()


def test_igamma_and_igammac_edge_cases_are_cpus():
    """a = 0, x = 0, infinities and negative arguments: CPU's values (lax's igamma gave NaN for a = 0 <
    x and for a = inf; test_unary_ufuncs' test_igammac_edge_cases found it)."""
    inf = float("inf")
    a = torch.tensor([0.0, 0.0, 1e-3, 1.0, inf, inf, 0.0, 1e3, 0.0, inf, -1.0, 2.0, 1.0])
    x = torch.tensor([1e-3, inf, 0.0, 0.0, 0.0, 1e3, 0.0, inf, 0.0, inf, 1.0, -1.0, 2.0])
    for f in (torch.igamma, torch.igammac):
        assert_close(f(a.to(XLA), x.to(XLA)).cpu(), f(a, x), equal_nan=True)
