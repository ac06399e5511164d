"""ROC and trade-off curves of the Gaussian mechanism against the NPO and GLRT adversaries.

Notation (docs/design.md §2): ``α`` is the false-positive rate, ``μ = Δ/σ ≥ 0`` the
signal-to-noise ratio, ``λ = μ²`` the non-centrality, ``Q`` the standard normal
survival function and ``Ψ_λ``/``Φ_λ`` the survival function / CDF of ``ncx2(d, λ)``
(``λ = 0``: the central ``χ²_d``). ``ℓ(t) = log f_λ(t) − log f_0(t)
= −λ/2 + log ₀F₁(; d/2; λt/4)`` is the log-likelihood ratio of the GLRT statistic
``T = ‖y‖²/σ²``; it is increasing in ``t``.

Curves
------
* NPO: ``R_N(α) = Q(Q⁻¹(α) − μ)``.
* GLRT (Theorem 1): ``R(α) = Ψ_λ(Ψ_0⁻¹(α))``, with the closed form
  ``R(α) = Q(Q⁻¹(α/2) − μ) + Q(Q⁻¹(α/2) + μ)`` for ``d = 1`` (Corollary 1).
* GLRT with the hypotheses swapped: ``R'(α) = Φ_0(Φ_λ⁻¹(α))``.
* Symmetrised GLRT: ``R_s`` = least concave majorant of ``max(R, R')`` (Dong, Roth
  and Su's symmetrisation).

The trade-off functions ``β(α) = 1 − ROC(α)`` of f-DP are evaluated directly
(``Φ`` where the ROC uses ``Ψ``), not as ``1 − ROC``, so they keep their relative
accuracy when they are tiny.

Numerical method
----------------
* NPO and the ``d = 1`` closed form use ``ndtri``/``ndtr`` (relative accuracy
  ~5e-13 down to ``α = 1e-300``). The ``d = 1`` trade-off, a normal band
  probability ``Φ(z − μ) − Φ(−z − μ)``, uses Gauss–Legendre quadrature of the
  density when the band is narrow, so it has no cancellation.
* The general GLRT curves compose the :mod:`glrt_jax.ncx2` quantile and
  distribution functions. In the lower tail of ``R'`` the threshold
  ``t' = Φ_λ⁻¹(α)`` can underflow (``d = 1``, ``α ≲ 1e-150``); whenever
  ``λ t' ≤ 1e-17 (d + 2)`` we use ``R'(α) = α e^{λ/2}``, exact to double precision
  there because ``Φ_λ(t)/Φ_0(t) = e^{−λ/2}(1 + O(λ t/(d + 2)))``.
* Results are clipped to ``[α, 1]`` (``[0, 1 − α]`` for trade-offs): every curve
  here is the ROC of a likelihood-ratio test and lies above the diagonal.

Symmetrisation (exact)
----------------------
``R`` is concave (``ncx2(d, λ)`` has increasing likelihood ratio in ``t``) and ``R'``
is its reflection across the anti-diagonal: the threshold ``t`` gives the point
``(Ψ_0(t), Ψ_λ(t))`` on ``R`` and ``(Φ_λ(t), Φ_0(t)) = (1 − Ψ_λ(t), 1 − Ψ_0(t))``
on ``R'``. A reflection maps slope ``s`` to slope ``1/s``, so the slope-1 tangent of
``R`` at ``x₁ = Ψ_0(c₁)``, where ``ℓ(c₁) = 0`` (the densities cross), is also the
slope-1 tangent of ``R'`` at ``x₁' = 1 − R(x₁) = Φ_λ(c₁)``: the line ``y = x + τ``
with ``τ = Ψ_λ(c₁) − Ψ_0(c₁)`` (the total-variation distance). We return

    R_s(α) = α + τ                 for x₁ ≤ α ≤ x₁',
    R_s(α) = max(R(α), R'(α))      otherwise,

which is Dong–Roth–Su's construction (their case ``f(x*) ≥ x*``). It is *exactly*
the least concave majorant whenever ``R ≥ R'`` on ``[0, x₁]`` (then ``R_s`` is
``R`` on ``[0, x₁]``, the common tangent on ``[x₁, x₁']`` and ``R'`` on
``[x₁', 1]``: concave, above ``max(R, R')``, and touching it outside a chord).
Equivalently, ``δ_R(ε) ≥ δ_R'(ε)`` for all ``ε ≥ 0``, the condition under which
``sup_α [R_s(α) − e^ε α] = max(δ_R(ε), δ_R'(ε))``. We verified it numerically (R
against R' on fine grids) for ``d`` from 1 to 10⁴ and ``μ`` from 10⁻² to 20; the
tests check concavity and ``R_s ≥ max(R, R')`` directly and compare with the upper
hull of densely sampled points. Off the segment we return ``max(R, R')`` rather
than ``R`` or ``R'`` alone, so ``R_s ≥ max(R, R')`` holds whatever the parameters;
were the condition ever violated, the symptom would be a loss of concavity there.
The threshold ``c₁`` is found by :func:`glrt_jax._src.llr.threshold` (the library's
root finder, :func:`glrt_jax._src.solvers.find_root`, with Halley steps on
``u = log t``); its derivative is not needed:
by the envelope theorem ``∂τ/∂λ = ∂Ψ_λ(c₁)/∂λ`` at fixed ``c₁``.

Derivatives
-----------
Custom JVPs with the exact slopes: ``∂R/∂α = e^{ℓ(t)}``, ``∂R'/∂α = e^{−ℓ(t')}``,
``∂Ψ_λ(t)/∂λ = f(t; d + 2, λ)``; ``∂R_N/∂α = e^{μz − μ²/2}``, ``∂R_N/∂μ = φ(z − μ)``.
``d`` is not differentiable.

Cost and compilation
--------------------
The six GLRT functions share one jitted core that evaluates ``R``, ``R'`` and
``R_s`` (values, trade-offs and slopes) together, calling each ncx2 kernel once on
stacked inputs; a call costs about three single-curve evaluations but all six
functions reuse one compilation. Inputs are broadcast, flattened and padded to a
power-of-two length (at least 16), so every shape in a size class shares that
compilation, and concrete (eager) calls — including eager ``jax.grad`` — reuse an
ahead-of-time compiled executable. Under ``jit``/``vmap`` the core is traced into
the caller's program. Inputs in float32 are computed in float32 (best effort; the
accuracy statements above are for float64).

Validation
----------
Public functions check concrete inputs eagerly and raise ``ValueError`` naming the
parameter and its allowed range. Under ``jit`` (traced inputs) the checks are
skipped and out-of-domain values (``α ∉ [0, 1]``, ``μ < 0`` or infinite, ``d`` not
a positive integer, NaN) give NaN.
"""

from __future__ import annotations

import collections
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_derivatives import SymbolicZero
from jax.scipy.special import ndtr, ndtri
from jax.typing import ArrayLike

from glrt_jax._src import ncx2
from glrt_jax._src.llr import threshold
from glrt_jax._src.numerics import float_dtype, promote
from glrt_jax._src.shapes import bucket
from glrt_jax._src.validation import ADVERSARIES, check_alpha, check_choice, check_d, check_range

__all__ = [
    "glrt",
    "glrt_swapped",
    "glrt_swapped_tradeoff",
    "glrt_symmetrised",
    "glrt_symmetrised_tradeoff",
    "glrt_tradeoff",
    "npo",
    "npo_tradeoff",
]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
# Gauss–Legendre rule for narrow normal bands (exact to double precision when
# width * (1 + max |endpoint|) <= 2).
_GL_X, _GL_W = np.polynomial.legendre.leggauss(20)
_BAND_NARROW = 2.0
# R'(α) = α e^{λ/2} once λ t' ≤ _TINY_T (d + 2).
_TINY_T = 1e-17


# ---------------------------------------------------------------------------
# Validation (eager; traced values pass and give NaN when out of domain)
# ---------------------------------------------------------------------------


def _check_mu(mu) -> None:
    check_range("mu", mu, lo=0.0)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _bad(alpha, mu, d=None):
    bad = ~((alpha >= 0) & (alpha <= 1)) | ~(mu >= 0) | jnp.isinf(mu)
    if d is not None:
        bad = bad | ~(d >= 1) | jnp.isinf(d) | (d != jnp.floor(d))
    return bad


def _no_d_tangent(t_d, name: str) -> None:
    if not isinstance(t_d, SymbolicZero):
        raise NotImplementedError(
            f"glrt_jax.roc.{name}: d is an integer and has no derivative; "
            "differentiate with respect to alpha and mu only."
        )


def _tan(t, like):
    if isinstance(t, SymbolicZero):
        return jnp.zeros_like(like)
    return jnp.broadcast_to(t, like.shape).astype(like.dtype)


def _norm_logpdf(x):
    return -0.5 * x * x - _HALF_LOG_2PI


def _normal_band(c, h):
    """``Φ(c + h) − Φ(c − h)`` for ``h ≥ 0`` with full relative accuracy.

    The band is passed as centre and half-width: forming the endpoints first
    would lose the half-width's precision when it is small next to ``|c|``.
    """
    lo, hi = c - h, c + h
    narrow = 2.0 * h * (1.0 + jnp.abs(c) + h) <= _BAND_NARROW
    # Gauss–Legendre quadrature of the density over a narrow band.
    hn = jnp.where(narrow, h, 0.0)
    nodes = c[..., None] + hn[..., None] * jnp.asarray(_GL_X, c.dtype)
    quad = hn * jnp.sum(jnp.asarray(_GL_W, c.dtype) * jnp.exp(_norm_logpdf(nodes)), axis=-1)
    # Wide band: difference on the side where both tails are small.
    diff = jnp.where(c > 0, ndtr(-lo) - ndtr(-hi), ndtr(hi) - ndtr(lo))
    return jnp.where(narrow, quad, diff)


def _clip_roc(r, alpha, upper):
    """Clip an ROC value to ``[α, 1]`` or a trade-off value to ``[0, 1 − α]``."""
    if upper:
        return jnp.clip(r, alpha, 1.0)
    return jnp.clip(r, 0.0, 1.0 - alpha)


# ---------------------------------------------------------------------------
# NPO
# ---------------------------------------------------------------------------


@partial(jax.custom_jvp, nondiff_argnums=(2,))
def _npo_kernel(alpha, mu, upper):
    z = -ndtri(alpha)
    r = ndtr(mu - z) if upper else ndtr(z - mu)
    r = jnp.where(mu == 0, alpha if upper else 1.0 - alpha, r)
    return _clip_roc(r, alpha, upper)


def _npo_jvp(upper, primals, tangents):
    alpha, mu = primals
    ta, tm = tangents
    out = _npo_kernel(alpha, mu, upper)
    z = -ndtri(alpha)
    ca = jnp.where(mu == 0, 1.0, jnp.exp(mu * z - 0.5 * mu * mu))
    cm = jnp.exp(_norm_logpdf(z - mu))
    tan = ca * _tan(ta, out) + cm * _tan(tm, out)
    return out, tan if upper else -tan


_npo_kernel.defjvp(_npo_jvp, symbolic_zeros=True)


@partial(jax.jit, static_argnames=("upper",))
def _npo_impl(alpha, mu, upper):
    alpha, mu = promote(alpha, mu)
    bad = _bad(alpha, mu)
    out = _npo_kernel(jnp.where(bad, 0.5, alpha), jnp.where(bad, 0.0, mu), upper)
    return jnp.where(bad, jnp.nan, out)


# ---------------------------------------------------------------------------
# GLRT: one core evaluates R, R', R_s (values, trade-offs and slopes)
# ---------------------------------------------------------------------------


def _llr_from_logpdfs(t, lp_lam, lp_0, lam):
    """``ℓ(t)`` from the two log-densities, with its limits at ``t = 0`` and ``t = ∞``."""
    ell = lp_lam - lp_0
    ell = jnp.where(t <= 0, -0.5 * lam, ell)
    return jnp.where(jnp.isposinf(t), jnp.inf, ell)


def _corrected(log_p, log_q, ell, alpha, log_ref_small, log_ref_large):
    """One Newton correction of a composed curve for the rounding of its threshold.

    The threshold ``t̂`` was meant to satisfy ``F(t̂) = α`` for a reference tail
    ``F``; its rounding moves the curve by ``e^{ℓ}(α − F(t̂))`` (``e^{ℓ}`` is the
    curve's slope). ``log_ref_small``/``log_ref_large`` are ``log F(t̂)`` and
    ``log(1 − F(t̂))``; ``log_p``/``log_q`` the logs of the curve's value and of its
    complement at ``t̂``. Returns the corrected (value, complement).
    """
    small = alpha <= 0.5
    log_base = jnp.where(small, jnp.log(alpha), jnp.log1p(-alpha))
    # α − F(t̂) = e^{log_base} * factor, without cancellation.
    factor = jnp.where(
        small, -jnp.expm1(log_ref_small - log_base), jnp.expm1(log_ref_large - log_base)
    )
    factor = jnp.where(jnp.isfinite(factor), factor, 0.0)
    shift_p = jnp.exp(ell + log_base - log_p) * factor
    shift_q = jnp.exp(ell + log_base - log_q) * factor
    p = jnp.exp(log_p) * (1.0 + jnp.where(jnp.isfinite(shift_p), shift_p, 0.0))
    q = jnp.exp(log_q) * (1.0 - jnp.where(jnp.isfinite(shift_q), shift_q, 0.0))
    return p, q


def _closed_form_d1(alpha, mu):
    """d = 1 (Corollary 1): R, 1 − R and the slopes ∂R/∂α, ∂R/∂μ."""
    z = -ndtri(0.5 * alpha)
    r = ndtr(mu - z) + ndtr(-mu - z)
    r_lo = _normal_band(-mu, z)
    e2 = jnp.exp(-2.0 * mu * z)
    ca = jnp.where(mu == 0, 1.0, 0.5 * jnp.exp(mu * z - 0.5 * mu * mu) * (1.0 + e2))
    cm = jnp.exp(_norm_logpdf(z - mu)) * -jnp.expm1(-2.0 * mu * z)
    cm = jnp.where(jnp.isfinite(z), cm, 0.0)
    return r, r_lo, ca, cm


@jax.jit
def _glrt_core(alpha, mu, d, closed_form):
    """All GLRT curves at once on flat arrays of equal length.

    Returns ``{"R" | "R_prime" | "R_s": (value, 1 − value, ∂/∂α, ∂/∂μ)}``. Every
    ncx2 function is called once on stacked inputs, so this compiles one quantile,
    one logsf, one logcdf and two logpdf kernels (one in the Newton loop).
    ``closed_form`` (a boolean scalar, traced so that both settings share one
    compilation) selects the ``d = 1`` closed form of ``R``.
    """
    bad, alpha, mu, d = _sanitise(alpha, mu, d)
    n = alpha.shape[0]
    lam = mu * mu
    zero = jnp.zeros_like(lam)
    pos = lam > 0
    lam_s = jnp.where(pos, lam, 1.0)
    log_a = jnp.log(alpha)
    log_1ma = jnp.log1p(-alpha)

    # Crossing point of the densities (slope-1 points of R and R'). Its derivative
    # is never needed: by the envelope theorem ∂τ/∂λ = ∂Ψ_λ(c₁)/∂λ at fixed c₁.
    c1 = threshold(jnp.zeros_like(lam_s), lam_s, d)  # ℓ(c₁) = 0: the densities cross

    # Thresholds t = Ψ_0⁻¹(α) and t' = Φ_λ⁻¹(α) = Ψ_λ⁻¹(1 − α), in one call.
    thr = ncx2.logisf(
        jnp.concatenate([log_a, log_1ma]), jnp.tile(d, 2), jnp.concatenate([zero, lam])
    )
    t, tp = thr[:n], thr[n:]

    def piece(arr, k):
        return arr[k * n : (k + 1) * n]

    x = jnp.concatenate([t, t, tp, tp, c1, c1])
    df = jnp.tile(d, 6)
    nc = jnp.concatenate([lam, zero, zero, lam, lam_s, zero])
    ls, lc = ncx2.logsf(x, df, nc), ncx2.logcdf(x, df, nc)

    xp = jnp.concatenate([t, t, tp, tp, t, tp, c1])
    dfp = jnp.concatenate([d, d, d, d, d + 2.0, d + 2.0, d + 2.0])
    ncp = jnp.concatenate([lam, zero, zero, lam, lam, lam, lam_s])
    lp = ncx2.logpdf(xp, dfp, ncp)
    ell = _llr_from_logpdfs(t, piece(lp, 0), piece(lp, 1), lam)
    ell_p = _llr_from_logpdfs(tp, piece(lp, 3), piece(lp, 2), lam)
    log_f2 = jnp.where(jnp.isfinite(t) & (t > 0), piece(lp, 4), -jnp.inf)
    log_f2p = jnp.where(jnp.isfinite(tp) & (tp > 0), piece(lp, 5), -jnp.inf)

    # R = Ψ_λ(t), corrected for the rounding of t against Ψ_0(t) = α.
    r, r_lo = _corrected(piece(ls, 0), piece(lc, 0), ell, alpha, piece(ls, 1), piece(lc, 1))
    r_ca, r_cm = jnp.exp(ell), 2.0 * mu * jnp.exp(log_f2)
    one = (d == 1) & closed_form
    cf = _closed_form_d1(alpha, mu)
    r, r_lo, r_ca, r_cm = (
        jnp.where(one, c, g) for c, g in zip(cf, (r, r_lo, r_ca, r_cm), strict=True)
    )

    # R' = Φ_0(t'), corrected against Φ_λ(t') = α; R' = α e^{λ/2} where t' is tiny.
    rp, rp_lo = _corrected(piece(lc, 2), piece(ls, 2), -ell_p, alpha, piece(lc, 3), piece(ls, 3))
    tiny = lam * tp <= _TINY_T * (d + 2.0)
    log_lin = log_a + 0.5 * lam
    rp = jnp.where(tiny, jnp.exp(log_lin), rp)
    rp_lo = jnp.where(tiny, -jnp.expm1(log_lin), rp_lo)
    rp_ca = jnp.exp(jnp.where(tiny, 0.5 * lam, -ell_p))
    rp_cm = jnp.where(tiny, mu * jnp.exp(log_lin), 2.0 * mu * jnp.exp(log_f2p - ell_p))

    # λ = 0: every curve is the diagonal.
    r, rp = jnp.where(pos, r, alpha), jnp.where(pos, rp, alpha)
    r_lo, rp_lo = jnp.where(pos, r_lo, 1.0 - alpha), jnp.where(pos, rp_lo, 1.0 - alpha)
    r, r_lo = _clip_roc(r, alpha, True), _clip_roc(r_lo, alpha, False)
    rp, rp_lo = _clip_roc(rp, alpha, True), _clip_roc(rp_lo, alpha, False)

    # Symmetrised curve: the common slope-1 tangent on [x₁, x₁'], max(R, R') elsewhere.
    x1 = jnp.where(pos, jnp.exp(piece(ls, 5)), jnp.inf)  # Ψ_0(c₁)
    x1p = jnp.exp(piece(lc, 4))  # Φ_λ(c₁) = 1 − R(x₁)
    tau = jnp.exp(piece(ls, 4)) - jnp.exp(piece(ls, 5))  # total-variation distance
    omega = x1p + jnp.exp(piece(ls, 5))  # 1 − τ without cancellation
    tau_cm = 2.0 * mu * jnp.exp(lp[6 * n :])  # ∂τ/∂μ = 2μ f(c₁; d + 2, λ)
    seg = (alpha >= x1) & (alpha <= x1p)
    use_r = r >= rp
    rs = jnp.where(seg, alpha + tau, jnp.maximum(r, rp))
    rs_lo = jnp.where(seg, omega - alpha, jnp.minimum(r_lo, rp_lo))
    rs, rs_lo = _clip_roc(rs, alpha, True), _clip_roc(rs_lo, alpha, False)
    rs_ca = jnp.where(seg, 1.0, jnp.where(use_r, r_ca, rp_ca))
    rs_cm = jnp.where(seg, tau_cm, jnp.where(use_r, r_cm, rp_cm))

    out = {
        "R": (r, r_lo, r_ca, r_cm),
        "R_prime": (rp, rp_lo, rp_ca, rp_cm),
        "R_s": (rs, rs_lo, rs_ca, rs_cm),
    }
    return {k: tuple(jnp.where(bad, jnp.nan, v) for v in vals) for k, vals in out.items()}


_COMPILED: collections.OrderedDict = collections.OrderedDict()
_COMPILED_MAX = 16


def _run_core(alpha, mu, d, closed_form=True):
    """Evaluate :func:`_glrt_core` on broadcast inputs; same shapes as the broadcast.

    Inputs are flattened and padded to a power-of-two length, so one compilation
    serves every input shape of that size class. Concrete inputs use an
    ahead-of-time compiled executable from a small LRU cache (``jit``'s own cache
    is keyed by the transformation context, so an eager ``jax.grad`` would
    otherwise recompile the core); traced inputs are traced as usual.
    """
    alpha, mu, d = _strong(alpha, mu, d)
    alpha, mu, d = jnp.broadcast_arrays(alpha, mu, d)
    shape = alpha.shape
    n = math.prod(shape)
    size = bucket(n)
    pads = (0.5, 1.0, 1.0)
    flat = [
        jnp.concatenate([jnp.ravel(a), jnp.full((size - n,), v, a.dtype)])
        for a, v in zip((alpha, mu, d), pads, strict=True)
    ]
    flag = jnp.asarray(closed_form, bool)
    if any(isinstance(a, jax.core.Tracer) for a in flat):
        out = _glrt_core(*flat, flag)
    else:
        key = (size, flat[0].dtype)
        exe = _COMPILED.get(key)
        if exe is None:
            exe = _glrt_core.lower(*flat, flag).compile()
            _COMPILED[key] = exe
            if len(_COMPILED) > _COMPILED_MAX:
                _COMPILED.popitem(last=False)
        else:
            _COMPILED.move_to_end(key)
        out = exe(*flat, flag)
    return {k: tuple(v[:n].reshape(shape) for v in vals) for k, vals in out.items()}


@partial(jax.custom_jvp, nondiff_argnums=(3, 4))
def _glrt_curve(alpha, mu, d, curve, upper):
    vals = _run_core(alpha, mu, d)[curve]
    return vals[0] if upper else vals[1]


def _glrt_curve_jvp(curve, upper, primals, tangents):
    alpha, mu, d = primals
    ta, tm, td = tangents
    _no_d_tangent(td, "glrt")
    r, r_lo, ca, cm = _run_core(alpha, mu, d)[curve]
    out = r if upper else r_lo
    tan = ca * _tan(ta, out) + cm * _tan(tm, out)
    return out, tan if upper else -tan


_glrt_curve.defjvp(_glrt_curve_jvp, symbolic_zeros=True)


def _sanitise(alpha, mu, d):
    alpha, mu, d = promote(alpha, mu, d)
    bad = _bad(alpha, mu, d)
    return bad, jnp.where(bad, 0.5, alpha), jnp.where(bad, 0.0, mu), jnp.where(bad, 1.0, d)


def _strong(*args):
    """Arrays in their common floating dtype, without weak types (one jit cache entry)."""
    dtype = float_dtype(*args)
    return [lax.convert_element_type(jnp.asarray(a), dtype) for a in args]


def _glrt_public(alpha, mu, d, curve, upper):
    check_alpha(alpha)
    _check_mu(mu)
    check_d(d)
    return _glrt_curve(*_strong(alpha, mu, d), curve, upper)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def npo(alpha: ArrayLike, mu: ArrayLike) -> jax.Array:
    """ROC curve of the Neyman–Pearson-optimal adversary: ``Q(Q⁻¹(α) − μ)``.

    The NPO adversary knows the direction of ``f(D') − f(D)`` and forms the full
    likelihood ratio: this is the classical Gaussian-DP (``μ``-GDP) curve.

    Args:
      alpha: false-positive rate(s) in ``[0, 1]``; accurate down to ``1e-300``.
      mu: signal-to-noise ratio ``μ = Δ/σ``, finite and ``≥ 0``. Broadcasts with
        ``alpha``.

    Returns:
      The true-positive rate ``R_N(α) ∈ [α, 1]`` in the floating dtype of the inputs.

    Raises:
      ValueError: for concrete ``alpha ∉ [0, 1]``, ``mu < 0``, infinite or NaN
        values. Under ``jit`` such values give NaN instead.

    Differentiable in ``alpha`` (``e^{μz − μ²/2}``, ``z = Q⁻¹(α)``) and ``mu``
    (``φ(z − μ)``).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import roc
      >>> f"{float(roc.curve(0.05, 1.0)):.6f}"
      '0.259511'
    """
    check_alpha(alpha)
    _check_mu(mu)
    return _npo_impl(*_strong(alpha, mu), upper=True)


def npo_tradeoff(alpha: ArrayLike, mu: ArrayLike) -> jax.Array:
    """Trade-off function of the NPO adversary: ``β(α) = 1 − R_N(α) = Φ(Q⁻¹(α) − μ)``.

    This is the ``G_μ`` curve of Gaussian differential privacy, evaluated
    directly (accurate when ``β`` is tiny).

    Args:
      alpha: type-I error(s) in ``[0, 1]``.
      mu: ``μ = Δ/σ ≥ 0``, finite. Broadcasts with ``alpha``.

    Returns:
      The type-II error ``β ∈ [0, 1 − α]``.

    Raises:
      ValueError: as :func:`npo`.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import roc
      >>> f"{float(roc.tradeoff(0.05, 1.0)):.6f}"
      '0.740489'
    """
    check_alpha(alpha)
    _check_mu(mu)
    return _npo_impl(*_strong(alpha, mu), upper=False)


def glrt(alpha: ArrayLike, mu: ArrayLike, d: ArrayLike) -> jax.Array:
    """ROC curve of the GLRT adversary (Theorem 1): ``R(α) = Ψ_λ(Ψ_0⁻¹(α))``, ``λ = μ²``.

    The GLRT adversary knows ``σ`` and ``Δ`` but not the direction of the shift in
    ``R^d``; it thresholds ``T = ‖y‖²/σ²``, which is ``χ²_d`` under ``H0`` and
    ``ncx2(d, λ)`` under ``H1``. For ``d = 1`` the closed form
    ``R(α) = Q(Q⁻¹(α/2) − μ) + Q(Q⁻¹(α/2) + μ)`` (Corollary 1) is used, elementwise.

    ``d`` may be a Python integer or an array of integers broadcasting with
    ``alpha`` and ``mu``, and may be traced under ``jit``. When it is concrete and
    all ones, only the closed form is evaluated; when it is concrete and has no
    ones, only the general formula; otherwise both, selected elementwise.

    Args:
      alpha: false-positive rate(s) in ``[0, 1]``.
      mu: ``μ = Δ/σ ≥ 0``, finite.
      d: dimension of the query, a positive integer (not differentiable).

    Returns:
      The true-positive rate ``R(α) ∈ [α, 1]``.

    Raises:
      ValueError: for concrete ``alpha ∉ [0, 1]``, ``mu < 0``, ``d`` not a positive
        integer, infinite or NaN values. Under ``jit`` such values give NaN.

    Differentiable in ``alpha`` (slope ``e^{ℓ(t)}``, the likelihood ratio at the
    threshold ``t = Ψ_0⁻¹(α)``) and ``mu``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import roc
      >>> f"{float(roc.curve(0.05, 1.0, 1, adversary='glrt')):.6f}"
      '0.170075'
      >>> r10, r1 = (float(roc.curve(0.05, 1.0, d, adversary="glrt")) for d in (10, 1))
      >>> r10 < r1 < float(roc.curve(0.05, 1.0))
      True
    """
    return _glrt_public(alpha, mu, d, "R", True)


def glrt_tradeoff(alpha: ArrayLike, mu: ArrayLike, d: ArrayLike) -> jax.Array:
    """Trade-off function of the GLRT adversary: ``β(α) = 1 − R(α) = Φ_λ(Ψ_0⁻¹(α))``.

    Args:
      alpha: type-I error(s) in ``[0, 1]``.
      mu: ``μ = Δ/σ ≥ 0``, finite.
      d: positive integer dimension (see :func:`glrt`).

    Returns:
      The type-II error ``β ∈ [0, 1 − α]``.

    Raises:
      ValueError: as :func:`glrt`.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import roc
      >>> f"{float(roc.tradeoff(0.05, 1.0, 1, adversary='glrt')):.6f}"
      '0.829925'
    """
    return _glrt_public(alpha, mu, d, "R", False)


def glrt_swapped(alpha: ArrayLike, mu: ArrayLike, d: ArrayLike) -> jax.Array:
    """GLRT ROC curve with the hypotheses swapped: ``R'(α) = Φ_0(Φ_λ⁻¹(α))``.

    ``R'`` is ``R`` reflected across the anti-diagonal: ``R'(α) = 1 − R⁻¹(1 − α)``.

    Args:
      alpha: false-positive rate(s) in ``[0, 1]``; accurate down to ``1e-300``
        (including the lower tail of ``d = 1``, where ``Φ_λ⁻¹(α)`` underflows).
      mu: ``μ = Δ/σ ≥ 0``, finite.
      d: positive integer dimension, may be an array or traced (no closed form is
        used for ``R'``).

    Returns:
      ``R'(α) ∈ [α, 1]``.

    Raises:
      ValueError: as :func:`glrt`.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import roc
      >>> f"{float(roc.curve(0.05, 1.0, 1, adversary='glrt', variant='swapped')):.6f}"
      '0.082290'
    """
    return _glrt_public(alpha, mu, d, "R_prime", True)


def glrt_swapped_tradeoff(alpha: ArrayLike, mu: ArrayLike, d: ArrayLike) -> jax.Array:
    """Trade-off function of the swapped GLRT curve: ``1 − R'(α) = Ψ_0(Φ_λ⁻¹(α))``.

    Args:
      alpha: type-I error(s) in ``[0, 1]``.
      mu: ``μ = Δ/σ ≥ 0``, finite.
      d: positive integer dimension.

    Returns:
      ``1 − R'(α) ∈ [0, 1 − α]``.

    Raises:
      ValueError: as :func:`glrt`.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import roc
      >>> f"{float(roc.tradeoff(0.05, 1.0, 1, adversary='glrt', variant='swapped')):.6f}"
      '0.917710'
    """
    return _glrt_public(alpha, mu, d, "R_prime", False)


def glrt_symmetrised(alpha: ArrayLike, mu: ArrayLike, d: ArrayLike) -> jax.Array:
    """Symmetrised GLRT ROC curve: least concave majorant of ``max(R, R')``.

    Dong–Roth–Su symmetrisation, exactly: with ``c₁`` the threshold where the two
    densities cross (``ℓ(c₁) = 0``), ``x₁ = Ψ_0(c₁)``, ``x₁' = Φ_λ(c₁)`` and the
    total-variation distance ``τ = Ψ_λ(c₁) − Ψ_0(c₁)``,

        R_s(α) = α + τ              on [x₁, x₁'] (the common slope-1 tangent),
        R_s(α) = max(R(α), R'(α))   elsewhere (R left of x₁, R' right of x₁').

    See :mod:`glrt_jax._src.roc` for why this is the majorant. ``R_s`` is symmetric
    (its own reflection across the anti-diagonal), and
    ``sup_α [R_s(α) − e^ε α] = max(δ_R(ε), δ_R'(ε))``.

    Args:
      alpha: false-positive rate(s) in ``[0, 1]``.
      mu: ``μ = Δ/σ ≥ 0``, finite.
      d: positive integer dimension (see :func:`glrt`).

    Returns:
      ``R_s(α) ∈ [α, 1]``.

    Raises:
      ValueError: as :func:`glrt`.

    Differentiable in ``alpha`` and ``mu`` (on the segment ``∂τ/∂λ`` follows from
    the envelope theorem).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import roc
      >>> r, rp, rs = (
      ...     roc.curve(0.3, 1.0, 1, adversary="glrt", variant=v) for v in roc.VARIANTS
      ... )
      >>> bool(rs >= max(r, rp))
      True
    """
    return _glrt_public(alpha, mu, d, "R_s", True)


def glrt_symmetrised_tradeoff(alpha: ArrayLike, mu: ArrayLike, d: ArrayLike) -> jax.Array:
    """Trade-off function of the symmetrised GLRT curve: ``1 − R_s(α)``.

    The greatest convex minorant of ``min(1 − R, 1 − R')``: a symmetric trade-off
    function in the sense of f-DP. On the segment it is ``(1 − τ) − α`` with
    ``1 − τ = Φ_λ(c₁) + Ψ_0(c₁)`` formed without cancellation.

    Args:
      alpha: type-I error(s) in ``[0, 1]``.
      mu: ``μ = Δ/σ ≥ 0``, finite.
      d: positive integer dimension.

    Returns:
      ``1 − R_s(α) ∈ [0, 1 − α]``.

    Raises:
      ValueError: as :func:`glrt`.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import roc
      >>> b = roc.tradeoff(0.3, 1.0, 1, adversary="glrt", variant="symmetrised")
      >>> back = roc.tradeoff(b, 1.0, 1, adversary="glrt", variant="symmetrised")
      >>> f"{float(back):.12f}"  # symmetric: f(f(α)) = α
      '0.300000000000'
    """
    return _glrt_public(alpha, mu, d, "R_s", False)


# ---------------------------------------------------------------------------
# Public entry points: the adversary and the variant chosen by parameters
# ---------------------------------------------------------------------------

VARIANTS = ("direct", "swapped", "symmetrised")

_CURVES = {
    ("glrt", "direct"): (glrt, glrt_tradeoff),
    ("glrt", "swapped"): (glrt_swapped, glrt_swapped_tradeoff),
    ("glrt", "symmetrised"): (glrt_symmetrised, glrt_symmetrised_tradeoff),
}


def _pick(adversary, variant, which):
    check_choice("adversary", adversary, ADVERSARIES)
    check_choice("variant", variant, VARIANTS)
    if adversary == "npo":  # symmetric: swapping the hypotheses gives the same curve
        return lambda alpha, mu, d: (npo, npo_tradeoff)[which](alpha, mu)
    return _CURVES[adversary, variant][which]


def curve(
    alpha: ArrayLike,
    mu: ArrayLike,
    d: ArrayLike = 1,
    *,
    adversary: str = "npo",
    variant: str = "direct",
) -> jax.Array:
    """ROC curve: the adversary's true-positive rate at false-positive rate ``alpha``.

    * ``adversary="npo"``: ``R_N(α) = Q(Q⁻¹(α) − μ)`` (Gaussian DP; ``d`` is ignored and
      every variant is the same curve).
    * ``adversary="glrt"``, ``variant="direct"``: Theorem 1, ``R(α) = Ψ_λ(Ψ_0⁻¹(α))``
      with ``λ = μ²`` (closed form for ``d = 1``, Corollary 1); ``"swapped"``: the
      hypotheses exchanged, ``R'(α) = Φ_0(Φ_λ⁻¹(α))``; ``"symmetrised"``: ``R_s``, the
      least concave majorant of ``max(R, R')``, built exactly.

    Args:
      alpha: false-positive rate(s) in ``[0, 1]``; accurate down to ``1e-300``.
      mu: ``μ = Δ/σ ≥ 0`` (finite). d: query dimension (a positive integer; GLRT).
        All three broadcast.
      adversary: ``"npo"`` or ``"glrt"``. variant: one of :data:`VARIANTS`.

    Returns:
      The true-positive rate in ``[α, 1]``, in the floating dtype of the inputs.
      Jittable (``adversary``/``variant`` static), vmappable, differentiable in
      ``alpha`` and ``mu`` with closed-form derivatives.

    Raises:
      ValueError: concrete out-of-domain inputs or unknown ``adversary``/``variant``
        (under ``jit``, out-of-domain values give NaN).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import roc
      >>> f"{float(roc.curve(0.05, 1.0)):.6f}"
      '0.259511'
      >>> f"{float(roc.curve(0.05, 1.0, 1, adversary='glrt')):.6f}"
      '0.170075'
    """
    return _pick(adversary, variant, 0)(alpha, mu, d)


def tradeoff(
    alpha: ArrayLike,
    mu: ArrayLike,
    d: ArrayLike = 1,
    *,
    adversary: str = "npo",
    variant: str = "direct",
) -> jax.Array:
    """Trade-off function of f-DP: ``β(α) = 1 − curve(α)``, evaluated directly.

    Accurate when ``β`` is tiny (no cancellation in ``1 − ROC``); arguments and
    conventions as in :func:`curve`. ``adversary="npo"`` gives Gaussian DP's ``G_μ``.

    Returns:
      The type-II error ``β ∈ [0, 1 − α]``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import roc
      >>> f"{float(roc.tradeoff(0.05, 1.0)):.6f}"
      '0.740489'
    """
    return _pick(adversary, variant, 1)(alpha, mu, d)
