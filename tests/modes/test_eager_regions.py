"""Eager mode runs a backward pass and an optimizer step each as one graph ('backward', 'optimizer
step', capture/dispatch.py): their ops are recorded lazily and run when the engine or the step returns,
at the user's line; everything else stays op by op."""

import contextlib

import pytest
import torch

import xlanb
from xlanb import events
from xlanb.state import runtime_state

from helpers import assert_close, compiles, eager_compiles

_rt = runtime_state()


@contextlib.contextmanager
def compiled_names():
    """The names of the graphs compiled in the block, in order."""
    names: list = []

    def listen(event):
        if isinstance(event, events.Compile):
            names.append(event.name)
    _rt.subscribe(listen)
    try:
        yield names
    finally:
        _rt.unsubscribe(listen)


def _mlp(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3)).to(device)


def _data(device):
    g = torch.Generator().manual_seed(1)
    return torch.randn(4, 6, generator=g).to(device), torch.randint(0, 3, (4,), generator=g).to(device)


def _train(device, optimizer, steps: int):
    model = _mlp(device)
    x, y = _data(device)
    opt = optimizer(model.parameters())
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model


# (optimizer, the steps that compile the step's graph): SGD's first step makes its momentum buffers
# (a clone of the gradients) where later steps update them, another program; AdamW's first step fills
# its moments, which are uploaded before the graph runs (capture/fills.py), so its graph is every step's
@pytest.mark.parametrize("optimizer,compiling_steps", [
    (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), (0, 1)),
    (lambda p: torch.optim.AdamW(p, lr=0.01), (0,))], ids=["sgd", "adamw"])
def test_backward_and_step_are_one_graph_each_and_match_cpu(optimizer, compiling_steps):
    with xlanb.eager_mode_context(True):
        model = _mlp("xla")
        x, y = _data("xla")
        opt = optimizer(model.parameters())
        xlanb.metrics.clear_all()
        for step in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            with compiled_names() as names:
                loss.backward()
            # backward() makes the loss's gradient (ones_like, an eager op) before the engine runs
            assert names == (["aten.ones_like.default", "backward"] if step == 0 else []), names
            assert xlanb.is_eager_mode()
            assert all(p.grad is not None and p.grad.device.type == "xla" for p in model.parameters())
            with compiled_names() as names:
                opt.step()
            assert names == (["optimizer step"] if step in compiling_steps else []), names
            assert xlanb.is_eager_mode()
        assert compiles() == 1 + len(compiling_steps)     # the graphs above; the forward's ops are eager ops
        assert eager_compiles() > 0
    expected = _train("cpu", optimizer, 3)
    for got, want in zip(model.parameters(), expected.parameters()):
        assert_close(got.cpu(), want)


def test_lazy_mode_is_unchanged():
    model = _mlp("xla")
    x, y = _data("xla")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with compiled_names() as names:
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        xlanb.sync()
    assert names == ["sync"]


def test_an_error_inside_backward_still_raises_at_backward_and_eager_mode_comes_back():
    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, grad):
            return grad[torch.tensor([7], device=grad.device)]      # out of range for a 3-vector

    with xlanb.eager_mode_context(True):
        a = torch.ones(3, device="xla", requires_grad=True)
        out = Boom.apply(a).sum()
        with pytest.raises(IndexError):
            out.backward()
        assert xlanb.is_eager_mode()
        assert (torch.ones(2, device="xla") + 1).tolist() == [2.0, 2.0]


class _Raising(torch.optim.Optimizer):
    """Scales its parameters in place, then raises: what it did before the error is kept."""

    def __init__(self, params):
        super().__init__(params, {})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.mul_(3)
        raise RuntimeError("the step failed")


def test_a_step_that_raises_leaves_eager_mode_on_and_its_writes_done():
    with xlanb.eager_mode_context(True):
        p = torch.nn.Parameter(torch.full((2,), 2.0, device="xla"))
        opt = _Raising([p])
        with pytest.raises(RuntimeError, match="the step failed"):
            opt.step()
        assert xlanb.is_eager_mode()
        assert p.detach().tolist() == [6.0, 6.0]
        assert not _rt.pending or all(ref() is None for ref in _rt.pending)


def test_inside_xlanb_compile_the_step_is_the_regions_graph():
    """xlanb.compile's region records lazily already: its backward and step are part of its graph."""
    model = _mlp("xla")
    x, y = _data("xla")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with xlanb.eager_mode_context(True):
        with compiled_names() as names:
            with xlanb.compile(name="train"):
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        assert xlanb.is_eager_mode()
    assert names == ["train"], names


def test_debug_nans_raises_a_nan_made_in_backward_at_the_backward_line():
    """sqrt's gradient at 0 is inf, and abs's sign (0 there) times inf is NaN: made by a backward op."""
    expected = torch.tensor([0.0, 4.0], requires_grad=True)
    expected.abs().sqrt().sum().backward()
    assert torch.isnan(expected.grad[0])
    with xlanb.eager_mode_context(True), xlanb.config.override(debug_nans=True):
        x = torch.tensor([0.0, 4.0], device="xla", requires_grad=True)
        y = x.abs().sqrt().sum()
        with pytest.raises(FloatingPointError, match="NaN produced by aten"):
            y.backward()
        assert xlanb.is_eager_mode()
    assert torch.isnan(x.grad.cpu()[0]) and x.grad.cpu()[1] == 0.25
