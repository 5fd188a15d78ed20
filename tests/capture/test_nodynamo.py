"""torch._dynamo (about a second to import) stays unimported until something needs it, and
torch's dynamo-disabled functions behave the same before and after it is imported."""

import subprocess
import sys
import textwrap

import torch

from xlanb.capture import nodynamo


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_torch_still_has_the_wrapper_shape_the_stand_in_relies_on():
    """If this fails after a torch upgrade, nodynamo.install() silently does nothing: update it."""
    assert nodynamo._wrapper_code() is not None
    inner = torch.optim.Optimizer.zero_grad
    assert inner.__code__ is nodynamo._wrapper_code()            # zero_grad is one of the wrapped functions


def test_ops_backward_and_zero_grad_do_not_import_dynamo():
    out = run("""
        import sys, torch, xlanb
        x = torch.ones(4, 4, device="xla")
        y = (x * 2.5 + 1).relu().sum()
        m = torch.nn.Linear(4, 4).to("xla")
        m(x).sum().backward()
        torch.optim.Optimizer.zero_grad(torch.optim.SGD(m.parameters(), lr=0.1))
        xlanb.sync(wait=True)
        print(y.item(), "torch._dynamo" in sys.modules)
    """)
    assert out.split() == ["56.0", "False"]


def test_after_dynamo_is_imported_the_real_disable_wrapper_is_used():
    out = run("""
        import sys, torch, xlanb
        from xlanb.capture.nodynamo import _DynamoDisabled
        fn = torch.optim.Optimizer.zero_grad.__wrapped__
        assert isinstance(fn.__dynamo_disable, _DynamoDisabled)
        compiled = torch.compile(lambda a: a.sin() * 2, backend="eager")
        print(float(compiled(torch.zeros(2)).sum()))
        m = torch.nn.Linear(2, 2)
        m(torch.ones(2)).sum().backward()
        torch.optim.SGD(m.parameters(), lr=0.1).zero_grad()
        print(type(fn.__dynamo_disable).__name__ != "_DynamoDisabled", m.weight.grad is None)
    """)
    assert out.split() == ["0.0", "True", "True"]
