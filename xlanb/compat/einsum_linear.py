"""torch_xla's linear written as einsums, with its own backward (`XLAPatchedLinear`, `EinsumLinear`,
`apply_xla_patch_to_nn_linear`), and `apply_backward_optimization_barrier`.

torch_xla lowers `nn.Linear` through reshapes and a transposed weight, which its sharding
propagation handles poorly, so it offers a linear whose forward and backward are each one einsum.
xlanb lowers torch's linear to one `dot_general` already; these exist so that torch_xla's scripts
run unchanged, and they compute F.linear's values (and gradients) on every device.
"""

from __future__ import annotations

import torch

from xlanb.compat.steps import optimization_barrier_


class XLAPatchedLinear(torch.autograd.Function):
    """`XLAPatchedLinear.apply(input, weight, bias=None)`: F.linear as einsums, forward and backward."""

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight)
        ctx.has_bias = bias is not None
        out = torch.einsum("...i,oi->...o", input, weight)
        return out if bias is None else out + bias

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        wants_input, wants_weight, wants_bias = ctx.needs_input_grad
        grad_input = torch.einsum("...o,oi->...i", grad_output, weight) if wants_input else None
        grad_weight = torch.einsum("...o,...i->oi", grad_output, input) if wants_weight else None
        grad_bias = None
        if ctx.has_bias and wants_bias:
            grad_bias = grad_output.reshape(-1, grad_output.shape[-1]).sum(0)
        return grad_input, grad_weight, grad_bias


def xla_patched_nn_linear_forward(m: torch.nn.Linear, input: torch.Tensor) -> torch.Tensor:
    return XLAPatchedLinear.apply(input, m.weight, m.bias)


class EinsumLinear(torch.nn.Linear):
    """An `nn.Linear` whose forward is `XLAPatchedLinear`."""

    def forward(self, input):
        return xla_patched_nn_linear_forward(self, input)


def apply_xla_patch_to_nn_linear(module: torch.nn.Module) -> torch.nn.Module:
    """Replaces every `nn.Linear` under `module` (itself excluded, as in torch_xla) by an
    `EinsumLinear` holding the same Parameter objects (torch_xla copies them through a state dict;
    keeping them lets an optimizer made before the patch go on updating the model). Returns `module`."""
    for name, child in module.named_children():
        if isinstance(child, torch.nn.Linear) and not isinstance(child, EinsumLinear):
            with torch.device("meta"):
                patched = EinsumLinear(child.in_features, child.out_features, bias=child.bias is not None)
            patched.weight, patched.bias = child.weight, child.bias      # the Parameters themselves
            patched.train(child.training)
            setattr(module, name, patched)
        else:
            apply_xla_patch_to_nn_linear(child)
    return module


def apply_backward_optimization_barrier(m: torch.nn.Module) -> None:
    """After `m`'s backward, its parameters' gradients so far and the gradients it passes on go
    through one optimization barrier (`xm.optimization_barrier_`), so XLA does not fuse that
    backward with what follows."""

    def barrier(module, grad_input, grad_output):
        tensors = [p.grad for p in module.parameters() if p.grad is not None]
        tensors += [g for g in grad_input if isinstance(g, torch.Tensor)]
        optimization_barrier_(tensors)

    m.register_full_backward_hook(barrier)
