"""functorch's aot_function over xla tensors (AOT autograd traces them as plain tensors): the forward
and the backward graphs run on xla tensors and give CPU's values; the gradient that reaches the
backward graph is an xla tensor, which AOT autograd accepts for the plain tensor it traced."""

import torch
from functorch.compile import aot_function, make_boxed_func
from helpers import assert_close


def _body(x, w):
    return torch.tanh(x @ w).sum(1) * 2


def test_forward_and_backward_match_cpu():
    x_cpu, w_cpu = torch.randn(4, 3), torch.randn(3, 5, requires_grad=True)
    compiled = aot_function(_body, lambda gm, _: make_boxed_func(gm))
    w = w_cpu.detach().to("xla").requires_grad_(True)
    y = compiled(x_cpu.to("xla"), w)
    y.sum().backward()
    _body(x_cpu, w_cpu).sum().backward()
    assert_close(y.detach().cpu(), _body(x_cpu, w_cpu.detach()))
    assert_close(w.grad.cpu(), w_cpu.grad)
