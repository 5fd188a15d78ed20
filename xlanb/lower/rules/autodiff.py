"""Helpers for backward rules: the accumulation dtype, and backward ops derived from a
forward rule through jax.vjp (no rules of its own)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def acc_dtype(dtype):
    """The dtype torch's CPU kernels accumulate in (float32 for half types)."""
    if dtype in (jnp.float16, jnp.bfloat16):
        return jnp.dtype(jnp.float32)
    if not jnp.issubdtype(dtype, jnp.inexact):
        return jnp.dtype(jnp.float32)
    return jnp.dtype(dtype)


def grad_at(f, x, grad_output):
    """A backward op from its forward rule: grad_output pulled back through f at x (jax.vjp)."""
    out, vjp = jax.vjp(f, x)
    return vjp(grad_output.astype(out.dtype))[0]


def linear_backward(f, grad_output, shape, dtype):
    """grad_input of a linear map f (pooling, padding, resampling): its transpose, taken at zeros."""
    return grad_at(f, jnp.zeros(tuple(shape), acc_dtype(dtype)), grad_output)
