"""Per-round privacy losses of the (Poisson-subsampled) Gaussian mechanism: tail masses.

What is composed
----------------
A *round* is one release of the (optionally Poisson-subsampled) Gaussian mechanism.
Its privacy is described by a dominating pair ``(P, Q)``; the privacy loss is
``L = log dP/dQ`` and, for a composition of independent rounds,

    δ(ε) = E_P[(1 − e^{ε − S})_+],    S = L_1 + … + L_N  (L_i independent under P).

Base pairs (``μ = Δ/σ``, ``λ = μ²``):

* NPO: ``P = N(μ, 1)``, ``Q = N(0, 1)``; ``L = μx − μ²/2`` is Gaussian.
* GLRT (per round): the adversary sees only the magnitude statistic
  ``T = ‖y‖²/σ²``: ``P = ncx2(d, λ)``, ``Q = χ²_d``. The loss
  ``ℓ(t) = −λ/2 + log ₀F₁(; d/2; λt/4)`` is increasing in ``t`` (for ``d = 1``,
  ``ℓ(t) = −λ/2 + log cosh √(λt)``), so the mass of ``P`` or ``Q`` between two loss
  levels is a difference of tail probabilities at ``ℓ⁻¹(level)``.

Neighbouring relations and subsampling with rate ``q``:

* ``"add_remove"``: remove pair ``(qP + (1−q)Q, Q)`` and add pair
  ``(Q, qP + (1−q)Q)``. Each direction is composed over all rounds and the larger
  δ(ε) (equivalently ε(δ)) of the two is reported.
* ``"replace_one"``: the records ``x`` and ``x'`` each contribute at most ``Δ`` in
  norm (``Δ`` is the per-record bound, e.g. the clipping norm, so the replace
  sensitivity is up to ``2Δ``). NPO: the pair is
  ``(qN(μ,1) + (1−q)N(0,1), qN(−μ,1) + (1−q)N(0,1))`` (antipodal contributions);
  it is symmetric, so one direction suffices. GLRT: the magnitude statistic only
  sees the norms of the two contributions; we use the extreme pair in which one
  record contributes ``Δ`` and the other ``0``, which gives the remove and add pairs
  above (the tests check numerically that intermediate norms are dominated).

Threat model: rounds are independent and each round's view is that round's
output alone; for GLRT the adversary re-estimates the direction in every round
(it sees ``‖y_i‖²`` per round). This is *not* the shared-direction composition of
the paper's Theorem 2, where the adversary averages the rounds first
(``λ_total = NΔ²/σ²``); that case has a closed form and lives in :mod:`glrt_jax._src.accountant`.

This module gives, for loss levels ``x``, the four tail masses of one round
(:func:`segment_tails`), the static key and per-phase values the engine's programs are
compiled for (:func:`program_key`, with the directions they compose) and the loss range
holding all but a given mass (:func:`probe_ranges`); :mod:`glrt_jax._src.composition`
builds on them.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import erf, erfc

from glrt_jax._src import ncx2
from glrt_jax._src.llr import threshold
from glrt_jax._src.numerics import log1mexp

_LOG2 = math.log(2.0)
_SQRT_HALF = math.sqrt(0.5)
# Bisection steps for the per-round loss range. Only ends whose tails were checked are
# kept, so the range leaves out at most the failure mass after any number of steps; 48
# halvings of the initial bracket ±c, c = μ²/2 + 40μ + 10 − log q, leave each end within
# 2^-47·c of the exact one (1.2e-12 for σ ≥ 0.3, q ≥ 1e-6). 80 steps cost a tenth of the
# plan at K = 10⁴ phases for answers that moved by at most 1e-12 relative.
_BISECT_ITERS = 48
# GLRT with d > 1 takes the non-central χ² tails. Up to this d (every phase's) its programs
# take them from the Poisson mixture alone (ncx2.logsf_mixture: one method compiled instead
# of three tiers), above it from the full dispatcher, whose contour rule costs the same at
# any d while the mixture's incomplete gamma costs about √d terms. One phase of σ = 1,
# q = 0.01, N = 1000 (GLRT, warm, 2-core CPU; mixture against dispatcher): d = 1000 21 against
# 26 ms, d = 10⁴ 26 against 24 ms, d = 3·10⁴ 32 against 25 ms, d = 10⁷ 206 against 49 ms.
MIXTURE_MAX_D = 10_000
# The static keys of GLRT with d > 1 (program_key): tails by the mixture, or by the
# dispatcher.
GLRT_LOSSES = ("glrt", "glrt_large_d")


def _normal_tails(a, e=None):
    """(Φ(−a), Φ(a)), each with full relative accuracy where it is the smaller one.

    ``e``: ``erfc(|a|/√2)`` if already at hand.
    """
    small = 0.5 * (erfc(jnp.abs(a) * _SQRT_HALF) if e is None else e)
    pos = a >= 0
    return jnp.where(pos, small, 1.0 - small), jnp.where(pos, 1.0 - small, small)


def _mix(q, a, b):
    return q * a + (1.0 - q) * b


def _limits(top):
    """Tails (P[L>b], P[L≤b], Q[L>b], Q[L≤b]) at a level beyond the support."""
    sf = jnp.where(top, 0.0, 1.0)
    return sf, 1.0 - sf, sf, 1.0 - sf


# ---------------------------------------------------------------------------
# Base pairs: (P[L > b], P[L ≤ b], Q[L > b], Q[L ≤ b]) for the base loss L
# ---------------------------------------------------------------------------


# The closed forms are written as (erfc arguments, tails from erfc at them), so that NPO and
# GLRT with d = 1 in one program (the "closed" loss of program_key) share one erfc.


def _npo_parts(mu, b):
    """P = N(μ, 1), Q = N(0, 1): L = μx − μ²/2 ~ N(±μ²/2, μ²). Arguments (2, ...), tails."""
    fin = jnp.isfinite(b)
    z = jnp.where(fin, b, 0.0) / mu
    a = jnp.stack([z - 0.5 * mu, z + 0.5 * mu])

    def tails(e):  # e = erfc(|a|/√2)
        s, f = _normal_tails(a, e[:2])
        out = (s[0], f[0], s[1], f[1])
        return tuple(jnp.where(fin, o, lim) for o, lim in zip(out, _limits(b > 0), strict=True))

    return jnp.abs(a), tails


def _glrt1_root(mu, b):
    """d = 1: ``(v, pos, r)`` with ``v = b + λ/2``, ``pos`` where the level lies inside the
    support, and ``r = √t``, ``ℓ(t) = b`` (1 elsewhere)."""
    v = b + 0.5 * mu * mu
    pos = (v > 0) & jnp.isfinite(v)
    vs = jnp.where(pos, v, 1.0)
    # √t = arccosh(e^v)/μ, arccosh(e^v) = v + log(1 + √(1 − e^{−2v})).
    return v, pos, (vs + jnp.log1p(jnp.sqrt(-jnp.expm1(-2.0 * vs)))) / mu


def _glrt1_parts(mu, b):
    """d = 1: T = Y² with Y ~ N(μ, 1) under P; ℓ(t) = −λ/2 + log cosh(μ √t). Arguments
    (3, ...), tails."""
    v, pos, r = _glrt1_root(mu, b)

    def tails(e):  # e = erfc(args/√2)
        sq = e[0]  # Q[T > t] = 2Φ(−√t)
        fq = 1.0 - e[0]
        small = 0.5 * e[1]
        above = jnp.where(r >= mu, small, 1.0 - small)  # Φ(μ − r)
        below = jnp.where(r >= mu, 1.0 - small, small)  # Φ(r − μ)
        mirror = 0.5 * e[2]  # Φ(−r − μ)
        sp = above + mirror
        fp = jnp.maximum(below - mirror, 0.0)
        lims = _limits(jnp.isposinf(v))
        return tuple(jnp.where(pos, o, lim) for o, lim in zip((sp, fp, sq, fq), lims, strict=True))

    return jnp.stack([r, jnp.abs(r - mu), r + mu]), tails


def _closed_base_tails(mu, b, parts):
    """Tails from one erfc call (one erfc in the compiled program)."""
    args, tails = parts(mu, b)
    return tails(erfc(args * _SQRT_HALF))


def _either_base_tails(mu, b, is_npo):
    """NPO where ``is_npo``, else GLRT with d = 1: both closed forms through one erfc."""
    args_n, tails_n = _npo_parts(mu, b)
    args_g, tails_g = _glrt1_parts(mu, b)
    args_n = jnp.concatenate([args_n, jnp.zeros_like(args_n[:1])])
    e = erfc(jnp.where(is_npo, args_n, args_g) * _SQRT_HALF)
    return tuple(jnp.where(is_npo, u, v) for u, v in zip(tails_n(e), tails_g(e), strict=True))


def _glrtd_level(mu, b, d):
    """General d: ``(λ, d, v, pos, t)`` with ``v = b + λ/2``, ``pos`` where the level lies
    inside the support, and the threshold ``t = ℓ⁻¹(b)`` of T (clipped into it elsewhere)."""
    lam = mu * mu
    d = jnp.asarray(d, jnp.result_type(float))
    v = b + 0.5 * lam
    pos = (v > 0) & jnp.isfinite(v)
    vf = jnp.clip(jnp.where(jnp.isfinite(v), v, 0.0), 1e-12 * lam, None)
    return lam, d, v, pos, threshold(vf - 0.5 * lam, lam, d)


def _glrtd_base_tails(mu, b, d, pair):
    """General d through glrt_jax.ncx2: tails of T at t = ℓ⁻¹(b).

    ``d``: the per-phase dimension, or the GLRT programs' pair ``(d, npo)``
    (:func:`phase_value`): where the unbatched flag ``npo`` is set, NPO's closed-form
    tails instead (one branch runs). ``pair(t, d, λ)``: the log sf of T under P =
    ncx2(d, λ) and under Q = χ²_d, ``ncx2.logsf_mixture_pair`` or ``ncx2.logsf`` stacked
    (the same values; see :data:`MIXTURE_MAX_D`).
    """
    if isinstance(d, tuple):
        return _npo_or_glrt(
            d,
            lambda: _closed_base_tails(mu, b, _npo_parts),
            lambda dd: _glrtd_base_tails(mu, b, dd, pair),
        )
    lam, d, v, pos, t = _glrtd_level(mu, b, d)
    # P = ncx2(d, λ) and Q = χ²_d together; the cdf is the sf's complement, used only
    # where it is the larger tail.
    log_sf = jnp.stack(pair(t, d, lam))
    sf, cdf = jnp.exp(log_sf), -jnp.expm1(log_sf)
    out = (sf[0], cdf[0], sf[1], cdf[1])
    lims = _limits(jnp.isposinf(v))
    return tuple(jnp.where(pos, o, lim) for o, lim in zip(out, lims, strict=True))


def program_key(adversary, d, neighbouring, phases):
    """The static loss and the per-phase values that the engine's programs are compiled for.

    ``d``: an int, or a tuple of ints, one per phase (fewer than ``phases``: the padding
    phases repeat the first). A compiled program depends on the query's loss only through
    the static key, so queries that differ only in the values share it:

    * ``"npo"``: NPO under ``"replace_one"`` (its one symmetric pair); values unused.
    * ``"closed"``: the closed-form tails with the add and remove pairs, chosen per phase
      by the value: NPO (0) or GLRT with ``d = 1`` (1). The two rows of a report (NPO, and
      GLRT with ``d = 1``) share one program per stage.
    * ``"glrt"``: GLRT through the non-central χ² tails; the values are the per-phase
      ``d`` (every ``d`` other than all ones shares one program), and 0 for NPO asked
      with such a ``d`` (NPO does not depend on ``d``): the two rows of a report with
      ``d > 1`` share one program per stage too. ``"glrt_large_d"``: the same where a
      phase's ``d`` exceeds :data:`MIXTURE_MAX_D` (the tails by the full dispatcher).

    Returns:
      ``(loss, values)``: the static key and float64 values of shape ``(phases,)``.
    """
    dv = np.asarray(d, np.float64).reshape(-1)
    dv = np.concatenate([dv, np.full(phases - dv.size, dv[0])]) if dv.size > 1 else dv
    dv = np.broadcast_to(dv, (phases,))
    if adversary == "npo" and neighbouring == "replace_one":
        return "npo", np.ones(phases)
    if np.any(dv != 1):
        key = GLRT_LOSSES[int(np.max(dv) > MIXTURE_MAX_D)]
        return key, dv if adversary == "glrt" else np.zeros(phases)
    return "closed", np.full(phases, 0.0 if adversary == "npo" else 1.0)


def batch_phases(loss) -> bool:
    """Whether the engine maps the per-phase code of the static ``loss``
    (:func:`program_key`) over a block of phases with a ``vmap``, or takes one phase per
    step of its scans.

    Not for GLRT with d > 1 (:data:`GLRT_LOSSES`): its non-central χ² tails (and, with
    the dispatcher, their tiers) run ``lax.cond`` and while-loops on each phase's values,
    and a ``vmap`` over phases turns every such branch into a ``select`` that computes all
    of them, and every loop into one that runs as long as its slowest phase (K = 1000
    phases of d = 10 in blocks of 32 with the mixture's tails: 2.0–2.6 s warm against
    1.2–1.3 s one at a time). One phase per step, K distinct
    phases of GLRT d = 10 (σ_k ∈ [0.8, 1.5], q_k ∈ [0.005, 0.02], 10 steps, δ = 1e-5,
    alternating processes on a 2-core CPU): K = 10 110 → 35 ms warm, K = 100 421 →
    136 ms, K = 1000 2.17 → 0.82 s, first calls 7.3 → 5.1, 13.3 → 9.6 and 13.7 → 9.9 s;
    the same bounds. (The closed forms have no such branches, and their blocks of up to
    32 phases are faster than one at a time.)
    """
    return loss not in GLRT_LOSSES


def loss_directions(loss):
    """The directions a program for :func:`program_key`'s static ``loss`` composes."""
    return ("replace",) if loss == "npo" else ("remove", "add")


def phase_value(loss, values):
    """What one phase's tails see of ``values`` (:func:`program_key`), as a function of
    its own value ``dk`` (to be called inside the map over phases).

    For the GLRT programs (:data:`GLRT_LOSSES`), the pair ``(dk, npo)`` with ``npo`` the
    *unbatched* flag "every value is 0" (the query is NPO's): the tails then branch once
    with ``lax.cond`` rather than evaluating both kinds at every point (a report's NPO
    row costs what it costs in the "closed" program). Other programs: ``dk`` itself.
    """
    if loss not in GLRT_LOSSES:
        return lambda dk: dk
    npo = jnp.all(values == 0)
    return lambda dk: (dk, npo)


def _npo_or_glrt(pair, npo_fn, glrt_fn):
    """One ``lax.cond`` on :func:`phase_value`'s pair ``(d, npo)``: ``npo_fn()`` where the
    flag is set, else ``glrt_fn(d)`` (with a harmless ``d = 2`` for NPO's phases, whose
    value 0 the χ² branch never sees selected; a finite branch keeps derivatives finite)."""
    d, npo = pair
    return lax.cond(npo, npo_fn, lambda: glrt_fn(jnp.where(d == 0, 2.0, d)))


def _is_one(d):
    """Whether ``d`` is a static 1 (a traced ``d`` is never)."""
    return isinstance(d, (int, np.integer)) and d == 1


def _base_tails(adversary, d, mu, b):
    """Tails of the base loss: ``adversary`` "npo", "glrt" or "glrt_large_d" (``d``
    static 1 or data; :func:`program_key`) or "closed" (``d`` the per-phase choice of
    :func:`program_key`: 0 NPO, 1 GLRT, d = 1)."""
    if adversary == "npo":
        return _closed_base_tails(mu, b, _npo_parts)
    if adversary == "closed":
        return _either_base_tails(mu, b, d == 0)
    if _is_one(d):
        return _closed_base_tails(mu, b, _glrt1_parts)
    pair = _stacked_pair(ncx2.logsf) if adversary == "glrt_large_d" else ncx2.logsf_mixture_pair
    return _glrtd_base_tails(mu, b, d, pair)


def _stacked_pair(logsf):
    """``(logsf(t, d, λ), logsf(t, d, 0))`` in one call of ``logsf`` (both tails stacked;
    any log-tail of the same signature, e.g. the log-cdf)."""

    def pair(t, d, lam):
        nc = jnp.stack([jnp.broadcast_to(lam, t.shape), jnp.zeros_like(t)])
        log_sf = logsf(jnp.stack([t, t]), jnp.broadcast_to(d, nc.shape), nc)
        return log_sf[0], log_sf[1]

    return pair


# ---------------------------------------------------------------------------
# Per-round pairs: tails of the round's loss at levels x
# ---------------------------------------------------------------------------


def _remove_level(y, exp_neg_y, q):
    """Base level b with log(1 − q + q e^b) = y (valid for y > log(1 − q))."""
    valid = y > jnp.log1p(-q)
    b = (
        jnp.where(valid, y, 1.0)
        - jnp.log(q)
        + jnp.log1p(-(1.0 - q) * jnp.where(valid, exp_neg_y, 0.0))
    )
    return valid, jnp.where(valid, b, -jnp.inf)


def _replace_threshold(v, mu, q):
    """z with log[(q e^{μz−μ²/2} + 1−q)/(q e^{−μz−μ²/2} + 1−q)] = v (odd in v).

    With u = e^{μ|z|}, a = q e^{−μ²/2}, c = 1 − q: a u² − c(e^{|v|} − 1)u − a e^{|v|} = 0,
    so log u = |v| − log 2a + log(α + √(α² + β²)), α = c(1 − e^{−|v|}), β = 2a e^{−|v|/2}.
    """
    log_2a = _LOG2 + jnp.log(q) - 0.5 * mu * mu
    c = 1.0 - q
    av = jnp.abs(v)
    pos = (av > 0) & (c > 0)
    la = jnp.where(
        pos, jnp.log(jnp.where(pos, c, 1.0)) + log1mexp(-jnp.where(pos, av, 1.0)), -jnp.inf
    )
    lb = log_2a - 0.5 * av
    lm = jnp.maximum(la, lb)
    ra, rb = jnp.exp(la - lm), jnp.exp(lb - lm)
    g = lm + jnp.log(ra + jnp.sqrt(ra * ra + rb * rb))
    return jnp.sign(v) * (av - log_2a + g) / mu


def segment_tails(adversary, d, mu, q, x, is_add, exp_x=None):
    """Tails of the round's loss at levels ``x`` (1-D; several segments concatenated).

    Returns ``(P'[L' > x], P'[L' ≤ x], Q'[L' > x], Q'[L' ≤ x])``. ``is_add`` marks the
    add direction, elementwise (``None`` for the replace pair). ``exp_x`` is ``e^x`` if
    already at hand.

    * remove: ``(qP + (1−q)Q, Q)``, ``L' = log(1 − q + q e^L)`` (increasing in L);
    * add: ``(Q, qP + (1−q)Q)``, ``L' = −log(1 − q + q e^L)`` (decreasing in L);
    * replace (NPO): ``(qN(μ) + (1−q)N(0), qN(−μ) + (1−q)N(0))``.
    """
    if is_add is None:
        z = _replace_threshold(x, mu, q)
        s_plus, f_plus = _normal_tails(z - mu)
        s_zero, f_zero = _normal_tails(z)
        s_minus, f_minus = _normal_tails(z + mu)
        return (
            _mix(q, s_plus, s_zero),
            _mix(q, f_plus, f_zero),
            _mix(q, s_minus, s_zero),
            _mix(q, f_minus, f_zero),
        )
    exp_x = jnp.exp(jnp.clip(x, -700.0, 700.0)) if exp_x is None else exp_x
    valid, b = _remove_level(jnp.where(is_add, -x, x), jnp.where(is_add, exp_x, 1.0 / exp_x), q)
    sp, fp, sq, fq = _base_tails(adversary, d, mu, b)
    msp, mfp = _mix(q, sp, sq), _mix(q, fp, fq)
    # add: L'' > x  ⇔  L < b
    tails = (
        jnp.where(is_add, fq, msp),
        jnp.where(is_add, sq, mfp),
        jnp.where(is_add, mfp, sq),
        jnp.where(is_add, msp, fq),
    )
    # Outside the support: remove levels lie below it, add levels above it.
    sf_lim = jnp.where(is_add, 0.0, 1.0)
    lims = (sf_lim, 1.0 - sf_lim, sf_lim, 1.0 - sf_lim)
    return tuple(jnp.where(valid, t, lim) for t, lim in zip(tails, lims, strict=True))


def _glrt1_lower_tails(mu, b):
    """GLRT, d = 1: ``(P[L ≤ b], Q[L ≤ b], scale)``: ``Q[L ≤ b] = erf(r/√2)`` (``r = √t``;
    not ``1 − erfc``, so small values keep their relative accuracy) and
    ``P[L ≤ b] = Φ(r − μ) − Φ(−r − μ)``, a difference of normal tails, whose error is
    relative to ``scale``, their sum."""
    v, pos, r = _glrt1_root(mu, b)
    below, mirror = _normal_tails(r - mu)[1], _normal_tails(r + mu)[0]
    lim = jnp.where(jnp.isposinf(v), 1.0, 0.0)
    out = (jnp.maximum(below - mirror, 0.0), erf(r * _SQRT_HALF), below + mirror)
    return tuple(jnp.where(pos, o, lim) for o in out)


def _glrtd_lower_tails(mu, b, d):
    """GLRT, general d: ``(P[L ≤ b], Q[L ≤ b], scale)`` from the non-central χ² log-cdf
    (the Poisson mixture's), relative to themselves (``scale = P[L ≤ b]``)."""
    lam, d, v, pos, t = _glrtd_level(mu, b, d)
    fp, fq = (jnp.exp(v) for v in _stacked_pair(ncx2.logcdf_mixture)(t, d, lam))
    lim = jnp.where(jnp.isposinf(v), 1.0, 0.0)
    return tuple(jnp.where(pos, o, lim) for o in (fp, fq, fp))


def _lower_tails(adversary, d, mu, b):
    """``(P[L ≤ b], Q[L ≤ b], scale)`` of the base pair, each with relative accuracy (the
    first relative to ``scale``): NPO's normal tails, or GLRT's (:func:`_base_tails`'
    keys; its lower tails are complements of upper ones there)."""

    def npo():
        _, fp, _, fq = _closed_base_tails(mu, b, _npo_parts)
        return fp, fq, fp

    if adversary == "npo":
        return npo()
    if adversary == "closed":
        is_npo = d == 0
        both = zip(npo(), _glrt1_lower_tails(mu, b), strict=True)
        return tuple(jnp.where(is_npo, u, g) for u, g in both)
    if _is_one(d):
        return _glrt1_lower_tails(mu, b)
    if isinstance(d, tuple):
        return _npo_or_glrt(d, npo, lambda dd: _glrtd_lower_tails(mu, b, dd))
    return _glrtd_lower_tails(mu, b, d)


def hinge_terms(adversary, d, mu, q, eps):
    """One round's ``δ(ε) = P'[L' > ε] − e^ε Q'[L' > ε]`` per direction, as terms.

    Returns ``(coef, tail, scale, ulps)``, each of shape ``eps.shape + (n_dir, 3)`` (the
    directions of :func:`loss_directions` for the static ``adversary``, a key of
    :func:`program_key`; ``d`` as for :func:`segment_tails`), with
    ``δ = c₀t₀ − c₁t₁ − c₂t₂``: non-negative coefficients; tails of the base pair at the
    round's level, each computed on its own (the upper tails directly, the lower ones
    not as complements of upper ones) so that a bound on each tail's error bounds δ's;
    the magnitude each tail's error is relative to (the tail itself, or for GLRT's
    ``P[L ≤ b]`` with d = 1, a difference of normal tails, their sum); and a bound on each
    coefficient's relative error in units of the unit roundoff where it can exceed a few.

    * remove (``L' > ε ⇔ L > b``): ``q·P[L > b] − (e^ε − 1 + q)·Q[L > b]``;
    * add (``L' > ε ⇔ L < b``, for ``ε < −log(1 − q)``; beyond it δ = 0 and the
      coefficients are 0): ``(1 − (1 − q)e^ε)·Q[L < b] − q e^ε·P[L < b]``, the first
      coefficient ``−expm1(ε + log(1 − q))``, whose argument carries ``log(1 − q)``'s
      rounding (``ulps``: ``8(1 + |log(1 − q)|/|ε + log(1 − q)|)``);
    * replace (NPO, the level's ``z``): ``q·Φ(μ − z) − q e^ε·Φ(−μ − z) −
      (e^ε − 1)(1 − q)·Φ(−z)``.
    """
    eps = jnp.asarray(eps, jnp.result_type(float))
    e_eps, em1 = jnp.exp(eps), jnp.expm1(eps)
    zero, qs = jnp.zeros_like(eps), q * jnp.ones_like(eps)

    def per_direction(*rows):
        return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)

    if adversary == "npo":
        z = _replace_threshold(eps, mu, q)
        tails = [_normal_tails(z - mu)[0], _normal_tails(z + mu)[0], _normal_tails(z)[0]]
        coef = [qs, q * e_eps, em1 * (1.0 - q)]
        tails = per_direction(tails)
        return per_direction(coef), tails, tails, per_direction([zero] * 3)
    valid_r, b_r = _remove_level(eps, 1.0 / e_eps, q)
    valid_a, b_a = _remove_level(-eps, e_eps, q)
    sp, _, sq, _ = _base_tails(adversary, d, mu, b_r)
    fp, fq, fp_scale = _lower_tails(adversary, d, mu, b_a)
    log_keep = jnp.log1p(-q)  # log(1 − q)
    near = jnp.where(valid_a, jnp.abs(eps + log_keep), 1.0)
    # (q = 1: log(1 − q) = −inf and the coefficient is exactly 1)
    add_ulps = jnp.where(valid_a & (q < 1.0), 8.0 * (1.0 + jnp.abs(log_keep) / near), 0.0)
    remove = [jnp.where(valid_r, c, 0.0) for c in (qs, em1 + q, zero)]
    add = [jnp.where(valid_a, c, 0.0) for c in (-jnp.expm1(eps + log_keep), q * e_eps, zero)]
    return (
        per_direction(remove, add),
        per_direction([sp, sq, sq], [fq, fp, fp]),
        per_direction([sp, sq, sq], [fq, fp_scale, fp_scale]),
        per_direction([zero] * 3, [add_ulps, zero, zero]),
    )


def _ncx2_chernoff(t, d, lam):
    """Chernoff bounds ``(log sf, log cdf)`` of ``ncx2(d, λ)`` at ``t ≥ 0`` (λ = 0: χ²_d).

    With ``log M(s) = λs/(1 − 2s) − (d/2) log(1 − 2s)`` and ``u = 1/(1 − 2s)``, the
    exponent ``st − log M(s)`` is ``E(u) = t(1 − 1/u)/2 − λ(u − 1)/2 − (d/2) log u``,
    maximal at the root ``u*`` of ``λu² + du = t``. ``u* ≥ 1`` (t at or above the mean
    ``d + λ``) bounds the upper tail, ``P(T ≥ t) ≤ e^{−E(u*)}``; ``u* ≤ 1`` the lower,
    ``P(T ≤ t) ≤ e^{−E(u*)}``; the other tail is bounded by 1.
    """
    disc = jnp.sqrt(d * d + 4.0 * lam * t)
    # u* = (√(d² + 4λt) − d)/(2λ), written without cancellation (and for λ = 0).
    u = jnp.maximum(2.0 * t / (d + disc), 1e-300)
    log_b = -(0.5 * t * (1.0 - 1.0 / u) - 0.5 * lam * (u - 1.0) - 0.5 * d * jnp.log(u))
    log_b = jnp.minimum(log_b, 0.0)
    upper = u >= 1.0
    return jnp.where(upper, log_b, 0.0), jnp.where(upper, 0.0, log_b)


def _glrtd_probe_tails(mu, q, x, is_add, d):
    """Upper bounds on ``(P'[L' > x], P'[L' ≤ x])`` of the GLRT round for ``d > 1``.

    No special function: ``t = ℓ⁻¹(b)`` is bracketed by the bounds
    ``λt/(2d) ≥ log ₀F₁(; d/2; λt/4) ≥ log(1 + λt/(2d))`` and ``√(λt) ≥ log ₀F₁``, i.e.
    ``max(2dr, r²)/λ ≤ t ≤ 2d(e^r − 1)/λ`` with ``r = b + λ/2``, and each tail of ``T``
    is bounded at the end of the bracket where it is larger (Chernoff,
    :func:`_ncx2_chernoff`).
    """
    lam = mu * mu
    y = jnp.where(is_add, -x, x)
    valid, b = _remove_level(y, jnp.exp(jnp.clip(-y, -700.0, 700.0)), q)
    r = jnp.maximum(b + 0.5 * lam, 0.0)
    t_lo = jnp.maximum(2.0 * d * r, r * r) / lam
    t_hi = 2.0 * d * jnp.expm1(jnp.minimum(r, 300.0)) / lam
    sf_p, _ = _ncx2_chernoff(t_lo, d, lam)
    sf_q, _ = _ncx2_chernoff(t_lo, d, 0.0)
    _, cdf_p = _ncx2_chernoff(t_hi, d, lam)
    _, cdf_q = _ncx2_chernoff(t_hi, d, 0.0)
    sf_p, sf_q, cdf_p, cdf_q = (jnp.exp(v) for v in (sf_p, sf_q, cdf_p, cdf_q))
    # remove: L' > x ⇔ T > t under qP + (1−q)Q; add: L'' > x ⇔ T < t under Q.
    above = jnp.where(is_add, cdf_q, _mix(q, sf_p, sf_q))
    below = jnp.where(is_add, sf_q, _mix(q, cdf_p, cdf_q))
    # Outside the support: remove levels lie below it, add levels above it.
    lim = jnp.where(is_add, 0.0, 1.0)
    return jnp.where(valid, above, lim), jnp.where(valid, below, 1.0 - lim)


def probe_tails(adversary, d, mu, q, x, is_add):
    """Upper bounds on ``(P'[L' > x], P'[L' ≤ x])``, cheap to compile and to evaluate.

    What :func:`probe_ranges` needs: the exact tails of :func:`segment_tails` where they
    are closed forms (NPO, GLRT with d = 1), Chernoff bounds for GLRT with d > 1 (the
    exact tails there cost a root finder and the non-central χ² tails).
    """
    if adversary in GLRT_LOSSES and not _is_one(d) and is_add is not None:
        if isinstance(d, tuple):  # the GLRT programs' (d, npo) pair: see phase_value
            return _npo_or_glrt(
                d,
                lambda: probe_tails("npo", 1, mu, q, x, is_add),
                lambda dd: _glrtd_probe_tails(mu, q, x, is_add, dd),
            )
        return _glrtd_probe_tails(mu, q, x, is_add, d)
    sp, fp, _, _ = segment_tails(adversary, d, mu, q, x, is_add)
    return sp, fp


def probe_ranges(adversary, d, directions, mu, q, m, bound):
    """Per direction: loss levels with P-tails ≤ m on each side (bisection).

    The tails are :func:`probe_tails`' upper bounds, so the range holds all but at most
    ``m`` on each side (the mass left outside is measured exactly by the grids).
    """
    n_dir = len(directions)
    is_add = None
    if "replace" not in directions:
        is_add = jnp.asarray(np.repeat([k == "add" for k in directions], 2))

    def body(_, carry):
        lo_a, lo_b, hi_a, hi_b = carry
        mid_lo, mid_hi = 0.5 * (lo_a + lo_b), 0.5 * (hi_a + hi_b)
        x = jnp.stack([mid_lo, mid_hi], axis=1).reshape(-1)
        sp, fp = probe_tails(adversary, d, mu, q, x, is_add)
        fp, sp = fp[0::2], sp[1::2]
        # lower end: largest x with P'[L' ≤ x] ≤ m; upper end: smallest x with P'[L' > x] ≤ m
        lo_a, lo_b = jnp.where(fp <= m, mid_lo, lo_a), jnp.where(fp <= m, lo_b, mid_lo)
        hi_a, hi_b = jnp.where(sp <= m, hi_a, mid_hi), jnp.where(sp <= m, mid_hi, hi_b)
        return lo_a, lo_b, hi_a, hi_b

    ones = jnp.ones(n_dir)
    init = (-bound * ones, bound * ones, -bound * ones, bound * ones)
    lo_a, _, _, hi_b = lax.fori_loop(0, _BISECT_ITERS, body, init)
    return lo_a, hi_b
