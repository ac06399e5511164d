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
theorem ∂δ/∂c = 0 at the tangent point, and the partials are closed forms at the solved
thresholds (dδ_R/dε = −e^ε Ψ_0(c), dδ_R/dλ = f(c; d + 2, λ); see ``_glrt_parts_flat``),
attached by a custom JVP. ε(δ) is the root of log δ(ε) = log δ*, found by the library's
root finder (:func:`glrt_jax._src.solvers.find_root`: Newton on log δ, started from an
upper bound, the NPO ε without its second term) and differentiated by its implicit
function rule: dε/dδ = 1/(∂δ/∂ε), dε/dμ = −(∂δ/∂μ)/(∂δ/∂ε). No derivative ever flows
through an iteration. Derivatives are exact to first order (second derivatives are not).

Precision: everything is computed in log space so δ down to 1e-300 (and log δ beyond) is
accurate. When δ_R ≪ Ψ_λ(c) the difference Ψ_λ(c) − e^ε Ψ_0(c) cancels (relative error
≈ 1e-16 |log Ψ| Ψ/δ); there δ_R is formed as Ψ_0(c) [(Ψ_λ − Ψ_0)/Ψ_0 − (e^ε − 1)] with the
gap Ψ_λ − Ψ_0 = Σ_i g(d/2 + i, c/2) P(J > i), J ~ Poisson(λ/2), a sum of positive terms
(``_log_tail_gap``); likewise for δ_R'. On the mpmath grid δ(ε) is within 2e-11 relative.

Jit and shapes: the public functions pad their inputs to a power-of-two length (at least
16; a single point is not padded), so every shape of a size class shares one
compilation. Under ``jit`` the validation is skipped (traced values cannot be checked):
out-of-domain traced inputs are not detected and their results are meaningless (e.g.
μ < 0 is treated as |μ|).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_derivatives import SymbolicZero
from jax.scipy.special import log_ndtr, ndtri

from glrt_jax._src import ncx2, programs, solvers
from glrt_jax._src.llr import threshold, threshold_df1
from glrt_jax._src.numerics import log1mexp, log_poisson
from glrt_jax._src.shapes import bucketed
from glrt_jax._src.special import dispatch
from glrt_jax._src.validation import ADVERSARIES, check_choice, check_range

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
    # A loop, not unrolled: the same operations in the same order, and a compiled
    # program (with its forward-mode derivative, taken by the ε solver) many times smaller.
    k = lax.fori_loop(0, _CF_TERMS, lambda i, k: t + (_CF_TERMS - i).astype(t.dtype) / k, t)
    log_tail = -0.5 * t * t - 0.5 * math.log(2.0 * math.pi) - jnp.log(k)
    return jnp.where(tail, log_tail, log_ndtr(jnp.where(tail, 0.0, x)))


def npo_log_delta_kernel(eps, mu):
    """log δ_NPO(ε) in log space; −inf where δ = 0 (μ = 0)."""
    mus = jnp.where(mu > 0, mu, 1.0)
    a = -eps / mus + 0.5 * mus
    b = -eps / mus - 0.5 * mus
    # One call on both arguments: one copy of the normal tail in the compiled program.
    la, lb = _log_ndtr(jnp.stack([a, b]))
    out = la + log1mexp(jnp.minimum(eps + lb - la, 0.0))
    return jnp.where(mu > 0, out, -jnp.inf)


# ---------------------------------------------------------------------------
# GLRT: δ at the tangent thresholds (glrt_jax._src.llr.threshold)
# ---------------------------------------------------------------------------


# Terms of the tail-gap series; the Poisson tail ratios start this many indices further
# (where, with m ≤ _GAP_MAX_M, the start value's error has decayed below 1e-20).
_GAP_TERMS = 48
_GAP_TAIL_START = _GAP_TERMS + 40
# The series is used where its last term is below e^-40 of the sum and λ/2 ≤ 16.
_GAP_LOG_TOL = -40.0
_GAP_MAX_M = 16.0
# ... and only where δ_R < _GAP_CANCEL Ψ_λ(c) (cancellation of at least a factor 4).
_GAP_CANCEL = 0.25


def _log_tail_gap(t, d, lam):
    """log(Ψ_λ(t) − Ψ_0(t)) as a sum of positive terms, and where it is valid.

    With a = d/2, y = t/2, J ~ Poisson(m), m = λ/2, w_j = P(J = j) and
    g(b, y) = y^b e^{−y}/Γ(b + 1), the recurrence Q(b + 1, y) = Q(b, y) + g(b, y) of
    the regularised upper gamma gives

        Ψ_λ(t) − Ψ_0(t) = Σ_j w_j [Q(a + j, y) − Q(a, y)] = Σ_{i≥0} g(a + i, y) P(J > i),

    which has no cancellation (it is also Φ_0(t) − Φ_λ(t)). Writing
    P(J > i) = w_{i+1} R_i, the tail ratios obey R_i = 1 + m R_{i+1}/(i + 2) (run
    downwards: bounded, no cancellation), and the term ratios are
    ρ_i = y m / ((a + i)(i + 1)), so the sum is g(a, y) w_1 Σ_i (ρ_1 ⋯ ρ_i) R_i,
    evaluated by Horner's rule: only multiplications and additions, no exp or log per
    term. ``ok`` is False where the _GAP_TERMS terms have not converged. The
    recurrences run in loops (not unrolled), which keeps the compiled program small.
    """
    a, y, m = 0.5 * d, 0.5 * t, 0.5 * lam
    dtype = m.dtype
    # 1/(i + 2) as constants rounded from float64, index j ↔ i = _GAP_TAIL_START − j.
    inv = jnp.asarray([1.0 / (i + 2.0) for i in range(_GAP_TAIL_START, -1, -1)], dtype)
    n_tail = _GAP_TAIL_START + 1 - _GAP_TERMS
    # R_i for i = _GAP_TAIL_START … _GAP_TERMS (start values, not kept).
    r = lax.fori_loop(0, n_tail, lambda j, r: 1.0 + m * r * inv[j], jnp.ones_like(m))
    ym = y * m

    def rho(i):  # ρ_{i+1} = y m / ((a + i + 1)(i + 2))
        fi = i.astype(dtype)
        return ym / ((a + (fi + 1.0)) * (fi + 2.0))

    # R_i for i = _GAP_TERMS − 1 … 0 and Horner's rule on the same pass (same order).
    last_r = 1.0 + m * r * inv[n_tail]

    def horner(j, total_r):
        total, r = total_r
        i = _GAP_TERMS - 1 - j  # i = _GAP_TERMS − 2 … 0
        r = 1.0 + m * r * inv[n_tail + j]
        return r + rho(i) * total, r

    total, _ = lax.fori_loop(1, _GAP_TERMS, horner, (last_r, last_r))
    last = lax.fori_loop(0, _GAP_TERMS - 1, lambda i, v: v * rho(i), last_r)
    ok = (last < math.exp(_GAP_LOG_TOL) * total) & (m <= _GAP_MAX_M) & (y > 0)
    ok = ok & jnp.isfinite(total) & (m > 0)
    ms = jnp.where(m > 0, m, 1.0)
    log_w1 = jnp.log(ms) - ms
    return log_poisson(a, y) + log_w1 + jnp.log(total), ok


def _log_delta_branch(eps, log_big, log_small, log_gap, ok):
    """log(e^{log_big} − e^{ε + log_small}) where e^{log_big} − e^{log_small} = e^{log_gap}.

    Direct form: log_big + log(1 − e^{ε + log_small − log_big}). When the two terms
    nearly cancel its relative error is that of the logs (~1e-16 |log δ|) times
    Ψ/δ; then (if ``ok``) we use the gap instead,
    δ = e^{log_small} (e^{log_gap − log_small} − (e^ε − 1)), whose amplification is
    smaller by (1 − e^{−ε}) and whose gap term carries no cancellation.
    """
    direct = log_big + log1mexp(jnp.minimum(eps + log_small - log_big, 0.0))
    x = jnp.exp(jnp.where(ok, log_gap - log_small, 0.0))
    diff = x - jnp.expm1(eps)
    use = ok & (diff > 0) & (diff < _GAP_CANCEL * (1.0 + x))
    via_gap = log_small + jnp.log(jnp.where(use, diff, 1.0))
    return jnp.where(use, via_gap, direct)


def _glrt_parts_flat(eps, lam, d, *, with_lam=True, closed_d1=False):
    """(log δ, ∂ log δ/∂ε, ∂ log δ/∂λ) of the GLRT on flat arrays of equal length.

    Both tangent thresholds (ℓ(c) = ε for R, ℓ(c') = −ε for R') come from one Newton
    solve on the stacked inputs, and every ncx2 function is called once on stacked
    inputs, which keeps the compiled program small. The partial derivatives follow
    from the envelope theorem (δ is stationary in the threshold):

        ∂δ_R/∂ε = −e^ε Ψ_0(c),      ∂δ_R/∂λ = ∂Ψ_λ(c)/∂λ = f(c; d + 2, λ),
        ∂δ_R'/∂ε = −e^ε Φ_λ(c'),    ∂δ_R'/∂λ = e^ε f(c'; d + 2, λ).

    ``with_lam=False`` skips ∂ log δ/∂λ (returned as None) and the densities it needs
    (the ε solver only differentiates in ε). ``closed_d1=True`` (static; every ``d`` is 1)
    uses the d = 1 closed forms only: the thresholds from ``llr.threshold_df1`` and the
    normal tails of ``special.dispatch`` (``logsf_df1``, ``logcdf_df1``); a point where
    the closed-form cdf would lose accuracy gives NaN instead (the eager caller then
    asks the general program).
    """
    n = eps.shape[0]
    pos = lam > 0
    lam_s = jnp.where(pos, lam, 1.0)
    has_swap = pos & (eps < 0.5 * lam)
    eps_s = jnp.where(has_swap, eps, 0.0)
    lam2, d2 = jnp.concatenate([lam_s, lam_s]), jnp.concatenate([d, d])
    targets = jnp.concatenate([eps, -eps_s])
    cc = threshold_df1(targets, lam2) if closed_d1 else threshold(targets, lam2, d2)
    c, c2 = cc[:n], cc[n:]
    zero = jnp.zeros_like(lam_s)
    # R: Ψ_λ(c), Ψ_0(c); R': Φ_0(c'), Φ_λ(c').
    x_sf, nc_sf = jnp.concatenate([c, c]), jnp.concatenate([lam_s, zero])
    x_cdf, nc_cdf = jnp.concatenate([c2, c2]), jnp.concatenate([zero, lam_s])
    if closed_d1:
        ls, lc = dispatch.logsf_df1(x_sf, nc_sf), dispatch.logcdf_df1(x_cdf, nc_cdf)
    else:
        ls, lc = ncx2.logsf(x_sf, d2, nc_sf), ncx2.logcdf(x_cdf, d2, nc_cdf)
    gap, ok = _log_tail_gap(cc, d2, lam2)
    log_r = _log_delta_branch(eps, ls[:n], ls[n:], gap[:n], ok[:n])
    log_s = _log_delta_branch(eps_s, lc[:n], lc[n:], gap[n:], ok[n:])
    log_s = jnp.where(has_swap, log_s, -jnp.inf)
    use_r = log_r >= log_s
    log_d = jnp.where(use_r, log_r, log_s)
    de = jnp.where(use_r, -jnp.exp(eps + ls[n:] - log_r), -jnp.exp(eps_s + lc[n:] - log_s))
    fin = pos & jnp.isfinite(log_d)
    dl = None
    if with_lam:
        lp = ncx2.logpdf(cc, d2 + 2.0, lam2)
        dl = jnp.where(use_r, jnp.exp(lp[:n] - log_r), jnp.exp(eps_s + lp[n:] - log_s))
        dl = jnp.where(fin, dl, 0.0)
    return jnp.where(pos, log_d, -jnp.inf), jnp.where(fin, de, 0.0), dl


def _glrt_parts(eps, lam, d, **kw):
    """:func:`_glrt_parts_flat` for broadcastable arrays of any shape (0-d included)."""
    eps, lam, d = jnp.broadcast_arrays(eps, lam, d)
    shape = eps.shape
    out = _glrt_parts_flat(eps.reshape(-1), lam.reshape(-1), d.reshape(-1), **kw)
    return tuple(None if o is None else o.reshape(shape) for o in out)


def _sym_tangent(t, like):
    """A tangent as an array (zeros for a symbolic zero)."""
    if isinstance(t, SymbolicZero):
        return jnp.zeros_like(like)
    return t


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _glrt_log_delta(eps, lam, d, closed_d1):
    return _glrt_parts(eps, lam, d, with_lam=False, closed_d1=closed_d1)[0]


def _glrt_log_delta_jvp(closed_d1, primals, tangents):
    eps, lam, d = primals
    t_eps, t_lam, _ = tangents
    with_lam = not isinstance(t_lam, SymbolicZero)
    val, de, dl = _glrt_parts(eps, lam, d, with_lam=with_lam, closed_d1=closed_d1)
    tan = de * _sym_tangent(t_eps, val)
    if with_lam:
        tan = tan + dl * t_lam
    return val, tan


_glrt_log_delta.defjvp(_glrt_log_delta_jvp, symbolic_zeros=True)


def glrt_log_delta_kernel(eps, lam, d):
    """log δ_GLRT(ε) at λ = μ²; exact first derivatives in ε and λ (not in d).

    The derivative in λ (and the densities it needs) is computed only where a tangent
    in λ is asked for.
    """
    return _glrt_log_delta(eps, lam, d, False)


def _glrt1_log_delta_kernel(eps, lam):
    """:func:`glrt_log_delta_kernel` at d = 1 by closed forms only (NaN where they would
    lose accuracy; see ``_glrt_parts_flat``)."""
    return _glrt_log_delta(eps, lam, jnp.ones_like(lam), True)


# ---------------------------------------------------------------------------
# ε(δ): the root of log δ(ε) = log δ* (solvers.find_root), implicit derivatives
# ---------------------------------------------------------------------------


def _epsilon_upper(log_target, mu):
    """An ε with δ_NPO(ε) < δ (hence δ_GLRT(ε) < δ too): the NPO ε without its second term.

    δ_NPO(ε) < Φ(−ε/μ + μ/2), which equals δ at ε = μ(μ/2 − Φ⁻¹(δ)); a small margin
    covers the rounding of ``ndtri``. The GLRT adversary is weaker than the NPO one, so
    its δ(ε) is smaller at every ε and the same ε bounds its root.
    """
    z = ndtri(jnp.exp(log_target))
    return mu * (0.5 * mu - z) * (1.0 + 1e-6) + 1e-6


def _npo_residual(eps, theta):
    log_target, mu = theta
    return npo_log_delta_kernel(eps, mu) - log_target


def _glrt_residual(eps, theta):
    log_target, mu, d = theta
    return glrt_log_delta_kernel(eps, mu * mu, d) - log_target


def _glrt1_residual(eps, theta):
    log_target, mu = theta
    return _glrt1_log_delta_kernel(eps, mu * mu) - log_target


def _solve_epsilon(residual, theta):
    """ε ≥ 0 with log δ(ε) = log_target (θ[0]); δ is convex and decreasing in ε.

    :func:`glrt_jax._src.solvers.find_root` (``side="any"``) on the log-space residual
    ``log δ(ε) − log_target``, searched in ``[0, eps_hi]`` (``_epsilon_upper``) and
    started at ``eps_hi``, on the right of the root. Where log δ is concave (NPO, and GLRT
    on every grid we tried) the Newton iterates then decrease monotonically to the root
    and never visit the far tail, where δ is expensive to evaluate. It stops when the
    step is below 8 ulp of max(1, ε) or log δ hits the target exactly. Returns 0 where
    δ(0) ≤ target (the solver reports the root below its lower bound), NaN where it
    does not converge. Derivatives: the solver's implicit-function rule,
    dε = −(∂ log δ/∂θ · dθ)/(∂ log δ/∂ε) (0 where ε = 0).
    """
    log_target, mu = theta[0], theta[1]
    eps_tol = 8.0 * float(jnp.finfo(log_target.dtype).eps)
    eps_hi = _epsilon_upper(log_target, mu)
    root = solvers.find_root(
        residual,
        theta,
        0.0,
        eps_hi,
        eps_hi,
        ftol=0.0,
        xtol=eps_tol,
        xrtol=eps_tol,
        side="any",
        max_iter=_NEWTON,
        max_step=math.inf,
    )
    return jnp.where(root.status == solvers.ROOT_BELOW, 0.0, root.x)


# ---------------------------------------------------------------------------
# Public functional forms (flattened, broadcasting handled by the wrappers)
# ---------------------------------------------------------------------------


def npo_epsilon_kernel(log_delta, mu):
    """ε(δ) of the NPO adversary from log δ; exact derivatives in both (implicit)."""
    log_delta, mu = jnp.broadcast_arrays(log_delta, mu)
    return _solve_epsilon(_npo_residual, (log_delta, mu))


def glrt_epsilon_kernel(log_delta, mu, d):
    """ε(δ) of the GLRT adversary from log δ; exact derivatives in log δ and μ (not d)."""
    log_delta, mu, d = jnp.broadcast_arrays(log_delta, mu, d)
    return _solve_epsilon(_glrt_residual, (log_delta, mu, d))


def _glrt1_epsilon_kernel(log_delta, mu):
    """:func:`glrt_epsilon_kernel` at d = 1 by closed forms only (NaN where they would
    lose accuracy)."""
    log_delta, mu = jnp.broadcast_arrays(log_delta, mu)
    return _solve_epsilon(_glrt1_residual, (log_delta, mu))


# The eager programs (stored programs: see glrt_jax._src.programs; the command line
# compiles them for latency, and a later process loads them without tracing). ε takes δ
# itself (its log is taken inside the program: no separate dispatch). The d = 1 programs
# carry d only for its shape and dtype.
@programs.stored()
def _jit_npo_log_delta(e, m):
    return npo_log_delta_kernel(e, m)


@programs.stored()
def _jit_glrt_log_delta(e, m, d):
    return glrt_log_delta_kernel(e, m * m, d)


@programs.stored()
def _jit_glrt1_log_delta(e, m, d):
    return _glrt1_log_delta_kernel(e, m * m)


@programs.stored()
def _jit_npo_eps(p, m):
    return npo_epsilon_kernel(jnp.log(p), m)


@programs.stored()
def _jit_glrt_eps(p, m, d):
    return glrt_epsilon_kernel(jnp.log(p), m, d)


@programs.stored()
def _jit_glrt1_eps(p, m, d):
    return _glrt1_epsilon_kernel(jnp.log(p), m)


def _check_mu_d(mu, d=None):
    check_range("mu", mu, lo=0.0)
    if d is not None:
        check_range("d", d, lo=1.0, integer=True)


def _glrt_eager(general, closed_d1, x, mu, d):
    """``general`` on bucketed inputs; for concrete d = 1 the closed-form program first.

    The d = 1 program is several times smaller (no general-d branch of the non-central
    χ² is compiled); where it returns NaN (a closed form that would lose accuracy, or a
    NaN answer) the general program answers instead, so results do not depend on it.
    """
    args = (x, mu, d)
    if not any(isinstance(a, jax.core.Tracer) for a in args) and np.all(np.asarray(d) == 1):
        out = bucketed(closed_d1, *args)
        if not np.any(np.isnan(np.asarray(out))):
            return out
    return bucketed(general, *args)


def npo_log_delta(epsilon, mu):
    """log δ(ε) of the NPO adversary: see :func:`npo_delta`. Finite below 1e-308."""
    check_range("epsilon", epsilon, lo=0.0)
    _check_mu_d(mu)
    return bucketed(_jit_npo_log_delta, epsilon, mu)


def npo_delta(epsilon, mu):
    """δ(ε) of the NPO adversary (μ-GDP), in log space: :func:`delta` with ``adversary="npo"``."""
    return jnp.exp(npo_log_delta(epsilon, mu))


def glrt_log_delta(epsilon, mu, d):
    """log δ(ε) of the GLRT adversary: see :func:`glrt_delta`. Finite below 1e-308."""
    check_range("epsilon", epsilon, lo=0.0)
    _check_mu_d(mu, d)
    return _glrt_eager(_jit_glrt_log_delta, _jit_glrt1_log_delta, epsilon, mu, d)


def glrt_delta(epsilon, mu, d):
    """δ(ε) of the GLRT adversary: :func:`delta` with ``adversary="glrt"``."""
    return jnp.exp(glrt_log_delta(epsilon, mu, d))


def npo_epsilon(delta, mu):
    """ε(δ) of the NPO adversary: :func:`epsilon` with ``adversary="npo"``."""
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    _check_mu_d(mu)
    return bucketed(_jit_npo_eps, delta, mu)


def glrt_epsilon(delta, mu, d):
    """ε(δ) of the GLRT adversary: :func:`epsilon` with ``adversary="glrt"``."""
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    _check_mu_d(mu, d)
    return _glrt_eager(_jit_glrt_eps, _jit_glrt1_eps, delta, mu, d)


# ---------------------------------------------------------------------------
# Public entry points: the adversary chosen by a parameter
# ---------------------------------------------------------------------------

_FUNCS = {
    ("npo", "delta"): lambda x, mu, d: npo_delta(x, mu),
    ("npo", "log_delta"): lambda x, mu, d: npo_log_delta(x, mu),
    ("npo", "epsilon"): lambda x, mu, d: npo_epsilon(x, mu),
    ("glrt", "delta"): glrt_delta,
    ("glrt", "log_delta"): glrt_log_delta,
    ("glrt", "epsilon"): glrt_epsilon,
}


def _dispatch(adversary, what, x, mu, d):
    check_choice("adversary", adversary, ADVERSARIES)
    if adversary == "npo":
        check_range("d", d, lo=1.0, integer=True)
    return _FUNCS[adversary, what](x, mu, d)


def delta(epsilon, mu, d=1, *, adversary: str = "npo") -> jax.Array:
    """Privacy profile δ(ε) of one adversary for the Gaussian mechanism with μ = Δ/σ.

    * ``adversary="npo"``: μ-Gaussian DP, ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``
      (``d`` is ignored).
    * ``adversary="glrt"``: ``δ(ε) = max(δ_R(ε), δ_R'(ε))``, the conjugate of the
      symmetrised GLRT ROC in dimension ``d``, at the exact tangent points.

    Args:
      epsilon: ε ≥ 0. mu: μ = Δ/σ ≥ 0 (for releases sharing a direction,
        μ = √(Σ Δ_i²/σ_i²)). d: query dimension (positive integer). All broadcast.
      adversary: ``"npo"`` or ``"glrt"`` (static under ``jit``).

    Returns:
      δ(ε), evaluated in log space. Jittable, vmappable, exact first derivatives in ε
      and μ (envelope theorem; no finite differences).

    Raises:
      ValueError: concrete out-of-domain inputs (under ``jit`` they give NaN).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import profile
      >>> f"{float(profile.delta(1.0, 1.0)):.6f}"
      '0.126937'
      >>> float(profile.delta(1.0, 1.0, 1, adversary="glrt")) < 0.126937
      True
    """
    return _dispatch(adversary, "delta", epsilon, mu, d)


def log_delta(epsilon, mu, d=1, *, adversary: str = "npo") -> jax.Array:
    """``log δ(ε)`` (see :func:`delta`); finite far below the smallest double.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import profile
      >>> bool(profile.log_delta(60.0, 1.0, 5, adversary="glrt") < -1000)
      True
    """
    return _dispatch(adversary, "log_delta", epsilon, mu, d)


def epsilon(delta, mu, d=1, *, adversary: str = "npo") -> jax.Array:
    """ε(δ): the smallest ε ≥ 0 with δ(ε) ≤ ``delta`` (see :func:`delta`).

    Args:
      delta: δ in (0, 1). mu: μ = Δ/σ ≥ 0. d: query dimension (positive integer).
      adversary: ``"npo"`` or ``"glrt"``.

    Returns:
      ε; 0 where δ(0) ≤ δ. Derivatives dε/dδ and dε/dμ by the implicit function
      theorem (never through the solver's iterations).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import profile
      >>> f"{float(profile.epsilon(1e-4, 0.3)):.4f}"
      '0.9501'
      >>> f"{float(profile.epsilon(1e-4, 0.3, 1, adversary='glrt')):.4f}"
      '0.3768'
    """
    return _dispatch(adversary, "epsilon", delta, mu, d)
