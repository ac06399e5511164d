"""The log-likelihood ratio of the GLRT statistic and its inverse (the tangent thresholds).

The GLRT adversary observes T = ‖y‖²/σ², distributed as χ²_d under H0 and as
ncx2(d, λ) under H1 (λ = μ²). Its log-likelihood ratio is a confluent limit function:
with a = d/2, m = λ/2 and x = λt/4,

    ℓ(t) = log f_λ(t) − log f_0(t) = −m + log ₀F₁(; a; x),

increasing and convex in u = log t, from ℓ(0) = −λ/2 to +∞. Every GLRT computation
(ROC crossings, tangent points of the privacy profile, levels of the privacy-loss
distribution) solves ℓ(c) = target; this module is the one place that does it, with the
library's root finder (:mod:`glrt_jax._src.solvers`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from glrt_jax._src import solvers
from glrt_jax._src.numerics import machine_eps, once_if_uniform, tail_converged

_BLOCK = 8
_MAX_TERMS = 1_000_000
# Newton on u = log c: evaluation cap, largest step, and the step that stops it.
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
    eps = machine_eps(dtype)
    a = 0.5 * d
    lg_a = once_if_uniform(lax.lgamma, a)  # (one d for every point, the usual case)
    x = 0.25 * lam * jnp.where(jnp.isfinite(t), t, 1.0)
    kp = 2.0 * x / (a + jnp.sqrt(a * a + 4.0 * x))
    j0 = jnp.floor(jnp.maximum(0.0, kp - 8.0 * jnp.sqrt(kp) - 5.0))
    xs = jnp.where(x > 0, x, 1.0)

    def shifted(_):  # the first term's log where the sum starts above k = 0
        lg_aj, lg_j = lax.lgamma(a + j0), lax.lgamma(j0 + 1.0)
        return jnp.where(j0 > 0, j0 * jnp.log(xs) - lg_j - lg_aj + lg_a, 0.0), lg_aj, lg_j

    # Where every sum starts at k = 0 (j0 = 0: x below 75.5·(75.5 + a), about 5700 + 76a),
    # its first term is 1 and the two log-gamma functions per point (on a CPU, more of a
    # pass's time than its series) are not needed.
    log_t0, lg_aj, lg_j = lax.cond(
        jnp.any(j0 > 0), shifted, lambda _: (jnp.zeros_like(x), lg_a, jnp.zeros_like(x)), None
    )

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
        conv = (term == 0) | ((k > kp) & tail_converged(term, prev, s0, 0.25 * eps))
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
def _llr_u(u, lam, d):
    """:func:`llr` at t = e^u, differentiable in u and λ (by closed forms, to any order).

    With x = λt/4, D = d/d log x and F = ₀F₁(; a; x), whose equation x F'' + a F' = F gives
    D ℓ_u = ℓ_u (1 − a − ℓ_u) + x:

        dℓ = ℓ_u (du + dλ/λ) − dλ/2,    dℓ_u = (ℓ_u (1 − a − ℓ_u) + x)(du + dλ/λ).

    None in d; the rounding level has none.
    """
    return llr(jnp.exp(u), lam, d)


@_llr_u.defjvp
def _llr_u_jvp(primals, tangents):
    u, lam, d = primals
    du, dlam, _ = tangents
    ell, ell_u, noise = _llr_u(u, lam, d)
    x = 0.25 * lam * jnp.exp(u)
    dlogx = du + dlam / lam
    d_ell = ell_u * dlogx - 0.5 * dlam
    d_ell_u = (ell_u * (1.0 - 0.5 * d - ell_u) + x) * dlogx
    return (ell, ell_u, noise), (d_ell, d_ell_u, jnp.zeros_like(noise))


def _threshold_residual(u, theta):
    """ℓ(e^u) − target with its slope ℓ_u, 8× its rounding level and Halley's step.

    One pass of :func:`llr`; the second derivative is the closed form
    D ℓ_u = ℓ_u (1 − a − ℓ_u) + x (see :func:`_llr_u`). Halley's step is
    s_N / (1 + s_N ℓ''/(2 ℓ_u)) with Newton's s_N = −f/ℓ_u; where that factor is
    below 1/2 (far right of the root, where ℓ is convex) it is NaN and the solver takes
    Newton's.
    Cubic convergence: at most 4 evaluations instead of 6 on the benchmark grid.
    """
    target, lam, d = theta
    ell, ell_u, noise = _llr_u(u, lam, d)
    f = ell - target
    curvature = ell_u * (1.0 - 0.5 * d - ell_u) + 0.25 * lam * jnp.exp(u)
    newton = -f / ell_u
    factor = 1.0 + 0.5 * newton * curvature / ell_u
    halley = jnp.where(factor > 0.5, newton / factor, jnp.nan)
    return solvers.Residual(f, ell_u, noise=8.0 * noise, step=halley)


def threshold(target, lam, d):
    """c > 0 with ℓ(c) = target, for target > −λ/2 and λ > 0 (broadcasting, any shape).

    Solved by :func:`glrt_jax._src.solvers.find_root` (``side="any"``) with Halley steps
    (``_threshold_residual``) on u = log c, in which ℓ is increasing and convex. The
    start is the proven lower bound of :func:`_lower_bound`; the solver's bracket and
    bisection safeguard the steps, which are capped at ``_MAX_LOG_STEP`` (an uncapped
    step from a poor start can land where ℓ is meaningless). It stops when the step is
    below 1e-12 (absolute plus relative in u; with cubic convergence the new iterate is
    exact to rounding) or when |ℓ(c) − target| is at the rounding level of ℓ
    (``llr``'s third output). NaN if it does not converge in ``_NEWTON`` evaluations.

    Derivatives are implicit (never through the loop), from ``find_root``:
    dc/c = (d target − ∂ℓ/∂λ dλ) / (∂ℓ/∂log c); none in d.
    """
    target, lam, d = jnp.broadcast_arrays(target, lam, d)
    u0 = _lower_bound(target + 0.5 * lam, lam, d)
    root = solvers.find_root(
        _threshold_residual,
        (target, lam, d),
        -jnp.inf,
        jnp.inf,
        u0,
        ftol=0.0,
        xtol=_STEP_TOL,
        xrtol=_STEP_TOL,
        side="any",
        increasing=True,
        residual=True,
        max_iter=_NEWTON,
        max_step=_MAX_LOG_STEP,
    )
    return jnp.exp(root.x)


def threshold_df1(target, lam):
    """:func:`threshold` for d = 1 in closed form: c with ℓ(c) = target.

    For d = 1, ℓ(t) = −λ/2 + log cosh(μ√t) (μ = √λ), so with v = target + λ/2 > 0,
    √c = arccosh(e^v)/μ and arccosh(e^v) = v + log(1 + √(1 − e^{−2v})) (no overflow,
    full relative accuracy as v → 0). Not differentiated (the privacy profile attaches
    its own derivatives).
    """
    target, lam = jnp.broadcast_arrays(target, lam)
    v = target + 0.5 * lam
    root = (v + jnp.log1p(jnp.sqrt(-jnp.expm1(-2.0 * v)))) / jnp.sqrt(lam)
    return root * root
