"""Lowering rules: linalg (matrix products, factorizations, solves).

Matrix products of float16/bfloat16 accumulate in float32 (as torch's kernels do);
float32 products take the XLA precision of the graph's `matmul_precision` (torch's setting when
the graph was built: lower/precision.py); float64 and integer products are exact. Factorizations follow LAPACK's conventions, as
torch's do: pivots are 1-based int32, `info` is int32 and 0 on success.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlanb.lower.dtypes import to_jax_dtype
from xlanb.lower.precision import dot_precision
from xlanb.lower.torch_versions import SOLVE_FACTORS_CONTIGUOUS_TRANSPOSE
from xlanb.lower.registry import lowers

_HALF = (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))


# Helpers --------------------------------------------------------------------------------

def _is_py_zero(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, jax.Array) and x == 0


def _is_py_one(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, jax.Array) and x == 1


def _acc_dtype(*xs):
    dt = np.dtype(jnp.result_type(*xs))
    return np.dtype(np.float32) if dt in _HALF else dt


def _einsum(spec, a, b):
    """einsum in torch's precision: float32 accumulation for half types."""
    dt = np.dtype(jnp.result_type(a, b))
    if dt in _HALF:
        return jnp.einsum(spec, a, b, preferred_element_type=jnp.float32, precision=dot_precision(dt))
    if dt == np.dtype(np.bool_):
        return jnp.einsum(spec, a.astype(jnp.int32), b.astype(jnp.int32)) != 0
    return jnp.einsum(spec, a, b, precision=dot_precision(dt))


def _matmul(a, b):
    dt = np.dtype(jnp.result_type(a, b))
    if dt in _HALF:
        return jnp.matmul(a, b, preferred_element_type=jnp.float32, precision=dot_precision(dt))
    return jnp.matmul(a, b, precision=dot_precision(dt))


def _scale_add(self, prod, beta, alpha):
    """beta * self + alpha * prod; a Python-0 beta ignores self (even NaN/inf). For integer
    and bool results torch converts alpha and beta to the result dtype first (0.6 -> 0)."""
    if not jnp.issubdtype(prod.dtype, jnp.inexact):
        alpha = alpha if _is_py_one(alpha) else jnp.asarray(alpha).astype(prod.dtype)
        beta = beta if _is_py_one(beta) or _is_py_zero(beta) else jnp.asarray(beta).astype(prod.dtype)
    out = prod if _is_py_one(alpha) else alpha * prod
    if _is_py_zero(beta):
        return out
    s = self.astype(prod.dtype)
    return (s if _is_py_one(beta) else beta * s) + out


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _mH(x):
    x = _mT(x)
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


def _bcast_batch(a, b):
    """Broadcasts the batch dims (all but the last two) of two matrix stacks."""
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:])


def _empty(dtype):
    return jnp.zeros((0,), dtype)


def _eye_like(n, x):
    return jnp.broadcast_to(jnp.eye(n, dtype=x.dtype), x.shape[:-2] + (n, n))


def _take_rows(x, perm):
    """x[..., perm[...], :] with broadcast batch dims."""
    batch = jnp.broadcast_shapes(x.shape[:-2], perm.shape[:-1])
    x = jnp.broadcast_to(x, batch + x.shape[-2:])
    perm = jnp.broadcast_to(perm, batch + perm.shape[-1:])
    return jnp.take_along_axis(x, perm[..., :, None], axis=-2)


def _lu(a):
    """(LU, 0-based pivots, permutation): a[perm] = L @ U."""
    if a.size == 0:     # LAPACK handles empty matrices and batches; XLA's lu does not
        k = min(a.shape[-2:])
        return (a, jnp.zeros(a.shape[:-2] + (k,), jnp.int32),
                jnp.broadcast_to(jnp.arange(a.shape[-2], dtype=jnp.int32), a.shape[:-1]))
    return lax.linalg.lu(a)


def _lu_info(lu_):
    """LAPACK getrf info: 1 + index of the first exactly-zero pivot, else 0."""
    k = min(lu_.shape[-2:])
    if k == 0 or lu_.size == 0:
        return jnp.zeros(lu_.shape[:-2], jnp.int32)
    d = jnp.diagonal(lu_, axis1=-2, axis2=-1)[..., :k]
    zero = d == 0
    first = jnp.argmax(zero, axis=-1).astype(jnp.int32) + 1
    return jnp.where(jnp.any(zero, axis=-1), first, 0).astype(jnp.int32)


def _tri(a, b, *, left, lower, trans=False, conj=False, unit=False):
    a, b = _bcast_batch(a, b)
    return lax.linalg.triangular_solve(a, b, left_side=left, lower=lower, transpose_a=trans,
                                       conjugate_a=conj, unit_diagonal=unit)


def _lu_solve_left(lu_, perm, b, adjoint):
    """Solves A X = B (or A^H X = B) from A's LU factors, A[perm] = L U."""
    cplx = jnp.iscomplexobj(lu_)
    if not adjoint:
        y = _take_rows(b, perm)
        y = _tri(lu_, y, left=True, lower=True, unit=True)
        return _tri(lu_, y, left=True, lower=False)
    # A^H = U^H L^H P^T, so P^T X = L^-H U^-H B
    y = _tri(lu_, b, left=True, lower=False, trans=True, conj=cplx)
    y = _tri(lu_, y, left=True, lower=True, trans=True, conj=cplx, unit=True)
    return _take_rows(y, jnp.argsort(perm, axis=-1))


def _lu_solve(lu_, perm, b, left=True, adjoint=False):
    if left:
        return _lu_solve_left(lu_, perm, b, adjoint)
    # X A = B  <=>  A^H X^H = B^H
    return _mH(_lu_solve_left(lu_, perm, _mH(b), not adjoint))


def _pivots_out(piv):
    return (piv + 1).astype(jnp.int32)


def _perm_from_pivots(pivots, m):
    """1-based LAPACK pivots -> the permutation `perm` with A[perm] = L U."""
    return lax.linalg.lu_pivots_to_permutation(pivots.astype(jnp.int32) - 1, m)


# Products -------------------------------------------------------------------------------

# XLA:TPU has no 64-bit integer dot: an int64 product failed in its compiler on a TPU v5e (int32
# compiled); torch_xla runs int64 dot on the CPU there too. The CPU computes these for int64 on a TPU
INT64_PRODUCT_AVOIDS = {"tpu:int64": "XLA:TPU has no 64-bit integer dot"}


@lowers("aten.mm.default", "aten.bmm.default", avoid=INT64_PRODUCT_AVOIDS)
def mm(self, mat2):
    return _matmul(self, mat2)


@lowers("aten.mm.dtype", "aten.bmm.dtype")
def mm_dtype(self, mat2, out_dtype):
    return _matmul(self, mat2).astype(to_jax_dtype(out_dtype))


@lowers("aten._int_mm.default")
def int_mm(self, mat2):
    return jnp.matmul(self, mat2, preferred_element_type=jnp.int32)


@lowers("aten._foreach_mm.default", avoid=INT64_PRODUCT_AVOIDS)
def foreach_mm(self, mat2):
    return [_matmul(a, b) for a, b in zip(self, mat2)]


@lowers("aten.addmm.default", "aten.baddbmm.default", avoid=INT64_PRODUCT_AVOIDS)
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    return _scale_add(self, _matmul(mat1, mat2), beta, alpha)


@lowers("aten.addmm.dtype", "aten.baddbmm.dtype")
def addmm_dtype(self, mat1, mat2, out_dtype, *, beta=1, alpha=1):
    return _scale_add(self, _matmul(mat1, mat2), beta, alpha).astype(to_jax_dtype(out_dtype))


@lowers("aten._addmm_activation.default", avoid=INT64_PRODUCT_AVOIDS)
def addmm_activation(self, mat1, mat2, *, beta=1, alpha=1, use_gelu=False):
    out = _scale_add(self, _matmul(mat1, mat2), beta, alpha)
    if use_gelu:    # torch's CPU kernel: exact (erf) gelu
        return jax.nn.gelu(out, approximate=False)
    return jnp.maximum(out, 0)


@lowers("aten.addbmm.default", avoid=INT64_PRODUCT_AVOIDS)
def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    return _scale_add(self, _einsum("bij,bjk->ik", batch1, batch2), beta, alpha)


@lowers("aten.mv.default", avoid=INT64_PRODUCT_AVOIDS)
def mv(self, vec):
    return _matmul(self, vec)


@lowers("aten.addmv.default", avoid=INT64_PRODUCT_AVOIDS)
def addmv(self, mat, vec, *, beta=1, alpha=1):
    return _scale_add(self, _matmul(mat, vec), beta, alpha)


@lowers("aten.dot.default", avoid=INT64_PRODUCT_AVOIDS)
def dot(self, tensor):
    return _einsum("i,i->", self, tensor)


@lowers("aten.vdot.default", avoid=INT64_PRODUCT_AVOIDS)
def vdot(self, other):
    return _einsum("i,i->", jnp.conj(self) if jnp.iscomplexobj(self) else self, other)


@lowers("aten.addr.default")
def addr(self, vec1, vec2, *, beta=1, alpha=1):
    if vec1.dtype == np.dtype(np.bool_):      # logical: (beta and self) or (alpha and outer)
        out = jnp.logical_and(vec1[:, None], vec2[None, :])
        if not isinstance(alpha, bool) or not alpha:
            out = jnp.logical_and(out, alpha != 0)
        if _is_py_zero(beta):
            return out
        return jnp.logical_or(out, jnp.logical_and(self, beta != 0))
    dt = _acc_dtype(vec1, vec2)
    prod = vec1.astype(dt)[:, None] * vec2.astype(dt)[None, :]
    return _scale_add(self, prod, beta, alpha)


@lowers("aten.trace.default")
def trace(self):
    dt = self.dtype
    if jnp.issubdtype(dt, jnp.integer) or dt == np.dtype(np.bool_):
        acc = jnp.int64
    else:
        acc = _acc_dtype(self)
    return jnp.trace(self.astype(acc))


@lowers("aten.diag_embed.default")
def diag_embed(self, offset=0, dim1=-2, dim2=-1):
    nd = self.ndim + 1
    dim1, dim2 = dim1 % nd, dim2 % nd
    k = self.shape[-1]
    n = k + abs(offset)
    idx = np.arange(k)
    rows, cols = idx + max(-offset, 0), idx + max(offset, 0)
    out = jnp.zeros(self.shape[:-1] + (n, n), self.dtype).at[..., rows, cols].set(self)
    if dim1 > dim2:
        dim1, dim2 = dim2, dim1
        out = _mT(out)
    return jnp.moveaxis(out, (-2, -1), (dim1, dim2))


@lowers("aten.linalg_cross.default")
def linalg_cross(self, other, *, dim=-1):
    shape = jnp.broadcast_shapes(self.shape, other.shape)
    a, b = jnp.broadcast_to(self, shape), jnp.broadcast_to(other, shape)
    a0, a1, a2 = (jnp.take(a, i, axis=dim) for i in range(3))
    b0, b1, b2 = (jnp.take(b, i, axis=dim) for i in range(3))
    return jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=dim % len(shape))


# Decompositions -----------------------------------------------------------------------

# XLA:TPU's SVD (jax's QDWH, the one algorithm it has) aborts the process at compile time when U and V
# are asked for with 64-bit types on, which xlanb lowers with (jax 0.10.2, libtpu 0.0.42: "shape.h:843
# Check failed: buffer != nullptr"; the same program compiles with them off): the CPU computes the ops
# whose rules take an SVD there (this one, linalg_extra.py's pinv)
SVD_AVOIDS = {"tpu": "XLA:TPU's SVD aborts the process when compiled with 64-bit types on (jax 0.10)"}
# on a TPU v5e torch.linalg.solve's float64 graph (these rules' LU, row permutation and triangular
# solves) failed in XLA:TPU's compiler, and passed with this avoid; float32 compiles. Pure JAX's float64
# solve, inv and slogdet were reported to raise on such a machine too; which piece fails is not isolated
LU_AVOIDS = {"tpu:float64": "XLA:TPU failed to compile this LU-based program in float64 (jax 0.10)"}


@lowers("aten._linalg_svd.default", avoid=SVD_AVOIDS)
def linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    if not compute_uv:
        s = jnp.linalg.svd(A, compute_uv=False)
        return _empty(A.dtype), s, _empty(A.dtype)
    u, s, vh = jnp.linalg.svd(A, full_matrices=full_matrices)
    return u, s, vh


def _hermitian_from(A, uplo):
    """The Hermitian matrix that the UPLO triangle of A describes (torch reads only that)."""
    if uplo.upper() == "U":
        A = _mH(A)
    low = jnp.tril(A)
    return low + _mH(jnp.tril(A, -1))


@lowers("aten._linalg_eigh.default")
def linalg_eigh(A, UPLO="L", compute_v=True):
    H = _hermitian_from(A, UPLO)
    if not compute_v:
        return jnp.linalg.eigvalsh(H), _empty(A.dtype)
    w, v = jnp.linalg.eigh(H, symmetrize_input=False)
    return w, v


@lowers("aten.linalg_eig.default")
def linalg_eig(self):
    w, v = jnp.linalg.eig(self)
    return w, v


@lowers("aten._linalg_eigvals.default")
def linalg_eigvals(self):
    return jnp.linalg.eigvals(self)


@lowers("aten.linalg_qr.default")
def linalg_qr(A, mode="reduced"):
    if mode == "r":
        r = jnp.linalg.qr(A, mode="r")
        return _empty(A.dtype), r
    q, r = jnp.linalg.qr(A, mode=mode)
    return q, r


@lowers("aten.geqrf.default")
def geqrf(self):
    from jax._src.lax.linalg import geqrf as _geqrf
    a, tau = _geqrf(self)
    return a, tau


@lowers("aten.ormqr.default")
def ormqr(self, input2, input3, left=True, transpose=False):
    return lax.linalg.ormqr(self, input2, input3, left=left, transpose=transpose)


@lowers("aten.linalg_householder_product.default")
def householder_product(input, tau):
    return lax.linalg.householder_product(input, tau)


def _det_parts(A):
    # torch factors A^T for a contiguous real A (and its backward solves with that LU):
    # captured tensors are contiguous, so follow that case
    lu_, piv, _ = _lu(A if jnp.iscomplexobj(A) else _mT(A))
    d = jnp.diagonal(lu_, axis1=-2, axis2=-1)
    n = A.shape[-1]
    odd = jnp.sum(piv != jnp.arange(n, dtype=piv.dtype), axis=-1) % 2 == 1
    return lu_, piv, d, odd


@lowers("aten._linalg_det.default", avoid=LU_AVOIDS)
def linalg_det(A):
    lu_, piv, d, odd = _det_parts(A)
    det = jnp.prod(d, axis=-1)
    return jnp.where(odd, -det, det), lu_, _pivots_out(piv)


@lowers("aten._linalg_slogdet.default", avoid=LU_AVOIDS)
def linalg_slogdet(A):
    lu_, piv, d, odd = _det_parts(A)
    absd = jnp.abs(d)
    logabsdet = jnp.sum(jnp.log(absd), axis=-1)
    if jnp.iscomplexobj(d):
        unit = jnp.where(absd == 0, 0, d / jnp.where(absd == 0, 1, absd).astype(d.dtype))
    else:
        unit = jnp.sign(d)
    sign = jnp.prod(unit, axis=-1)
    return jnp.where(odd, -sign, sign), logabsdet, lu_, _pivots_out(piv)


def _cholesky_info(A):
    """LAPACK potrf info for the lower triangle of A: the order of the first leading
    minor that is not positive definite (an unblocked factorization; only run on failure)."""
    n = A.shape[-1]
    H = jnp.tril(A) + _mH(jnp.tril(A, -1))
    ar = jnp.arange(n)

    def step(j, carry):
        M, info = carry
        d = jnp.real(M[..., j, j])
        bad = ~(d > 0) & (info == 0)
        info = jnp.where(bad, j + 1, info)
        sd = jnp.sqrt(jnp.where(d > 0, d, 1.0)).astype(M.dtype)
        col = jnp.where(ar > j, M[..., :, j], 0) / sd[..., None]
        M = M - col[..., :, None] * jnp.conj(col)[..., None, :]
        return M, info

    info0 = jnp.zeros(A.shape[:-2], jnp.int32)
    return lax.fori_loop(0, n, step, (H, info0))[1]


def _cholesky(A, upper):
    """(L or U, info); A's lower (upper when `upper`) triangle is read, as in torch."""
    if A.size == 0:
        return A, jnp.zeros(A.shape[:-2], jnp.int32)
    X = _mH(A) if upper else A
    L = lax.linalg.cholesky(X, symmetrize_input=False)
    failed = jnp.isnan(jnp.real(jnp.diagonal(L, axis1=-2, axis2=-1)))
    info = lax.cond(jnp.any(failed), _cholesky_info, lambda x: jnp.zeros(x.shape[:-2], jnp.int32), X)
    return (_mH(L) if upper else L), info


@lowers("aten.linalg_cholesky_ex.default")
def linalg_cholesky_ex(self, *, upper=False, check_errors=False):
    return _cholesky(self, upper)


@lowers("aten.cholesky.default")
def cholesky(self, upper=False):
    return _cholesky(self, upper)[0]


def _cholesky_solve(B, L, upper):
    if upper:      # A = U^H U
        y = _tri(L, B, left=True, lower=False, trans=True, conj=jnp.iscomplexobj(L))
        return _tri(L, y, left=True, lower=False)
    y = _tri(L, B, left=True, lower=True)
    return _tri(L, y, left=True, lower=True, trans=True, conj=jnp.iscomplexobj(L))


@lowers("aten.cholesky_solve.default")
def cholesky_solve(self, input2, upper=False):
    return _cholesky_solve(self, input2, upper)


@lowers("aten._cholesky_solve_helper.default")
def cholesky_solve_helper(self, A, upper):
    return _cholesky_solve(self, A, upper)


@lowers("aten.cholesky_inverse.default")
def cholesky_inverse(self, upper=False):
    return _cholesky_solve(_eye_like(self.shape[-1], self), self, upper)


@lowers("aten.linalg_inv_ex.default", avoid=LU_AVOIDS)
def linalg_inv_ex(A, *, check_errors=False):
    lu_, _, perm = _lu(A)
    inv = _lu_solve(lu_, perm, _eye_like(A.shape[-1], A))
    return inv, _lu_info(lu_)


def _vector_rhs(A, B):
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])


@lowers("aten._linalg_solve_ex.default", avoid=LU_AVOIDS)
def linalg_solve_ex(A, B, *, left=True, check_errors=False):
    lu_, piv, perm = _lu(A)
    vector = _vector_rhs(A, B)
    if vector:
        B = B[..., :, None] if left else B[..., None, :]
    x = _lu_solve(lu_, perm, B, left=left)
    if vector:
        x = x[..., 0] if left else x[..., 0, :]
    if SOLVE_FACTORS_CONTIGUOUS_TRANSPOSE and not jnp.iscomplexobj(A):     # torch 2.9, 2.10
        lu_, piv, _ = _lu(jnp.swapaxes(A, -1, -2))
    return x, lu_, _pivots_out(piv), _lu_info(lu_)


def _lu_nopivot(A):
    """LU without pivoting (Doolittle, unblocked): the packed factors."""
    m, n = A.shape[-2:]
    k = min(m, n)
    rows, cols = jnp.arange(m), jnp.arange(n)

    def step(j, M):
        p = M[..., j, j]
        lcol = jnp.where(rows > j, M[..., :, j] / p[..., None], 0)
        urow = jnp.where(cols > j, M[..., j, :], 0)
        M = M - lcol[..., :, None] * urow[..., None, :]
        return jnp.where((rows > j)[:, None] & (cols == j)[None, :], lcol[..., :, None], M)

    return lax.fori_loop(0, k, step, A)


@lowers("aten.linalg_lu_factor_ex.default", avoid=LU_AVOIDS)
def linalg_lu_factor_ex(A, *, pivot=True, check_errors=False):
    if pivot:
        lu_, piv, _ = _lu(A)
        pivots = _pivots_out(piv)
    else:
        lu_ = _lu_nopivot(A)
        k = min(A.shape[-2:])
        pivots = jnp.broadcast_to(jnp.arange(1, k + 1, dtype=jnp.int32), A.shape[:-2] + (k,))
    return lu_, pivots, _lu_info(lu_)


def _unpack_lu(lu_):
    m, n = lu_.shape[-2:]
    k = min(m, n)
    L = jnp.tril(lu_[..., :, :k], -1) + jnp.eye(m, k, dtype=lu_.dtype)
    U = jnp.triu(lu_[..., :k, :])
    return L, U


def _perm_matrix(perm, m, dtype):
    """P with A = P L U when A[perm] = L U."""
    return _mT(jax.nn.one_hot(perm, m, dtype=dtype))


@lowers("aten.linalg_lu.default", avoid=LU_AVOIDS)
def linalg_lu(A, *, pivot=True):
    m = A.shape[-2]
    if pivot:
        lu_, _, perm = _lu(A)
        P = _perm_matrix(perm, m, A.dtype)
    else:
        lu_ = _lu_nopivot(A)
        P = _empty(A.dtype)
    L, U = _unpack_lu(lu_)
    return P, L, U


@lowers("aten.lu_unpack.default")
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    m = LU_data.shape[-2]
    if unpack_data:
        L, U = _unpack_lu(LU_data)
    else:
        L = U = _empty(LU_data.dtype)
    if unpack_pivots:
        P = _perm_matrix(_perm_from_pivots(LU_pivots, m), m, LU_data.dtype)
    else:
        P = _empty(LU_data.dtype)
    return P, L, U


@lowers("aten.linalg_lu_solve.default", avoid=LU_AVOIDS)
def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    perm = _perm_from_pivots(pivots, LU.shape[-2])
    return _lu_solve(LU, perm, B, left=left, adjoint=adjoint)


@lowers("aten.triangular_solve.default", avoid=LU_AVOIDS)
def triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
    A_b, _ = _bcast_batch(A, self)
    x = _tri(A, self, left=True, lower=not upper, trans=transpose, unit=unitriangular)
    return x, A_b


@lowers("aten.linalg_solve_triangular.default", avoid=LU_AVOIDS)
def linalg_solve_triangular(self, B, *, upper, left=True, unitriangular=False):
    return _tri(self, B, left=left, lower=not upper, unit=unitriangular)


@lowers("aten.linalg_matrix_exp.default")
def linalg_matrix_exp(self):
    dt = self.dtype
    x = self.astype(jnp.float32) if dt in _HALF else self
    if x.ndim == 2:
        return jax.scipy.linalg.expm(x)
    flat = x.reshape((-1,) + x.shape[-2:])
    return jax.vmap(jax.scipy.linalg.expm)(flat).reshape(x.shape)


@lowers("aten._linalg_check_errors.default")
def linalg_check_errors(info, api_name, *, is_matrix):
    return ()
