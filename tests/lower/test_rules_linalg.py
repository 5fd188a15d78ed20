import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702
from helpers import FLOAT64_EMULATED  # noqa: E402
from rulecheck import check, run_rule  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from xlanb.lower.registry import lookup  # noqa: E402

aten = torch.ops.aten
g = torch.Generator().manual_seed(0)


def rn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def spd(n, *batch, dtype=torch.float64):
    a = rn(*batch, n, n, dtype=torch.float64)
    return (a @ a.mT + n * torch.eye(n, dtype=torch.float64)).to(dtype)


TOL = {torch.float32: dict(atol=1e-4, rtol=1e-4), torch.float64: dict(atol=1e-10, rtol=1e-10),
       torch.bfloat16: dict(atol=5e-2, rtol=2e-2), torch.float16: dict(atol=1e-2, rtol=5e-3)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_products(dtype):
    a, b, c = rn(5, 7, dtype=dtype), rn(7, 3, dtype=dtype), rn(5, 3, dtype=dtype)
    tol = TOL[dtype]
    check("aten.mm.default", a, b, **tol)
    check("aten.bmm.default", rn(2, 5, 7, dtype=dtype), rn(2, 7, 3, dtype=dtype), **tol)
    check("aten.addmm.default", c, a, b, beta=0.5, alpha=2.5, **tol)
    check("aten.addmm.default", rn(3, dtype=dtype), a, b, **tol)
    check("aten.baddbmm.default", rn(2, 5, 3, dtype=dtype), rn(2, 5, 7, dtype=dtype), rn(2, 7, 3, dtype=dtype),
          beta=-0.5, alpha=0.25, **tol)
    check("aten.addbmm.default", c, rn(4, 5, 7, dtype=dtype), rn(4, 7, 3, dtype=dtype), beta=2.0, alpha=0.5, **tol)
    check("aten.mv.default", a, rn(7, dtype=dtype), **tol)
    check("aten.addmv.default", rn(5, dtype=dtype), a, rn(7, dtype=dtype), beta=3.0, alpha=-2.0, **tol)
    check("aten.dot.default", rn(9, dtype=dtype), rn(9, dtype=dtype), **tol)
    check("aten.vdot.default", rn(9, dtype=dtype), rn(9, dtype=dtype), **tol)
    check("aten.addr.default", c, rn(5, dtype=dtype), rn(3, dtype=dtype), beta=1.5, alpha=0.5, **tol)
    check("aten._addmm_activation.default", c, a, b, beta=0.5, alpha=1.5, **tol)
    check("aten._addmm_activation.default", c, a, b, use_gelu=True, **tol)


def test_beta_zero_ignores_self():
    a, b = rn(4, 6), rn(6, 3)
    bad = torch.full((4, 3), float("nan"))
    check("aten.addmm.default", bad, a, b, beta=0, alpha=2.0, atol=1e-4)
    check("aten.addmm.default", bad, a, b, beta=0.0, atol=1e-4)
    check("aten.baddbmm.default", torch.full((2, 4, 3), float("inf")), rn(2, 4, 6), rn(2, 6, 3), beta=0, atol=1e-4)
    check("aten.addmv.default", torch.full((4,), float("nan")), a, rn(6), beta=0, atol=1e-4)
    check("aten.addr.default", torch.full((4, 3), float("nan")), rn(4), rn(3), beta=0, alpha=3.0, atol=1e-5)
    # any other beta is lifted (a traced scalar) and multiplies self: NaN stays NaN
    assert torch.isnan(run_rule("aten.addmm.default", bad, a, b, beta=2.0)).all()


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_products(dtype):
    a = torch.randint(-9, 9, (5, 7), generator=g, dtype=dtype)
    b = torch.randint(-9, 9, (7, 3), generator=g, dtype=dtype)
    check("aten.mm.default", a, b)
    check("aten.addmm.default", torch.randint(-9, 9, (5, 3), generator=g, dtype=dtype), a, b, beta=3, alpha=-2)
    check("aten.dot.default", a[0], b[:, 0])
    check("aten.trace.default", a)


def test_out_dtype_and_int_mm():
    a, b = rn(5, 7, dtype=torch.bfloat16), rn(7, 3, dtype=torch.bfloat16)
    # torch has no CPU kernel for the out_dtype overloads: call the rules directly
    ja, jb = (jnp.asarray(t.float().numpy()).astype(jnp.bfloat16) for t in (a, b))
    out = jax.jit(lambda x, y: lookup("aten.mm.dtype").fn(x, y, torch.float32))(ja, jb)
    assert out.dtype == jnp.float32
    torch.testing.assert_close(torch.from_numpy(np.asarray(out)), a.float() @ b.float(), atol=1e-4, rtol=1e-4)
    c = rn(5, 3)
    out = jax.jit(lambda s, x, y: lookup("aten.addmm.dtype").fn(s, x, y, torch.float32, beta=0.5))(
        jnp.asarray(c.numpy()), ja, jb)
    assert out.dtype == jnp.float32
    torch.testing.assert_close(torch.from_numpy(np.asarray(out)), 0.5 * c + a.float() @ b.float(), atol=1e-4, rtol=1e-4)
    a8 = torch.randint(-100, 100, (17, 32), generator=g, dtype=torch.int8)
    b8 = torch.randint(-100, 100, (32, 8), generator=g, dtype=torch.int8)
    check("aten._int_mm.default", a8, b8)


def test_bool_addr():
    s = torch.tensor([[True, False], [False, False]])
    v1, v2 = torch.tensor([True, False]), torch.tensor([False, True])
    check("aten.addr.default", s, v1, v2)
    check("aten.addr.default", s, v1, v2, beta=False)


def test_misc_matrix_ops():
    check("aten.trace.default", rn(4, 6))
    check("aten.trace.default", rn(5, 5, dtype=torch.bfloat16), atol=5e-2, rtol=2e-2)
    x = rn(2, 3)
    for offset, d1, d2 in [(0, -2, -1), (1, 0, 2), (-2, 2, 0), (0, 1, 0)]:
        check("aten.diag_embed.default", x, offset, d1, d2)
    check("aten.linalg_cross.default", rn(4, 3), rn(1, 3))
    check("aten.linalg_cross.default", rn(3, 5), rn(3, 5), dim=0)
    check("aten.linalg_matrix_exp.default", 0.3 * rn(3, 4, 4), atol=1e-5, rtol=1e-5)


def test_foreach_mm():
    check("aten._foreach_mm.default", [rn(2, 3), rn(4, 4)], [rn(3, 5), rn(4, 1)], atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_svd_eigh_qr(dtype):
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=1e-10, rtol=1e-10)
    if dtype == torch.float64 and FLOAT64_EMULATED:     # XLA:TPU's emulated float64: 2.2e-7 off on the fifth run
        tol = dict(atol=1e-5, rtol=1e-5)
    A = rn(2, 5, 3, dtype=dtype)
    for full in (False, True):
        U, S, Vh = run_rule("aten._linalg_svd.default", A, full, True)
        eU, eS, eVh = aten._linalg_svd(A, full, True)
        assert U.shape == eU.shape and Vh.shape == eVh.shape and U.dtype == dtype
        torch.testing.assert_close(S, eS, **tol)
        k = S.shape[-1]
        torch.testing.assert_close(U[..., :k] * S[..., None, :] @ Vh[..., :k, :], A, **tol)
        torch.testing.assert_close(U.mT @ U, torch.eye(U.shape[-1], dtype=dtype).expand_as(U.mT @ U), **tol)
    check("aten._linalg_svd.default", A, False, False, **tol)

    H = rn(3, 4, 4, dtype=dtype)
    for uplo in ("L", "U"):
        w, V = run_rule("aten._linalg_eigh.default", H, uplo, True)
        ew, eV = aten._linalg_eigh(H, uplo, True)
        torch.testing.assert_close(w, ew, **tol)
        sym = (torch.tril(H) + torch.tril(H, -1).mT) if uplo == "L" else (torch.triu(H) + torch.triu(H, 1).mT)
        torch.testing.assert_close(V @ torch.diag_embed(w) @ V.mT, sym, **tol)
        check("aten._linalg_eigh.default", H, uplo, False, **tol)

    for mode in ("reduced", "complete"):
        Q, R = run_rule("aten.linalg_qr.default", A, mode)
        eQ, eR = aten.linalg_qr(A, mode)
        assert Q.shape == eQ.shape and R.shape == eR.shape
        torch.testing.assert_close(Q @ R, A, **tol)
        torch.testing.assert_close(R, torch.triu(R))
        torch.testing.assert_close(R.abs(), eR.abs(), **tol)
    Q, R = run_rule("aten.linalg_qr.default", A, "r")
    assert Q.shape == (0,)
    torch.testing.assert_close(R.abs(), aten.linalg_qr(A, "r")[1].abs(), **tol)


def test_eig():
    A = rn(3, 3, dtype=torch.float64)
    try:
        w, V = run_rule("aten.linalg_eig.default", A)
    except Exception as e:    # jnp.linalg.eig is not implemented on every backend
        pytest.skip(f"eig unavailable: {e}")
    assert w.dtype == torch.complex128 and V.dtype == torch.complex128
    torch.testing.assert_close(A.to(V.dtype) @ V, V * w[None, :], atol=1e-10, rtol=1e-10)
    ew = torch.linalg.eigvals(A)
    got = run_rule("aten._linalg_eigvals.default", A)
    key = lambda z: sorted(zip(z.real.tolist(), z.imag.tolist()))  # noqa: E731
    for (a, b), (c, d) in zip(key(got), key(ew)):
        assert abs(a - c) < 1e-10 and abs(b - d) < 1e-10


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_det_and_lu(dtype):
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=1e-10, rtol=1e-10)
    A = rn(3, 4, 4, dtype=dtype)
    check("aten._linalg_det.default", A, **tol)
    check("aten._linalg_slogdet.default", A, **tol)
    sing = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=dtype)
    check("aten._linalg_slogdet.default", sing, **tol)
    check("aten.linalg_lu_factor_ex.default", A, **tol)
    check("aten.linalg_lu_factor_ex.default", rn(2, 5, 3, dtype=dtype), **tol)
    check("aten.linalg_lu.default", A, **tol)
    check("aten.linalg_lu.default", rn(3, 5, dtype=dtype), **tol)
    LU, piv, _ = aten.linalg_lu_factor_ex(A)
    check("aten.lu_unpack.default", LU, piv, **tol)
    check("aten.lu_unpack.default", LU, piv, False, True, **tol)
    B = rn(3, 4, 2, dtype=dtype)
    flags = [(True, False), (False, True)]
    if dtype == torch.float64:
        flags += [(True, True), (False, False)]
    for left, adjoint in flags:
        check("aten.linalg_lu_solve.default", LU, piv, B if left else B.mT, left=left, adjoint=adjoint, **tol)
    # torch has no CPU kernel for LU without pivoting: check the reconstruction
    fn = lookup("aten.linalg_lu_factor_ex.default").fn
    with jax.enable_x64(True):
        LU, _, info = jax.jit(lambda a: fn(a, pivot=False))(jnp.asarray(A.numpy()))
        P, L, U = jax.jit(lambda a: lookup("aten.linalg_lu.default").fn(a, pivot=False))(jnp.asarray(A.numpy()))
    LU, info, L, U = (torch.from_numpy(np.asarray(t)) for t in (LU, info, L, U))
    torch.testing.assert_close(torch.tril(LU, -1) + torch.eye(4, dtype=dtype), L)
    torch.testing.assert_close(L @ U, A, **tol)
    assert (info == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_solves(dtype):
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=1e-9, rtol=1e-9)
    A = rn(2, 4, 4, dtype=dtype) + 4 * torch.eye(4, dtype=dtype)
    check("aten.linalg_inv_ex.default", A, **tol)
    check("aten.linalg_inv_ex.default", torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=dtype),
          atol=float("inf"))    # info must say 2; the inverse is undefined
    assert run_rule("aten.linalg_inv_ex.default", torch.zeros(3, 3, dtype=dtype))[1].item() == 1
    check("aten._linalg_solve_ex.default", A, rn(2, 4, 3, dtype=dtype), **tol)
    check("aten._linalg_solve_ex.default", A, rn(2, 4, dtype=dtype), **tol)          # batched vector
    check("aten._linalg_solve_ex.default", A, rn(4, dtype=dtype), **tol)             # vector, broadcast
    check("aten._linalg_solve_ex.default", A[0], rn(3, 4, 2, dtype=dtype), **tol)    # batch broadcast
    check("aten._linalg_solve_ex.default", A, rn(2, 3, 4, dtype=dtype), left=False, **tol)
    T = torch.tril(rn(2, 4, 4, dtype=dtype)) + 3 * torch.eye(4, dtype=dtype)
    B = rn(2, 4, 3, dtype=dtype)
    flags = [(True, False)] if dtype == torch.float32 else [(True, False), (False, True), (True, True)]
    for upper in (True, False):
        Tm = T.mT if upper else T
        for transpose, unit in flags:
            check("aten.triangular_solve.default", B, Tm, upper, transpose, unit, **tol)
        check("aten.linalg_solve_triangular.default", Tm, B, upper=upper, **tol)
        check("aten.linalg_solve_triangular.default", Tm, B.mT, upper=upper, left=False, unitriangular=True, **tol)
    check("aten.triangular_solve.default", rn(3, 2, 4, 3, dtype=dtype), T[0], **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cholesky_before_2_14(dtype):
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=1e-9, rtol=1e-9)
    for upper in (False, True):
        check("aten.cholesky.default", spd(4, 2, dtype=dtype), upper, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cholesky(dtype):
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=1e-9, rtol=1e-9)
    A = spd(4, 2, dtype=dtype)
    for upper in (False, True):
        check("aten.linalg_cholesky_ex.default", A, upper=upper, **tol)
        L = torch.linalg.cholesky(A, upper=upper)
        check("aten.cholesky_solve.default", rn(2, 4, 3, dtype=dtype), L, upper, **tol)
        check("aten.cholesky_inverse.default", L[0], upper, **tol)
    # torch reads only one triangle
    junk = torch.triu(torch.full((4, 4), 100.0, dtype=dtype), 1)
    check("aten.linalg_cholesky_ex.default", A[0] + junk, **tol)
    # not positive definite: info names the first failing leading minor
    bad = torch.tensor([[[4.0, 2, 1], [2, 1, 0], [1, 0, 3]], [[1.0, 0, 0], [0, 1, 0], [0, 0, -1]]], dtype=dtype)
    _, info = run_rule("aten.linalg_cholesky_ex.default", bad)
    assert info.tolist() == aten.linalg_cholesky_ex(bad)[1].tolist() == [2, 3]
    _, info = run_rule("aten.linalg_cholesky_ex.default", A)
    assert info.tolist() == [0, 0]


def test_householder():
    A = rn(5, 3, dtype=torch.float64)
    a, tau = aten.geqrf(A)
    check("aten.geqrf.default", A, atol=1e-10, rtol=1e-10)
    check("aten.linalg_householder_product.default", a, tau, atol=1e-10, rtol=1e-10)
    C = rn(5, 2, dtype=torch.float64)
    for transpose in (False, True):
        check("aten.ormqr.default", a, tau, C, True, transpose, atol=1e-10, rtol=1e-10)
    check("aten.ormqr.default", a, tau, rn(2, 5, dtype=torch.float64), False, False, atol=1e-10, rtol=1e-10)


def test_check_errors_is_noop():
    assert run_rule("aten._linalg_check_errors.default", torch.zeros((), dtype=torch.int32), "x", is_matrix=True) == ()
