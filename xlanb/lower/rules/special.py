"""Lowering rules: torch.special functions (gamma family, Bessel I, zeta, orthogonal polynomials).

The orthogonal polynomials follow ATen's Math.h exactly: the same special cases, the same
recurrences (run for max(n) - 1 steps, each element stopping at its own n), the same
trigonometric forms for large n. `n` is cast to int64 as ATen does (non-finite n -> -1).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import jax.scipy.special as jss
from jax import lax

from xlanb.lower.registry import lowers
from xlanb.lower.rules.pointwise import as_float, digamma


def _unary(names, fn):
    def rule(x):
        return fn(as_float(x))
    rule.__name__ = rule.__qualname__ = names[0].split(".")[1]
    lowers(*names, promote="float")(rule)


_unary(("aten.i0.default", "aten.special_i0.default"), jss.i0)
_unary(("aten.special_i0e.default",), jss.i0e)
_unary(("aten.special_i1.default",), jss.i1)
_unary(("aten.special_i1e.default",), jss.i1e)
_unary(("aten.special_ndtri.default",), jss.ndtri)
_unary(("aten.special_log_ndtr.default",), jss.log_ndtr)
_unary(("aten.special_erfcx.default",), jss.erfcx)


@lowers("aten.special_spherical_bessel_j0.default", promote="float")
def spherical_bessel_j0(x):
    x = as_float(x)
    x2 = x * x
    series = 1 + x2 * (-1 / 6 + x2 * (1 / 120 + x2 * (-1 / 5040 + x2 * (1 / 362880 + x2 * (
        -1 / 39916800 + x2 * (1 / 6227020800))))))
    out = jnp.where(jnp.abs(x) < 0.5, series, jnp.sin(x) / jnp.where(x == 0, 1, x))
    return jnp.where(jnp.isinf(x), jnp.zeros_like(x), out)


def _igamma_edges(a, x, lower):
    """ATen's calc_igamma/calc_igammac edge cases, which lax's leave NaN: a = 0 < x (the lower
    function 1), a = inf > x (0), x = inf > a (1), x = 0 < a (0); negative arguments, a = x = 0 and
    a = x = inf are NaN."""
    a, x = jnp.broadcast_arrays(a, x)
    out = lax.igamma(a, x) if lower else lax.igammac(a, x)
    one, zero = jnp.ones_like(out), jnp.zeros_like(out)
    p1, p0 = (one, zero) if lower else (zero, one)      # where igamma is 1 (igammac 0), and 0 (igammac 1)
    nan = jnp.full_like(out, jnp.nan)
    out = jnp.where((a == 0) & (x > 0), p1, out)
    out = jnp.where((x == 0) & (a > 0), p0, out)
    out = jnp.where(jnp.isinf(a) & (a > 0) & ~jnp.isinf(x), p0, out)
    out = jnp.where(jnp.isinf(x) & (x > 0) & ~jnp.isinf(a), p1, out)
    return jnp.where((a < 0) | (x < 0) | ((a == 0) & (x == 0)) | (jnp.isinf(a) & jnp.isinf(x)), nan, out)


@lowers("aten.igamma.default", promote="float")
def igamma(self, other):
    return _igamma_edges(self, other, True)


@lowers("aten.igammac.default", promote="float")
def igammac(self, other):
    return _igamma_edges(self, other, False)


def _trigamma(x):
    """ATen's calc_trigamma: reflection below 0.5, six recurrence steps, then the asymptotic series."""
    pi = jnp.asarray(math.pi, x.dtype)
    reflect = x < 0.5
    sin_pi_x = jnp.sin(pi * x)
    result = jnp.where(reflect, -(pi * pi) / (sin_pi_x * sin_pi_x), jnp.zeros_like(x))
    x = jnp.where(reflect, 1 - x, x)
    for _ in range(6):
        result = result + 1 / (x * x)
        x = x + 1
    ixx = 1 / (x * x)
    result = result + (1 + 1 / (2 * x) + ixx * (1 / 6 - ixx * (1 / 30 - ixx * (1 / 42)))) / x
    return jnp.where(reflect, -result, result)


_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)


def _zeta(x, q):
    """Hurwitz zeta as ATen computes it (Cephes, in float64 on CPU): a direct sum until the
    terms are small or past 9 (negative q included), then Euler-Maclaurin."""
    dtype = x.dtype
    x, q = x.astype(jnp.float64), q.astype(jnp.float64)
    eps = 1.11022302462515654042e-16
    s0 = jnp.power(q, -x)

    # state: (i, a, b, s, stopped, converged)
    def cond2(st):
        return jnp.any(~st[4])

    def body2(st):
        i, a, b, s, stopped, conv = st
        live = ~stopped & ((i < 9) | (a <= 9.0))
        a2 = jnp.where(live, a + 1, a)
        b2 = jnp.where(live, jnp.power(a2, -x), b)
        s2 = jnp.where(live, s + b2, s)
        c = live & (-eps * s2 < b2) & (b2 < eps * s2)
        return i + 1, a2, b2, s2, stopped | ~live | c, conv | c

    zero = jnp.zeros_like(x)
    _, a, b, s, _, conv = lax.while_loop(cond2, body2, (jnp.asarray(0), q, zero, s0, jnp.zeros(x.shape, bool),
                                                        jnp.zeros(x.shape, bool)))
    w = a
    em = s + b * w / (x - 1) - 0.5 * b
    done = conv
    acc, k = jnp.ones_like(x), zero
    for coef in _ZETA_A:
        acc = acc * (x + k)
        b = b / w
        t = acc * b / coef
        em = jnp.where(done, em, em + t)
        done = done | (jnp.abs(t / em) < eps)
        k = k + 1
        acc = acc * (x + k)
        b = b / w
        k = k + 1
    out = jnp.where(conv, s, em)
    out = jnp.where((q <= 0) & (q == jnp.floor(q)), jnp.inf, out)
    out = jnp.where((q <= 0) & (q != jnp.floor(q)) & (x != jnp.floor(x)), jnp.nan, out)
    out = jnp.where(x == 1, jnp.inf, out)
    return jnp.where(x < 1, jnp.nan, out).astype(dtype)


@lowers("aten.polygamma.default")
def polygamma(n, self):
    x = as_float(self)
    if n == 0:
        return digamma(x)
    if n == 1:
        return _trigamma(x)
    sign = 1.0 if n % 2 else -1.0
    return sign * math.exp(math.lgamma(n + 1.0)) * _zeta(jnp.full_like(x, n + 1.0), x)


@lowers("aten.special_zeta.default", "aten.special_zeta.self_scalar", "aten.special_zeta.other_scalar",
        promote="float")
def zeta(self, other):
    return _zeta(*jnp.broadcast_arrays(self, other))


# Orthogonal polynomials -----------------------------------------------------------------------

def _n_int(n):
    n = jnp.asarray(n)
    if jnp.issubdtype(n.dtype, jnp.inexact):
        return jnp.where(jnp.isfinite(n), n, -1).astype(jnp.int64)
    return n.astype(jnp.int64)


def _recurrence(x, n, q0, step):
    """q after n - 1 steps of (p, q) <- (q, step(j, p, q)), j = 1, 2, ...; p0 = 1."""
    steps = jnp.where(n >= 2, n - 1, 0)
    count = jnp.max(steps) if steps.size else jnp.asarray(0, jnp.int64)
    p0 = jnp.ones_like(x)

    def body(state):
        j, p, q = state
        r = step(j.astype(x.dtype), p, q)
        live = j <= steps
        return j + 1, jnp.where(live, q, p), jnp.where(live, r, q)

    _, _, q = lax.while_loop(lambda s: s[0] <= count, body, (jnp.asarray(1, jnp.int64), p0, q0))
    return q


def _poly(name, q0_fn, step, special):
    @lowers(f"aten.{name}.default", f"aten.{name}.x_scalar", f"aten.{name}.n_scalar", promote="float")
    def rule(x, n):
        x, nf = jnp.broadcast_arrays(as_float(x), as_float(n))
        ni = _n_int(nf)
        q0 = q0_fn(x)
        out = _recurrence(x, ni, q0, lambda j, p, q: step(x, j, p, q))
        out = jnp.where(ni == 1, q0, out)
        out = jnp.where(ni == 0, jnp.ones_like(x), out)
        for cond, value in special(x, ni):       # highest priority last
            out = jnp.where(cond, value, out)
        return jnp.where(ni < 0, jnp.zeros_like(x), out)
    rule.__name__ = rule.__qualname__ = name
    return rule


def _nf(n, x):
    return n.astype(x.dtype)


def _sign_even(n, x):
    return jnp.where(n % 2 == 0, jnp.ones_like(x), -jnp.ones_like(x))


def _cheb_t_special(x, n, t, big=6):
    acos = jnp.arccos(jnp.clip(t, -1, 1))
    return [((n > big) & (jnp.abs(t) < 1), jnp.cos(_nf(n, x) * acos)),
            (jnp.abs(t) == 1, jnp.where(t > 0, jnp.ones_like(x), _sign_even(n, x)))]


def _cheb_u_special(x, n, t, big=8):
    acos = jnp.arccos(jnp.clip(t, -1, 1))
    s = jnp.sin(acos)
    n1 = _nf(n, x) + 1
    trig = jnp.where(s != 0, jnp.sin(n1 * acos) / jnp.where(s != 0, s, 1),
                     n1 * jnp.cos(n1 * acos) / jnp.where(t != 0, t, 1))
    return [((n > big) & (jnp.abs(t) < 1), trig),
            (jnp.abs(t) == 1, jnp.where((t > 0) | (n % 2 == 0), n1, -n1))]


def _cheb_v_special(x, n, t, big=8):
    acos = jnp.arccos(jnp.clip(t, -1, 1))
    odd = 2 * _nf(n, x) + 1
    edge = jnp.where(n % 2 == 0, odd, -odd)
    half = jnp.cos(acos / 2)
    trig = jnp.where(jnp.sin(acos / 2) != 1, jnp.cos((_nf(n, x) + 0.5) * acos) / jnp.where(half != 0, half, 1), edge)
    return [((n > big) & (jnp.abs(t) < 1), trig),
            (jnp.abs(t) == 1, jnp.where(t > 0, jnp.ones_like(x), edge))]


def _cheb_w_special(x, n, t, big=8):
    acos = jnp.arccos(jnp.clip(t, -1, 1))
    odd = 2 * _nf(n, x) + 1
    edge = jnp.where(t > 0, odd, _sign_even(n, x))
    half = jnp.sin(acos / 2)
    trig = jnp.where(jnp.cos(acos / 2) != 1, jnp.sin((_nf(n, x) + 0.5) * acos) / jnp.where(half != 0, half, 1),
                     edge)
    return [((n > big) & (jnp.abs(t) < 1), trig), (jnp.abs(t) == 1, edge)]


def _cheb_step(t):
    return lambda x, j, p, q: (t(x) + t(x)) * q - p


_ident = lambda x: x  # noqa: E731
_shift = lambda x: x + x - 1  # noqa: E731

_poly("special_chebyshev_polynomial_t", _ident, _cheb_step(_ident), lambda x, n: _cheb_t_special(x, n, x))
_poly("special_chebyshev_polynomial_u", lambda x: x + x, _cheb_step(_ident), lambda x, n: _cheb_u_special(x, n, x))
_poly("special_chebyshev_polynomial_v", lambda x: x + x - 1, _cheb_step(_ident),
      lambda x, n: _cheb_v_special(x, n, x))
_poly("special_chebyshev_polynomial_w", lambda x: x + x + 1, _cheb_step(_ident),
      lambda x, n: _cheb_w_special(x, n, x))


def _shifted_special(base, big):
    """Shifted polynomials: the same in t = 2x - 1, with ATen's x == 1 / x == 0 cases."""
    def special(x, n):
        t = x + x - 1
        cases = base(x, n, t, big)
        trig = [c for c in cases[:1]]
        # ATen tests x == 1 and x == 0 (t == +-1) before the trigonometric form
        return trig + [(x == 0, cases[1][1]), (x == 1, cases[1][1])]
    return special


_poly("special_shifted_chebyshev_polynomial_t", _shift, _cheb_step(_shift), _shifted_special(_cheb_t_special, 6))
_poly("special_shifted_chebyshev_polynomial_u", lambda x: _shift(x) + _shift(x), _cheb_step(_shift),
      _shifted_special(_cheb_u_special, 6))
_poly("special_shifted_chebyshev_polynomial_v", lambda x: _shift(x) + _shift(x) - 1, _cheb_step(_shift),
      _shifted_special(_cheb_v_special, 6))
_poly("special_shifted_chebyshev_polynomial_w", lambda x: _shift(x) + _shift(x) + 1, _cheb_step(_shift),
      _shifted_special(_cheb_w_special, 4))


def _hermite_limit(x):
    return 128 if x.dtype == jnp.float32 else 512 if x.dtype == jnp.float64 else 1024


def _hermite_special(x, n):
    return [(n > _hermite_limit(x), jnp.full_like(x, jnp.nan))]


_poly("special_hermite_polynomial_h", lambda x: x + x, lambda x, j, p, q: (x + x) * q - (j + j) * p,
      _hermite_special)
_poly("special_hermite_polynomial_he", _ident, lambda x, j, p, q: x * q - j * p, _hermite_special)
_poly("special_laguerre_polynomial_l", lambda x: 1 - x,
      lambda x, j, p, q: (((j + j) + (1 - x)) * q - j * p) / (j + 1),
      lambda x, n: [(jnp.abs(x) == 0, jnp.ones_like(x))])
_poly("special_legendre_polynomial_p", _ident, lambda x, j, p, q: ((j + j + 1) * x * q - j * p) / (j + 1),
      lambda x, n: [(jnp.abs(x) == 1, jnp.where((x > 0) | (n % 2 == 0), jnp.ones_like(x), -jnp.ones_like(x)))])

