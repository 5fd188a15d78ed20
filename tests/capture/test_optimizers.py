"""torch's optimizers take their foreach path on xla tensors (capture/optimizers.py): one op for all
parameters where the per-parameter loop has one per parameter, with the values torch computes."""

import pytest
import torch
from torch.utils._foreach_utils import _get_foreach_kernels_supported_devices

import xlanb
from helpers import assert_close, compiles, eager_compiles

# torch offers its foreach path to the devices this lists: a renamed PrivateUse1 (torch >= 2.10), not
# torch 2.9's own XLA device type, which xlanb takes there (capture/torch_versions.py)
foreach_device = pytest.mark.skipif(
    xlanb.device().type not in _get_foreach_kernels_supported_devices(),
    reason="this torch offers no foreach path to the xla device type (torch 2.9: its own XLA type)")

OPTIMIZERS = {
    "sgd": lambda params, **kw: torch.optim.SGD(params, lr=0.1, momentum=0.9, **kw),
    "adam": lambda params, **kw: torch.optim.Adam(params, lr=0.01, **kw),
    "adamw": lambda params, **kw: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1, **kw),
}


def _model():
    torch.manual_seed(0)
    # four parameter shapes: the per-parameter loop compiles each of its ops once per shape
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def _train(model, make, x, steps=3, **kw):
    opt = make(model.parameters(), **kw)
    for _ in range(steps):
        opt.zero_grad()
        model(x).square().sum().backward()
        opt.step()
    return model


@foreach_device
def test_xla_parameters_take_the_foreach_path():
    from torch.optim.optimizer import _default_to_fused_or_foreach
    params = list(_model().to("xla").parameters())
    assert _default_to_fused_or_foreach(params, differentiable=False) == (False, True)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_values_match_torch_cpu(name):
    x = torch.randn(4, 6)
    want = _train(_model(), OPTIMIZERS[name], x)            # CPU: the per-parameter loop
    got = _train(_model().to("xla"), OPTIMIZERS[name], x.to("xla"))
    # Adam divides by sqrt(v): a gradient's last-bit difference (a TPU's tanh) moves an update by ~1e-5
    for w, g in zip(want.parameters(), got.parameters()):
        assert_close(g.cpu(), w.detach(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_an_eager_step_is_one_graph_foreach_or_not(name):
    """Eager mode runs an optimizer step as one graph (capture/dispatch.py), its foreach ops or its
    per-parameter loop alike: no eager op executable."""
    x = torch.randn(4, 6, device="xla")
    for foreach in (None, False):
        xlanb.runtime_state().cache.clear()
        model = _model().to("xla")
        opt = OPTIMIZERS[name](model.parameters(), foreach=foreach)
        with xlanb.eager_mode_context(True):
            model(x).square().sum().backward()
            before = compiles(), eager_compiles()
            opt.step()
            assert (compiles() - before[0], eager_compiles() - before[1]) == (1, 0), foreach


@foreach_device
def test_one_eager_executable_per_foreach_op():
    """A foreach op run in eager mode (outside a step) is one executable for all its tensors, where a
    loop over them compiles one per op and shape."""
    shapes = [(6, 5), (5,), (5, 3), (3,)]
    with xlanb.eager_mode_context(True):
        params = [torch.ones(s, device="xla") for s in shapes]
        before = eager_compiles()
        torch._foreach_mul_(params, 0.5)
        foreach = eager_compiles() - before
        before = eager_compiles()
        for p in params:
            p.mul_(0.5)
        loop = eager_compiles() - before
    assert (foreach, loop) == (1, len(shapes))
    assert all(torch.equal(p.cpu(), torch.full(s, 0.25)) for p, s in zip(params, shapes))
