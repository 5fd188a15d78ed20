"""The xla device and what users do with its tensors: factories, copies, views, printing."""

import copy
import io

import pytest
import torch
import torch.nn as nn

import xlanb
from helpers import assert_close


def test_device_is_xla_0():
    assert str(xlanb.device()) == "xla:0"
    t = torch.empty(2, device="xla")
    assert t.device == xlanb.device()
    assert torch.device("xla") == torch.device("xla", 0).__class__("xla")


@pytest.mark.parametrize("make, expected", [
    (lambda d: torch.zeros(2, 3, device=d), torch.zeros(2, 3)),
    (lambda d: torch.ones(4, dtype=torch.int64, device=d), torch.ones(4, dtype=torch.int64)),
    (lambda d: torch.full((2,), 7.5, device=d), torch.full((2,), 7.5)),
    (lambda d: torch.arange(5, device=d), torch.arange(5)),
    (lambda d: torch.arange(1.0, 2.0, 0.25, device=d), torch.arange(1.0, 2.0, 0.25)),
    (lambda d: torch.eye(3, device=d), torch.eye(3)),
    (lambda d: torch.linspace(0, 1, 5, device=d), torch.linspace(0, 1, 5)),
    (lambda d: torch.tensor([[1, 2], [3, 4]], device=d), torch.tensor([[1, 2], [3, 4]])),
    (lambda d: torch.zeros_like(torch.ones(3, device=d)), torch.zeros(3)),
])
def test_factories_match_cpu(make, expected):
    got = make("xla")
    assert got.device.type == "xla"
    assert got.dtype == expected.dtype
    assert_close(got.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool,
                                   torch.bfloat16, torch.float16, torch.uint8])
def test_round_trip_is_exact(dtype):
    cpu = (torch.randn(5, 3) * 100).to(dtype)
    back = cpu.to("xla").cpu()
    assert back.dtype == dtype
    assert torch.equal(back, cpu)


def test_int64_and_float64_are_exact():
    big = torch.tensor([2 ** 60 + 1, -(2 ** 62) + 3], dtype=torch.int64)
    x = big.to("xla")
    assert ((x + 1) * 2).cpu().tolist() == [((v + 1) * 2) for v in big.tolist()]
    if xlanb.runtime_state().jax_device().platform == "tpu":
        return      # float64 is two float32s there: float32's exponent range (a TPU v5e gave inf for 3e300)
    f = torch.tensor([1.0 + 2 ** -50, 1e300], dtype=torch.float64)
    assert (f.to("xla") * 3).cpu().tolist() == (f * 3).tolist()


def test_value_access():
    cpu = torch.randn(2, 3)
    x = cpu.to("xla")
    assert x.sum().item() == pytest.approx(cpu.sum().item(), rel=1e-5)
    assert x.tolist() == cpu.tolist()
    assert (x.numpy(force=True) == cpu.numpy()).all()
    with pytest.raises(TypeError, match=r"^can't convert xla:0 device type tensor to numpy. Use Tensor.cpu\(\) to copy"):
        x.numpy()            # as torch refuses it for cuda: .cpu().numpy() says where the copy happens
    text = repr(x)
    assert text.startswith("tensor(") and "device='xla:0'" in text
    assert bool((x == x).all())


def test_views_and_writes_through_them_match_cpu():
    cpu = torch.randn(4, 5)
    x = cpu.to("xla")
    ref = cpu.clone()
    for f in (lambda t: t[1].mul_(10), lambda t: t.t()[2].add_(100), lambda t: t.view(20)[3:7].fill_(-1),
              lambda t: t[:, 1:4:2].zero_(), lambda t: t.diagonal().add_(0.5)):
        f(x)
        f(ref)
    x[0] = 3.0
    ref[0] = 3.0
    x[:, -1] = torch.arange(4.0)
    ref[:, -1] = torch.arange(4.0)
    assert_close(x.cpu(), ref)
    v = x[1:3]
    assert_close(v.cpu(), ref[1:3])
    assert x.t().is_contiguous() is False


def test_in_place_returns_self_and_keeps_dtype():
    x = torch.ones(3, dtype=torch.float16, device="xla")
    y = x.add_(torch.ones(3, dtype=torch.float32, device="xla"))
    assert y is x
    assert x.dtype == torch.float16
    assert x.cpu().tolist() == [2.0, 2.0, 2.0]


def test_module_to_and_state_dict_round_trip(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    ref = copy.deepcopy(model)
    model.to("xla")
    assert all(p.device.type == "xla" for p in model.parameters())
    assert all(isinstance(p, nn.Parameter) for p in model.parameters())
    x = torch.randn(5, 3)
    assert_close(model(x.to("xla")).cpu(), ref(x), rtol=1e-5, atol=1e-6)

    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)          # saved as CPU tensors
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert all(t.device.type == "cpu" for t in loaded.values())
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).to("xla")
    fresh.load_state_dict(loaded)
    assert_close(fresh(x.to("xla")).cpu(), ref(x), rtol=1e-5, atol=1e-6)


def test_deepcopy_is_an_independent_copy():
    model = nn.Linear(2, 2).to("xla")
    twin = copy.deepcopy(model)
    assert isinstance(twin.weight, nn.Parameter) and twin.weight.device.type == "xla"
    with torch.no_grad():
        model.weight.add_(1.0)
    assert not torch.equal(model.weight.cpu(), twin.weight.cpu())
    assert_close(model.weight.cpu(), twin.weight.cpu() + 1.0)


def test_mixing_a_cpu_scalar_tensor_works():
    x = torch.ones(3, device="xla")
    y = x * torch.tensor(2.5)
    assert y.cpu().tolist() == [2.5, 2.5, 2.5]


def test_tied_parameters_stay_tied_after_to_xla():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 3)
            self.head = nn.Linear(3, 5, bias=False)
            self.head.weight = self.emb.weight
    model = Tied().to("xla")
    assert model.head.weight is model.emb.weight
    assert len(list(model.parameters())) == 1


@pytest.mark.parametrize("items", [
    lambda t: list(t),                                   # iteration: unbind(0)
    lambda t: t.unbind(-1),
    lambda t: t.split(3, dim=-1),                        # the last piece is shorter
    lambda t: t.split([1, 4, 2], dim=1),
    lambda t: t.chunk(3, dim=0),
])
def test_reading_the_pieces_of_a_tensor_downloads_it_once_and_gives_cpus_values(items):
    """Each piece is a view of one value: reading them one by one downloads that value once, and
    each piece is made alone on the host (a select or a narrow), not by splitting the whole again."""
    from xlanb import events
    from xlanb.state import runtime_state
    cpu = torch.arange(42.0).reshape(6, 7)
    x = (cpu.to("xla") * 2)
    xlanb.sync()
    seen = []
    runtime_state().subscribe(seen.append)
    try:
        got = [piece.cpu() for piece in items(x)]
    finally:
        runtime_state().unsubscribe(seen.append)
    want = items(cpu * 2)
    assert len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want))
    assert sum(isinstance(e, events.Transfer) and e.direction == "from_device" for e in seen) == 1


@pytest.mark.parametrize("fill", [
    lambda out: torch.arange(0, 4, out=out.narrow(1, 1, 2)),        # a strided view, as many elements
    lambda out: torch.linspace(0, 1, 4, out=out.narrow(1, 1, 2)),
    lambda out: torch.arange(0.0, 6.0, out=out.t()),
    lambda out: torch.arange(0, 4, out=out[0]),                     # another number of elements: resized
])
def test_a_range_written_into_an_out_view_keeps_its_layout_as_on_cpu(fill):
    """arange/linspace/logspace keep an out= tensor of as many elements (a view's strides included)
    and fill it in order; xla resized it to 1-d and wrote the storage in the wrong places."""
    import warnings
    results = {}
    for device in ("cpu", "xla"):
        out = torch.zeros(2, 3, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = fill(out)
        results[device] = (r.shape, r.stride(), r.cpu(), out.cpu())
    (shape, stride, r, whole), (xshape, xstride, xr, xwhole) = results["cpu"], results["xla"]
    assert (xshape, xstride) == (shape, stride)
    assert torch.equal(xr, r) and torch.equal(xwhole, whole)
