"""The plan of a composition query: tilt, window, smoothing and the sizes they need.

Before any transform is computed, each phase's round is measured on planning points
(:mod:`glrt_jax._src.grids`): its loss range (P-tails beyond it below a small failure
mass), its pmf and the cumulant generating functions of its split pair at a ladder of
tilts. Composed over the phases (``Σ_k n_k Λ_k(t)``) they give the Chernoff/saddle-point
picture of the composed loss near the answer, from which the plan chooses

* the damping ``a`` and the period ``W`` of the trapezoid rule (aliasing far below
  ``tol · δ`` with the fewest nodes),
* the widest smoothing ``τ`` the tolerance allows (``τ²`` a share of ``tol · ε``), which
  sets the node count (the inversion then smooths with the narrowest ``τ`` the nodes
  support, :func:`smoothing_width`),
* the per-round grid points ``B`` and frequency nodes ``J`` that ``tol`` needs
  (``b_need``, ``j_need``).

The plan depends neither on ``B`` nor on ``J``: one compiled plan serves every size
choice, and :func:`smoothing_width` applies the node count afterwards. Why each choice
keeps the bounds valid is in :mod:`glrt_jax._src.composition`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import logsumexp

from glrt_jax._src import grids, losses
from glrt_jax._src.shapes import phase_block, vmap_block

# Chernoff tilts of the planner.
_T_POS = np.geomspace(1e-3, 1e6, 73)
# Extra tilts for the Chernoff and aliasing bounds: a + multiples of 1/s (s the tilted
# spread), and multiples of a (where 1/s is large against a, e.g. a few rounds at small q:
# the MGF at a + 0.25/s can be astronomically large while the period W was planned with a
# tilt near 2a).
_U_MULT = np.array([0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
_A_MULT = np.array([1.1, 1.25, 1.5, 2.0, 3.0, 4.0])
# Tilts a·(1 + 2^−k), k = 1…6 (1.5a down to 1.016a, around and below the planner's next
# tilt above the damping a, 1.33a), for the period's aliasing from above. A round at small
# q whose loss has a Gaussian right tail has M(b) ≈ 1 + q^{1+b} e^{b(b+1)μ²/2}, which
# explodes past b ≈ 2 log(1/q)/μ², and the Chernoff damping a lies just below that: the
# ladder's next tilt can put the composed Λ(b) in the thousands where a tilt a few per
# cent above a keeps it near Λ(a). σ = 0.9, q = 1e-3, N = 10⁴, δ = 1e-12: a = 10, the
# period from b = 13.3 was 5528, from b = 11.25 it is 32 (see _refine_period).
_B_FINE = 2.0 ** -np.arange(1, 7)
# Refine the period only where the ladder's is at least this many times the aliasing from
# below's (which the refinement cannot go under): a smaller gain is not worth a phase sum.
_REFINE_FROM = 2.0
# Frequency truncation: e^{−τ²Ω²/2} = e^{−X} at the last node Ω. The truncation term is
# then C·e^{−X}/(2πXΩ), C = M(a)e^{−aε} the trapezoid's scale. It is kept below
# e^{−8}·tol·δ, as far below tol·δ as the aliasing (``log_margin``): with
# L = log(C/δ) + 8 − log(tol) at the planned ε (the plan's ``log_trunc``),
# X = L − log(2π·_TRUNC_MIN·Ω) within [_TRUNC_MIN, _TRUNC_EXP] (:func:`smoothing_width`).
# A larger X only widens τ (both smoothing terms of the bounds grow like τ²) or costs
# nodes; the fixed X = 30 this replaces was right for the largest scale the damping
# allows (C = e^{_LOG_SCALE_MAX}·δ) at the smallest tol only.
_TRUNC_EXP = 30.0
_TRUNC_MIN = 10.0
# Largest log of (trapezoid scale M(a) e^{−aε}) / δ the damping may bring.
_LOG_SCALE_MAX = 12.0
# The most nodes a pass takes (glrt_jax._src.composition.NODES end there), and past
# FEW_PHASES (padded) phases MANY_PHASES_MAX_NODES (see composition; max_nodes).
MAX_NODES = 1 << 18
MANY_PHASES_MAX_NODES = 1 << 16
FEW_PHASES = 8
# A damping whose nodes (at the widest smoothing the tolerance allows) exceed the most a
# pass takes by more than this factor is out of reach: at the most nodes its smoothing,
# and with it the smoothing's share of the error, is wider by the square of that factor,
# 64 times the planned share of the tolerance.
_REACH = 8.0
# Share of the tolerance given to the smoothing.
_TAU_SHARE = 0.35
# δ below which a δ query's accuracy is absolute, ``tol·SMALL_DELTA`` (no guarantee uses a
# smaller δ; the plan's failure mass alone is about 2.8·10⁻²³): a relative ``tol`` at a δ
# of 10⁻³⁶ asked for the largest sizes, and got an upper bound at the failure mass anyway.
SMALL_DELTA = 1e-15
# The loosest relative accuracy such a plan sizes for (the sizing's pictures are first
# order in it).
_TOL_LOOSEST = 0.1
# Phases per batch of the planning map (from _LARGE_FROM phases on, padded, _LARGE_BATCH:
# fewer steps of its scan, e.g. of the range bisection's loop; K = 10⁴ plan 2.25 → 2.1 s;
# smaller buckets keep 8, which computes fewer padding phases), and per block of the sums
# over phases after it.
_BATCH, _LARGE_BATCH, _LARGE_FROM = 8, 32, 1024
_SUM_BLOCK = 128
# From this many phases (padded) on, half the planning points per phase: K = 10⁴ distinct
# phases 9.7–9.9 → 8.1 s warm (2-core CPU, same-minute A/B), peak memory 1.05 → 0.77 GB,
# the upper bound within 5e-7 relative (the planning points place the grids; the bounds
# come from the grids). GLRT with d > 1 (losses.GLRT_LOSSES), whose planning points each
# cost the exact non-central χ² tails and a root of ℓ (most of its plan), takes a quarter:
# the tables' K-phase schedule at d = 10, warm, K = 100 0.105 → 0.080 s, K = 1000 0.78–0.82
# → 0.60–0.61 s, K = 10⁴ 7.3 → 5.35 s (first call 16.4 → 13.8 s), brackets 3–4 % wider
# (an eighth: 0.73 and 6.8 s, the coarser plan asking for larger sizes). NPO's points are
# closed forms: a quarter there made K = 10⁴ slower (3.8 → 5.0–6.7 s) for the same reason.
_THIN_FROM = 64
_THIN, _THIN_GLRT = 2, 4


class Plan(NamedTuple):
    """The plan of one query (arrays only; leading axis: direction, ``n_dir``).

    Attributes:
      a: damping of the trapezoid rule (a Chernoff tilt ≤ the saddle point).
      W: period of the trapezoid rule (node spacing ``2π/W``).
      tau_tol: the widest smoothing the tolerance allows (it sizes ``j_need``).
      log_trunc: ``log(C/δ) + 8 − log(tol)`` at the damping ``a`` (C its scale, δ the
        planned one), which sets the frequency truncation (:func:`smoothing_width`).
      s_a: spread of the composed loss under the tilt ``a``.
      sup: the largest composed loss of the grids (above it only failure mass is left).
      xp, pp: per phase (K, n_dir, P): planning points and split pmf.
      eps_ref: the planning guess of ε (from below); eps_ch: the Chernoff bound of ε
        (ε queries; the target ε for δ queries).
      bound, estimate: a certified upper bound on each direction's answer (ε or δ) from
        the planning pmf (:func:`_certified_chernoff`), and its saddle-point estimate:
        where the others' bounds lie below one direction's answer, that direction alone
        decides the answer.
      b_need, j_need: grid points and nodes the tolerance asks for (0 for directions
        that cannot decide the answer).
      b_alias: the tilt ``b > a`` whose aliasing bound from above the period ``W`` was
        planned with (one of the bound tilts: the others are relative to ``a``, and a
        loss bounded just below ``ε + W`` may need a far larger one).
      b_ch: the planner's Chernoff optimum (a bound tilt too: where the damping ``a`` had
        to fall back, the Chernoff cap on the upper bound needs it; see
        :func:`glrt_jax._src.inversion.query_bounds`).
    """

    a: Any
    W: Any
    tau_tol: Any
    log_trunc: Any
    s_a: Any
    sup: Any
    xp: Any
    pp: Any
    eps_ref: Any
    eps_ch: Any
    bound: Any
    estimate: Any
    b_need: Any
    j_need: Any
    b_alias: Any
    b_ch: Any


def _phase_range(loss, value, directions, mu, q, log_m):
    """One phase's loss range per direction, ``(lo, hi)`` (:func:`losses.probe_ranges`)."""
    bound = 0.5 * mu * mu + 40.0 * mu + 10.0 - jnp.log(q)
    return losses.probe_ranges(loss, value, directions, mu, q, jnp.exp(log_m), bound)


def _phase_support(loss, value, directions, mu, q, log_m, thin, ends):
    """Ranges, planning points, split pmf and the P-mass outside the range of one phase,
    per direction (``ends``: its range, :func:`_phase_range`)."""
    lo, hi = ends
    is_add = grids.direction_flags(directions)

    # Every direction's tails in one call (see grids.bins), the rest per direction.
    xs = jax.vmap(lambda lo_i, hi_i: grids.planning_points(lo_i, hi_i, thin))(lo, hi)
    pi, kappa, outside = grids.bins(loss, value, is_add, mu, q, xs)
    many = thin > 1  # (thinned points: many phases, see many_phases)
    ps = jax.vmap(lambda p, k, x: grids.split(p, k, x, many)[0])(pi, kappa, xs)
    return lo, hi, xs, ps, outside


def _phase_sum(fn, nf, xp, pp, trailing=()):
    """``Σ_k n_k fn(xp_k, pp_k)`` (``fn``: one phase's (n_dir, P) arrays to
    (n_dir, *trailing)).

    A scan over blocks of phases, so that no (K, n_dir, P) temporary is formed (at
    K = 10⁴ each would be hundreds of MB); blocks of padding phases are skipped.
    """
    kk = nf.shape[0]
    size = phase_block(kk, _SUM_BLOCK)
    blocks = (
        nf.reshape(kk // size, size),
        xp.reshape((kk // size, size) + xp.shape[1:]),
        pp.reshape((kk // size, size) + pp.shape[1:]),
    )

    def body(acc, block):
        n_b, x_b, p_b = block

        def add(acc):
            per_phase = vmap_block(lambda args: fn(*args), (x_b, p_b))
            return acc + jnp.einsum("k,kd...->d...", n_b, per_phase)

        return lax.cond(jnp.any(n_b > 0), add, lambda acc: acc, acc), None

    return lax.scan(body, jnp.zeros(xp.shape[1:2] + tuple(trailing)), blocks)[0]


def _certified_chernoff(ts, lam, lam_tot, lo, hi, outside, nf, query, target):
    """A certified upper bound on each direction's answer from the planning pmf, (n_dir,):
    on ε(δ = target) for ε queries, on δ(ε = target) for δ queries.

    On its range ``[lo, hi]`` a round's split pmf dominates the round (a two-point
    distribution per bin with the bin's P- and Q-masses), so for ``t ≥ 0`` its
    ``Σ_j p_j e^{t x_j}`` bounds ``E_P[e^{tL}; lo ≤ L ≤ hi]`` from above: ``e^{tL} =
    u^{−t}`` is convex in ``u = e^{−L}``, whose mean over the bin the split keeps, at the
    bin's ends. Let ``A`` be the event that every round's loss lies in its range. Then
    ``δ(ε) ≤ P(Aᶜ) + E[(1 − e^{ε−S})₊; A] ≤ Σ_k n_k out_k + κ_t e^{Λ(t) − tε}``, with
    ``(1 − e^{−y})₊ ≤ κ_t e^{ty}`` for ``κ_t = t^t/(1 + t)^{1+t}`` (the maximum of
    ``(1 − e^{−y}) e^{−ty}``, at ``e^{−y} = 1/(1 + t)``) and ``Λ = Σ_k n_k log M_k`` the
    planned cumulant sum; minimised over the planner's tilts for δ, and for ε:
    ``ε ≤ min_t (Λ(t) + log κ_t − log(δ − Σ_k n_k out_k))/t``.

    Rounding: each round's ``log M_k`` (a log-sum of at most 1024 terms whose arguments
    round by 2u of ``|t x| + |log p|``) and the masses behind it are charged ``1e-9 +
    1e-10(|log M_k| + t max|x|)``, far more than their float64 errors; the sum over the
    phases ``1e-10 Σ_k n_k|log M_k|`` (``γ_K`` for K ≤ 10⁵ phases); the result ``1e-12``
    relative.
    """
    n_tot = jnp.sum(nf)
    x_max = jnp.maximum(jnp.abs(lo), jnp.abs(hi))  # (K, n_dir)
    margin = (
        1e-9 * n_tot
        + 1e-10 * jnp.einsum("k,kdt->dt", nf, jnp.abs(lam))
        + 1e-10 * ts[None, :] * jnp.einsum("k,kd->d", nf, x_max)[:, None]
    )
    out_tot = jnp.einsum("k,kd->d", nf, outside) * (1.0 + 1e-9)
    log_c = -ts * jnp.log1p(1.0 / ts) - jnp.log1p(ts)  # t log t − (1 + t) log(1 + t)
    core = lam_tot + margin + log_c[None, :]  # log of the bound on κ_t E[e^{tS}; A]
    if query == "delta":
        inside = jnp.exp(jnp.min(core - ts[None, :] * target, axis=-1))
        return jnp.minimum((out_tot + inside) * (1.0 + 1e-12), 1.0)
    left = target - out_tot
    log_left = jnp.log(jnp.where(left > 0, left, 1.0))
    eps = jnp.min((core - log_left[:, None]) / ts[None, :], axis=-1)
    eps = jnp.maximum(eps, 0.0) * (1.0 + 1e-12)
    return jnp.where((left > 0) & jnp.isfinite(eps), eps, jnp.inf)


def failure_log_mass(query, target, tol, n_tot):
    """``log m``: each round's range leaves out P-tails of at most ``m`` per side (the
    failure mass, at most ``2Nm``; ``n_tot`` the schedule's total steps N).

    ε queries: ``m ≈ 10⁻⁴·tol·δ/N`` (a smaller m would only widen the range, and the
    period W with it: nodes ∝ W). δ queries, whose δ is not known yet and may be far
    below 10⁻¹⁵: ``10⁻¹²·e⁻²⁵/N``.
    """
    if query == "epsilon":
        return jnp.log(target) + jnp.log(tol) - 10.0 - jnp.log(n_tot)
    return jnp.log(1e-12) - 25.0 - jnp.log(n_tot)


def many_phases(phases: int) -> bool:
    """Whether a program over ``phases`` (padded) phases is one of many: its per-phase work
    is what it costs (thinned planning points, :func:`thinning`; per-point values
    computed once, :func:`glrt_jax._src.numerics.computed_once`). Programs of fewer phases
    keep the plain forms, and with them their answers bit for bit."""
    return phases >= _THIN_FROM


def thinning(phases: int, loss: str) -> int:
    """The planning points' ``thin`` (:func:`glrt_jax._src.grids.planning_points`) of a
    schedule of ``phases`` (padded) phases of the static ``loss``
    (:func:`glrt_jax._src.losses.program_key`)."""
    if not many_phases(phases):
        return 1
    return _THIN_GLRT if loss in losses.GLRT_LOSSES else _THIN


def measure_phases(loss, values, mu, q, n, log_m, thin):
    """Each phase's round measured on its planning points, per direction:
    ``(lo, hi, xp, pp, lam, outside)``.

    ``lo``, ``hi``: the range (P-tails beyond it at most ``e^{log_m}`` per side);
    ``xp``, ``pp``: planning points and split pmf, (K, n_dir, P); ``lam``: the split
    pmf's cumulant generating function at the planner's tilts, (K, n_dir, T);
    ``outside``: the P-mass outside the range, (K, n_dir). Phases with no steps may
    repeat another phase's values (finite; their weight in every sum is 0).
    """
    directions = losses.loss_directions(loss)
    ts = jnp.asarray(_T_POS)
    kk = mu.shape[0]
    value = losses.phase_value(loss, values)

    def one(m, r, dk, ends):
        lo, hi, xp, pp, out = _phase_support(loss, value(dk), directions, m, r, log_m, thin, ends)
        return lo, hi, xp, pp, jax.vmap(lambda x, w: grids.pmf_log_mgf(x, w, ts))(xp, pp), out

    # The ranges come first, for all phases at once: the range's bisection is branch-free
    # (closed-form tails, or the tails' Chernoff bounds), and within a batch its 48 steps
    # on a few numbers each are hundreds of small kernels per batch (one phase at a time,
    # losses.batch_phases: GLRT d = 10, the tables' K-phase schedule, per half of K = 1000
    # alone, the per-phase part 257 → 215 ms; K = 10⁴ warm 5.37–5.66 → 5.20–5.35 s). NPO
    # in batches of 32, the same schedule, a half's per-phase part alone (best of 10–15,
    # two processes each, 2-core CPU): K = 10⁴ 661–665 → 623–626 ms, K = 1000 83–98 →
    # 76–77 ms. The same answers, bit for bit.
    ranges = jax.vmap(lambda m, r, dk: _phase_range(loss, value(dk), directions, m, r, log_m))(
        mu, q, values
    )

    # Phases in batches (a vmap within, or one phase per batch where the loss branches by
    # phase, losses.batch_phases; a scan across: the (T, P) exponentials of every
    # phase at once would be gigabytes at K = 10⁴). A batch of padding phases (n = 0)
    # is not computed: it repeats the previous batch, whose weight there is 0. (The
    # first batch is always computed, inside the scan: one copy of ``one`` in the
    # compiled program.)
    size = phase_block(kk, _LARGE_BATCH if kk >= _LARGE_FROM else _BATCH)
    size = size if losses.batch_phases(loss) else 1
    batches = [v.reshape((kk // size, size)) for v in (mu, q, n, values)]
    ranges = jax.tree_util.tree_map(lambda v: v.reshape((kk // size, size) + v.shape[1:]), ranges)
    first = jnp.arange(kk // size) == 0
    # Zeros shaped like a batch of ``one``'s output (written out: jax.eval_shape would trace
    # ``one`` a second time; a mismatch fails the scan's carry check).
    n_dir = len(directions)
    ends = jnp.zeros((size, n_dir))
    pts = jnp.zeros((size, n_dir, grids.n_planning(thin)))
    init = (ends, ends, pts, pts, jnp.zeros((size, n_dir, ts.shape[0])), ends)

    def body(prev, batch):
        m, r, k, dk, is_first, span = batch

        def measure():
            return vmap_block(lambda args: one(*args), (m, r, dk, span))

        out = lax.cond(jnp.any(k > 0) | is_first, measure, lambda: prev)
        return out, out

    _, out = lax.scan(body, init, (*batches, first, ranges))
    return tuple(v.reshape((kk,) + v.shape[2:]) for v in out)


def max_nodes(phases: int) -> int:
    """The most nodes a pass over ``phases`` (padded) phases takes."""
    return MAX_NODES if phases <= FEW_PHASES else MANY_PHASES_MAX_NODES


def _log_trunc(log_scale, tol):
    """The plan's ``log_trunc`` at a damping whose trapezoid scale is ``e^{log_scale}·δ``;
    an unknown scale keeps the former fixed X = _TRUNC_EXP (inf clips to it in both uses)."""
    log_trunc = log_scale + 8.0 - jnp.log(tol)
    return jnp.where(jnp.isfinite(log_trunc), log_trunc, jnp.inf)


def _nodes_for(log_scale, tau, W, tol):
    """Nodes the trapezoid rule needs at a damping of scale ``e^{log_scale}·δ``, smoothing
    ``τ`` and period ``W``: sized with X = log_trunc, at least the X that
    :func:`smoothing_width` then takes."""
    x = jnp.clip(_log_trunc(log_scale, tol), _TRUNC_MIN, _TRUNC_EXP)
    return jnp.sqrt(2.0 * x) / tau * W / (2.0 * math.pi)


def plan(
    loss,
    values,
    mu,
    q,
    n,
    query,
    target,
    tol,
    hint=jnp.nan,
    tau_cap=jnp.inf,
    floor=0.0,
    measured=None,
):
    """The plan of one query: tilt, window, smoothing and the sizes they need (no sizes used).

    ``mu``, ``q``, ``n``: per phase, shape (K,). ``loss``, ``values``: the round's loss,
    :func:`glrt_jax._src.losses.program_key`'s static key and per-phase values (K,).
    ``hint``/``tau_cap``/``floor``: see :func:`glrt_jax._src.composition.compose_query`.
    ``measured``: :func:`measure_phases`' output for these phases, if already at hand
    (computed here otherwise). Every field is per direction of the neighbouring relation
    (leading axis), except the per-phase planning points and pmf.
    """
    nf = n.astype(jnp.float64)
    n_tot = jnp.sum(nf)
    log_target = jnp.log(target) if query == "epsilon" else jnp.log(1e-12)
    ts = jnp.asarray(_T_POS)
    if measured is None:
        log_m = failure_log_mass(query, target, tol, n_tot)
        measured = measure_phases(loss, values, mu, q, n, log_m, thinning(mu.shape[0], loss))
    # lo, hi, outside: (K, n_dir); xp, pp: (K, n_dir, P); lam: (K, n_dir, T)
    lo, hi, xp, pp, lam, outside = measured
    lam_tot = jnp.einsum("k,kdt->dt", nf, lam)
    many = many_phases(mu.shape[0])

    def tilted_var(x, p, tt):
        logw = grids.safe_log(p) + tt * x
        w = jnp.exp(logw - logsumexp(logw))
        m1 = jnp.sum(w * x)
        return jnp.sum(w * (x - m1) ** 2)

    def composed_sd(tt):  # (n_dir,) spread of S under the tilt tt (per direction)
        var = _phase_sum(lambda x, p: jax.vmap(tilted_var)(x, p, tt), nf, xp, pp)
        return jnp.sqrt(jnp.maximum(var, 1e-30))

    if query == "epsilon":
        eps_ch = (lam_tot - log_target) / ts
        it = jnp.argmin(eps_ch, axis=-1)
        eps_ch_min = jnp.min(eps_ch, axis=-1)
        # Planning needs ε from below: the saddle-point correction of the Chernoff bound
        # (δ ≈ e^{Λ(t)−tε}/(t(1+t)√(2π)s)), with a margin.
        t_s = ts[it]
        corr = jnp.log(t_s * (1.0 + t_s) * math.sqrt(2.0 * math.pi) * composed_sd(t_s)) / t_s
        eps_sp = eps_ch_min - jnp.maximum(corr, 0.0)
        estimate = eps_sp
        eps_ref = jnp.maximum(0.8 * eps_sp, 0.1 * eps_ch_min)
        eps_ref = jnp.where(jnp.isfinite(hint), jnp.minimum(eps_ref, hint), eps_ref)
        eps_ref = jnp.maximum(eps_ref, 1e-9)
        log_delta_ref = jnp.full(eps_ref.shape, log_target)
        tol_d = jnp.broadcast_to(tol, eps_ref.shape)  # per direction
    else:
        obj = lam_tot - ts * target
        it = jnp.argmin(obj, axis=-1)
        # δ(ε) to a relative tol: an ε-error of tol/a (a the saddle point).
        eps_ref = 1.0 / ts[it]
        eps_ch_min = jnp.full(eps_ref.shape, target)
        log_delta_ref = jnp.min(obj, axis=-1) - 5.0
        # The saddle-point estimate of δ (as for ε queries above).
        t_s = ts[it]
        corr = jnp.log(t_s * (1.0 + t_s) * math.sqrt(2.0 * math.pi) * composed_sd(t_s))
        estimate = jnp.exp(jnp.min(obj, axis=-1) - corr)
        # A re-plan's hint is the first answer's δ (halved): the Chernoff bound can lie
        # many orders of magnitude above δ (a bimodal tilted loss: small q, tiny δ), and a
        # scale within e^{_LOG_SCALE_MAX} of it is not one within reach of δ. One round at
        # σ = 1.348, q = 0.00269, δ(0.1525) = 3.21e-11: a = 17.8 left the estimate 16 % high.
        has_hint = jnp.isfinite(hint) & (hint > 0)
        log_hint = jnp.log(jnp.where(has_hint, hint, 1.0))
        log_delta_ref = jnp.where(has_hint, jnp.minimum(log_delta_ref, log_hint), log_delta_ref)
        # Below SMALL_DELTA the aim is the absolute accuracy tol·SMALL_DELTA: the error
        # terms are sized at that δ, and the discretisation for a relative accuracy of
        # tol·SMALL_DELTA/δ, δ from the Chernoff bound e^{min obj} ≥ δ.
        log_delta_ref = jnp.maximum(log_delta_ref, math.log(SMALL_DELTA))
        log_loose = jnp.log(tol) + jnp.maximum(math.log(SMALL_DELTA) - jnp.min(obj, axis=-1), 0.0)
        tol_d = jnp.maximum(tol, jnp.exp(jnp.minimum(log_loose, math.log(_TOL_LOOSEST))))
    # Damping a and period W of the trapezoid rule. Aliasing from below is at most
    # e^{−aW}/(1 − e^{−aW}) and from above M(b) e^{−bε}/(e^{(b−a)W} − 1) for b > a; both
    # must stay far below tol·δ. Choose, among a no larger than the saddle point and with
    # the scale M(a) e^{−aε} within e^{_LOG_SCALE_MAX} of δ (rounding errors are relative to
    # the scale), the one that needs the fewest nodes
    # (∝ W/τ).
    log_margin = 8.0 - jnp.log(tol) - log_delta_ref[:, None]  # (n_dir, 1)
    w_below = log_margin / ts[None, :]
    # The aliasing from above at the queried ε (δ queries; their eps_ref, 1/a at the saddle
    # point, can exceed it near the bulk of the loss: σ = 1.98, q = 0.1, N = 10⁴, δ(15) ≈ 0.36
    # then got a period that let e^{aW}δ(ε + W) ≈ 0.14 into the upper bound at tol = 1e-5).
    eps_alias = eps_ref if query == "epsilon" else jnp.minimum(eps_ref, target)
    if query == "epsilon":
        # A certified lower bound on ε (a re-plan's first bracket) above the guess: the
        # aliasing from above and the scale are at most what they are there. The guess
        # from below can put them far too high: σ = 0.9, q = 1e-4, N = 10⁶, δ = 1e-9 got
        # a = 23.7 and W = 1734 from a guess of 0.43, [0.85642, 0.85909] at 2¹⁸ nodes;
        # planned at the first bracket's 0.8564, a = 13.3 and W = 2.7 give [0.8584973,
        # 0.8585017]. (The guess itself still sizes the smoothing and the points.)
        eps_alias = jnp.maximum(eps_ref, floor)
    # The upper bound's smoothing moves ε by about (1 + a)τ²/2 (saddle-point picture:
    # f_S/|δ_S'| ≈ 1 + a at ε; see inversion.query_bounds).
    tau_c = jnp.sqrt(_TAU_SHARE * (tol_d * eps_ref)[:, None] / (0.5 * (1.0 + ts))[None, :])
    # The bounds charge the aliasing from above of the smoothed loss S + τZ, whose
    # generating function at b carries e^{τ²b²/2} (inversion.query_bounds): with it, a
    # loss bounded by sup gets a period that puts ε + W clear of sup, by a few τ. Without
    # it the ladder's largest tilts put ε + W within 1e-5 of sup (one round at σ = 0.9,
    # q = 1e-4, δ(0.013885) ≈ 1e-9: W = 1.61115, the smoothing 5.7e-6 wide), where the
    # smoothed top of the loss aliases: 12 % of δ in the lower bound.
    tau_p = jnp.minimum(tau_cap, tau_c)  # (n_dir, T) over a
    num = lam_tot - ts[None, :] * eps_alias[:, None] + log_margin  # (n_dir, T) at b
    num = num[:, None, :] + 0.5 * (tau_p[:, :, None] * ts[None, None, :]) ** 2  # [a, b]
    gap = ts[None, :] - ts[:, None]  # [a, b]
    w_ab = jnp.where(gap[None] > 0, num / jnp.where(gap > 0, gap, 1.0)[None], jnp.inf)
    w_above = jnp.min(w_ab, axis=-1)  # (n_dir, T) over a
    w_cand = jnp.maximum(jnp.maximum(w_below, w_above), 1e-3)
    # The scale at the ε the inversion is evaluated at: the planning guess for ε queries;
    # for a δ query's re-plan, the queried ε (its eps_ref, 1/a at the saddle point, is a
    # width; σ = 8.5, q = 2.4e-5, one round, δ(2.3e-5) = 5.35e-15: 3.3e-3 above δ at eps_ref,
    # 2.2e-4 at ε). A first plan takes the larger of the two: at ε = 0 (the advantage) the
    # queried ε picks another damping and a far wider bracket (GLRT's advantage at σ = 1,
    # q = 0.01, N = 1000, d = 10: 2.6e-5 wide instead of 1e-7, still within the
    # tolerance), while far above 1/a no damping keeps the scale at eps_ref near δ and the
    # saddle point's own needs the largest sizes (GLRT, d = 10, σ = 1, q = 0.01, N = 1000,
    # δ(1) ≈ 10⁻²⁶: 16384 points and 2¹⁸ nodes at eps_ref, 8192 and 16384 at ε).
    eps_scale = eps_alias if query == "epsilon" else eps_ref
    if query == "delta":
        eps_scale = jnp.where(jnp.isfinite(hint), target, jnp.maximum(eps_ref, target))
    log_scale = lam_tot - ts[None, :] * eps_scale[:, None] - log_delta_ref[:, None]
    below_saddle = ts[None, :] <= ts[it][:, None]
    if query == "delta":
        # At an ε below the composed loss's mean (δ(0) is the attacker's advantage) the
        # Chernoff saddle point is at 0 and would force a → 0 and a huge period W; any
        # damping in (0, 1] whose scale stays within e^{_LOG_SCALE_MAX} of δ will do.
        below_saddle = below_saddle | (ts[None, :] <= 1.0)
    usable = below_saddle & jnp.isfinite(w_cand) & (ts < ts[-1])[None, :]
    ok = usable & (log_scale <= _LOG_SCALE_MAX)
    cost = jnp.where(ok, w_cand / tau_c, jnp.inf)
    # No damping keeps the scale within e^{_LOG_SCALE_MAX} of δ (e.g. a tiny loss scale,
    # whose factor (1 − e^{ε−S})₊ puts δ far below the Chernoff picture: one round at
    # σ = 10, q = 1e-4): the Chernoff optimum. Where that has no period (the ladder's last
    # tilt: a bounded loss's optimum, the add direction's there, lies beyond it), the
    # usable tilt with the smallest scale (the rounding errors are relative to it).
    it_usable = jnp.take_along_axis(usable, it[:, None], axis=-1)[:, 0]
    any_usable = jnp.any(usable, axis=-1)
    smallest = jnp.argmin(jnp.where(usable, log_scale, jnp.inf), axis=-1)
    fallback = jnp.where(it_usable | ~any_usable, it, smallest)
    fallback_scale = log_scale  # (the scales the fallback was chosen by)
    if query == "epsilon":
        # A re-plan knows ε (its hint is half the first answer's estimate): the usable tilt
        # with the smallest scale there, the Chernoff optimum *at that ε*. The optimum over
        # ε (``it``) tilts for the Chernoff bound's ε, far above the true one where the
        # tilted loss is bimodal (small q, tiny δ), and its scale at the true ε is larger:
        # one round at σ = 1.348, q = 0.00269, δ = 3.2e-11 got a = 56 and an upper bound
        # 0.9 % above ε; a = 42 brings it within 1.5e-5.
        scale_est = lam_tot - ts[None, :] * (2.0 * hint) - log_delta_ref[:, None]
        at_est = jnp.argmin(jnp.where(usable, scale_est, jnp.inf), axis=-1)
        known = jnp.isfinite(hint) & any_usable
        fallback = jnp.where(known, at_est, fallback)
        fallback_scale = jnp.where(known[:, None], scale_est, log_scale)
    # ... unless that damping is out of reach of the nodes (_REACH): then, of the usable
    # ones within reach, the one with the smallest scale (none such: the fallback). The
    # fallback's scale can be a fraction smaller at a period thousands of times longer (a
    # heavy right tail, few sampled rounds: σ = 0.9, q = 1e-6, N = 10⁶, δ = 1e-9, where
    # a = 1333 has the scale e^{14.3} and the period 760, a = 1000 e^{14.6} and 0.088: the
    # former's bracket was [0.0070, 0.0120] at 2¹⁸ nodes, the latter's is
    # [0.0070990, 0.0071002] at 4096).
    most = _REACH * max_nodes(mu.shape[0])
    in_reach = _nodes_for(log_scale, tau_p, w_cand, tol) <= most
    reachable = usable & in_reach
    closest = jnp.argmin(jnp.where(reachable, fallback_scale, jnp.inf), axis=-1)
    fb_in_reach = jnp.take_along_axis(in_reach, fallback[:, None], axis=-1)[:, 0]
    fallback = jnp.where(fb_in_reach | ~jnp.any(reachable, axis=-1), fallback, closest)
    ia = jnp.where(jnp.any(ok, axis=-1), jnp.argmin(cost, axis=-1), fallback)
    a = ts[ia]
    # The b of the chosen a's bound from above (the next tilt up where none is finite).
    ib = jnp.argmin(jnp.take_along_axis(w_ab, ia[:, None, None], axis=1)[:, 0, :], axis=-1)
    b_alias = ts[jnp.maximum(ib, jnp.minimum(ia + 1, ts.shape[0] - 1))]
    W = jnp.take_along_axis(w_cand, ia[:, None], axis=-1)[:, 0]
    w_low = jnp.take_along_axis(w_below, ia[:, None], axis=-1)[:, 0]
    tau_a = jnp.take_along_axis(tau_p, ia[:, None], axis=-1)[:, 0]
    W, b_alias = _refine_period(
        a, W, b_alias, w_low, eps_alias, log_margin[:, 0], tau_a, nf, xp, pp
    )
    W = jnp.where(jnp.isfinite(W), W, 100.0)
    tau_tol = tau_a
    # The truncation's budget from the scale at the chosen damping (see _TRUNC_EXP).
    scale_a = jnp.take_along_axis(log_scale, ia[:, None], axis=-1)[:, 0]
    log_trunc = _log_trunc(scale_a, tol)

    s_a = composed_sd(a)

    # Points per round: the split adds at most Σ_k n_k (Σ c)³/(0.81 B²)/4 of tilted
    # variance; it moves ε by about (1 + a)/2 times that. Give it 0.3 tol ε.
    def share_cubed(x, p):  # (n_dir,) (Σ c)³ of one phase's companding shares
        share = jax.vmap(lambda xx, pv, tt: jnp.sum(grids.compand_counts(xx, pv, tt, many)[0]))
        return share(x, p, a) ** 3

    v_b = _phase_sum(share_cubed, nf, xp, pp) / (0.81 * 4.0)
    b_need = jnp.sqrt(v_b * (1.0 + a) / (2.0 * 0.3 * tol_d * eps_ref))
    j_need = _nodes_for(scale_a, tau_tol, W, tol)
    # Only the directions that can decide the answer ask for accuracy; the others are
    # computed at whatever sizes (their bounds stay valid, and far below).
    if query == "epsilon":
        relevant = eps_ch_min >= 0.5 * jnp.max(eps_ch_min)
    else:
        log_ch = jnp.min(obj, axis=-1)
        relevant = log_ch >= jnp.max(log_ch) - math.log(100.0)
    b_need = jnp.where(relevant, b_need, 0.0)
    j_need = jnp.where(relevant, j_need, 0.0)
    return Plan(
        a=a,
        W=W,
        tau_tol=tau_tol,
        log_trunc=log_trunc,
        s_a=s_a,
        sup=jnp.einsum("k,kd->d", nf, hi),
        xp=xp,
        pp=pp,
        eps_ref=eps_ref,
        eps_ch=eps_ch_min,
        bound=_certified_chernoff(ts, lam, lam_tot, lo, hi, outside, nf, query, target),
        estimate=estimate,
        b_need=b_need,
        j_need=j_need,
        b_alias=b_alias,
        b_ch=ts[it],
    )


def _refine_period(a, W, b_alias, w_low, eps_alias, log_margin, tau, nf, xp, pp):
    """``(W, b_alias)``: the period of damping ``a`` (per direction) with the aliasing from
    above bounded at the tilts ``a·(1 + 2^−k)`` (:data:`_B_FINE`) too, where that is shorter.

    The ladder's period bounds the aliasing from above with the Chernoff bound of the
    smoothed loss (``Λ(b) + τ²b²/2``, ``tau`` the planned smoothing per direction) at its
    own tilts ``b > a``, the first of them 1.33·a. The composed ``Λ(b)`` can explode
    between (a Gaussian right tail at small q; see :data:`_B_FINE`): the period is then
    thousands of times what a tilt just above ``a`` needs, and the nodes (``∝ W/τ``) or
    the smoothing width (``∝ W/J``) with it. The tilt found is the one the period is
    planned with (``b_alias``), so the bounds (:func:`bound_tilts`) charge the aliasing at
    it. One phase sum of the planning pmf at ``len(_B_FINE)`` tilts, skipped
    (``lax.cond``) where the ladder's period is within :data:`_REFINE_FROM` of the
    aliasing from below ``w_low``, which no tilt above ``a`` shortens.
    """
    fine = a[:, None] * (1.0 + jnp.asarray(_B_FINE))[None, :]  # (n_dir, F)

    def refine(_):
        lam = _phase_sum(
            lambda x, p: jax.vmap(grids.pmf_log_mgf)(x, p, fine), nf, xp, pp, fine.shape[1:]
        )
        # (the ladder's w_ab in plan, at the fine tilts)
        num = (
            lam - fine * eps_alias[:, None] + log_margin[:, None] + 0.5 * (tau[:, None] * fine) ** 2
        )
        w_f = num / (fine - a[:, None])
        w_f = jnp.where(jnp.isfinite(w_f), w_f, jnp.inf)
        i_f = jnp.argmin(w_f, axis=-1)
        w_new = jnp.maximum(jnp.maximum(jnp.min(w_f, axis=-1), w_low), 1e-3)
        shorter = w_new < W
        b_f = jnp.take_along_axis(fine, i_f[:, None], axis=-1)[:, 0]
        return jnp.where(shorter, w_new, W), jnp.where(shorter, b_f, b_alias)

    worth = jnp.any(W > _REFINE_FROM * w_low)
    return lax.cond(worth, refine, lambda _: (W, b_alias), None)


def smoothing_width(p: Plan, J: int):
    """τ per direction: the narrowest smoothing that ``J`` nodes resolve.

    Truncating the frequency integral at ``Ω = JΔω`` costs ``C e^{−X}/(2πXΩ)`` with
    ``X = τ²Ω²/2`` and C the trapezoid's scale; ``X = L − log(2π·10·Ω)`` (``L`` the
    plan's ``log_trunc``), within [10, 30], keeps that below ``e^{−8}·tol·δ`` at the
    plan's scale (the bounds charge the term whatever it is). Both smoothing terms of
    the bounds shrink like τ², so the narrowest width is the tightest; when ``J`` meets
    the plan's ``j_need`` it is at most ``tau_tol``, and under ``jit`` (sizes fixed) it
    may be wider.
    """
    omega_max = J * 2.0 * jnp.pi / p.W
    x = p.log_trunc - jnp.log(2.0 * jnp.pi * _TRUNC_MIN * omega_max)
    x = jnp.clip(x, _TRUNC_MIN, _TRUNC_EXP)
    return jnp.sqrt(2.0 * x) / omega_max


def bound_tilts(p: Plan):
    """Tilts for the Chernoff and aliasing bounds, (n_dir, nb): a + multiples of 1/s,
    multiples of a, 0 ≤ b ≤ a, the tilt the period was planned with, and the planner's
    Chernoff optimum."""
    a = p.a
    g = jnp.asarray(_U_MULT)
    b_up = a[:, None] + g[None, :] / p.s_a[:, None]
    b_mult = a[:, None] * jnp.asarray(_A_MULT)[None, :]
    b_dn = a[:, None] * jnp.asarray([0.0, 0.25, 0.5, 0.75, 0.9])[None, :]
    extra = [a[:, None], p.b_alias[:, None], p.b_ch[:, None]]
    return jnp.concatenate([b_up, b_mult, b_dn, *extra], axis=-1)
