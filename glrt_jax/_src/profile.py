"""Privacy profiles δ(ε) and ε(δ) of the NPO and GLRT adversaries.

Notation: μ = Δ/σ, λ = μ², T = ‖y‖²/σ² ~ ncx2(d, 0) under H0 and ncx2(d, λ) under H1,
Ψ_λ / Φ_λ its survival / distribution function, ℓ(t) = log f_λ(t) − log f_0(t) the
log-likelihood ratio of T (increasing in t, ℓ(0) = −λ/2).

* NPO (Gaussian DP):  δ(ε) = Φ_N(−ε/μ + μ/2) − e^ε Φ_N(−ε/μ − μ/2).
* GLRT (paper, Theorem 1 and the conversion to (ε, δ)): δ(ε) = max(δ_R(ε), δ_R'(ε)) with
  δ_R(ε)  = Ψ_λ(c)  − e^ε Ψ_0(c),   ℓ(c)  = ε   (the tangent point of R with slope e^ε),
  δ_R'(ε) = Φ_0(c') − e^ε Φ_λ(c'),  ℓ(c') = −ε  (0 when ε ≥ λ/2).
  This is the Legendre–Fenchel conjugate sup_x [R_s(x) − e^ε x] of the symmetrised ROC.

Exact derivatives: δ is the value of an optimisation over the threshold, so by the envelope
theorem ∂δ/∂c = 0 at the tangent point; evaluating the expression at ``stop_gradient(c)``
therefore gives exact first derivatives (dδ/dε = −e^ε Ψ_0(c), dδ/dλ = pdf(c; d + 2, λ)).
ε(δ) is found by Newton on log δ and differentiated by the implicit function theorem
(custom JVP): dε/dδ = 1/(∂δ/∂ε), dε/dμ = −(∂δ/∂μ)/(∂δ/∂ε). No derivative ever flows through
an iteration.

Everything is computed in log space so δ down to 1e-300 (and log δ beyond) is accurate.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import log_ndtr

from glrt_jax._src import ncx2
from glrt_jax._src.ncx2 import _log1mexp, _promote
from glrt_jax._src.validation import check_range

_NEWTON = 80


# ---------------------------------------------------------------------------
# NPO
# ---------------------------------------------------------------------------

_CF_TERMS = 64


def _log_ndtr(x):
    """log Φ(x) to full precision for every x.

    jax.scipy's log_ndtr switches to a short asymptotic series below −20 and keeps ~8 digits
    there. Below −10 we use the Mills-ratio continued fraction
    Φ(x) = φ(x) / (t + 1/(t + 2/(t + 3/(t + …)))), t = −x, evaluated backwards.
    """
    tail = x < -10.0
    t = jnp.where(tail, -x, 20.0)
    k = t
    for n in range(_CF_TERMS, 0, -1):
        k = t + n / k
    log_tail = -0.5 * t * t - 0.5 * math.log(2.0 * math.pi) - jnp.log(k)
    return jnp.where(tail, log_tail, log_ndtr(jnp.where(tail, 0.0, x)))


def _npo_log_delta(eps, mu):
    """log δ_NPO(ε) in log space; −inf where δ = 0 (μ = 0)."""
    mus = jnp.where(mu > 0, mu, 1.0)
    a = -eps / mus + 0.5 * mus
    b = -eps / mus - 0.5 * mus
    la = _log_ndtr(a)
    out = la + _log1mexp(jnp.minimum(eps + _log_ndtr(b) - la, 0.0))
    return jnp.where(mu > 0, out, -jnp.inf)


# ---------------------------------------------------------------------------
# GLRT: tangent thresholds
# ---------------------------------------------------------------------------


def _llr(t, lam, d):
    """ℓ(t) and dℓ/dt for the statistic T (t > 0)."""
    lpdf = ncx2.logpdf(t, d, lam)
    l0 = ncx2.logpdf(t, d, 0.0)
    ratio = jnp.exp(ncx2.logpdf(t, d + 2.0, lam) - lpdf)
    return lpdf - l0, 0.5 * lam / t * ratio


def _threshold(target, lam, d):
    """c > 0 with ℓ(c) = target (target > −λ/2), by safeguarded Newton on u = log c.

    ℓ(t) ≤ −λ/2 + λ t / (2d) gives the lower bound c ≥ 2d (target + λ/2) / λ, where we
    start; ℓ is increasing and convex in u, so Newton from there converges from above
    after at most one step, and the bracket keeps every iterate safe.
    """
    lam_s = jnp.where(lam > 0, lam, 1.0)
    c_lo = 2.0 * d * (target + 0.5 * lam_s) / lam_s
    u0 = jnp.log(jnp.maximum(c_lo, jnp.finfo(c_lo.dtype).tiny))
    eps = float(jnp.finfo(c_lo.dtype).eps)

    def cond(st):
        i, u, lo, hi, done = st
        return jnp.any(~done) & (i < _NEWTON)

    def body(st):
        i, u, lo, hi, done = st
        t = jnp.exp(u)
        ell, dell = _llr(t, lam_s, d)
        f = ell - target
        hi = jnp.where(f > 0, jnp.minimum(hi, u), hi)
        lo = jnp.where(f <= 0, jnp.maximum(lo, u), lo)
        un = u - f / (dell * t)
        ok = (un >= lo) & (un <= hi) & jnp.isfinite(un)
        ub = jnp.where(jnp.isfinite(hi), 0.5 * (lo + hi), u + 1.0)
        un = jnp.where(ok, un, ub)
        conv = (jnp.abs(un - u) <= 16 * eps * jnp.maximum(1.0, jnp.abs(u))) | (f == 0)
        return i + 1, jnp.where(done, u, un), lo, hi, done | conv

    init = (0, u0, u0, jnp.full_like(u0, jnp.inf), jnp.zeros(u0.shape, bool))
    _, u, _, _, _ = lax.while_loop(cond, body, init)
    return jnp.exp(u)


def _glrt_log_deltas(eps, lam, d):
    """(log δ_R, log δ_R') at ε, with thresholds held fixed for differentiation."""
    c = lax.stop_gradient(_threshold(lax.stop_gradient(eps), lax.stop_gradient(lam), d))
    log_r = ncx2.logsf(c, d, lam)
    log_r = log_r + _log1mexp(jnp.minimum(eps + ncx2.logsf(c, d, 0.0) - log_r, 0.0))
    # R': only for ε < λ/2 (ℓ(0) = −λ/2).
    has_swap = eps < 0.5 * lam
    eps_s = jnp.where(has_swap, eps, 0.0)
    lam_s = jnp.where(has_swap, lam, 1.0)
    c2 = lax.stop_gradient(_threshold(-lax.stop_gradient(eps_s), lax.stop_gradient(lam_s), d))
    log_s = ncx2.logcdf(c2, d, 0.0)
    log_s = log_s + _log1mexp(jnp.minimum(eps_s + ncx2.logcdf(c2, d, lam_s) - log_s, 0.0))
    log_s = jnp.where(has_swap, log_s, -jnp.inf)
    zero = lam <= 0
    return jnp.where(zero, -jnp.inf, log_r), jnp.where(zero, -jnp.inf, log_s)


def _glrt_log_delta(eps, lam, d):
    log_r, log_s = _glrt_log_deltas(eps, lam, d)
    return jnp.maximum(log_r, log_s)


# ---------------------------------------------------------------------------
# ε(δ) by Newton on log δ(ε), implicit derivatives
# ---------------------------------------------------------------------------


def _solve_epsilon(log_delta_fn, log_target, eps_hi0):
    """ε ≥ 0 with log δ(ε) = log_target; δ is convex and decreasing in ε.

    Newton on log δ (concave in ε for both adversaries), safeguarded by a bracket.
    Returns 0 where δ(0) ≤ target.
    """
    dtype = log_target.dtype
    eps_tol = float(jnp.finfo(dtype).eps)
    val_grad = jax.vmap(jax.value_and_grad(lambda e, i: log_delta_fn(e, i)), in_axes=(0, 0))
    idx = jnp.arange(log_target.shape[0])
    zero = jnp.zeros_like(log_target)
    ld0, _ = val_grad(zero, idx)
    at_zero = ld0 <= log_target

    def cond(st):
        i, e, lo, hi, done = st
        return jnp.any(~done) & (i < _NEWTON)

    def body(st):
        i, e, lo, hi, done = st
        ld, g = val_grad(e, idx)
        f = ld - log_target
        lo = jnp.where(f > 0, jnp.maximum(lo, e), lo)
        hi = jnp.where(f <= 0, jnp.minimum(hi, e), hi)
        en = e - f / g
        ok = (en >= lo) & (en <= hi) & jnp.isfinite(en)
        eb = jnp.where(jnp.isfinite(hi), 0.5 * (lo + hi), 2.0 * e + 1.0)
        en = jnp.where(ok, en, eb)
        conv = (jnp.abs(en - e) <= 8 * eps_tol * jnp.maximum(1.0, e)) | (f == 0)
        return i + 1, jnp.where(done, e, en), lo, hi, done | conv

    init = (0, eps_hi0, zero, jnp.full_like(zero, jnp.inf), at_zero)
    _, e, _, _, _ = lax.while_loop(cond, body, init)
    return jnp.where(at_zero, 0.0, e)


# ---------------------------------------------------------------------------
# Public functional forms (flattened, broadcasting handled by the wrappers)
# ---------------------------------------------------------------------------


@jax.custom_jvp
def _npo_epsilon(log_delta, mu):
    shape = log_delta.shape
    ld, m = log_delta.reshape(-1), mu.reshape(-1)
    fn = lambda e, i: _npo_log_delta(e, m[i])  # noqa: E731
    return _solve_epsilon(fn, ld, jnp.ones_like(ld)).reshape(shape)


@_npo_epsilon.defjvp
def _npo_epsilon_jvp(primals, tangents):
    ld, mu = primals
    tld, tmu = tangents
    e = _npo_epsilon(ld, mu)
    g_e, g_mu = jax.grad(lambda a, b: jnp.sum(_npo_log_delta(a, b)), argnums=(0, 1))(e, mu)
    tan = (tld - g_mu * tmu) / g_e
    return e, jnp.where(e > 0, tan, 0.0)


@jax.custom_jvp
def _glrt_epsilon(log_delta, mu, d):
    shape = log_delta.shape
    ld, m, dd = log_delta.reshape(-1), mu.reshape(-1), d.reshape(-1)
    fn = lambda e, i: _glrt_log_delta(e, m[i] * m[i], dd[i])  # noqa: E731
    return _solve_epsilon(fn, ld, jnp.ones_like(ld)).reshape(shape)


@_glrt_epsilon.defjvp
def _glrt_epsilon_jvp(primals, tangents):
    ld, mu, d = primals
    tld, tmu, _ = tangents
    e = _glrt_epsilon(ld, mu, d)
    g_e, g_mu = jax.grad(lambda a, b: jnp.sum(_glrt_log_delta(a, b * b, d)), argnums=(0, 1))(e, mu)
    tan = (tld - g_mu * tmu) / g_e
    return e, jnp.where(e > 0, tan, 0.0)


_jit_npo_log_delta = jax.jit(lambda e, m: _npo_log_delta(*_promote(e, m)))
_jit_glrt_log_delta = jax.jit(
    lambda e, m, d: (lambda e_, m_, d_: _glrt_log_delta(e_, m_ * m_, d_))(*_promote(e, m, d))
)
_jit_npo_eps = jax.jit(lambda ld, m: _npo_epsilon(*_promote(ld, m)))
_jit_glrt_eps = jax.jit(lambda ld, m, d: _glrt_epsilon(*_promote(ld, m, d)))


def _check_mu_d(mu, d=None):
    check_range("mu", mu, lo=0.0)
    if d is not None:
        check_range("d", d, lo=1.0, integer=True)


def npo_log_delta(eps, mu):
    """log δ(ε) of the NPO adversary: see :func:`npo_delta`. Finite below 1e-308."""
    check_range("eps", eps, lo=0.0)
    _check_mu_d(mu)
    return _jit_npo_log_delta(eps, mu)


def npo_delta(eps, mu):
    """δ(ε) of the NPO adversary (μ-Gaussian DP).

    ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``, evaluated in log space.

    Args:
      eps: ε ≥ 0 (broadcasts). mu: μ = Δ/σ (for N releases sharing a direction,
        μ = √(Σ Δ_i²/σ_i²)), ≥ 0.

    Returns:
      δ(ε). Differentiable in ε and μ (exact derivatives).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import profile
      >>> f"{float(profile.npo_delta(1.0, 1.0)):.6f}"
      '0.126936'
    """
    return jnp.exp(npo_log_delta(eps, mu))


def glrt_log_delta(eps, mu, d):
    """log δ(ε) of the GLRT adversary: see :func:`glrt_delta`. Finite below 1e-308."""
    check_range("eps", eps, lo=0.0)
    _check_mu_d(mu, d)
    return _jit_glrt_log_delta(eps, mu, d)


def glrt_delta(eps, mu, d):
    """δ(ε) of the GLRT adversary with query dimension d.

    ``δ(ε) = max(δ_R(ε), δ_R'(ε))``: the conjugate of the symmetrised ROC of the GLRT,
    computed at the exact tangent points (Newton on the threshold of ‖y‖²/σ²).

    Args:
      eps: ε ≥ 0. mu: μ = Δ/σ ≥ 0 (λ = μ²). d: query dimension, a positive integer.

    Returns:
      δ(ε). Exact first derivatives in ε and μ (envelope theorem).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import profile
      >>> float(profile.glrt_delta(1.0, 1.0, 1)) < float(profile.npo_delta(1.0, 1.0))
      True
    """
    return jnp.exp(glrt_log_delta(eps, mu, d))


def npo_epsilon(delta, mu):
    """ε(δ) of the NPO adversary: the smallest ε ≥ 0 with δ(ε) ≤ δ.

    Args:
      delta: δ in (0, 1). mu: μ ≥ 0.

    Returns:
      ε; 0 where δ(0) ≤ δ. Derivatives dε/dδ and dε/dμ by the implicit function
      theorem (never through the solver's iterations).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import profile
      >>> f"{float(profile.npo_epsilon(1e-4, 0.3)):.4f}"
      '0.9501'
    """
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    _check_mu_d(mu)
    return _jit_npo_eps(jnp.log(delta), mu)


def glrt_epsilon(delta, mu, d):
    """ε(δ) of the GLRT adversary with query dimension d.

    Args:
      delta: δ in (0, 1). mu: μ = Δ/σ ≥ 0. d: query dimension (positive integer).

    Returns:
      ε; 0 where δ(0) ≤ δ. Exact derivatives in δ and μ (implicit function theorem).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import profile
      >>> f"{float(profile.glrt_epsilon(1e-4, 0.3, 1)):.4f}"
      '0.3768'
    """
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    _check_mu_d(mu, d)
    return _jit_glrt_eps(jnp.log(delta), mu, d)
