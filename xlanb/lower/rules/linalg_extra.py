"""Lowering rules: the pseudoinverse (linalg_pinv), as ATen computes it from the SVD (or eigh
for hermitian inputs), with ATen's default tolerances."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from xlanb.lower.registry import lowers
from xlanb.lower.rules.linalg import SVD_AVOIDS


def _mH(x):
    x = jnp.swapaxes(x, -1, -2)
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


def _pinv(a, atol, rtol, hermitian):
    real = np.dtype(jnp.real(jnp.zeros((), a.dtype)).dtype)
    atol = jnp.zeros((), np.float64) if atol is None else jnp.asarray(atol)
    if rtol is None:
        default = np.finfo(real).eps * max(a.shape[-1], a.shape[-2])
        rtol = jnp.where(atol > 0, 0.0, default)
    rtol = jnp.asarray(rtol)
    if not hermitian:
        u, s, vh = jnp.linalg.svd(a, full_matrices=False)
        top = s[..., :1]
        tol = jnp.maximum(atol[..., None], rtol[..., None] * top)
        s_inv = jnp.where(s > tol, 1 / s, 0).astype(a.dtype)
        return jnp.matmul(_mH(vh) * s_inv[..., None, :], _mH(u), precision="highest")
    s, u = jnp.linalg.eigh(a, UPLO="L", symmetrize_input=False)     # torch reads the lower triangle
    top = jnp.max(jnp.abs(s), axis=-1, keepdims=True)
    tol = jnp.maximum(atol[..., None], rtol[..., None] * top)
    s_inv = jnp.where(jnp.abs(s) > tol, 1 / s, 0).astype(a.dtype)
    return jnp.matmul(u * s_inv[..., None, :], _mH(u), precision="highest")


@lowers("aten.linalg_pinv.atol_rtol_tensor", "aten.linalg_pinv.atol_rtol_float", avoid=SVD_AVOIDS)
def linalg_pinv(self, *, atol=None, rtol=None, hermitian=False):
    return _pinv(self, atol, rtol, hermitian)


@lowers("aten.linalg_pinv.default", "aten.linalg_pinv.rcond_tensor", avoid=SVD_AVOIDS)
def linalg_pinv_rcond(self, rcond, hermitian=False):
    return _pinv(self, jnp.zeros((), np.float64), rcond, hermitian)
