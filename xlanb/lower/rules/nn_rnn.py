"""The fused LSTM and GRU cells torch's RNN modules call on an accelerator.

`nn.LSTM`, `nn.GRU`, `nn.LSTMCell` and `nn.GRUCell` on a device other than the CPU run each step's
gate arithmetic as one fused op (`_thnn_fused_lstm_cell`, `_thnn_fused_gru_cell`, CUDA's kernels);
CPU has no kernel for them. The rules compute what those kernels compute, including the workspace
their backward ops read (the activated gates; for the GRU also hx and the hidden candidate), so that
torch's own derivative formulas apply: the forward's workspace layout is the backward's contract.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xlanb.lower.registry import lowers


@lowers("aten._thnn_fused_lstm_cell.default")
def fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    total = input_gates + hidden_gates          # the pre-activation gates, with both biases
    if input_bias is not None:
        total = total + input_bias + hidden_bias
    i, f, c, o = jnp.split(total, 4, axis=-1)
    i, f, c, o = jax.nn.sigmoid(i), jax.nn.sigmoid(f), jnp.tanh(c), jax.nn.sigmoid(o)
    cy = f * cx + i * c
    hy = o * jnp.tanh(cy)
    return hy, cy, jnp.concatenate([i, f, c, o], axis=-1)      # workspace: the activated gates


@lowers("aten._thnn_fused_lstm_cell_backward_impl.default")
def fused_lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, c, o = jnp.split(workspace, 4, axis=-1)
    grad_hy = jnp.zeros_like(cy) if grad_hy is None else grad_hy
    tanh_cy = jnp.tanh(cy)
    grad_o = grad_hy * tanh_cy * o * (1 - o)
    grad_c = grad_hy * o * (1 - tanh_cy * tanh_cy)
    if grad_cy is not None:
        grad_c = grad_c + grad_cy
    grad_i = grad_c * c * i * (1 - i)
    grad_f = grad_c * cx * f * (1 - f)
    grad_g = grad_c * i * (1 - c * c)
    grad_gates = jnp.concatenate([grad_i, grad_f, grad_g, grad_o], axis=-1)
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, grad_c * f, grad_bias


@lowers("aten._thnn_fused_gru_cell.default")
def fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    ir, ii, in_ = jnp.split(input_gates if input_bias is None else input_gates + input_bias, 3, axis=-1)
    hr, hi, hn = jnp.split(hidden_gates if hidden_bias is None else hidden_gates + hidden_bias, 3, axis=-1)
    r = jax.nn.sigmoid(ir + hr)
    z = jax.nn.sigmoid(ii + hi)
    n = jnp.tanh(in_ + r * hn)
    hy = n + z * (hx - n)
    return hy, jnp.concatenate([r, z, n, hx, hn], axis=-1)       # workspace: what the backward reads


@lowers("aten._thnn_fused_gru_cell_backward.default")
def fused_gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, hx, hn = jnp.split(workspace, 5, axis=-1)
    grad_z = grad_hy * (hx - n) * z * (1 - z)
    grad_n = grad_hy * (1 - z) * (1 - n * n)
    grad_r = grad_n * hn * r * (1 - r)
    grad_input_gates = jnp.concatenate([grad_r, grad_z, grad_n], axis=-1)
    grad_hidden_gates = jnp.concatenate([grad_r, grad_z, grad_n * r], axis=-1)
    grad_hx = grad_hy * z
    if not has_bias:
        return grad_input_gates, grad_hidden_gates, grad_hx, None, None
    return grad_input_gates, grad_hidden_gates, grad_hx, grad_input_gates.sum(0), grad_hidden_gates.sum(0)
