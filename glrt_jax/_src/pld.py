"""Privacy loss distributions on a grid, composed by FFT: bounds, jit, gradients.

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
(``λ_total = NΔ²/σ²``); that case has a closed form and lives elsewhere.

Discretisation and why the bounds hold
--------------------------------------
Losses live on the grid ``x_k = k h``. For each round, the P- and Q-masses of the
loss in every bin ``(x_k, x_{k+1}]`` (``π_k`` and ``κ_k``, differences of tail
probabilities, evaluated in log space) are split between the two endpoints so that
both masses are preserved ("connect the dots", Doroshenko et al. 2022): a fraction
``θ_k = (1 − e^{x_k}κ_k/π_k) / (1 − e^{−h})`` of ``π_k`` goes up to ``x_{k+1}``.
Equivalently each loss ``L`` is replaced by a random grid neighbour ``L̃`` with
``E[e^{−L̃} | L] = e^{−L}``. Mass outside the per-round range ``(x_lo, x_hi]``
(at most ``m`` per round, chosen from ``tail_mass``) is dropped.

* Upper bound. ``f_ε(s) = (1 − e^{ε−s})_+`` is convex in ``e^{−s}``, so by Jensen
  the split can only increase ``E f_ε``: on the event ``G`` that every round falls
  inside its range, ``E[f_ε(S) 1_G] ≤ E[f_ε(S̃) 1_G]``; off ``G``, ``f_ε ≤ 1``. Hence
  ``δ(ε) ≤ δ̃(ε) + P(Gᶜ)``.
* Lower bound. ``S̃ − S = W`` is a sum of independent terms, each in an interval of
  length ``h`` with mean in ``[0, b_max]`` (``b_max ≤ h²/8``), so by Hoeffding
  ``P(W ≥ c) ≤ η`` for ``c = N b_max + h √(N log(1/η) / 2)``, and
  ``δ(ε) ≥ δ̃(ε + c) − η`` for every ``η > 0`` (we take the best of a few).
* The estimate is ``δ̃(ε + N h²/12)``: the split's average bias removed. It is
  second-order accurate and lies between the bounds.

So a single composition gives all three numbers. The grid spacing is chosen
from the ε tolerance, ``h ≈ eps_tol / √(N log(1/η_ref)/2)`` (the same scaling as
Gopi et al. 2021), so ``upper − lower ≈ eps_tol`` at ``δ ≈ 1e-6``; the upper bound
itself is usually within ``1e-5`` of the truth.

Composition and the remaining error terms. The per-round pmfs are placed on a
window of ``M`` bins; ``N``-fold composition is the ``N``-th power of their
discrete Fourier transforms (the characteristic-function view of Zhu, Dong and
Wang 2022), computed by repeated squaring. The result is the composition folded
modulo ``M``. Mass that leaves the window is bounded by Chernoff bounds
``P(S̃ ≥ x) ≤ M(t)^N e^{−tx}`` evaluated on the discrete pmfs; it is added to the
upper bound (mass above the window) and subtracted from the lower bound (mass
folded into the window). The floating-point error of the transform, propagated
through the power, and of the suffix sums is bounded and accounted for in the same
way. All bounds hold up to floating-point rounding of the tail probabilities
themselves (relative ``~1e-12`` on bin masses).

ε(δ) is obtained by inverting the piecewise-smooth δ̃(ε) exactly (not by picking
the smallest grid point), so ε is continuous in the parameters and can be
differentiated.

Grids, jit and gradients
------------------------
Array shapes depend on the grid, so the grid is chosen outside tracing from
concrete parameter values (:func:`make_grid`) and then held fixed; gradients
``dε/dσ``, ``dε/dq`` flow through the pmf, the FFTs and the inversion with the
grid held fixed. Functions called eagerly (or under ``jax.grad`` without ``jit``)
choose the grid from the primal values; under ``jit``/``vmap`` pass
``grid=make_grid(...)`` built from the parameter values (or ranges) that will be
used. Invalid parameters inside ``jit`` give NaN.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import erfc, logsumexp

from glrt_jax._src.llr import threshold

__all__ = [
    "Bounds",
    "GaussianBlock",
    "Grid",
    "PrivacyLossDistribution",
    "compose",
    "delta_for_epsilon",
    "epsilon_for_delta",
    "make_grid",
]

_ADVERSARIES = ("npo", "glrt")
_NEIGHBOURINGS = ("add_remove", "replace_one")
_LOG2 = math.log(2.0)
_SQRT_HALF = math.sqrt(0.5)
_EPS64 = float(np.finfo(np.float64).eps)
# log(1/η_ref) in the grid spacing rule (η ≈ 1e-3 δ at δ ≈ 1e-6).
_LOG_INV_ETA_REF = 21.0
# Fractions of the target δ tried as the Hoeffding slack η in the lower bounds.
_ETA_FRACTIONS = (0.3, 0.1, 3e-2, 1e-2, 3e-3, 1e-3, 1e-4, 1e-6)
# Bisection steps for the per-round loss range.
_BISECT_ITERS = 80
# Bins of the coarse per-round pmfs used for the tail bounds (fixed shape).
_COARSE_BINS = 4096
# Row length of the two-level suffix sums.
_SCAN_ROW = 1024
# Largest FFT length (bins of the composed window) a grid may use.
_MAX_FFT = 2**24
# Candidate t values when choosing the window.
_T_GRID = np.geomspace(1e-3, 1e3, 121)


# ---------------------------------------------------------------------------
# Public containers
# ---------------------------------------------------------------------------


class Bounds(NamedTuple):
    """A (lower, estimate, upper) triple; the true value lies in [lower, upper]."""

    lower: Any
    estimate: Any
    upper: Any


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["sigma", "sensitivity", "sampling_rate"],
    meta_fields=["steps", "adversary", "dim"],
)
@dataclasses.dataclass(frozen=True)
class GaussianBlock:
    """``steps`` identical rounds of the Poisson-subsampled Gaussian mechanism.

    Attributes:
      sigma: noise standard deviation ``σ > 0`` (same units as ``sensitivity``).
      sensitivity: ℓ2 sensitivity ``Δ > 0`` (for ``"replace_one"``: the bound on
        each record's contribution).
      sampling_rate: Poisson sampling rate ``q ∈ (0, 1]`` (1 = no subsampling).
      steps: number of rounds ``N ≥ 1`` (static).
      adversary: ``"npo"`` (classical Gaussian DP) or ``"glrt"`` (per-round
        magnitude statistic ``‖y‖²``) (static).
      dim: output dimension ``d ≥ 1``; only used by ``"glrt"`` (static).

    ``sigma``, ``sensitivity`` and ``sampling_rate`` are pytree leaves: they can be
    traced, differentiated and vmapped. ``steps``, ``adversary`` and ``dim`` are
    static.
    """

    sigma: Any
    sensitivity: Any = 1.0
    sampling_rate: Any = 1.0
    steps: int = 1
    adversary: str = "npo"
    dim: int = 1

    def __post_init__(self):
        for name in ("steps", "dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.adversary not in _ADVERSARIES:
            raise ValueError(f"adversary must be one of {_ADVERSARIES}, got {self.adversary!r}")


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["spacing", "offsets", "window_start", "chernoff_t", "strides"],
    meta_fields=[
        "sizes",
        "fft_size",
        "directions",
        "steps",
        "adversary",
        "dims",
        "neighbouring",
        "eps_tol",
        "tail_mass",
    ],
)
@dataclasses.dataclass(frozen=True)
class Grid:
    """A fixed discretisation for one composition structure (see :func:`make_grid`).

    Data (pytree leaves, so a grid can be passed into ``jit``): ``spacing`` (h),
    ``offsets[dir, block]`` (grid index of the lowest loss of each per-round pmf),
    ``window_start[dir]`` (grid index of the lowest loss of the composed window),
    ``chernoff_t[dir]`` (the ``t`` of the upper- and lower-tail bounds) and
    ``strides[dir, block]`` (spacing, in bins, of the coarse pmfs used by those
    bounds). Static: the per-round lengths ``sizes[dir][block]``, the FFT length,
    the directions and the composition structure the grid was built for.
    """

    spacing: Any
    offsets: Any
    window_start: Any
    chernoff_t: Any
    strides: Any
    sizes: tuple
    fft_size: int
    directions: tuple
    steps: tuple
    adversary: str
    dims: tuple
    neighbouring: str
    eps_tol: float
    tail_mass: float


# ---------------------------------------------------------------------------
# Small numerical helpers
# ---------------------------------------------------------------------------


def _log1mexp(x):
    """log(1 − e^x) for x < 0, accurate on both sides of −log 2."""
    return jnp.where(x > -_LOG2, jnp.log(-jnp.expm1(x)), jnp.log1p(-jnp.exp(x)))


def _normal_tails(a):
    """(Φ(−a), Φ(a)), each with full relative accuracy where it is the smaller one."""
    small = 0.5 * erfc(jnp.abs(a) * _SQRT_HALF)
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


def _npo_base_tails(mu, b):
    """P = N(μ, 1), Q = N(0, 1): L = μx − μ²/2 ~ N(±μ²/2, μ²)."""
    fin = jnp.isfinite(b)
    z = jnp.where(fin, b, 0.0) / mu
    # One erfc for both distributions (keeps the compiled program small).
    s, f = _normal_tails(jnp.stack([z - 0.5 * mu, z + 0.5 * mu]))
    lims = _limits(b > 0)
    out = (s[0], f[0], s[1], f[1])
    return tuple(jnp.where(fin, o, lim) for o, lim in zip(out, lims, strict=True))


def _glrt1_base_tails(mu, b):
    """d = 1: T = Y² with Y ~ N(μ, 1) under P; ℓ(t) = −λ/2 + log cosh(μ √t)."""
    v = b + 0.5 * mu * mu
    pos = (v > 0) & jnp.isfinite(v)
    vs = jnp.where(pos, v, 1.0)
    # √t = arccosh(e^v)/μ, arccosh(e^v) = v + log(1 + √(1 − e^{−2v})).
    r = (vs + jnp.log1p(jnp.sqrt(-jnp.expm1(-2.0 * vs)))) / mu
    e = erfc(jnp.stack([r, jnp.abs(r - mu), r + mu]) * _SQRT_HALF)
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


def _ncx2_module():
    try:
        from glrt_jax import ncx2
    except ImportError as err:  # pragma: no cover - depends on the install
        raise NotImplementedError(
            "the GLRT pair with dim > 1 needs glrt_jax.ncx2 (logsf, logcdf, logpdf)"
        ) from err
    return ncx2


def _glrtd_base_tails(mu, b, d):
    """General d through glrt_jax.ncx2: tails of T at t = ℓ⁻¹(b)."""
    ncx2 = _ncx2_module()
    lam = mu * mu
    v = b + 0.5 * lam
    pos = (v > 0) & jnp.isfinite(v)
    vf = jnp.clip(jnp.where(jnp.isfinite(v), v, 0.0), 1e-12 * lam, None)
    t = threshold(vf - 0.5 * lam, lam, float(d))
    # One logsf call for P = ncx2(d, λ) and Q = χ²_d together; the cdf is its
    # complement, used only where it is the larger tail.
    nc = jnp.stack([jnp.broadcast_to(lam, t.shape), jnp.zeros_like(t)])
    log_sf = ncx2.logsf(jnp.stack([t, t]), float(d), nc)
    sf, cdf = jnp.exp(log_sf), -jnp.expm1(log_sf)
    out = (sf[0], cdf[0], sf[1], cdf[1])
    lims = _limits(jnp.isposinf(v))
    return tuple(jnp.where(pos, o, lim) for o, lim in zip(out, lims, strict=True))


def _base_tails(adversary, dim, mu, b):
    if adversary == "npo":
        return _npo_base_tails(mu, b)
    if dim == 1:
        return _glrt1_base_tails(mu, b)
    return _glrtd_base_tails(mu, b, dim)


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
        pos, jnp.log(jnp.where(pos, c, 1.0)) + _log1mexp(-jnp.where(pos, av, 1.0)), -jnp.inf
    )
    lb = log_2a - 0.5 * av
    lm = jnp.maximum(la, lb)
    ra, rb = jnp.exp(la - lm), jnp.exp(lb - lm)
    g = lm + jnp.log(ra + jnp.sqrt(ra * ra + rb * rb))
    return jnp.sign(v) * (av - log_2a + g) / mu


def _segment_tails(adversary, dim, mu, q, x, is_add, exp_x=None):
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
    sp, fp, sq, fq = _base_tails(adversary, dim, mu, b)
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


def _directions(adversary, neighbouring):
    if neighbouring == "replace_one" and adversary == "npo":
        return ("replace",)
    return ("remove", "add")


# ---------------------------------------------------------------------------
# Discretisation of one round ("connect the dots" split of every bin)
# ---------------------------------------------------------------------------


def _split_pmfs(tails, exp_x, denom, cut):
    """Split pmfs on concatenated grids (``exp_x = e^x``, ``denom = 1 − e^{−h}`` per point).

    Bin k's P-mass π_k and Q-mass κ_k go to x_k and x_{k+1} so that both are kept:
    the part moved up is (π_k − e^{x_k} κ_k) / (1 − e^{−h}). ``cut`` marks the
    bins that straddle two segments (dropped).
    """
    sp, fp, sq, fq = tails
    use_sf = sp[:-1] < 0.5
    pi = jnp.where(use_sf, sp[:-1] - sp[1:], fp[1:] - fp[:-1])
    use_sf = sq[:-1] < 0.5
    kappa = jnp.where(use_sf, sq[:-1] - sq[1:], fq[1:] - fq[:-1])
    pi = jnp.where(cut, 0.0, jnp.maximum(pi, 0.0))
    kappa = jnp.maximum(kappa, 0.0)
    up = jnp.clip((pi - exp_x[:-1] * kappa) / denom[:-1], 0.0, pi)
    return jnp.pad(pi - up, (0, 1)) + jnp.pad(up, (1, 0))


def _block_params(block):
    sigma = jnp.asarray(block.sigma, jnp.float64)
    sens = jnp.asarray(block.sensitivity, jnp.float64)
    q = jnp.asarray(block.sampling_rate, jnp.float64)
    valid = (sigma > 0) & (sens > 0) & (q > 0) & (q <= 1)
    mu = jnp.where(valid, sens / jnp.where(valid, sigma, 1.0), 1.0)
    return mu, jnp.where(valid, q, 0.5), valid


def _round_pmfs(adversary, dim, directions, mu, q, h, offsets, sizes, strides):
    """Fine and coarse split pmfs of one round, per direction, in one pass.

    Direction i uses the fine grid ``(offsets[i] + arange(sizes[i])) h`` and the coarse
    grid ``(offsets[i] + strides[i]·arange(_COARSE_BINS + 1)) h``. Returns
    ``(fine pmfs, fine tail masses, coarse pmfs (n_dir, n_c), coarse grids)``.
    """
    nc = _COARSE_BINS + 1
    xs, steps, lens, adds = [], [], [], []
    for i, direction in enumerate(directions):
        xs += [
            (offsets[i] + jnp.arange(sizes[i])) * h,
            (offsets[i] + strides[i] * jnp.arange(nc)) * h,
        ]
        steps += [h, strides[i] * h]
        lens += [sizes[i], nc]
        adds += [direction == "add"] * 2
    ends = np.cumsum(lens)
    starts = ends - np.asarray(lens)
    x = jnp.concatenate(xs)
    # Losses beyond ±700 never matter (e^{−700}); clipping keeps e^x finite.
    exp_x = jnp.exp(jnp.clip(x, -700.0, 700.0))
    is_add = None
    if "replace" not in directions:
        is_add = jnp.asarray(np.repeat(np.asarray(adds), lens))
    tails = _segment_tails(adversary, dim, mu, q, x, is_add, exp_x)
    cut = np.zeros(int(ends[-1]) - 1, bool)
    cut[ends[:-1] - 1] = True
    # 1 − e^{−step} per point, gathered from one value per segment.
    denom = -jnp.expm1(-jnp.stack(steps))[jnp.asarray(np.repeat(np.arange(len(lens)), lens))]
    pmf = _split_pmfs(tails, exp_x, denom, jnp.asarray(cut))
    sp, fp = tails[0], tails[1]
    fine, tail, coarse, grids = [], [], [], []
    for i in range(len(directions)):
        a, e = starts[2 * i], ends[2 * i]
        fine.append(pmf[a:e])
        tail.append(fp[a] + sp[e - 1])
        coarse.append(pmf[starts[2 * i + 1] : ends[2 * i + 1]])
        grids.append(xs[2 * i + 1])
    return fine, tail, jnp.stack(coarse), jnp.stack(grids)


# ---------------------------------------------------------------------------
# The composed distribution and its queries
# ---------------------------------------------------------------------------


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=[
        "suffix_mass",
        "suffix_scaled",
        "lowest_loss",
        "spacing",
        "upper_slack",
        "lower_slack",
        "below_window",
        "valid",
    ],
    meta_fields=["rounds", "directions"],
)
@dataclasses.dataclass(frozen=True)
class PrivacyLossDistribution:
    """A composed privacy loss distribution with certified error terms.

    One row per direction (remove/add, or replace). For the window pmf ``c_i`` at
    losses ``x_i = lowest_loss + i·h``: ``suffix_mass[j] = Σ_{i≥j} c_i`` and
    ``suffix_scaled[j] = Σ_{i≥j} c_i e^{x_j − x_i}``; for ``ε ∈ [x_{j−1}, x_j]``,
    ``δ̃(ε) = suffix_mass[j] − e^{ε−x_j} suffix_scaled[j]``. ``upper_slack`` (mass
    above the window, rounds outside their range, numerical error) is added to the
    upper bounds, ``lower_slack`` (mass folded into the window, numerical error) is
    subtracted from the lower ones.

    Query with :meth:`delta` and :meth:`epsilon`; both return :class:`Bounds`
    maximised over the directions and work under jit, vmap and autodiff.
    """

    suffix_mass: Any
    suffix_scaled: Any
    lowest_loss: Any
    spacing: Any
    upper_slack: Any
    lower_slack: Any
    below_window: Any
    valid: Any
    rounds: int
    directions: tuple

    def delta(self, epsilon) -> Bounds:
        """Bounds on δ(ε): ``lower ≤ δ(ε) ≤ upper`` (any real ε, any shape)."""
        return _delta_jit(self, jnp.asarray(epsilon, jnp.float64))

    def epsilon(self, delta) -> Bounds:
        """Bounds on ε(δ), the smallest ε ≥ 0 with δ(ε) ≤ δ (δ in (0, 1), any shape).

        ``upper`` is ``inf`` when δ is below the certified slack.
        """
        return _epsilon_jit(self, jnp.asarray(delta, jnp.float64))


def _hoeffding_shift(h, n, eta):
    """c with P(W ≥ c) ≤ η for the split noise W of n rounds (see module docstring)."""
    slope = h / -jnp.expm1(-h)
    b_max = slope - 1.0 - jnp.log(slope)  # largest mean shift of one split, ≤ h²/8
    return n * b_max + h * jnp.sqrt(0.5 * n * jnp.log(1.0 / eta))


def _delta_window(A, B, x0, h, eps):
    """δ̃(ε) of one direction's window (eps of any shape)."""
    m = A.shape[0] - 1
    j = jnp.clip(jnp.floor((eps - x0) / h).astype(jnp.int32) + 1, 0, m)
    # eps ≤ x_j except past the window's top, where B = 0: clip to avoid inf · 0.
    return jnp.maximum(A[j] - jnp.exp(jnp.minimum(eps - (x0 + j * h), 0.0)) * B[j], 0.0)


def _epsilon_window(A, B, x0, h, delta):
    """Smallest ε with δ̃(ε) ≤ δ for one direction's window (exact inversion)."""
    m = A.shape[0] - 1
    D = A[:m] - B[:m]  # δ̃ at the grid points, decreasing
    j = jnp.clip(jnp.searchsorted(-D, -delta, side="left"), 0, m - 1)
    Aj, Bj = A[j], B[j]
    xj = x0 + j * h
    ok = (Aj - delta > 0) & (Bj > 0)
    eps = xj + jnp.log(jnp.where(ok, Aj - delta, 1.0)) - jnp.log(jnp.where(ok, Bj, 1.0))
    return jnp.where(delta > 0, jnp.where(ok, eps, xj), jnp.inf)


def _per_direction(fn, dist, values):
    """Apply fn(A, B, x0, h, v) per direction; values has a leading direction axis."""
    return jax.vmap(fn, in_axes=(0, 0, 0, None, 0))(
        dist.suffix_mass, dist.suffix_scaled, dist.lowest_loss, dist.spacing, values
    )


def _nan_if_invalid(bounds, valid):
    return Bounds(*(jnp.where(valid, b, jnp.nan) for b in bounds))


@jax.jit
def _delta_jit(dist, eps):
    n_dir = dist.suffix_mass.shape[0]
    h, n = dist.spacing, dist.rounds
    col = (slice(None),) + (None,) * eps.ndim
    eps_d = jnp.broadcast_to(eps, (n_dir,) + eps.shape)
    d_hat = _per_direction(_delta_window, dist, eps_d)
    d_est = _per_direction(_delta_window, dist, eps_d + n * h**2 / 12.0)
    below = jnp.where(eps_d < dist.lowest_loss[col], dist.below_window[col], 0.0)
    d_up = d_hat + dist.upper_slack[col] + below
    # Lower bound: max over η of δ̃(ε + c(η)) − η.
    fr = jnp.asarray(_ETA_FRACTIONS).reshape((-1, 1) + (1,) * eps.ndim)
    eta = jnp.maximum(fr * d_hat[None], 1e-300)
    shifted = eps_d[None] + _hoeffding_shift(h, n, eta)
    d_low = jax.vmap(lambda e: _per_direction(_delta_window, dist, e))(shifted) - eta
    d_low = jnp.maximum(jnp.max(d_low, axis=0) - dist.lower_slack[col], 0.0)
    out = Bounds(
        jnp.max(d_low, axis=0),
        jnp.clip(jnp.max(d_est, axis=0), 0.0, 1.0),
        jnp.minimum(jnp.max(d_up, axis=0), 1.0),
    )
    return _nan_if_invalid(out, dist.valid)


@jax.jit
def _epsilon_jit(dist, delta):
    n_dir = dist.suffix_mass.shape[0]
    h, n = dist.spacing, dist.rounds
    col = (slice(None),) + (None,) * delta.ndim
    d = jnp.broadcast_to(delta, (n_dir,) + delta.shape)
    e_up = _per_direction(_epsilon_window, dist, d - dist.upper_slack[col])
    e_est = _per_direction(_epsilon_window, dist, d) - n * h**2 / 12.0
    fr = jnp.asarray(_ETA_FRACTIONS).reshape((-1, 1) + (1,) * delta.ndim)
    eta = fr * d[None]
    target = d[None] + dist.lower_slack[col][None] + eta
    e_low = jax.vmap(lambda t: _per_direction(_epsilon_window, dist, t))(target)
    e_low = jnp.max(e_low - _hoeffding_shift(h, n, eta), axis=0)
    out = Bounds(
        jnp.maximum(jnp.max(e_low, axis=0), 0.0),
        jnp.maximum(jnp.max(e_est, axis=0), 0.0),
        jnp.maximum(jnp.max(e_up, axis=0), 0.0),
    )
    return _nan_if_invalid(out, dist.valid)


def _suffix_sums(c, h):
    """A_j = Σ_{i≥j} c_i and B_j = Σ_{i≥j} c_i e^{−(i−j)h} along the last axis.

    Two levels: reverse cumulative sums within rows of ``_SCAN_ROW`` bins (B with the
    weights e^{−ih}, ih ≤ 103, so nothing overflows), then a carry across rows (a
    cumulative sum for A, a small triangular matrix of e^{−(s−r)Lh} for B). Both get
    a trailing zero (the empty suffix).
    """
    n = c.shape[-1]
    L = min(_SCAN_ROW, n)
    R = -(-n // L)
    X = jnp.pad(c, [(0, 0)] * (c.ndim - 1) + [(0, R * L - n)]).reshape(c.shape[:-1] + (R, L))
    ax = X.ndim - 1
    w = jnp.exp(-h * jnp.arange(L))
    loc_a = lax.cumsum(X, axis=ax, reverse=True)
    loc_b = lax.cumsum(X * w, axis=ax, reverse=True) / w
    # Suffix sums at the start of the next row.
    next_a = lax.cumsum(loc_a[..., 0], axis=ax - 1, reverse=True)
    next_a = jnp.concatenate([next_a[..., 1:], jnp.zeros_like(next_a[..., :1])], axis=-1)
    # B at the start of row r + 1: a short sequential scan over the rows (factor e^{−Lh}).
    decay_row = jnp.exp(-h * L)

    def carry_b(acc, row_start):
        return row_start + decay_row * acc, acc

    rows = jnp.moveaxis(loc_b[..., 0], -1, 0)[::-1]
    _, next_b = lax.scan(carry_b, jnp.zeros(rows.shape[1:], c.dtype), rows)
    next_b = jnp.moveaxis(next_b[::-1], 0, -1)
    A = loc_a + next_a[..., None]
    B = loc_b + next_b[..., None] * jnp.exp(-h * (L - jnp.arange(L)))
    zero = jnp.zeros(c.shape[:-1] + (1,), c.dtype)
    A = jnp.concatenate([A.reshape(c.shape[:-1] + (R * L,))[..., :n], zero], axis=-1)
    B = jnp.concatenate([B.reshape(c.shape[:-1] + (R * L,))[..., :n], zero], axis=-1)
    return A, B


def _half_spectrum_weights(m):
    """Multiplicities of the rfft bins in the full spectrum, and Dirichlet weights.

    A run of consecutive outputs of an inverse DFT (1/m scaling) of ``E`` sums to at
    most ``(1/m) Σ_k |E_k| min(m, 1/|sin(πk/m)|)``.
    """
    k = np.arange(m // 2 + 1)
    s = np.abs(np.sin(np.pi * k / m))
    w = np.where(k == 0, m, np.minimum(m, 1.0 / np.maximum(s, 1e-300)))
    mult = np.full(k.shape, 2.0)
    mult[0] = 1.0
    if m % 2 == 0:
        mult[-1] = 1.0
    return mult, w


def _fft_error_bound(phis, spectrum, steps, pmf_masses, M):
    """Bound on the rounding error of any suffix sum of the composed window pmf.

    A length-M FFT computed in log2(M) butterfly stages errs by at most
    ``γ ‖p‖₁`` per output, ``γ = 6u log2 M``. To first order this reaches the
    composed spectrum as ``N_b |Φ_k|/|φ_{b,k}| γ ‖p_b‖₁`` (the powers add ``γ_pow |Φ_k|``)
    and any run of outputs of the inverse transform as ``(1/M) Σ_k |E_k| w_k`` (Dirichlet
    weights). The inverse transform itself and the two-level suffix sums add small
    terms; the factor 2 covers both suffix sums entering δ̃. Typical size:
    ``N · 1e-13`` absolute.
    """
    u = 0.5 * _EPS64
    log2m = math.log2(M)
    gamma = 6.0 * u * log2m
    mult, w = _half_spectrum_weights(M)
    weight = mult * w / M
    abs_spec = jnp.abs(spectrum)
    gamma_pow = (4.0 * math.log2(sum(steps) + 1) + 2.0 * len(steps) + 2.0) * u
    err_k = gamma_pow * abs_spec
    for phi, n, mass in zip(phis, steps, pmf_masses, strict=True):
        a = jnp.abs(phi)
        ratio = jnp.where(a > 0, abs_spec / jnp.where(a > 0, a, 1.0), 0.0)
        err_k = err_k + n * gamma * mass[:, None] * jnp.minimum(ratio, 1.0)
    total = jnp.sum(err_k * weight, axis=-1)
    # Inverse transform: ≤ γ (1/M) Σ|Φ_k| per output, at most M outputs in a run.
    total = total + gamma * jnp.sum(mult * abs_spec, axis=-1)
    total = total + 4.0 * (_SCAN_ROW + M // _SCAN_ROW + 16) * u
    return 2.0 * total


def _compose_impl(blocks, grid):
    M = grid.fft_size
    h = grid.spacing
    n_dir = len(grid.directions)
    steps = [b.steps for b in blocks]
    params = [_block_params(b) for b in blocks]
    valid = functools.reduce(jnp.logical_and, [p[2] for p in params])
    t_up, t_lo = grid.chernoff_t[:, 0, :], grid.chernoff_t[:, 1, :]  # (n_dir, n_t)
    ts = jnp.concatenate([t_up, -t_lo], axis=-1)

    spectrum = None
    phis, masses, tails = [], [], []
    log_mgf = 0.0  # Σ_b N_b log E[e^{±t L̃}] per direction
    k0 = jnp.zeros((n_dir,), grid.offsets.dtype)
    for bi, block in enumerate(blocks):
        mu, q, _ = params[bi]
        fine_pmfs, tail, coarse_pmfs, xcs = _round_pmfs(
            block.adversary,
            block.dim,
            grid.directions,
            mu,
            q,
            h,
            grid.offsets[:, bi],
            [grid.sizes[di][bi] for di in range(n_dir)],
            grid.strides[:, bi],
        )
        stacked = jnp.stack([jnp.pad(p, (0, M - p.shape[0])) for p in fine_pmfs])
        phi = jnp.fft.rfft(stacked, axis=-1)
        power = lax.integer_pow(phi, steps[bi])
        spectrum = power if spectrum is None else spectrum * power
        phis.append(lax.stop_gradient(phi))
        masses.append(lax.stop_gradient(jnp.sum(stacked, axis=-1)))
        tails.append(jnp.stack(tail))
        # Tail bounds from the coarse split of the same round: it is a further split
        # of the fine one, so by Jensen its E[e^{tL}] is larger for t > 0 and t ≤ −1.
        lm = logsumexp(ts[:, :, None] * xcs[:, None, :], b=coarse_pmfs[:, None, :], axis=-1)
        log_mgf = log_mgf + steps[bi] * lm
        k0 = k0 + steps[bi] * grid.offsets[:, bi]

    c = jnp.fft.irfft(spectrum, n=M, axis=-1)
    # c[i] holds absolute loss index k0 + i (mod M); bring window_start to position 0.
    idx = jnp.mod(jnp.arange(M)[None, :] - (k0 - grid.window_start)[:, None], M)
    c = jnp.take_along_axis(c, idx, axis=-1)
    neg = lax.stop_gradient(jnp.sum(jnp.maximum(-c, 0.0), axis=-1))
    c = jnp.maximum(c, 0.0)
    num_err = lax.stop_gradient(
        _fft_error_bound(phis, lax.stop_gradient(spectrum), steps, masses, M)
    )

    # Chernoff bounds on the composed (truncated) pmf outside the window.
    n_t = t_up.shape[-1]
    x_above = (grid.window_start + M)[:, None] * h
    x_below = (grid.window_start - 1)[:, None] * h
    # (exponents clipped at 0: a bound above 1 is useless, and exp must not overflow)
    mass_above = jnp.exp(jnp.min(jnp.minimum(log_mgf[:, :n_t] - t_up * x_above, 0.0), axis=1))
    mass_below = jnp.exp(jnp.min(jnp.minimum(log_mgf[:, n_t:] + t_lo * x_below, 0.0), axis=1))
    # Probability that some round falls outside its per-round range.
    log_keep = sum(n * jnp.log1p(-jnp.minimum(t, 1.0)) for n, t in zip(steps, tails, strict=True))
    outside = -jnp.expm1(log_keep)

    A, B = _suffix_sums(c, h)
    return PrivacyLossDistribution(
        suffix_mass=A,
        suffix_scaled=B,
        lowest_loss=grid.window_start * h,
        spacing=h,
        upper_slack=mass_above + outside + num_err,
        lower_slack=mass_above + mass_below + num_err + neg,
        below_window=mass_below,
        valid=valid,
        rounds=sum(steps),
        directions=grid.directions,
    )


_compose_jit = jax.jit(_compose_impl)


# ---------------------------------------------------------------------------
# Grid selection (eager, from concrete parameter values)
# ---------------------------------------------------------------------------


def _ladder(n, minimum=64):
    """Smallest size ≥ n among {4, 5, 6, 7}·2^a (FFT-friendly; few distinct shapes)."""
    n = max(int(n), minimum)
    a = max(int(math.floor(math.log2(n))) - 3, 0)
    while True:
        for f in (4, 5, 6, 7):
            if f * 2**a >= n:
                return f * 2**a
        a += 1


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _probe_ranges(adversary, dim, directions, mu, q, m, bound):
    """Per direction: loss levels with P-tails ≤ m on each side (bisection)."""
    n_dir = len(directions)
    is_add = None
    if "replace" not in directions:
        is_add = jnp.asarray(np.repeat([d == "add" for d in directions], 2))

    def body(_, carry):
        lo_a, lo_b, hi_a, hi_b = carry
        mid_lo, mid_hi = 0.5 * (lo_a + lo_b), 0.5 * (hi_a + hi_b)
        x = jnp.stack([mid_lo, mid_hi], axis=1).reshape(-1)
        sp, fp, _, _ = _segment_tails(adversary, dim, mu, q, x, is_add)
        fp, sp = fp[0::2], sp[1::2]
        # lower end: largest x with P'[L' ≤ x] ≤ m; upper end: smallest x with P'[L' > x] ≤ m
        lo_a, lo_b = jnp.where(fp <= m, mid_lo, lo_a), jnp.where(fp <= m, lo_b, mid_lo)
        hi_a, hi_b = jnp.where(sp <= m, hi_a, mid_hi), jnp.where(sp <= m, mid_hi, hi_b)
        return lo_a, lo_b, hi_a, hi_b

    ones = jnp.ones(n_dir)
    init = (-bound * ones, bound * ones, -bound * ones, bound * ones)
    lo_a, _, _, hi_b = lax.fori_loop(0, _BISECT_ITERS, body, init)
    return lo_a, hi_b


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _probe_log_mgf(adversary, dim, directions, mu, q, h, offsets, strides, ts):
    """log E[e^{tL̃}] of the coarse split pmfs, per direction, for all t in ts."""
    sizes = [2] * len(directions)
    _, _, pmfs, xcs = _round_pmfs(adversary, dim, directions, mu, q, h, offsets, sizes, strides)
    return logsumexp(ts[None, :, None] * xcs[:, None, :], b=pmfs[:, None, :], axis=-1)


def _concrete(value, name):
    try:
        val = jax.extend.core.concrete_or_error(None, value, f"the grid choice needs {name}")
    except jax.errors.ConcretizationTypeError as err:
        raise ValueError(
            f"{name} is traced (inside jit or vmap): build the grid outside with "
            "glrt_jax.pld.make_grid(blocks, ...) from the values (or the range of values) "
            "that will be used, and pass grid=..."
        ) from err
    return np.asarray(val, dtype=np.float64)


def _check_float_dtype(value, name):
    dtype = getattr(value, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jnp.floating) and jnp.finfo(dtype).bits < 64:
        raise ValueError(
            f"{name} has dtype {dtype}; the privacy bounds need float64. Pass float64 "
            'values (enable them with jax.config.update("jax_enable_x64", True) or '
            "inside jax.enable_x64())."
        )


def _check_x64():
    if jnp.asarray(1.0).dtype != jnp.float64:
        raise ValueError(
            "glrt_jax.pld needs 64-bit floats: enable them with "
            'jax.config.update("jax_enable_x64", True) or run inside jax.enable_x64().'
        )


def _as_blocks(blocks) -> tuple:
    if isinstance(blocks, GaussianBlock):
        return (blocks,)
    if not isinstance(blocks, Sequence) or len(blocks) == 0:
        raise ValueError("blocks must be a GaussianBlock or a non-empty sequence of them")
    for b in blocks:
        if not isinstance(b, GaussianBlock):
            raise ValueError(f"blocks must contain GaussianBlock objects, got {type(b).__name__}")
    if len({b.adversary for b in blocks}) > 1:
        raise ValueError("adversary must be the same for all blocks of one composition")
    return tuple(blocks)


def _validate_block_values(blocks, *, scalar):
    """Check the concrete leaves; traced ones are left to the NaN handling."""
    for b in blocks:
        for name, hi in (("sigma", None), ("sensitivity", None), ("sampling_rate", 1.0)):
            value = getattr(b, name)
            _check_float_dtype(value, name)
            if isinstance(value, jax.core.Tracer):
                continue
            arr = np.asarray(value, dtype=np.float64)
            bad = ~np.isfinite(arr) | (arr <= 0) | ((arr > hi) if hi is not None else False)
            if np.any(bad):
                allowed = "(0, 1]" if hi is not None else "(0, inf)"
                raise ValueError(f"{name} must lie in {allowed}, got {value!r}")
            if scalar and arr.size != 1:
                raise ValueError(
                    f"{name} must be a scalar here: use jax.vmap over it, with a grid from "
                    "make_grid(blocks with the array of values)"
                )


def _validate_options(eps_tol, tail_mass, neighbouring):
    if neighbouring not in _NEIGHBOURINGS:
        raise ValueError(f"neighbouring must be one of {_NEIGHBOURINGS}, got {neighbouring!r}")
    if not (isinstance(eps_tol, (int, float)) and math.isfinite(eps_tol) and 0 < eps_tol <= 1):
        raise ValueError(f"eps_tol must be a number in (0, 1], got {eps_tol!r}")
    if not (isinstance(tail_mass, (int, float)) and 0 < tail_mass <= 1e-3):
        raise ValueError(f"tail_mass must be a number in (0, 1e-3], got {tail_mass!r}")


def make_grid(
    blocks,
    *,
    neighbouring: str = "add_remove",
    eps_tol: float = 1e-2,
    tail_mass: float = 1e-14,
) -> Grid:
    """Choose the discretisation for a composition, from concrete parameter values.

    Args:
      blocks: a :class:`GaussianBlock` or a sequence of them (one composition).
        Their ``sigma``, ``sensitivity`` and ``sampling_rate`` may be arrays: the
        grid then covers the range of values (it is built at the extreme μ = Δ/σ
        and q, where loss ranges and tails are widest), so it can be reused under
        ``jax.vmap`` or across a calibration loop.
      neighbouring: ``"add_remove"`` or ``"replace_one"``.
      eps_tol: target width ``upper − lower`` of the ε bounds (met at δ around
        1e-6; smaller δ gives slightly wider bounds). This, not the grid spacing, is
        the accuracy knob: ``h = min(eps_tol/10, 0.9 eps_tol / √(10.5 N))`` for N
        rounds in total.
      tail_mass: probability mass allowed outside the per-round ranges and the
        composed window, all rounds together. It enters the δ bounds, so keep it well
        below the δ of interest.

    Returns:
      A :class:`Grid`. Per-round ranges are the quantiles of the loss at
      ``tail_mass/(8N)``; the window comes from Chernoff bounds on coarse pmfs.
    """
    _check_x64()
    blocks = _as_blocks(blocks)
    _validate_options(eps_tol, tail_mass, neighbouring)
    _validate_block_values(blocks, scalar=False)
    adversary = blocks[0].adversary
    directions = _directions(adversary, neighbouring)
    n_dir = len(directions)
    steps = tuple(int(b.steps) for b in blocks)
    n_tot = sum(steps)
    h = min(eps_tol / 10.0, 0.9 * eps_tol / math.sqrt(0.5 * n_tot * _LOG_INV_ETA_REF))
    m_round = tail_mass / (8.0 * n_tot)
    ts = np.concatenate([_T_GRID, -_T_GRID])

    offsets = np.zeros((n_dir, len(blocks)), np.int64)
    strides = np.ones((n_dir, len(blocks)), np.int64)
    sizes = [[0] * len(blocks) for _ in directions]
    log_mgf = np.zeros((n_dir, ts.size))
    for bi, b in enumerate(blocks):
        sig = _concrete(b.sigma, "sigma")
        sen = _concrete(b.sensitivity, "sensitivity")
        q = _concrete(b.sampling_rate, "sampling_rate")
        mus = {float(sen.min() / sig.max()), float(sen.max() / sig.min())}
        corners = [(m, r) for m in mus for r in {float(q.min()), float(q.max())}]
        lo, hi = np.full(n_dir, np.inf), np.full(n_dir, -np.inf)
        for m, r in corners:
            bound = 0.5 * m * m + 40.0 * m + 10.0 - math.log(r)
            # dim > 1 is a garbling of dim = 1 (T_d = T_1 + χ²_{d−1}): its loss has
            # smaller exponential moments, so the d = 1 ranges and window cover it
            # (and the bounds account for any mass outside, whatever the grid).
            l, u = _probe_ranges(adversary, 1, directions, m, r, m_round, bound)
            lo, hi = np.minimum(lo, np.asarray(l)), np.maximum(hi, np.asarray(u))
        for di in range(n_dir):
            k_lo = int(math.floor(lo[di] / h)) - 2
            size = _ladder(int(math.ceil(hi[di] / h)) + 3 - k_lo)
            offsets[di, bi], sizes[di][bi] = k_lo, size
            strides[di, bi] = max(1, -(-(size - 1) // _COARSE_BINS))
        lm = [
            np.asarray(
                _probe_log_mgf(
                    adversary,
                    1,
                    directions,
                    m,
                    r,
                    h,
                    offsets[:, bi],
                    strides[:, bi],
                    jnp.asarray(ts),
                )
            )
            for m, r in corners
        ]
        log_mgf += b.steps * np.max(lm, axis=0)

    # Window per direction from the Chernoff bounds, at tail_mass/8 on each side.
    target = math.log(tail_mass / 8.0)
    nt = _T_GRID.size
    starts, chern, need = [], [], max(max(s) for s in sizes)
    for di in range(n_dir):
        up = (log_mgf[di, :nt] - target) / _T_GRID
        dn = np.where(_T_GRID >= 1.0, -(log_mgf[di, nt:] - target) / _T_GRID, -np.inf)
        i_up, i_dn = int(np.nanargmin(up)), int(np.nanargmax(dn))
        support_lo = sum(s * int(o) for s, o in zip(steps, offsets[di], strict=True))
        support_hi = sum(
            s * (int(o) + k - 1) for s, o, k in zip(steps, offsets[di], sizes[di], strict=True)
        )
        w_hi = min(int(math.ceil(up[i_up] / h)), support_hi)
        w_lo = max(int(math.floor(dn[i_dn] / h)), support_lo)
        w_lo, w_hi = min(w_lo, -2), max(w_hi, 2)
        margin = int(0.03 * (w_hi - w_lo)) + 16
        starts.append((w_lo - margin, w_hi + margin))
        need = max(need, w_hi - w_lo + 2 * margin + 1)
        # Lower-tail t's stay ≥ 1, where the coarse bound is valid for the fine pmf.
        spread = np.array([0.7, 1.0, 1.4])
        chern.append([_T_GRID[i_up] * spread, np.maximum(_T_GRID[i_dn] * spread, 1.0)])
    M = _ladder(need)
    if M > _MAX_FFT:
        raise ValueError(
            f"this composition needs {M} grid points (losses up to {need * h:.3g} at spacing "
            f"{h:.2g}); increase eps_tol (now {eps_tol}) or compose fewer rounds"
        )
    window_start = [w_lo - (M - (w_hi - w_lo + 1)) // 2 for w_lo, w_hi in starts]
    return Grid(
        spacing=jnp.asarray(h, jnp.float64),
        offsets=jnp.asarray(offsets),
        window_start=jnp.asarray(np.array(window_start, np.int64)),
        chernoff_t=jnp.asarray(np.array(chern, np.float64)),
        strides=jnp.asarray(strides),
        sizes=tuple(tuple(s) for s in sizes),
        fft_size=M,
        directions=directions,
        steps=steps,
        adversary=adversary,
        dims=tuple(int(b.dim) for b in blocks),
        neighbouring=neighbouring,
        eps_tol=float(eps_tol),
        tail_mass=float(tail_mass),
    )


def _check_grid(grid, blocks, neighbouring):
    if not isinstance(grid, Grid):
        raise ValueError(f"grid must be a Grid from make_grid, got {type(grid).__name__}")
    structure = (
        tuple(int(b.steps) for b in blocks),
        blocks[0].adversary,
        tuple(int(b.dim) for b in blocks),
        neighbouring,
    )
    if structure != (grid.steps, grid.adversary, grid.dims, grid.neighbouring):
        raise ValueError(
            "grid was built for a different composition (steps, adversary, dim or "
            "neighbouring differ); call make_grid with these blocks"
        )


# ---------------------------------------------------------------------------
# User-facing entry points
# ---------------------------------------------------------------------------


def compose(
    blocks,
    *,
    neighbouring: str = "add_remove",
    eps_tol: float = 1e-2,
    tail_mass: float = 1e-14,
    grid: Grid | None = None,
) -> PrivacyLossDistribution:
    """Compose the privacy loss distributions of a sequence of Gaussian blocks.

    Args:
      blocks: a :class:`GaussianBlock` or a sequence of them, composed in sequence
        (heterogeneous σ, q, Δ and steps allowed; one adversary for all).
      neighbouring: ``"add_remove"`` (Poisson subsampling; both directions) or
        ``"replace_one"`` (see the module docstring for the dominating pairs).
      eps_tol, tail_mass: accuracy knobs, see :func:`make_grid` (ignored when
        ``grid`` is given).
      grid: a :class:`Grid` from :func:`make_grid`; required under ``jit``/``vmap``.

    Returns:
      A :class:`PrivacyLossDistribution`; query it with ``.delta(eps)`` and
      ``.epsilon(delta)``, which return :class:`Bounds`.

    Threat model: independent rounds, each seen on its own (for GLRT, an adversary
    that re-estimates the direction every round from ``‖y_i‖²``).

    Raises:
      ValueError: invalid parameters (named), or a traced parameter without ``grid``.
    """
    _check_x64()
    blocks = _as_blocks(blocks)
    if neighbouring not in _NEIGHBOURINGS:
        raise ValueError(f"neighbouring must be one of {_NEIGHBOURINGS}, got {neighbouring!r}")
    _validate_block_values(blocks, scalar=True)
    if grid is None:
        grid = make_grid(blocks, neighbouring=neighbouring, eps_tol=eps_tol, tail_mass=tail_mass)
    else:
        _check_grid(grid, blocks, neighbouring)
    blocks = tuple(
        dataclasses.replace(
            b,
            sigma=jnp.asarray(b.sigma, jnp.float64).reshape(()),
            sensitivity=jnp.asarray(b.sensitivity, jnp.float64).reshape(()),
            sampling_rate=jnp.asarray(b.sampling_rate, jnp.float64).reshape(()),
        )
        for b in blocks
    )
    return _compose_jit(blocks, grid)


def _check_query(value, name):
    _check_float_dtype(value, name)
    if isinstance(value, jax.core.Tracer):
        return
    arr = np.asarray(value, dtype=np.float64)
    if name == "delta" and np.any(~((arr > 0) & (arr < 1))):
        raise ValueError(f"delta must lie in (0, 1), got {value!r}")
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not be NaN, got {value!r}")


def epsilon_for_delta(blocks, delta, **kwargs) -> Bounds:
    """Bounds on the smallest ε ≥ 0 with δ(ε) ≤ ``delta`` for the composition.

    Args:
      blocks: a :class:`GaussianBlock` or a sequence of them.
      delta: target δ in (0, 1); any shape.
      **kwargs: ``neighbouring``, ``eps_tol``, ``tail_mass``, ``grid`` as in
        :func:`compose`.

    Returns:
      :class:`Bounds` ``(lower, estimate, upper)``; report ``upper``.
    """
    _check_query(delta, "delta")
    return compose(blocks, **kwargs).epsilon(delta)


def delta_for_epsilon(blocks, epsilon, **kwargs) -> Bounds:
    """Bounds on δ(ε) for the composition (ε real, any shape; see :func:`compose`)."""
    _check_query(epsilon, "epsilon")
    return compose(blocks, **kwargs).delta(epsilon)
