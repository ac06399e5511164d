"""The log-likelihood ratio of the GLRT statistic and its inverse (the tangent thresholds).

The GLRT adversary observes T = ‖y‖²/σ², distributed as χ²_d under H0 and as
ncx2(d, λ) under H1 (λ = μ²). Its log-likelihood ratio is a confluent limit function:
with a = d/2, m = λ/2 and x = λt/4,

    ℓ(t) = log f_λ(t) − log f_0(t) = −m + log ₀F₁(; a; x),

increasing and convex in u = log t, from ℓ(0) = −λ/2 to +∞. Every GLRT computation
(ROC crossings, tangent points of the privacy profile, levels of the privacy-loss
distribution) solves ℓ(c) = target; this module is the one place that does it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from glrt_jax._src.ncx2 import _converged

_BLOCK = 8
_MAX_TERMS = 1_000_000
# Newton on u = log c: iteration cap, largest step, and the step that stops it.
_NEWTON = 80
_MAX_LOG_STEP = 2.0
_STEP_TOL = 1e-12


def llr(t, lam, d):
    """``(ℓ(t), ∂ℓ/∂log t, rounding level of ℓ)`` elementwise (t > 0, λ > 0, d > 0).

    With T_k = x^k / (k! (a)_k) (a = d/2, x = λt/4):

        ₀F₁(; a; x) = Σ T_k,     ∂ℓ/∂log t = x ₀F₁'/₀F₁ = x Σ T_k/(a + k) / Σ T_k,

    both from one pass over the terms (and ∂ℓ/∂λ = (∂ℓ/∂log t)/λ − 1/2). The terms
    peak near k* with (k* + 1)(a + k*) = x; the sum runs upwards from
    k* − 8√k* − 5 (the mass below is under e^-32 of the peak), relative to the first
    term, whose log comes from ``lgamma``; the rounding level returned accounts for
    those logs. No incomplete gamma, no density: several times cheaper than
    differencing two log-densities, and free of their cancellation.
    """
    t, lam, d = jnp.broadcast_arrays(t, lam, d)
    dtype = t.dtype
    eps = float(jnp.finfo(dtype).eps)
    a = 0.5 * d
    x = 0.25 * lam * jnp.where(jnp.isfinite(t), t, 1.0)
    kp = 2.0 * x / (a + jnp.sqrt(a * a + 4.0 * x))
    j0 = jnp.floor(jnp.maximum(0.0, kp - 8.0 * jnp.sqrt(kp) - 5.0))
    xs = jnp.where(x > 0, x, 1.0)
    lg_a, lg_aj, lg_j = lax.lgamma(a), lax.lgamma(a + j0), lax.lgamma(j0 + 1.0)
    log_t0 = jnp.where(j0 > 0, j0 * jnp.log(xs) - lg_j - lg_aj + lg_a, 0.0)

    def cond(st):
        return jnp.any(~st[-2]) & (st[-1] < _MAX_TERMS)

    def body(st):
        k, term, s0, s1, prev, done, n = st
        new = st[:5]
        for _ in range(_BLOCK):
            s0 = s0 + term
            s1 = s1 + term / (a + k)
            prev = term
            term = term * x / ((k + 1.0) * (a + k))
            k = k + 1.0
        conv = (term == 0) | ((k > kp) & _converged(term, prev, s0, 0.25 * eps))
        new = tuple(
            jnp.where(done, old, v) for old, v in zip(new, (k, term, s0, s1, prev), strict=True)
        )
        return (*new, done | conv, n + _BLOCK)

    one, zero = jnp.ones_like(x), jnp.zeros_like(x)
    init = (j0, one, zero, zero, zero, jnp.zeros(x.shape, bool), 0)
    _, _, s0, s1, _, _, _ = lax.while_loop(cond, body, init)
    half = 0.5 * lam
    ell = -half + log_t0 + jnp.log(s0)
    ell_u = x * s1 / s0
    noise = eps * (half + jnp.abs(log_t0) + jnp.abs(lg_aj) + jnp.abs(lg_a) + jnp.abs(lg_j) + 1.0)
    ell = jnp.where(t <= 0, -half, jnp.where(jnp.isposinf(t), jnp.inf, ell))
    return ell, ell_u, noise


def _lower_bound(r, lam, d):
    """A proven lower bound of log c, where r = target + λ/2 > 0.

    The bounds log ₀F₁(; a; x) ≤ min(x/a, 2√x) give ℓ(t) ≤ −λ/2 + min(λt/(2d), √(λt)),
    hence c ≥ max(2dr/λ, r²/λ).
    """
    c = jnp.maximum(2.0 * d * r / lam, r * r / lam)
    return jnp.log(jnp.maximum(c, jnp.finfo(r.dtype).tiny))


@jax.custom_jvp
def threshold(target, lam, d):
    """c > 0 with ℓ(c) = target, for target > −λ/2 and λ > 0 (broadcasting, any shape).

    Safeguarded Newton on u = log c. ℓ is increasing and convex in u, so from a point
    right of the root the iterates decrease monotonically to it. It starts at the proven
    lower bound of :func:`_lower_bound` (the first step overshoots to the right); a
    bracket with bisection keeps every iterate safe, and steps are capped at
    ``_MAX_LOG_STEP`` (an uncapped step from a poor start can land where ℓ is
    meaningless). It stops when the step is below 1e-12 (relative;
    quadratic convergence makes the new iterate exact to rounding) or when
    |ℓ(c) − target| is at the rounding level of ℓ.

    Derivatives are implicit (never through the loop):
    dc/c = (d target − ∂ℓ/∂λ dλ) / (∂ℓ/∂log c); none in d.
    """
    target, lam, d = jnp.broadcast_arrays(target, lam, d)
    u0 = _lower_bound(target + 0.5 * lam, lam, d)

    def cond(st):
        i, u, lo, hi, done = st
        return jnp.any(~done) & (i < _NEWTON)

    def body(st):
        i, u, lo, hi, done = st
        ell, ell_u, noise = llr(jnp.exp(u), lam, d)
        f = ell - target
        hi = jnp.where(f > 0, jnp.minimum(hi, u), hi)
        lo = jnp.where(f <= 0, jnp.maximum(lo, u), lo)
        un = u - jnp.clip(f / ell_u, -_MAX_LOG_STEP, _MAX_LOG_STEP)
        ok = (un >= lo) & (un <= hi) & jnp.isfinite(un)
        un = jnp.where(ok, un, jnp.where(jnp.isfinite(hi), 0.5 * (lo + hi), u + 1.0))
        conv = (jnp.abs(un - u) <= _STEP_TOL * jnp.maximum(1.0, jnp.abs(u))) | (
            jnp.abs(f) <= 8.0 * noise
        )
        return i + 1, jnp.where(done, u, un), lo, hi, done | conv

    init = (0, u0, u0, jnp.full_like(u0, jnp.inf), jnp.zeros(u0.shape, bool))
    _, u, _, _, _ = lax.while_loop(cond, body, init)
    return jnp.exp(u)


@threshold.defjvp
def _threshold_jvp(primals, tangents):
    target, lam, d = primals
    t_target, t_lam, _ = tangents
    c = threshold(target, lam, d)
    _, ell_u, _ = llr(c, lam, d)
    ell_lam = ell_u / lam - 0.5
    return c, c * (t_target - ell_lam * t_lam) / ell_u
