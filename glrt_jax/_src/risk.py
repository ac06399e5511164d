"""Attack risk of the composed mechanism: TPR at a given FPR, advantage, ROC curve.

Each accountant answer (:class:`glrt_jax.accountant.Accountant`) can also say what an
adversary can do against the composed mechanism: its true-positive rate ``tpr`` at a
false-positive rate ``fpr`` (the ROC curve), and its maximal advantage
``max_fpr (tpr − fpr)``. This module turns the certified privacy profile of the
engine into certified bounds on these numbers, and calibrates σ to them.

The mathematics
---------------
Let δ(ε) be the privacy profile the engine bounds (:func:`glrt_jax.accountant.
schedule_delta`: for ``add_remove``, the larger of the remove and add directions). For
ε ≥ 0 it is the profile of the *symmetrised* ROC curve ``R_s`` (Dong, Roth and Su: the
least concave majorant of the curves of both directions, which is what the GLRT's
``R_s`` of :mod:`glrt_jax.roc` is for one release); for ε < 0 the symmetry of ``R_s``
(reflection across the anti-diagonal) gives

    δ(−t) = 1 − e^{−t} + e^{−t} δ(t)        (t ≥ 0).

``R_s`` is concave, so it is the conjugate of its profile (ε over all reals):

    tpr(α) = R_s(α) = inf_ε [δ(ε) + e^ε α],      advantage = sup_α [R_s(α) − α] = δ(0)

(the total-variation distance; the same for both directions). Any test of the composed
mechanism, in either direction of the neighbouring relation, has a true-positive rate
at most ``tpr(α)`` at false-positive rate α.

Certified bounds. In ``x = e^ε`` the profile ``δ(x) = sup_u [R_s(u) − x u]`` is convex
and decreasing, and ``h(x) = δ(x) + α x`` is convex. The engine gives intervals
``[δ⁻(x_k), δ⁺(x_k)]`` at points ``x_k`` (each evaluation at ε > 0 gives ``±ε``).

* Upper: ``tpr(α) ≤ min_k δ⁺(x_k) + α x_k`` (any ε is a certificate).
* Lower: on ``[x_p, x_r]`` the function ``h`` lies above each of the lines
  ``δ⁻(x_r) + α x`` (δ decreasing), ``α x`` and ``1 − x + α x`` (δ ≥ 0 and
  δ ≥ 1 − x), and the chord extrapolations that convexity gives:
  ``δ(x) ≥ δ⁻(x_p) + (δ⁻(x_p) − δ⁺(x_k))(x − x_p)/(x_p − x_k)`` for ``x_k < x_p ≤ x``
  (and its mirror from the right). The minimum over the interval of the largest line
  is exact arithmetic on a few candidate points; the smallest of these interval
  bounds over a partition of ``(0, 1/α]`` (beyond ``1/α``, ``h ≥ 1``) is a lower
  bound on ``tpr(α)``, and the partition that maximises it is found by a short
  dynamic programme (so that a loose sample can be jumped over).
* The ε grid is refined where the bound is weakest (bisection of the bottleneck
  interval, extension of the range at the ends) until
  ``upper − lower ≤ rtol · upper``, within a budget of engine calls. The gap then
  shrinks with the square of the grid step near the minimiser (convexity) down to the
  engine's own accuracy. A new sample needs a width small beside that gap only (it
  moves ``h`` by as much): where the engine's own tolerance would compile larger
  sizes or run much larger ones, bounds at cheaper sizes already compiled serve when
  they are that narrow (:func:`engine_profile`).
* Advantage: ``δ(1)`` lies below the chord between ``x = e^{−t}`` and ``e^{t}`` and
  above the monotone and chord-extrapolation lines at ``x = 1``; ``t`` is halved until
  the gap is small (the engine's bounds loosen as ε → 0, which limits this).

For ``threat_model="shared"`` the curves are closed forms: NPO is μ-Gaussian DP,
``tpr(α) = Φ(Φ⁻¹(α) + μ)`` and advantage ``2Φ(μ/2) − 1``; the GLRT's curve is ``R_s``
of :func:`glrt_jax.roc.curve` (``variant="symmetrised"``) and its advantage the
profile at ε = 0.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from glrt_jax._src import solvers
from glrt_jax._src.calibration_solve import glrt_log_sigma
from glrt_jax._src.shapes import pad_phases
from glrt_jax._src.validation import check_range

# Relative gap the refinement aims for, and engine calls it may spend per answer.
RTOL = 2e-3
_BUDGET = 24
# Outward rounding of the host arithmetic on the engine's bounds.
_ROUND = 1e-12
# A sample whose lower bound is below this share of its upper bound is "loose" (unless
# its upper bound is below _TINY, negligible beside any false-positive rate of interest).
_LOOSE = 0.5
# Relative width above which a sample at reused sizes is recomputed at its own sizes.
_REFIT = 0.05
_TINY = 1e-9
# Share of tpr's relative gap that a sample's width may take (see :func:`tpr`).
_COARSE_SHARE = 0.125


class Profile:
    """Certified samples of a privacy profile δ(ε), extended to ε < 0 by symmetry.

    Args:
      delta_fn: ``ε ↦ (lower, estimate, upper)`` certified bounds on δ(ε), ε ≥ 0, at
        the accuracy of the engine's own tolerance.
      coarse_fn: optionally, ``ε ↦`` certified bounds as cheap as the engine can give
        them now (for the engine: at sizes already compiled), or ``None`` when it has
        none. A sample asked for with a width ``atol`` comes from it when its bounds
        are that narrow, and from ``delta_fn`` otherwise.

    The samples are cached: all answers about one composed mechanism share them.
    """

    def __init__(
        self,
        delta_fn: Callable[[float], tuple[float, float, float]],
        coarse_fn: Callable[[float], tuple[float, float, float] | None] | None = None,
    ):
        self._fn = delta_fn
        self._coarse_fn = coarse_fn
        self._eps: dict[float, tuple[float, float, float]] = {}
        self._coarse: set[float] = set()  # the samples taken from coarse_fn
        self.calls = 0

    def evaluate(self, eps: float, atol: float | None = None) -> None:
        """Sample δ at ``eps`` ≥ 0 once (again at the engine's accuracy, if it was coarse
        and ``atol`` is ``None``).

        Args:
          eps: the ε ≥ 0 to sample.
          atol: the width ``upper − lower`` that is enough for the caller; ``None``
            for the engine's own accuracy.
        """
        eps = float(eps)
        if eps in self._eps and (atol is not None or eps not in self._coarse):
            return
        self._coarse.discard(eps)
        if atol is not None and self._coarse_fn is not None:
            out = self._coarse_fn(eps)
            if out is not None:
                self._store(eps, out)
                lo, _, up = self._eps[eps]
                if up - lo <= atol:
                    self._coarse.add(eps)
                    return
        self._store(eps, self._fn(eps))

    def _store(self, eps: float, bounds) -> None:
        lo, est, up = (float(v) for v in bounds)
        self.calls += 1
        up = min(up, 1.0) if math.isfinite(up) else 1.0
        lo = max(lo, 0.0) if math.isfinite(lo) else 0.0
        est = min(max(est, lo), up) if math.isfinite(est) else up
        self._eps[eps] = (lo, est, up)

    @property
    def evaluated(self) -> tuple[float, ...]:
        return tuple(sorted(self._eps))

    def is_loose(self, eps: float) -> bool:
        """Whether the engine's bounds at ``eps`` are too wide to use (tiny δ never is)."""
        lo, _, up = self._eps[eps]
        return lo < _LOOSE * up and up > _TINY

    def samples(self):
        """Sorted arrays ``x = e^ε``, δ⁻, δ̂, δ⁺ over ±ε of the evaluated points."""
        eps, lo, est, up = [], [], [], []
        for e, (a, m, b) in self._eps.items():
            eps.append(e), lo.append(a), est.append(m), up.append(b)
            if e > 0.0:
                c = math.exp(-e)
                base = -math.expm1(-e)  # 1 − e^{−t}
                eps.append(-e)
                lo.append(base + c * a)
                est.append(base + c * m)
                up.append(min(1.0, base + c * b))
        order = np.argsort(eps)
        eps = np.asarray(eps)[order]
        return (np.exp(eps), eps, *(np.asarray(v)[order] for v in (lo, est, up)))


def _interval_lowers(x, lo, up, alpha: float, pts, p, r):
    """Lower bounds of min h on the intervals ``[pts[p], pts[r]]``, for index arrays p, r.

    ``pts`` are the breakpoints: 0, the samples ``x``, and an end beyond them (breakpoint
    i is sample i − 1). On each interval ``h(x) = δ(x) + α x`` lies above up to seven
    lines: ``α x`` and ``1 − x + α x`` (δ ≥ 0 and δ ≥ 1 − x); at a right end that is a
    sample r, ``δ⁻(x_r) + α x`` (δ decreasing) and the chords of (r, r + 1) and
    (r, r + 2) extended to its left; at a left end that is a sample p, the chords of
    (p − 2, p) and (p − 1, p) extended to its right. The minimum over the interval of
    their maximum is at an end or where two lines cross: all intervals are evaluated
    at once, absent lines padded as ``−∞``.
    """
    m = len(x)
    rs, ps = r - 1, p - 1  # sample indices of the ends (the virtual ends: out of range)
    has_r, has_p = (r >= 1) & (r <= m), (p >= 1) & (p <= m)
    rs_, ps_ = np.clip(rs, 0, m - 1), np.clip(ps, 0, m - 1)
    lines = [  # (slope, cut, present)
        (np.full(p.shape, alpha), np.zeros(p.shape), np.ones(p.shape, bool)),
        (np.full(p.shape, alpha - 1.0), np.ones(p.shape), np.ones(p.shape, bool)),
        (np.full(p.shape, alpha), lo[rs_], has_r),
    ]
    with np.errstate(divide="ignore", invalid="ignore"):
        for off in (1, 2):  # δ ≥ lo_r + k (x_r − x), k the chord's slope
            ll = np.clip(rs + off, 0, m - 1)
            k = (lo[rs_] - up[ll]) / (x[ll] - x[rs_])
            lines.append((alpha - k, lo[rs_] + k * x[rs_], has_r & (rs + off < m)))
        for off in (1, 2):  # δ ≥ lo_p + k (x − x_p)
            kk = np.clip(ps - off, 0, m - 1)
            k = (lo[ps_] - up[kk]) / (x[ps_] - x[kk])
            lines.append((alpha + k, lo[ps_] - k * x[ps_], has_p & (ps - off >= 0)))
        s = np.stack([np.where(ok, sl, 0.0) for sl, _, ok in lines], axis=1)
        c = np.stack([np.where(ok, cu, -np.inf) for _, cu, ok in lines], axis=1)
        xs = (c[:, None, :] - c[:, :, None]) / (s[:, :, None] - s[:, None, :])
    a, b = pts[p], pts[r]
    xs = xs.reshape(len(p), -1)
    inside = np.isfinite(xs) & (xs > a[:, None]) & (xs < b[:, None])
    cand = np.concatenate([a[:, None], b[:, None], np.where(inside, xs, a[:, None])], axis=1)
    top = np.max(s[:, :, None] * cand[:, None, :] + c[:, :, None], axis=1)
    return np.min(top, axis=1)


def tpr_bounds(profile: Profile, alpha: float):
    """Certified ``(lower, estimate, upper)`` on tpr(α) from the profile's samples.

    Also returns the bottleneck interval ``(ε_left, ε_right)`` (``None`` for an open
    end) where the lower bound is attained.
    """
    x, eps, lo, est, up = profile.samples()
    h_up = up + alpha * x
    k_best = int(np.argmin(h_up))
    upper = min(1.0, float(h_up[k_best]))
    estimate = min(upper, float(np.min(est + alpha * x)))
    x_end = max(1.0 / alpha, float(x[-1]))
    # Breakpoints: 0, the samples, x_end (index i ↦ sample i − 1).
    pts = np.array([0.0, *x.tolist(), x_end])
    n = len(pts)
    # The intervals: each breakpoint r with the three before it.
    pairs = [(p, r) for r in range(1, n) for p in range(max(0, r - 3), r)]
    ps, rs = np.array(pairs).T
    lbs = dict(zip(pairs, _interval_lowers(x, lo, up, alpha, pts, ps, rs).tolist(), strict=True))
    best = [-math.inf] * n
    best[0] = math.inf
    arg = [(0, 0, math.inf)] * n  # (previous breakpoint, bottleneck (p, r), its value)
    for r in range(1, n):
        for p in range(max(0, r - 3), r):
            if best[p] == -math.inf:
                continue
            lb = lbs[p, r]
            val = min(best[p], lb)
            if val > best[r]:
                best[r] = val
                neck = arg[p][1] if best[p] <= lb else (p, r)
                arg[r] = (p, neck, val)
    lower = max(alpha, best[-1])
    p, r = arg[-1][1]
    left = None if p == 0 else float(eps[p - 1])
    right = None if r == n - 1 else float(eps[r - 1])
    lower = max(0.0, lower * (1.0 - _ROUND))
    upper = min(1.0, upper * (1.0 + _ROUND))
    estimate = min(max(estimate, lower), upper)
    return (lower, estimate, upper), (left, right)


def _next_eps(profile: Profile, neck) -> float | None:
    """|ε| to sample next for a bottleneck interval; None when nothing can improve it.

    The midpoint of the interval, unless that lies where the engine's bounds are loose
    (|ε| near 0, below the smallest tight sample): then a point between that zone and
    the interval's ends.
    """
    done = profile.evaluated
    span = max(done) if done else 0.0
    left, right = neck
    good = [e for e in done if not profile.is_loose(e)]
    floor = max(
        (e for e in done if profile.is_loose(e) and (not good or e < min(good))), default=-1.0
    )
    if left is None or right is None:
        cands = [span + max(1.0, 0.5 * span)]
    else:
        ends = sorted((abs(left), abs(right)))
        cands = [abs(0.5 * (left + right))]
        cands += [0.5 * (max(floor, 0.0) + e) for e in ends]
    for cand in cands:
        if cand > floor * (1.0 + 1e-3) and all(abs(cand - e) > 1e-6 * (1.0 + e) for e in done):
            return cand
    return None


def tpr(
    profile: Profile,
    alpha: float,
    *,
    rtol: float = RTOL,
    budget: int = _BUDGET,
    seed: float = 1.0,
):
    """Certified bounds on tpr(α), refining the profile's samples as needed.

    Args:
      profile: the composed mechanism's :class:`Profile` (shared between answers).
      alpha: the false-positive rate α ∈ (0, 1).
      rtol: stop when ``upper − lower ≤ rtol · upper``.
      budget: most new engine calls for this answer.
      seed: the first ε to sample when the profile has no sample yet.

    Returns:
      ``(lower, estimate, upper)`` as floats.

    Example (the exact profile of μ-Gaussian DP, μ = 1, standing in for the engine):
      >>> import math
      >>> from glrt_jax._src import risk
      >>> Phi = lambda z: 0.5 * math.erfc(-z / math.sqrt(2.0))
      >>> gdp = lambda e: (Phi(0.5 - e) - math.exp(e) * Phi(-0.5 - e),) * 3
      >>> lo, _, up = risk.tpr(risk.Profile(gdp), 0.01)
      >>> lo <= 0.0923622 <= up and up - lo <= risk.RTOL * up  # Φ(Φ⁻¹(0.01) + 1)
      True
    """
    if not profile.evaluated:
        profile.evaluate(abs(seed))
    start = profile.calls
    while True:
        b, neck = tpr_bounds(profile, alpha)
        if b[2] - b[0] <= rtol * b[2] or profile.calls - start >= budget:
            return b
        cand = _next_eps(profile, neck)
        if cand is None:
            return b
        # A sample's width moves h(x) = δ(x) + α x by as much: a coarse sample (the
        # engine's compiled sizes) serves when its width is a small share of the gap
        # tpr may keep, rtol · upper.
        profile.evaluate(cand, _COARSE_SHARE * rtol * b[2])


def advantage_bounds(profile: Profile):
    """Certified ``(lower, estimate, upper)`` on δ(0) = max (tpr − fpr) from the samples."""
    x, _, lo, est, up = profile.samples()
    m = len(x)
    upper, estimate, lower = 1.0, math.nan, 0.0
    for i in range(m):
        if x[i] == 1.0:
            upper, lower = min(upper, up[i]), max(lower, lo[i])
            estimate = est[i]
    left = [i for i in range(m) if x[i] < 1.0]
    right = [i for i in range(m) if x[i] > 1.0]
    for i in left:  # chord upper bounds across x = 1
        for j in right:
            w = (x[j] - 1.0) / (x[j] - x[i])
            upper = min(upper, w * up[i] + (1.0 - w) * up[j])
            if i == left[-1] and j == right[0] and math.isnan(estimate):
                estimate = w * est[i] + (1.0 - w) * est[j]
    for r in right:
        lower = max(lower, lo[r])
        if r + 1 < m:
            t = (x[r] - 1.0) / (x[r + 1] - x[r])
            lower = max(lower, lo[r] * (1.0 + t) - up[r + 1] * t)
    for p in left:
        if p >= 1:
            t = (1.0 - x[p]) / (x[p] - x[p - 1])
            lower = max(lower, lo[p] * (1.0 + t) - up[p - 1] * t)
    lower = max(0.0, lower * (1.0 - _ROUND))
    upper = min(1.0, upper * (1.0 + _ROUND))
    estimate = min(max(estimate if math.isfinite(estimate) else upper, lower), upper)
    return float(lower), float(estimate), float(upper)


def advantage(profile: Profile, *, rtol: float = RTOL, budget: int = _BUDGET):
    """Certified bounds on the advantage δ(0): sampled at ε = 0, else by chords at small ε.

    Returns:
      ``(lower, estimate, upper)`` as floats.

    Example (μ-Gaussian DP with μ = 1: the advantage is 2Φ(1/2) − 1):
      >>> import math
      >>> from glrt_jax._src import risk
      >>> Phi = lambda z: 0.5 * math.erfc(-z / math.sqrt(2.0))
      >>> gdp = lambda e: (Phi(0.5 - e) - math.exp(e) * Phi(-0.5 - e),) * 3
      >>> lo, _, up = risk.advantage(risk.Profile(gdp))
      >>> truth = math.erf(0.5 / math.sqrt(2.0))  # 2Φ(1/2) − 1
      >>> lo <= truth <= up and up - lo < 1e-9
      True
    """
    start = profile.calls
    profile.evaluate(0.0)  # δ(0) itself: the engine plans ε = 0 like any other ε
    b = advantage_bounds(profile)
    if b[2] - b[0] <= max(rtol, _REFIT) * b[2]:
        # As tight as the engine's own answer at ε = 0 (about 3·tol): chords through
        # samples at ε > 0, each as wide, would not do better.
        return b
    # Otherwise (a loose δ(0)): certified chords through samples at small ε > 0.
    good = [e for e in profile.evaluated if e > 0 and not profile.is_loose(e)]
    t = min(good) if good else 0.25
    while True:  # a tight sample t and 2t to start from
        profile.evaluate(t)
        profile.evaluate(2.0 * t)
        if not profile.is_loose(t) or t >= 16.0:
            break
        t *= 4.0
    while True:
        b = advantage_bounds(profile)
        if b[2] - b[0] <= rtol * b[2] or profile.calls - start >= budget:
            return b
        t *= 0.5
        profile.evaluate(t)
        if profile.is_loose(t):
            return advantage_bounds(profile)


# ---------------------------------------------------------------------------
# Closed forms (threat_model="shared") and the per-round engine's profile
# ---------------------------------------------------------------------------


def closed_tpr(alpha, mu: float, d: int, adversary: str):
    """tpr(α) of the shared-direction model: μ-GDP (NPO) or the GLRT's ``R_s``."""
    from glrt_jax._src import roc

    a = np.asarray(alpha, dtype=np.float64)
    if adversary == "npo":
        return np.asarray(roc.curve(a, mu))
    return np.asarray(roc.curve(a, mu, d, adversary="glrt", variant="symmetrised"))


def closed_advantage(mu: float, d: int, adversary: str) -> float:
    """Advantage of the shared-direction model: ``2Φ(μ/2) − 1`` (NPO) or δ_GLRT(0)."""
    from glrt_jax._src import profile

    if adversary == "npo":
        return math.erf(mu / (2.0 * math.sqrt(2.0)))  # 2Φ(μ/2) − 1
    return float(profile.delta(0.0, mu, d, adversary="glrt"))


def engine_profile(
    sig,
    q,
    n,
    *,
    d: int,
    adversary: str,
    neighbouring: str,
    tol: float,
    sizes_used: list[tuple[int, int]] | None = None,
) -> Profile:
    """The :class:`Profile` of the per-round engine for one adversary and a schedule.

    Few compiled programs: each ε's grid and node counts are what ``tol`` asks for
    (:func:`glrt_jax._src.composition.choose_sizes`), rounded up to sizes already used
    when there are such (larger sizes give bounds at least as accurate). A coarse sample
    (:class:`Profile`) is taken at the largest used sizes cheaper than those: in
    ``x = e^ε`` a sample far out on the curve needs little accuracy beside ``α x``, and
    this spares a compilation (NPO, σ = 1, q = 0.01, N = 1000: ε = 2 asks for 4× the
    nodes of ε = 1 and is within 1.4e-3 relative at ε = 1's sizes; a new compilation
    takes 4–5 s on 2 cores) or a pass at much larger sizes (σ = 0.7, q = 5e-4,
    N = 2·10⁵: 420 ms at ε = 3's sizes against 15 ms). A sample that asks for larger
    sizes than any used is taken at the largest used first, and kept where its δ is at
    most ``_TINY`` (far below what a risk answer sees).

    Args:
      sig, q, n: the schedule's phases (σ, sampling rate, steps).
      d, adversary, neighbouring, tol: as for :func:`glrt_jax.accountant.schedule_delta`.
      sizes_used: the ``(points, nodes)`` used so far, a list shared with the other
        adversary's profile of the same schedule (appended to here): with d = 1 the
        programs NPO compiled serve GLRT too.
    """
    from glrt_jax._src import composition

    sig, q, n = (np.atleast_1d(np.asarray(v)) for v in (sig, q, n))
    sig, q, n = np.broadcast_arrays(sig.astype(float), q.astype(float), n.astype(np.int64))
    sig_p, q_p, n_p = pad_phases(sig, q, n)  # the engine's bucket of phase counts
    mu_p, q_p, n_p = jnp.asarray(1.0 / sig_p), jnp.asarray(q_p), jnp.asarray(n_p)
    static = dict(adversary=adversary, d=d, neighbouring=neighbouring)
    used = [] if sizes_used is None else sizes_used

    @functools.cache  # asked again by ``fn`` after ``coarse``
    def sizes(eps):
        b, j = composition.choose_sizes(
            mu_p, q_p, n_p, jnp.float64(eps), jnp.float64(tol), query="delta", **static
        )
        return int(b), int(j)

    def at(eps, b, j):
        return composition.schedule_delta(sig, q, n, eps, tol=tol, points=b, nodes=j, **static)

    def fitting(eps):
        b, j = sizes(eps)
        fits = [s for s in used if s[0] >= b and s[1] >= j]
        return (b, j), (min(fits, key=_cost) if fits else None)

    def fn(eps):
        (b, j), fit = fitting(eps)
        if fit is not None:
            out = at(eps, *fit)
            lo, up = float(out.lower), float(out.upper)
            if up - lo <= _REFIT * up or up <= _TINY:
                return out
            # Loose at fixed sizes (a steep loss near ε, as near ε = 0): the automatic
            # sizes re-plan with less smoothing.
        else:
            if used:
                # Larger sizes than any used: a δ far below what risk sees needs none of
                # them, and the largest sizes used certify it (GLRT, d = 10, σ = 1,
                # q = 0.01, N = 1000: δ(1) ≈ 10⁻²⁶ asked for 16384 points and 2¹⁸
                # nodes, whose compilation took 10.7 of a tpr report's 27 s).
                out = at(eps, *max(used, key=_cost))
                if float(out.upper) <= _TINY:
                    return out
            used.append((b, j))
        return composition.schedule_delta(sig, q, n, eps, tol=tol, **static)

    def coarse(eps):
        _, fit = fitting(eps)
        cheaper = [s for s in used if fit is None or _cost(s) < _cost(fit)]
        if not cheaper:
            return None  # nothing compiled yet, or nothing cheaper than ``fn``
        return at(eps, *max(cheaper, key=_cost))

    return Profile(fn, coarse)


def _cost(sizes: tuple[int, int]) -> int:
    """The work of a pass at ``(points, nodes)``, to order sizes by."""
    return sizes[0] * sizes[1]


def check_fpr(fpr) -> np.ndarray:
    """``fpr`` as a float array (scalar or 1-D), every entry in (0, 1)."""
    a = np.asarray(fpr, dtype=np.float64)
    if a.ndim > 1:
        raise ValueError(f"fpr must be a scalar or a 1-D array; got shape {a.shape}")
    check_range("fpr", a, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    return a


def default_fpr(points: int = 31) -> np.ndarray:
    """A false-positive-rate grid for ROC curves: log-spaced from 1e-6, then linear."""
    return np.unique(
        np.concatenate([np.logspace(-6, -1, points // 2), np.linspace(0.1, 0.99, points // 2)])
    )


# ---------------------------------------------------------------------------
# Calibration: σ for a target true-positive rate or advantage
# ---------------------------------------------------------------------------


def _risk_upper(
    kind, sigma, fpr, steps, q, d, adversary, threat_model, neighbouring, tol, sizes_used=None
):
    """Certified upper bound on tpr(fpr) (``kind="tpr"``) or the advantage at σ.

    Evaluated exactly as :class:`~glrt_jax.accountant.Accountant` answers (same profile,
    same ``rtol``), so the σ calibration returns meets the target as the accountant reports.
    """
    if threat_model == "shared":
        m = math.sqrt(steps) / sigma
        if kind == "tpr":
            return float(closed_tpr(fpr, m, d, adversary))
        return closed_advantage(m, d, adversary)
    prof = engine_profile(
        sigma,
        q,
        steps,
        d=d,
        adversary=adversary,
        neighbouring=neighbouring,
        tol=tol,
        sizes_used=sizes_used,
    )
    if kind == "tpr":
        return tpr(prof, fpr, rtol=max(RTOL, 2.0 * tol))[2]
    return advantage(prof, rtol=max(RTOL, 2.0 * tol))[2]


def _calibrate(kind, target, fpr, steps, q, d, adversary, threat_model, neighbouring, rtol, tol):
    """Safeguarded Newton (secant slopes) in log σ on log(certified upper / target), eager.

    The returned σ is one at which the certified upper bound was evaluated and is at
    most ``target``; a σ at most a factor ``1 + rtol`` smaller was evaluated above it.
    """
    from scipy.special import ndtri

    from glrt_jax._src.validation import ADVERSARIES, THREAT_MODELS, check_choice

    check_choice("adversary", adversary, ADVERSARIES)
    check_choice("threat_model", threat_model, THREAT_MODELS)
    check_range("steps", steps, lo=1.0, integer=True)
    check_range("sampling_rate", q, lo=0.0, hi=1.0, lo_open=True)
    check_range("d", d, lo=1.0, integer=True)
    check_range("rtol", rtol, lo=1e-9, hi=0.5)
    if threat_model == "shared" and (q != 1.0 or neighbouring != "add_remove"):
        raise ValueError(
            "threat_model='shared' covers sampling_rate=1 and neighbouring='add_remove' only; "
            f"got sampling_rate={q!r}, neighbouring={neighbouring!r}"
        )
    steps, q, d = int(steps), float(q), int(d)
    if kind == "tpr":
        mu_t = float(ndtri(target) - ndtri(fpr))  # NPO, no subsampling: exact
    else:
        mu_t = float(2.0 * ndtri(0.5 * (1.0 + target)))
    # CLT guess of the subsampled Gaussian: μ ≈ q √(N (e^{1/σ²} − 1)).
    u = -0.5 * math.log(math.log1p(mu_t**2 / (q * q * steps)))
    if adversary == "glrt":  # the GLRT's own start: it needs less noise than NPO
        u = float(glrt_log_sigma(u, d, steps, threat_model))

    sizes_used: list[tuple[int, int]] = []  # the σ tried share their compiled sizes

    def g(u):
        val = _risk_upper(
            kind,
            math.exp(u),
            fpr,
            steps,
            q,
            d,
            adversary,
            threat_model,
            neighbouring,
            tol,
            sizes_used,
        )
        return math.log(max(val, 1e-300)) - math.log(target)

    # Safe side, stopped by the bracket only (ftol = 0): the σ returned was evaluated and
    # meets the target, and one at most a factor 1 + rtol smaller was evaluated above it.
    root = solvers.find_root(
        solvers.HostSecant(g),
        (),
        -jnp.inf,
        jnp.inf,
        u,
        ftol=0.0,
        xtol=math.log1p(rtol),
        residual=True,
        eager=True,
    )
    solvers.raise_for_status(root.status, what=f"noise_multiplier for target {kind}={target!r}")
    return math.exp(float(root.x))


def noise_multiplier_for_tpr(
    target_tpr: float,
    fpr: float,
    steps: int = 1,
    sampling_rate: float = 1.0,
    d: int = 1,
    adversary: str = "npo",
    *,
    threat_model: str = "per_round",
    neighbouring: str = "add_remove",
    rtol: float = 1e-3,
    tol: float = 1e-3,
) -> float:
    """Smallest noise multiplier σ whose attack true-positive rate at ``fpr`` is at most
    ``target_tpr`` (to a factor ``1 + rtol`` in σ).

    The certified upper bound on ``tpr(fpr)`` (see :func:`tpr`) is evaluated at the
    returned σ and is at most ``target_tpr``; σ/(1 + rtol) misses the target. The
    search is :func:`solvers.find_root`'s safeguarded Newton step on ``log σ`` (secant
    slopes, evaluated eagerly), starting from the Gaussian-DP guess
    ``μ = Φ⁻¹(target_tpr) − Φ⁻¹(fpr)`` (exact for NPO without subsampling:
    ``σ = √steps / μ``) and the central-limit form of subsampling.

    Args:
      target_tpr: the largest true-positive rate allowed, in ``(fpr, 1)``.
      fpr: the false-positive rate α in (0, 1) (e.g. 0.01).
      steps, sampling_rate, d, adversary, threat_model, neighbouring, tol: as in
        :func:`glrt_jax.calibrate.noise_multiplier`.
      rtol: relative precision of σ.

    Returns:
      σ as a float (host computation; not jittable).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import calibrate
      >>> s = calibrate.noise_multiplier_for_tpr(0.05, 0.01, steps=4, threat_model="shared")
      >>> exact = 2.0 / 0.681494  # √4 / (Φ⁻¹(0.05) − Φ⁻¹(0.01))
      >>> exact * (1 - 1e-6) <= s <= exact * 1.001
      True
    """
    check_range("fpr", fpr, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    check_range("target_tpr", target_tpr, lo=float(fpr), hi=1.0, lo_open=True, hi_open=True)
    return _calibrate(
        "tpr",
        float(target_tpr),
        float(fpr),
        steps,
        sampling_rate,
        d,
        adversary,
        threat_model,
        neighbouring,
        rtol,
        tol,
    )


def noise_multiplier_for_advantage(
    target_advantage: float,
    steps: int = 1,
    sampling_rate: float = 1.0,
    d: int = 1,
    adversary: str = "npo",
    *,
    threat_model: str = "per_round",
    neighbouring: str = "add_remove",
    rtol: float = 1e-3,
    tol: float = 1e-3,
) -> float:
    """Smallest noise multiplier σ whose attack advantage ``max (tpr − fpr)`` is at most
    ``target_advantage`` (to a factor ``1 + rtol`` in σ); see
    :func:`noise_multiplier_for_tpr` for the method and the arguments.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import calibrate
      >>> s = calibrate.noise_multiplier_for_advantage(0.1, steps=1, threat_model="shared")
      >>> exact = 1.0 / (2.0 * 0.125661)  # 1 / (2 Φ⁻¹(0.55))
      >>> exact * (1 - 1e-5) <= s <= exact * 1.001
      True
    """
    check_range("target_advantage", target_advantage, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    return _calibrate(
        "advantage",
        float(target_advantage),
        None,
        steps,
        sampling_rate,
        d,
        adversary,
        threat_model,
        neighbouring,
        rtol,
        tol,
    )


def roc_figure(report, path=None):
    """Both composed ROC curves of a ``"tpr"`` :class:`PrivacyReport` (an array of ``fpr``).

    Two panels (linear and log–log axes); each adversary's certified upper bound is the
    line, the band below it reaches the lower bound.

    Args:
      report: the answer of :meth:`glrt_jax.accountant.Accountant.roc`.
      path: optional file name to save the figure to.

    Returns:
      The :class:`matplotlib.figure.Figure`.

    Raises:
      ImportError: matplotlib is missing (``pip install 'glrt-jax[plot]'``).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> acc = accountant.Accountant(threat_model="shared")
      >>> fig = roc_figure(acc.compose(accountant.Phase(1.0)).roc())
      >>> len(fig.axes)
      2
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("ROC figures need matplotlib: pip install 'glrt-jax[plot]'") from err
    if report.quantity != "tpr" or np.ndim(report.fpr) != 1:
        raise ValueError("report must be a 'tpr' answer over an array of fpr (Accountant.roc)")
    fig = Figure(figsize=(10, 4.2))
    FigureCanvasAgg(fig)
    a = np.asarray(report.fpr)
    for k, ax in enumerate(fig.subplots(1, 2)):
        for name, b, color in (
            ("NPO", report.npo, "C0"),
            (f"GLRT (d = {report.d})", report.glrt, "C1"),
        ):
            ax.plot(a, b.upper, color=color, label=f"{name}, upper bound")
            ax.fill_between(a, b.lower, b.upper, color=color, alpha=0.25, linewidth=0)
        ax.plot(a, a, color="0.6", linestyle=":", label="no information (tpr = fpr)")
        ax.set_xlabel("false-positive rate (fpr)")
        ax.set_ylabel("true-positive rate (tpr)")
        if k == 1:
            ax.set_xscale("log")
            ax.set_yscale("log")
        else:
            ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(
        f"Composed ROC curves (bands: certified bounds): threat_model={report.threat_model}, "
        f"steps={report.steps}, phases={report.phases}, neighbouring={report.neighbouring}",
        fontsize=9,
    )
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
