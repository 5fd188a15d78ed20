"""A fill written in place and kept (an optimizer's state) is device data at the next sync
(capture/fills.py): the first step runs the graph of the steps after it, so it compiles once; a fill
written in place and dropped before the sync stays a constant of its graph."""

import pytest
import torch

import xlanb
from xlanb import events, hooks
from helpers import assert_close, compiles

OPTIMIZERS = {                          # each makes its state with a fill on the first step
    "adam": lambda params: torch.optim.Adam(params, lr=0.01),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1),
    "adagrad": lambda params: torch.optim.Adagrad(params, lr=0.1, initial_accumulator_value=0.5),
    "rmsprop": lambda params: torch.optim.RMSprop(params, lr=0.01),
}


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def _to_device(t: torch.Tensor) -> torch.Tensor:
    return t.to("xla")


def _uploads(since) -> list:
    return [e for e in since if isinstance(e, events.Transfer) and e.direction == "to_device"]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_an_optimizers_first_step_compiles_the_graph_of_the_later_ones(name):
    x = torch.randn(4, 6)
    cpu, dev = _model(), _model().to("xla")
    opt_cpu, opt_dev = OPTIMIZERS[name](cpu.parameters()), OPTIMIZERS[name](dev.parameters())
    compiled = []
    for _ in range(3):
        for model, opt, inp in ((cpu, opt_cpu, x), (dev, opt_dev, _to_device(x))):
            opt.zero_grad()
            model(inp).square().sum().backward()
            opt.step()
        before = compiles()
        xlanb.sync()
        compiled.append(compiles() - before)
    assert compiled == [1, 0, 0]
    for p_dev, p_cpu in zip(dev.parameters(), cpu.parameters()):
        assert_close(p_dev.cpu(), p_cpu)
        for key, value in opt_cpu.state[p_cpu].items():
            assert_close(opt_dev.state[p_dev][key].cpu(), value, msg=key)


@pytest.mark.parametrize("make,value", [(lambda: torch.zeros(3, device="xla"), 0.0),
                                        (lambda: torch.full((3,), 0.5, device="xla"), 0.5),
                                        (lambda: torch.ones(3).to("xla").new_ones(3), 1.0)],
                         ids=["zeros", "full", "new_ones"])
def test_a_kept_fill_written_in_place_is_an_input_from_the_first_sync(make, value):
    t = make()
    mark = hooks.mark()
    for _ in range(3):
        t.mul_(2.0).add_(1.0)
        xlanb.sync()
    (step,) = [e for e in hooks.since(mark) if isinstance(e, events.Compile)]     # one graph for the three
    assert len(step.inputs) == 1
    assert t.cpu().tolist() == [((value * 2 + 1) * 2 + 1) * 2 + 1] * 3


def test_a_fill_dropped_before_the_sync_stays_a_constant_of_its_graph():
    x = torch.arange(5.0).to("xla")
    xlanb.sync()
    mark = hooks.mark()
    mask = torch.zeros(5, device="xla")
    mask.add_(x)
    y = mask * 2
    del mask
    xlanb.sync()
    assert _uploads(hooks.since(mark)) == []
    (step,) = [e for e in hooks.since(mark) if isinstance(e, events.Compile)]
    assert len(step.inputs) == 1                # x alone: the zeros are a constant
    assert y.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]


def test_a_kept_fill_overwritten_without_being_read_is_not_uploaded():
    buf = torch.zeros(4, device="xla")
    mark = hooks.mark()
    buf.copy_(torch.arange(4.0))
    buf.add_(1.0)
    xlanb.sync()
    (upload,) = _uploads(hooks.since(mark))       # the copied values only
    assert upload.nbytes == 16
    assert buf.cpu().tolist() == [1.0, 2.0, 3.0, 4.0]


def test_a_failed_upload_of_a_fill_loses_nothing():
    t = torch.zeros(3, device="xla")
    t.add_(2.0)
    xlanb.runtime_state().inject_fault("transfer", "oom")
    with pytest.raises(Exception, match="RESOURCE_EXHAUSTED"):
        xlanb.sync()
    xlanb.sync()                                 # the fill stays a constant of the graph: the same value
    assert t.cpu().tolist() == [2.0, 2.0, 2.0]
    t.add_(1.0)
    xlanb.sync()
    assert t.cpu().tolist() == [3.0, 3.0, 3.0]
