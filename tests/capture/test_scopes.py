"""Module scopes (capture/scopes.py): the nn.Module path each recorded op carries, forward and
backward, when a forward raises and when the autograd engine runs a forward again (a checkpoint)."""

import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import xlanb
from xlanb.capture.scopes import recording_modules
from xlanb.capture.tensor import base_node
from xlanb.ir.graph import build_graph
from xlanb.state import runtime_state


class Net(nn.Module):
    def __init__(self, checkpointed: bool):
        super().__init__()
        self.checkpointed = checkpointed
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 4), nn.Tanh()), nn.Linear(4, 2)

    def forward(self, x):
        h = self.a(x).exp()
        h = checkpoint(self.b, h, use_reentrant=False) if self.checkpointed else self.b(h)
        return self.c(h)


def _ops_by_scope(tensors) -> dict:
    found = {}
    for n in build_graph([base_node(t) for t in tensors], "g").order:
        if n.buffer is None:
            found.setdefault(n.scope, []).append(n.name)
    return found


@pytest.mark.parametrize("checkpointed", [False, True])
def test_backward_ops_carry_their_forwards_module_with_and_without_a_checkpoint(checkpointed):
    """A checkpointed module runs again inside backward, on the engine's thread (its own autograd
    counter), and stops early by raising: the marks of the recorded forward stay, its recomputed ops
    are named as in the model, and every module's backward ops carry that module."""
    torch.manual_seed(0)
    net = Net(checkpointed).to("xla")
    x = torch.ones(3, 4, device="xla")
    xlanb.sync()
    with recording_modules():
        net(x).sum().backward()
        found = _ops_by_scope([p.grad for p in net.parameters()])
        assert runtime_state().module_stack == []
    xlanb.sync()
    assert "aten.tanh_backward.default" in found["b.1"]
    assert found["a"].count("aten.mm.default") == 1           # a's weight gradient (x needs none)
    assert found["b.0"].count("aten.mm.default") == 2         # b.0's weight and input gradients
    assert found["c"].count("aten.mm.default") == 2
    assert "aten.exp.default" in found[""]                     # Net.forward's own op
    assert found["b.0"].count("aten.addmm.default") == (2 if checkpointed else 1)    # recomputed in backward
    assert set(found) <= {"", "a", "b.0", "b.1", "c", None}    # nothing named outside the model


def test_a_forward_that_raises_leaves_no_module_running():
    class Bad(nn.Module):
        def forward(self, x):
            raise ValueError("bad input")

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.bad, self.good = Bad(), nn.Linear(4, 4)

        def forward(self, x, fail):
            return self.bad(x) if fail else self.good(x)

    outer = Outer().to("xla")
    x = torch.ones(2, 4, device="xla")
    xlanb.sync()
    with recording_modules():
        with pytest.raises(ValueError, match="bad input"):
            outer(x, True)
        assert runtime_state().module_stack == []
        y = outer(x, False)
        assert set(_ops_by_scope([y])) == {"good"}
    xlanb.sync()


def test_module_calls_keep_torchs_fast_path_and_its_own_call_outside_scopes():
    """Scopes wrap nn.Module.__call__ while recorded (no global module hook: torch's module call
    keeps its fast path) and put torch's own back when the last scope closes."""
    from torch.nn.modules import module as torch_module
    torchs = nn.Module.__call__
    net = nn.Sequential(nn.Linear(4, 4)).to("xla")
    x = torch.ones(2, 4, device="xla")
    xlanb.sync()
    with recording_modules():
        assert nn.Module.__call__ is not torchs
        with recording_modules():
            pass
        assert nn.Module.__call__ is not torchs                  # the outer scope is still open
        assert not (torch_module._global_forward_hooks or torch_module._global_forward_pre_hooks)
        y = net(x)
        assert set(_ops_by_scope([y])) == {"0"}
    assert nn.Module.__call__ is torchs
    assert runtime_state().module_scope is None
    xlanb.sync()


def test_a_wrapper_put_over_the_scopes_by_another_library_stays_and_records_nothing_after():
    """Another library wraps Module.__call__ while a scope is open (as torch.fx does while it traces):
    closing the scope leaves its wrapper in place, and the scope wrapper under it calls straight through."""
    torchs = nn.Module.__call__
    net = nn.Sequential(nn.Linear(4, 4)).to("xla")
    x = torch.ones(2, 4, device="xla")
    xlanb.sync()
    try:
        with recording_modules():
            inner = nn.Module.__call__
            calls = []

            def theirs(self, *args, **kwargs):
                calls.append(type(self).__name__)
                return inner(self, *args, **kwargs)
            nn.Module.__call__ = theirs
        assert nn.Module.__call__ is theirs
        y = net(x)
        assert calls == ["Sequential", "Linear"]
        assert runtime_state().module_stack == [] and runtime_state().module_scope is None
        assert set(_ops_by_scope([y])) == {None}
        with recording_modules():                 # a new scope wraps theirs, and names modules again
            z = net(x)
            assert set(_ops_by_scope([z])) == {"0"}
        assert nn.Module.__call__ is theirs
    finally:
        nn.Module.__call__ = torchs
    xlanb.sync()
