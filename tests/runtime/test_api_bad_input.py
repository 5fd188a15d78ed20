"""Bad input at the public API: wrong types and values, unknown devices and tensors from another
device each raise a clear error with the words below, and nothing pending is lost."""

import pytest
import torch

import xlanb

CASES = [
    ("xlanb.device('0')", lambda: xlanb.device("0"), TypeError, "xlanb.device(index) takes an int, got str '0'"),
    ("xlanb.device(1)", lambda: xlanb.device(1), ValueError, "xlanb drives one device; xla:1 does not exist"),
    ("a factory on xla:1", lambda: torch.ones(2, device="xla:1"), RuntimeError,
     "xlanb drives one device; xla:1 does not exist (use 'xla:0')"),
    ("a copy to xla:3", lambda: torch.ones(2).to("xla:3"), RuntimeError,
     "xlanb drives one device; xla:3 does not exist"),
    # from an xla tensor: every op that takes a device (each computed on xla:0 before)
    *[(f"{name} to xla:2", call, RuntimeError, "xlanb drives one device; xla:2 does not exist (use 'xla:0')")
      for name, call in (
          ("x.to", lambda: torch.ones(2, device="xla").to("xla:2")),
          ("x.to(device=)", lambda: torch.ones(2, device="xla").to(device=torch.device("xla", 2))),
          ("as_tensor", lambda: torch.as_tensor(torch.ones(2, device="xla"), device="xla:2")),
          ("zeros_like", lambda: torch.zeros_like(torch.ones(2, device="xla"), device="xla:2")),
          ("empty_like", lambda: torch.empty_like(torch.ones(2, device="xla"), device="xla:2")),
          ("full_like", lambda: torch.full_like(torch.ones(2, device="xla"), 3.0, device="xla:2")),
          ("randn_like", lambda: torch.randn_like(torch.ones(2, device="xla"), device="xla:2")),
          ("new_zeros", lambda: torch.ones(2, device="xla").new_zeros(3, device="xla:2")),
          ("new_empty", lambda: torch.ones(2, device="xla").new_empty(3, device="xla:2")))],
    ("xlanb.sync(wait='yes')", lambda: xlanb.sync(wait="yes"), TypeError,
     "xlanb.sync(wait=...) must be True or False, got str 'yes'"),
    ("xlanb.eager_mode('on')", lambda: xlanb.eager_mode("on"), TypeError,
     "xlanb.eager_mode(enable) must be True or False, got str 'on'"),
    ("xlanb.eager_mode_context(2)", lambda: xlanb.eager_mode_context(2).__enter__(), TypeError,
     "xlanb.eager_mode_context(enable) must be True or False, got int 2"),
    ("max_different_graphs=-1", lambda: xlanb.compile(lambda x: x, max_different_graphs=-1), ValueError,
     "max_different_graphs must be >= 1, got -1"),
    ("max_different_graphs=1.5", lambda: xlanb.compile(lambda x: x, max_different_graphs=1.5), TypeError,
     "max_different_graphs must be an int or None, got float 1.5"),
    ("max_different_graphs='2'", lambda: xlanb.compile(max_different_graphs="2"), TypeError,
     "max_different_graphs must be an int or None, got str '2'"),
    ("name=3", lambda: xlanb.compile(lambda x: x, name=3), TypeError,
     "xlanb.compile(name=...) must be a non-empty string, got int 3"),
    ("name=''", lambda: xlanb.compile(name=""), TypeError, "must be a non-empty string, got str ''"),
    ("full_graph='yes'", lambda: xlanb.compile(lambda x: x, full_graph="yes"), TypeError,
     "xlanb.compile(full_graph=...) must be True or False, got str 'yes'"),
    ("xlanb.compile(5)", lambda: xlanb.compile(5), TypeError, "xlanb.compile expects a function, got int"),
    ("manual_seed('x')", lambda: xlanb.manual_seed("x"), TypeError, "xlanb.manual_seed expects an int, got str 'x'"),
    ("manual_seed(1.5)", lambda: xlanb.manual_seed(1.5), TypeError, "xlanb.manual_seed expects an int, got float"),
    ("manual_seed(2**70)", lambda: xlanb.manual_seed(2 ** 70), ValueError, "the seed must be in [-2**63, 2**64)"),
    ("a CPU tensor in an xla op", lambda: torch.ones(2) + torch.ones(2, device="xla"), RuntimeError,
     "Expected all tensors to be on the same device, but found at least two devices, xla:0 and cpu! "
     "(aten.add.Tensor got a cpu tensor of shape [2]: move it with .to('xla:0')"),
    ("an xla matmul with a CPU tensor", lambda: torch.ones(2, 2, device="xla") @ torch.ones(2, 2), RuntimeError,
     "Expected all tensors to be on the same device"),
    ("debug.ir_text of a CPU tensor", lambda: xlanb.debug.ir_text(torch.ones(2)), TypeError,
     "expected xla tensors, got Tensor on cpu"),
    ("debug.hlo_text(stage='llvm')", lambda: xlanb.debug.hlo_text(torch.ones(2, device="xla") + 1, stage="llvm"),
     ValueError, "stage must be 'stablehlo', 'hlo' or 'optimized', got 'llvm'"),
]


@pytest.mark.parametrize("what, call, error, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_clear_error_and_loses_nothing(what, call, error, words):
    x = torch.arange(6.).to("xla")
    pending = x * 2 + 1                                     # pending across the failed call
    with pytest.raises(error) as raised:
        call()
    assert words in str(raised.value)
    assert not xlanb.is_eager_mode()
    assert pending.cpu().tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]


def test_what_torch_allows_stays_allowed():
    """CUDA's rules: a 0-dim CPU tensor is a number; CPU index tensors may index; seeds may be negative."""
    x = torch.arange(6.).to("xla")
    assert (x * torch.tensor(2.0)).cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert x[torch.tensor([1, 3])].cpu().tolist() == [1.0, 3.0]
    x[torch.tensor([0])] = torch.tensor(9.0)
    assert x.cpu().tolist() == [9.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    xlanb.manual_seed(-5)
    a = torch.rand(3, device="xla").cpu()
    xlanb.manual_seed(-5)
    assert torch.equal(torch.rand(3, device="xla").cpu(), a)
    for device in ("xla", "xla:0", torch.device("xla", 0), "cpu"):     # xla:0 spelled any way, or another type
        assert torch.zeros_like(x, device=device).device == torch.device(device if device != "xla" else "xla:0")
        assert x.to(device).new_ones(2, device=device).cpu().tolist() == [1.0, 1.0]
    with xlanb.eager_mode_context(True) as previous:
        assert previous is False and xlanb.is_eager_mode()
    assert xlanb.compile(name="step", max_different_graphs=2, full_graph=False) is not None


def test_a_result_asked_for_on_another_device_type_is_made_there():
    """An op that takes a device makes its result where it is asked, as on any other device: from an
    xla tensor, `zeros_like(x, device="cpu")` is a CPU tensor of x's layout (it was an xla tensor)."""
    host = torch.arange(6.).reshape(2, 3).t()
    x = torch.arange(6.).reshape(2, 3).to("xla").t()      # a transposed view
    assert x.stride() == host.stride()
    for make in (lambda t: torch.zeros_like(t, device="cpu"), lambda t: torch.ones_like(t, device="cpu"),
                 lambda t: torch.full_like(t, 2.5, device="cpu"), lambda t: torch.empty_like(t, device="cpu").fill_(1),
                 lambda t: t.new_full((2,), 7.0, device="cpu"), lambda t: t.new_zeros((2, 2), device="cpu"),
                 lambda t: torch.zeros_like(t, device="meta")):
        got, want = make(x), make(host)
        assert (got.device, got.dtype, got.shape, got.stride()) == (want.device, want.dtype, want.shape, want.stride())
        if got.device.type == "cpu":
            assert torch.equal(got, want)
    torch.manual_seed(3)
    want = torch.randn_like(host, device="cpu")
    torch.manual_seed(3)
    assert torch.equal(torch.randn_like(x, device="cpu"), want)        # CPU's generator, as CPU draws it
    assert torch.equal(x.cpu(), host)                                   # the xla tensor untouched
