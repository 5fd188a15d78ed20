"""Where torch releases differ, xla answers as the installed torch answers on the CPU
(xlanb/capture/torch_versions.py, xlanb/lower/torch_versions.py)."""

import gc

import pytest
import torch

from xlanb.capture import torch_versions
from xlanb.capture.tensor import LazyTensor
from helpers import assert_close


def _solve_grads(device, make_a):
    g = torch.Generator().manual_seed(0)
    a0 = torch.randn(3, 4, 4, generator=g, dtype=torch.float64) + 4 * torch.eye(4, dtype=torch.float64)
    b0 = torch.randn(3, 4, 2, generator=g, dtype=torch.float64)
    a = a0.to(device).requires_grad_()
    b = b0.to(device).requires_grad_()
    x = torch.linalg.solve(make_a(a), b)
    (x * torch.arange(x.numel(), dtype=x.dtype, device=device).reshape(x.shape)).sum().backward()
    return x.detach().cpu(), a.grad.cpu(), b.grad.cpu()


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_solve_and_its_gradients_match_cpu_whatever_the_layout(layout):
    """torch 2.9 and 2.10 factor A's transpose for a contiguous A, and solve's backward reads the
    factors: a wrong choice gives wrong gradients, not an error."""
    make_a = (lambda a: a) if layout == "contiguous" else (lambda a: a.mT)
    for cpu, xla in zip(_solve_grads("cpu", make_a), _solve_grads("xla", make_a)):
        assert_close(xla, cpu)


def test_tensors_made_without_an_index_are_on_device_zero():
    """The device guard answers index 0 (torch 2.9's is xlanb's own, torch_versions)."""
    for t in (torch.tensor([1.0, 2.0], device="xla"), torch.ones(2).to("xla"), torch.zeros(2, device="xla")):
        assert t.device == torch.device("xla", 0)
    p = torch.ones(3, device="xla", requires_grad=True)
    (p * 2).sum().backward()                     # the autograd engine's device thread for xla:0
    assert p.grad.cpu().tolist() == [2.0, 2.0, 2.0]


def test_the_backend_key_is_the_one_this_torch_parses_xla_to():
    expected = "XLA" if torch_versions.TORCH < (2, 10) else "PrivateUse1"
    assert torch_versions.backend_key("xla") == expected
    assert torch.device("xla").type == "xla"


class _FakeTpu:
    platform = "tpu"


def test_float64_on_a_tpu_is_named_at_the_op(monkeypatch):
    """TPUs have no 64-bit floats: float64 is emulated (a warning at the op), complex128 refused."""
    import warnings
    from xlanb.state import runtime_state
    monkeypatch.setattr(type(runtime_state()), "jax_device", lambda self: _FakeTpu())
    with pytest.warns(UserWarning, match="float64 on a TPU is emulated"):
        torch.zeros(3, dtype=torch.float64, device="xla")
    with pytest.raises(NotImplementedError, match="complex128 is not supported on a TPU"):
        torch.ones(2, dtype=torch.complex128).to("xla")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.zeros(3, device="xla")                 # float32: nothing said
    monkeypatch.undo()
    if runtime_state().jax_device().platform == "tpu":
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # on this machine's platform, float64 is native
        assert torch.ones(2, dtype=torch.float64, device="xla").sum().item() == 2.0


def test_on_a_tpu_cpus_error_comes_before_the_complex128_refusal(monkeypatch):
    """complex(float32, float64): CPU refuses the mixed dtypes; the meta kernel's result is complex128,
    which a TPU refuses too, but CPU's verdict is the one the user needs (a TPU v5e gave its own)."""
    from xlanb.state import runtime_state
    a, b = torch.ones(2), torch.ones(2, dtype=torch.float64)
    with pytest.raises(RuntimeError) as cpu:
        torch.complex(a, b)
    xa, xb = a.to("xla"), b.to("xla")
    monkeypatch.setattr(type(runtime_state()), "jax_device", lambda self: _FakeTpu())
    with pytest.raises(RuntimeError) as xla:
        torch.complex(xa, xb)
    assert type(xla.value) is type(cpu.value) and str(xla.value) == str(cpu.value)
    with pytest.raises(NotImplementedError, match="complex128 is not supported on a TPU"):
        torch.complex(xb, xb)


def test_on_a_tpu_float64_bits_are_not_reinterpreted(monkeypatch):
    """XLA:TPU's float64 is two float32s: view(dtype) to or from it is refused at the op there (a TPU
    v5e gave other bits, silently); float32 <-> int32 and the CPU platform are unchanged."""
    from xlanb.state import runtime_state
    d, f, i = (torch.tensor([2.125, 3.0], dtype=torch.float64).to("xla"), torch.tensor([2.5, -1.0]).to("xla"),
               torch.tensor([3], dtype=torch.int64).to("xla"))
    monkeypatch.setattr(type(runtime_state()), "jax_device", lambda self: _FakeTpu())
    for make in (lambda: d.view(torch.int64), lambda: d.view(torch.uint8), lambda: i.view(torch.float64)):
        with pytest.raises(NotImplementedError, match="float64 cannot be reinterpreted .* on a TPU"):
            make()
    bits = f.view(torch.int32)
    empty = torch.zeros(0, 4, dtype=torch.float64, device="xla").view(torch.uint8)     # no bits to get wrong
    monkeypatch.undo()
    assert empty.shape == (0, 32) and empty.cpu().shape == (0, 32)
    assert bits.cpu().tolist() == torch.tensor([2.5, -1.0]).view(torch.int32).tolist()
    if runtime_state().jax_device().platform != "tpu":
        assert d.view(torch.int64).cpu().tolist() == torch.tensor([2.125, 3.0], dtype=torch.float64).view(torch.int64).tolist()


def test_a_float_index_is_refused_at_the_op_with_cpus_error():
    """torch 2.9's meta kernel of embedding takes float ids; CPU refuses them, and so does xla, at the op."""
    weight = torch.randn(10, 3)
    ids = torch.rand(2, 4)
    with pytest.raises(RuntimeError) as cpu:
        torch.nn.functional.embedding(ids, weight)
    with pytest.raises(RuntimeError) as xla:
        torch.nn.functional.embedding(ids.to("xla"), weight.to("xla"))
    assert str(xla.value) == str(cpu.value)
    x = torch.ones(3, device="xla") * 2                # nothing left pending to fail the next sync
    assert x.cpu().tolist() == [2.0, 2.0, 2.0]


class _Holder:
    pass


def _square_sum_through_a_cycle(x):
    """(y * y).sum() for y = x * 2, where a garbage cycle made before y holds y's only Python reference."""
    holder = _Holder()
    holder.itself = holder
    y = x * 2
    holder.y = y
    return (y * y).sum()


def test_a_collection_leaves_a_tensor_autograd_saved_whole():
    """Breaking the cycle hands y's object to the C++ tensor autograd saved; torch 2.9 then cleared
    it in the same collection and the backward met a LazyTensor without its state
    (torch_versions.keep_state_through_gc)."""
    base = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    grads = []
    for device in ("cpu", "xla"):
        x = base.detach().to(device).requires_grad_()
        z = _square_sum_through_a_cycle(x)
        gc.collect()
        z.backward()
        grads.append(x.grad.cpu())
    assert_close(grads[1], grads[0])


def test_garbage_cycles_through_lazy_tensors_are_still_freed():
    """On torch 2.9 a collection does not clear a LazyTensor itself: each cycle is broken at one of
    its other objects (the tensor's __dict__, a holder, a hook's function)."""
    def cycles():
        a = torch.randn(10, device="xla")
        b = a + 1
        b.itself = b
        holder = _Holder()
        holder.itself = holder
        c = a * 3
        holder.c, c.holder = c, holder
        leaf = torch.randn(4, device="xla", requires_grad=True)
        leaf.register_hook(lambda grad: leaf)
        view = (a * 2)[1:]
        view.itself = view
        assert _lazy_tensors() >= before + 5
    gc.collect()
    before = _lazy_tensors()
    cycles()
    gc.collect()
    assert _lazy_tensors() == before      # a weak reference would not tell: a collection clears it first
    x = torch.randn(4, device="xla", requires_grad=True)
    _square_sum_through_a_cycle(x).backward()         # x.grad exists from here on
    gc.collect()
    before = _lazy_tensors()
    z = _square_sum_through_a_cycle(x)
    gc.collect()
    z.backward()
    del z
    gc.collect()
    assert _lazy_tensors() == before             # y, resurrected for the backward, went with its graph


def _lazy_tensors() -> int:
    return sum(type(o) is LazyTensor for o in gc.get_objects())
