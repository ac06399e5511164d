"""Per-round grids of the composition engine: where each round's loss is discretised.

A round of one phase (Poisson-subsampled Gaussian, one direction of the neighbouring
relation) is discretised on its own non-uniform grid of points ``x_0 < … < x_B``. This
module owns:

* the *planning points* (uniform, geometric from each end and geometric around 0), on
  which the planner measures the round's mass before any size is chosen;
* the P- and Q-masses of the bins between consecutive points (:func:`bins`, from the
  exact loss tails of :mod:`glrt_jax._src.losses`);
* the two discretisations whose composition brackets the truth: :func:`split`
  (connect-the-dots, dominates the round: δ can only grow) and :func:`merge` (one atom
  per bin at ``log(π_b/κ_b)``, post-processing of the round: dominated by it);
* the companded grid of ``B + 1`` points, density ∝ (tilted mass density)^{1/3}
  (:func:`companded_grid`), which minimises the split's added variance for a given B.

Why each is a bound, and how the grids enter the transform, is in
:mod:`glrt_jax._src.composition`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import logsumexp

from glrt_jax._src import losses
from glrt_jax._src.numerics import computed_once

# Planning points per direction (uniform, geometric from each end, geometric around 0),
# divided by :func:`planning_points`'s ``thin``.
_N_UNIFORM = 256
_N_GEOM = 192


def n_planning(thin: int = 1) -> int:
    """Planning points per direction in all (:func:`planning_points`)."""
    return _N_UNIFORM // thin + 4 * (_N_GEOM // thin)


def safe_log(v):
    pos = v > 0
    return jnp.where(pos, jnp.log(jnp.where(pos, v, 1.0)), -jnp.inf)


def _bitonic_merge(v):
    """Sorts a bitonic sequence (non-decreasing, then non-increasing) of length ``2^k``.

    Batcher's bitonic merger: ``k`` rounds of compare-and-exchange between the halves of
    ever shorter blocks, each an elementwise minimum and maximum (XLA's comparison sort
    is about three times slower on the planner's 512 points per row).
    """
    n = v.shape[-1]
    if n & (n - 1):
        raise ValueError(f"a bitonic merge needs a power-of-two length; got {n}")
    k = n // 2
    while k >= 1:
        blocks = v.reshape(v.shape[:-1] + (n // (2 * k), 2, k))
        a, b = blocks[..., 0, :], blocks[..., 1, :]
        v = jnp.stack([jnp.minimum(a, b), jnp.maximum(a, b)], axis=-2).reshape(v.shape)
        k //= 2
    return v


def planning_points(lo, hi, thin: int = 1):
    """Sorted planning points on [lo, hi]: uniform, geometric from both ends and around 0.

    ``thin`` (static) divides the number of points of each kind: the planner of many
    phases takes half as many (its per-phase work is what a schedule's cost grows with).
    The points that do not depend on where 0 lies (uniform and geometric from both ends),
    ``lo + w·v`` for a sorted ``v`` on [0, 1], are sorted (rounding is monotone), and so
    are those around 0; one bitonic merge of the two (their total is a power of two)
    sorts them all.
    """
    g = np.geomspace(1e-13, 1.0, _N_GEOM // thin)
    v = np.sort(np.concatenate([np.linspace(0.0, 1.0, _N_UNIFORM // thin), g, 1.0 - g]))
    # (in decreasing order: the merge's second run)
    around = jnp.asarray(np.concatenate([g[::-1], -g])) * jnp.maximum(jnp.abs(lo), jnp.abs(hi))
    ranged = lo + (hi - lo) * jnp.asarray(v)
    return _bitonic_merge(jnp.concatenate([ranged, jnp.clip(around, lo, hi)]))


def direction_flags(directions):
    """Per-direction flags for :func:`bins` (``None`` for the single replace pair)."""
    if directions == ("replace",):
        return None
    return jnp.asarray([direction == "add" for direction in directions])


def bins(adversary, d, is_add, mu, q, x):
    """P- and Q-masses of the bins between consecutive points, and the outside P-mass.

    ``x``: the points, shape ``(..., B + 1)`` (a row per direction, say); ``is_add``: a
    boolean per row (shape ``x.shape[:-1]``, traced is fine) for the add/remove pairs,
    ``None`` for the replace pair. Every row's tails come from one call of the tails (one
    copy of them in the compiled program, traced once, not once per vmapped direction).
    """

    def flat(v):
        return v.reshape(-1)

    def flags(shape):  # each row's flag at each of its points
        if is_add is None:
            return None
        return flat(jnp.broadcast_to(jnp.asarray(is_add)[..., None], shape))

    tails = losses.segment_tails(adversary, d, mu, q, flat(x), flags(x.shape))
    sp, fp, sq, fq = (t.reshape(x.shape) for t in tails)
    # Differences of the smaller tail (full relative accuracy).
    pi = jnp.where(sp[..., :-1] < 0.5, sp[..., :-1] - sp[..., 1:], fp[..., 1:] - fp[..., :-1])
    kappa = jnp.where(sq[..., :-1] < 0.5, sq[..., :-1] - sq[..., 1:], fq[..., 1:] - fq[..., :-1])
    outside = fp[..., 0] + sp[..., -1]
    if adversary in losses.GLRT_LOSSES:
        # The non-central χ² tails give the cdf as the complement of the log-sf (absolute
        # error ~1e-16); the Chernoff bounds of the planner bound the mass beyond the
        # ends as well, and far below that (N rounds would otherwise leave N·1e-16 of
        # failure mass in δ, e.g. an upper bound of 2e-15 on a δ of 1e-36).
        ends = jnp.stack([x[..., 0], x[..., -1]], axis=-1)
        b_sp, b_fp = losses.probe_tails(adversary, d, mu, q, flat(ends), flags(ends.shape))
        b_sp, b_fp = b_sp.reshape(ends.shape), b_fp.reshape(ends.shape)
        outside = jnp.minimum(fp[..., 0], b_fp[..., 0]) + jnp.minimum(sp[..., -1], b_sp[..., 1])
    return jnp.maximum(pi, 0.0), jnp.maximum(kappa, 0.0), outside


def split(pi, kappa, x, apart=False):
    """Connect-the-dots pmf on the points ``x`` (bins of any widths); ``apart``: see
    :func:`glrt_jax._src.numerics.computed_once`."""
    h = x[1:] - x[:-1]
    exp_x = jnp.exp(jnp.clip(x[:-1], -700.0, 700.0))
    up = jnp.clip((pi - exp_x * kappa) / -jnp.expm1(-jnp.maximum(h, 1e-300)), 0.0, pi)
    up = computed_once(up, apart)
    return jnp.pad(pi - up, (0, 1)) + jnp.pad(up, (1, 0)), up


def merge(pi, kappa, x):
    """Binned pair: one atom per bin at log(π/κ) (bins with a zero mass dropped)."""
    ok = (pi > 0) & (kappa > 0)
    loc = jnp.where(ok, safe_log(pi) - safe_log(kappa), 0.5 * (x[:-1] + x[1:]))
    loc = jnp.clip(loc, x[:-1], x[1:])
    return loc, jnp.where(ok, pi, 0.0)


def log_mgf(x, p, ts):
    return logsumexp(ts[..., None] * x + safe_log(p), axis=-1)


def pmf_log_mgf(x, p, ts):
    """``log Σ_j p_j e^{t x_j}`` at many tilts ``t ≥ 0`` (shape (T,)) of a pmf on the points
    ``x`` (shape (P,); masses at most 1).

    As :func:`log_mgf`, but shifted by a bound on each tilt's largest term rather than by
    the largest term itself: on a CPU, XLA compiles logsumexp's maximum over the
    (tilts × points) terms, its exponentials and their sum into one fusion that takes
    about 5 ns per term, and a plain sum of exponentials about 1–2 ns. With ``x⁺`` the
    largest point with mass, the largest term ``t x_j + log p_j`` lies between
    ``t x⁺ + log p(x⁺)`` and ``t x⁺ + max_j log p_j``, an interval at most 745 wide
    (masses in ``(2⁻¹⁰⁷⁴, 1]``); shifted by its midpoint, no exponential overflows and
    the largest is at least ``e^{−373}``, a normal number. The result then differs from
    logsumexp's only by rounding: the shifted exponents round by at most ``373u`` each,
    far within the ``1e-9`` the planner charges per round (the planner's 73 tilts ×
    512 points per phase: 2.5–2.9× faster on a 2-core CPU).
    """
    lp = safe_log(p)
    top = jnp.argmax(jnp.where(p > 0, x, -jnp.inf))
    shift = ts * x[top] + 0.5 * (jnp.max(lp) + lp[top])
    # No mass at all: every term is 0 and the answer −inf, as logsumexp's.
    shift = lax.stop_gradient(jnp.where(jnp.isfinite(shift), shift, 0.0))
    total = jnp.sum(jnp.exp(ts[:, None] * x + lp - shift[:, None]), axis=-1)
    return jnp.log(total) + shift


def compand_counts(xp, pmf, t, apart=False):
    """Per planning bin: the companding share ``w^{1/3} h^{2/3}`` (tilted and plain mass);
    ``apart``: see :func:`glrt_jax._src.numerics.computed_once`.

    A placement, not a bound: masses below zero count as zero. The split pmf
    (:func:`split`) can hold a few of a rounding's size where its ``π − up`` reads ``π``
    by another code path than ``up``'s clip (``computed_once``; e.g. −5.6e-17 and −6e-33
    beside masses of 0.1 and 1e-25), and such a mass made a bin's share ``log`` of a
    negative number: NaN, then NaN grid points and an infinite upper bound (K = 1000
    phases, σ_k ∈ [2, 5], q_k ∈ [1e-4, 1e-3], 10 steps each, δ = 1e-5, once the plan
    and phase sums ran with XLA's default code generation).
    """
    pmf = jnp.maximum(pmf, 0.0)
    logw = safe_log(pmf) + t * xp
    w = computed_once(jnp.exp(logw - logsumexp(logw)), apart)
    w0 = pmf / jnp.sum(pmf)
    wb = 0.5 * (w[:-1] + w[1:]) + 0.5 * (w0[:-1] + w0[1:])  # tilted and untilted, per bin
    width = jnp.maximum(xp[1:] - xp[:-1], 0.0)
    # The cube root as e^{log(·)/3}: a placement, not a bound, needs no last bits, and XLA's
    # power function costs about five times as much on a CPU (the planner takes it at
    # every planning bin of every phase).
    dens = jnp.where(width > 0, jnp.exp(jnp.log(wb / jnp.where(width > 0, width, 1.0)) / 3.0), 0.0)
    return dens * width, width


def companded_grid(xp, pmf, t, B, apart=False):
    """B + 1 points on [xp_0, xp_-1], density ∝ (tilted mass density)^{1/3}.

    With a share 0.9 of the points placed so, the split's ``Σ_b w_b h_b²`` is at most
    ``(Σ_b w_b^{1/3} h_b^{2/3})³ / (0.81 B²)`` (Hölder's equality case). ``apart``: see
    :func:`glrt_jax._src.numerics.computed_once`.
    """
    count, width = compand_counts(xp, pmf, t, apart)
    total = jnp.sum(count)
    # A floor: a tenth of the points spread uniformly, so no bin is ever empty of points.
    count = 0.9 * count / total + 0.1 * width / jnp.sum(width)
    cum = jnp.concatenate([jnp.zeros(1), jnp.cumsum(count)])
    cum = cum / cum[-1]
    levels = jnp.linspace(0.0, 1.0, B + 1)
    x = jnp.interp(levels, cum, xp)
    return x.at[0].set(xp[0]).at[-1].set(xp[-1])
