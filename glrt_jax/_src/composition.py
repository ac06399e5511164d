"""Composition of heterogeneous phases by characteristic functions at Fourier nodes.

What is composed
----------------
A *phase* is ``n`` identical rounds of the Poisson-subsampled Gaussian mechanism with
noise multiplier σ (μ = 1/σ) and sampling rate q. For K phases the composed privacy
loss is ``S = Σ_k Σ_{i ≤ n_k} L_{k,i}`` and, per direction of the neighbouring relation
(the dominating pairs of :mod:`glrt_jax._src.losses`),

    δ(ε) = E_P[g_ε(S)],   g_ε(s) = (1 − e^{ε − s})_+.

Why not a lattice
-----------------
A lattice engine splits every round's loss onto ``hZ`` and convolves by FFT. When q is
small most rounds have a loss of order q; splitting it onto a lattice coarser than q
adds a variance of about ``h|L|`` per round, so ``h`` must shrink like ``1/N`` while the
composed window grows like ``√N``: the transform grows faster than N (the previous
engine of this module needed 1.2·10⁶ points at σ = 1, q = 10⁻⁴, N = 5·10⁶ and was still
1 % loose there). Here no lattice of the composed loss is formed. Each round is
discretised on its own non-uniform grid, fine where its (tilted) mass is, and only the
round's moment generating function is needed, at a fixed set of complex frequencies.
Raising it to the power ``n`` costs nothing; the number of frequencies depends on the
tolerance and on the shape of the composed loss near ε, not on N. The cost of one
query is about ``K · (B·2M + 4J log₂ 4J)`` operations (B grid points per round, J nodes,
``M = 13``): one non-uniform FFT per round and side.

Method (and why each step is a bound)
-------------------------------------
1. **Per-round grids.** Phase k's loss range ``[lo, hi]`` (P-tails beyond it below
   ``m = δ·tol·e^{−10}/N`` for ε queries, ``10⁻¹²e⁻²⁵/N`` for δ queries, counted as
   failure mass: for ε queries at most ``10⁻⁴·tol·δ`` in all, yet the range, and with
   it the period ``W`` below, is no wider than that needs) is covered by ``B + 1``
   points placed by companding: point density ∝ (tilted mass density)^{1/3}, which
   minimises the split's added variance ``Σ_b w_b h_b²`` for a given number of points.
   Geometric planning points near the ends and near 0 resolve the near-atom of unsampled
   rounds (losses of order q).
2. **Two discretisations per round.** *Upper:* connect-the-dots, each bin's P- and
   Q-masses split onto its end points; the pair dominates the round (δ can only grow).
   *Lower:* each bin merged into one atom at ``log(π_b/κ_b)``: binning the output is
   post-processing, so this pair is dominated by the round. Composition preserves both
   orders, and both errors are second order in the bin widths.
3. **Moment generating functions at nodes.** For a damping ``a > 0`` and nodes
   ``ω_j = jΔω`` (``j < J``), each phase contributes ``n_k log M_k(a + iω_j)``, evaluated as
   ``log M_k(a) + iω c_k + log1p(Σ_b v_b e^{iω(x_b − c_k)} − 1)`` (tilted weights ``v``,
   tilted mean ``c_k``). The sums over the grid at all nodes are one non-uniform FFT
   (Gaussian gridding, :mod:`glrt_jax._src.nufft`) of the exact phases ``Δω(x_b − c_k)``
   (formed in double-double), with a proved bound on its error. Phases are a ``lax.scan``
   over chunks: one compiled program for any K and any counts.
4. **Smoothed inversion.** With ``X = S + τZ`` (``Z`` standard normal, independent),
   ``E g_ε(X) = (1/2π) ∫ M_S(a+iω) e^{τ²(a+iω)²/2} ĝ(ω) dω`` with
   ``ĝ(ω) = e^{−(a+iω)ε}/((a+iω)(a+1+iω))``. The trapezoid rule with step ``Δω = 2π/W``
   equals ``E g_ε(X)`` plus the aliasing terms ``Σ_{m≠0} e^{amW} δ_X(ε + mW)`` (Poisson
   summation), all non-negative: the sum is an upper bound before truncation, and the
   aliasing is bounded by Chernoff bounds of X for the lower side. Truncating after
   the last node, ``Ω = (J − 1)Δω``, costs at most ``(C/π) e^{−τ²Ω²/2}/(τ²Ω³)``,
   ``C = M_X(a) e^{−aε}`` (the terms left out lie below the integral of their decreasing
   majorant from the last node on).
   The damping ``a`` and the period ``W`` are chosen together (aliasing far below
   ``tol·δ`` with the fewest nodes). The nodes are sized for the widest ``τ`` the
   tolerance allows (``τ²`` a share of ``tol·ε``), and the inversion then smooths with
   the narrowest ``τ`` they resolve: the one whose truncation term stays below
   ``e^{−8}·tol·δ`` at the plan's scale (``τ²Ω²/2`` between 10 and 30,
   :func:`glrt_jax._src.planning.smoothing_width`): both smoothing terms below shrink
   with ``τ``, so this is the tightest answer the nodes give.
5. **Removing the smoothing.** Upper: ``g_ε(s + τz) = g_{ε−τz}(s)``, so
   ``δ_X(ε) = E_Z δ_S(ε − τZ) = E_Z h(e^{ε−τZ})`` with ``h(x) = E_P(1 − x e^{−S})_+``,
   convex in ``x``; by Jensen ``δ_X(ε) ≥ h(E e^{ε−τZ}) = δ_S(ε + τ²/2)``, so
   ``δ_S(ε) ≤ δ_X(ε − τ²/2)``. The gap is exact: ``δ_X(ε − τ²/2) − δ_S(ε) = E_P k(S − ε)``
   with ``k(u) = E(1 − e^{−u}Y)₊ − (1 − e^{−u})₊ ≥ 0``, ``Y = e^{−τ²/2−τZ}`` (a call on
   ``e^{−u}Y`` struck at 1 for ``u > 0``, a put for ``u ≤ 0``), ``∫k du = τ²/2``. Any
   ``m ≤ k`` whose expectation is a trapezoid sum on the same nodes gives
   ``δ_S(ε) ≤ δ_X(ε − τ²/2) − E_P m(S − ε)``, with ``E_P m`` bounded below by its sum less
   the sum's error terms and aliasing. The minorants are
   ``m(u) = s(τ)τ²(c₀ + c₂t'²)φ_{cτ}(u)``, ``t' = u/(cτ)``, at c = 1 and 1.2
   (:data:`glrt_jax._src.inversion._JENSEN_ROWS`): ``m ≤ 0 ≤ k`` where the polynomial is
   negative, and on the bounded interval where it is positive ``m ≤ k`` is checked
   against k's closed form in 50 digits over the widths τ with ``s(τ) > 0``. They take
   0.69s and 0.56s of the gap's ``τ²/2`` mass (s ≈ 0.97 at small τ); the larger of the
   two lower bounds is charged. Lower: with ``h(x) = (1 − e^{−x})₊`` and ``x = s − ε``,
   ``E_Z h(x + τZ) − h(x) ≤ τ φ(x/τ)`` (φ the standard normal density): for ``x ≤ 0``,
   ``h(y) ≤ y₊`` gives ``E(x + τZ)₊ = τ(tΦ(t) + φ(t)) ≤ τφ(t)``, ``t = x/τ ≤ 0``; for
   ``x > 0``, ``h`` lies below its tangent at ``x`` on ``[0, ∞)`` and is 0 below, so
   ``E h(x + τZ) ≤ h(x)Φ(t) + h'(x)τφ(t)`` with ``h' ≤ 1``. Hence
   ``δ_S(ε) ≥ δ_X(ε) − τ² f_{S+τZ}(ε)``, the density one more trapezoid sum on the same
   nodes (the bound this replaced, ``C_τ e^{−(s−ε)²/(8τ²)}`` with
   ``C_τ = e^{2τ²/3}(τ/√(2π) + τ²)``, charged about ``2τ² f_{S+2τZ}(ε)``, twice as much).
   Both are second order in τ. And for ``c ≥ 1``, ``φ_τ(x) ≤ c φ_{cτ}(x)`` (the ratio
   ``φ_{cτ}/φ_τ = e^{x²(1 − 1/c²)/(2τ²)}/c ≥ 1/c``), so ``f_{S+τZ}(ε) ≤ c f_{S+cτZ}(ε)``:
   the smaller of the two is charged, c chosen so that the transform of ``f_{S+cτZ}`` has
   decayed at the last node where that of ``f_{S+τZ}`` has not
   (:func:`glrt_jax._src.inversion._deficit_variance`).
6. **Floating point.** Per node and phase ``|ŝ − s| ≤ e`` (the non-uniform FFT's bound,
   about 5·10⁻¹⁴, and the subtraction of 1), so
   ``Π_k(|1 + ŝ_k| + e)^{n_k} − Π_k|1 + ŝ_k|^{n_k}`` bounds the error of the composed
   transform at that node; the logs' own rounding (4u(|log w| + 1) per round) and that
   of their sums over the phases (``γ_m Σ_k n_k |log w_k|``, m the roundings a term goes
   through, :func:`glrt_jax._src.transform.phase_sums`), the normalisers ``log M_k(a)``
   (``(B + 4)u`` relative each, and their sum's ``γ_m Σ_k n_k |log M_k(a)|``), the
   tilted means' sum (``γ_m Σ_k n_k |c_k|``, a turn of ω times it at each node) and
   the phases ``ω(c − ε)`` add their terms; the MGFs' sums at the bound tilts are
   raised by their rounding and the log of the mass kept lowered by its own.
   All enter the bounds. (The tails of one round are taken as exact to a few ulps.)

ε(δ) is found per direction by a bracketed search on the certified bounds (secant on
log δ, which is nearly linear, with bisection as the safeguard): first the estimate, from
the plan's guesses, then the upper bound, starting next to the estimate (about eight
evaluations), then the lower bound, below the upper one. Any ε evaluated and found with
upper-δ(ε) ≤ δ is a valid upper bound on ε whatever the bound's shape; a direction other
than the plan's leading one stops searching once it passes below the leading one's
bracket (the answer is the maximum over directions, which it can no longer change), and
the lower bound is searched in the direction of the largest upper bound only (any
direction's is valid). The upper bound is differentiated by the implicit-function rule at
its root (grids held fixed).

Where each step lives
---------------------
* :mod:`glrt_jax._src.losses`: the exact tails of one round's loss (per direction);
* :mod:`glrt_jax._src.grids`: planning points, bins, the split and merged pairs, the
  companded grid (steps 1–2);
* :mod:`glrt_jax._src.planning`: the plan (tilt, damping, period, smoothing, sizes);
* :mod:`glrt_jax._src.transform`: per-round terms at the nodes, summed over the phases
  (step 3);
* :mod:`glrt_jax._src.inversion`: the smoothed inversion and the certified bounds, the
  ε search (steps 4–6);
* this module: the three compiled stages (plan → phase sums → bounds), the size
  choice and re-planning, input checks and the public entry points.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from glrt_jax._src import inversion, losses, one_round, planning, programs, transform
from glrt_jax._src.shapes import PHASE_FLOOR, bucket, pad_phases
from glrt_jax._src.transform import UNIT_ROUNDOFF
from glrt_jax._src.validation import (
    ADVERSARIES,
    NEIGHBOURINGS,
    check_choice,
    check_range,
    check_x64,
    is_traced,
)


class Bounds(NamedTuple):
    """A (lower, estimate, upper) triple; the true value lies in [lower, upper]."""

    lower: Any
    estimate: Any
    upper: Any


programs.register_tuple(Bounds, "glrt_jax.Bounds")
programs.register_tuple(planning.Plan, "glrt_jax.Plan")

# ---------------------------------------------------------------------------
# The three stages of a query, each its own compiled program when called eagerly
# ---------------------------------------------------------------------------
#
# plan (per static loss key, query and number of phases) → phase sums (per static loss
# key, B, J and number of phases) → bounds (per J and query only). The static loss key
# (losses.program_key) is the same for NPO and GLRT with d = 1 (the two rows of a
# report), and one other serves GLRT with every other d. Under an outer jit the stages are
# traced into one program; eagerly, a plan serves every size choice (and the size choice
# itself), and the bounds program is shared by both adversaries, every d and every B.


def _sanitize(mu, q, n, target, tol, query):
    """Replace invalid inputs by harmless ones (NaN answers under jit); the validity flag.

    Concrete inputs are checked with NumPy (no compiled program of its own), traced ones
    with ``jax.numpy``.
    """
    xp = jnp if is_traced(mu, q, n, target, tol) else np
    valid = xp.all((mu > 0) & xp.isfinite(mu) & (q > 0) & (q <= 1) & (n >= 0))
    valid = valid & xp.any(n > 0) & xp.isfinite(target) & (tol > 0)
    if query == "epsilon":
        valid = valid & (target > 0) & (target < 1)
    mu = xp.where(valid, mu, 1.0)
    q = xp.where(valid, q, 0.5)
    n = xp.where(valid, n, 1)
    target = xp.where(valid, target, 0.5)
    return valid, mu, q, n, target


# Each program's size for the choice of compiler options (programs.stored): about the
# numbers it computes per step (the plan: 512 planning points per phase; the phase sums:
# grid points and nodes per phase, halved for one direction of two; the bounds: nodes).
@programs.stored(static_argnames=("loss", "query"), size=lambda mu, *_, **__: 512 * mu.shape[0])
def _plan_program(mu, q, n, target, tol, hint, tau_cap, floor, values, *, loss, query):
    p = planning.plan(loss, values, mu, q, n, query, target, tol, hint, tau_cap, floor)
    return jax.tree_util.tree_map(jax.lax.stop_gradient, p)


# No certified lower bound on ε (the plan's ``floor``, a float64 as re-plans pass it).
_NO_FLOOR = np.float64(0.0)


def _plan_stage(
    mu,
    q,
    n,
    target,
    tol,
    hint,
    tau_cap,
    floor=_NO_FLOOR,
    *,
    adversary,
    d,
    neighbouring,
    query,
):
    # Programs are keyed on the loss's static part (losses.program_key): NPO and GLRT with
    # d = 1 share one, every other d shares one (d is data).
    loss, values = losses.program_key(adversary, d, neighbouring, mu.shape[0])
    args = (mu, q, n, target, tol, hint, tau_cap, floor, values)
    halves = _halves(n, args)
    if halves is None:
        if is_traced(*args):
            # The plan is held fixed by derivatives (its outputs stop them): with its
            # inputs stopped too, a derivative does not linearise the plan's program only
            # to drop its tangents (a vmapped gradient of a three-phase ε traced in 21 s
            # before, 13 s after).
            args = jax.tree_util.tree_map(lax.stop_gradient, args)
        return _plan_program(*args, loss=loss, query=query)

    def part(start, count):
        return _plan_part_program(
            mu, q, n, target, tol, values, start, count,
            loss=loss, query=query, length=halves[2], thin=planning.thinning(mu.shape[0], loss),
        )  # fmt: skip

    parts = _side_by_side(halves, part)
    return _plan_joined_program(*args, *parts, np.int64(halves[0]), loss=loss, query=query)


@programs.stored(
    static_argnames=("loss", "query", "length", "thin"),
    # (the whole plan's size, so that both take the same compiler options)
    size=lambda mu, *_, **__: 512 * mu.shape[0],
)
def _plan_part_program(mu, q, n, target, tol, values, start, count, *, loss, query, length, thin):
    """The per-phase part of the plan (:func:`planning.measure_phases`) over the ``count``
    phases from ``start`` (see :func:`_slice_phases`; ranges from the whole schedule's
    failure mass). Eager and untraced only (:func:`_halves`)."""
    cut, steps = _slice_phases(n, start, count, length)
    log_m = planning.failure_log_mass(query, target, tol, jnp.sum(n.astype(jnp.float64)))
    return planning.measure_phases(loss, cut(values), cut(mu), cut(q), steps, log_m, thin)


@programs.stored(static_argnames=("loss", "query"), size=lambda mu, *_, **__: 512 * mu.shape[0])
def _plan_joined_program(
    mu, q, n, target, tol, hint, tau_cap, floor, values, first, second, offset, *, loss, query
):
    """The plan from the per-phase parts of two halves (:func:`_plan_part_program` from 0
    and from ``offset``), placed where their phases are: the second half's first phase
    fills the rest (padding phases, whose weight is 0)."""

    def join(a, b):
        whole = jnp.broadcast_to(b[:1], mu.shape + b.shape[1:])
        whole = lax.dynamic_update_slice_in_dim(whole, a, 0, axis=0)
        return lax.dynamic_update_slice_in_dim(whole, b, offset, axis=0)

    measured = tuple(join(a, b) for a, b in zip(first, second, strict=True))
    return planning.plan(
        loss, values, mu, q, n, query, target, tol, hint, tau_cap, floor, measured=measured
    )


def _sums(mu, q, n, p, values, only, *, loss, B, J, precise=False):
    """The phase sums of plan ``p`` (and its smoothing and bound tilts); ``only``: None,
    or the index of the one direction to compose (an int64, data: one program serves
    each direction; its plan then goes on to the bounds); ``precise``: each round's
    transform in double-double (:func:`glrt_jax._src.transform.node_terms`)."""
    if only is not None:
        p = _one_direction(p, only)
    tau = planning.smoothing_width(p, J)
    tilts = planning.bound_tilts(p)
    dw = 2.0 * jnp.pi / p.W
    carry = transform.phase_sums(
        mu, q, n, p, values, p.a, dw, tilts, loss=loss, B=B, J=J, direction=only,
        precise=precise,
    )  # fmt: skip
    if only is None:
        return carry, tau, tilts
    return carry, tau, tilts, p._replace(xp=None, pp=None)


def _one_direction_work(only):
    """The work of a pass over one direction (``only`` an index) relative to one over
    every direction (``None``), for the choice of compiler options: one direction of two
    is half the work (a re-plan of N = 10 rounds at 16384 nodes: 0.9 instead of 1.6 s to
    compile, 3.75 instead of 3.58 ms warm)."""
    return 1 if only is None else 2


# Double-double phase sums compile first for latency (programs.stored's latency_first):
# without LLVM's optimisation their code compiles in about 1 s instead of 2.5 s and runs
# 0.95 instead of 0.7 s (K = 10 phases, 512 points, 16384 nodes; 0.3 s once compiled for
# speed, which takes 3.4 s in the background).
@programs.stored(
    static_argnames=("loss", "B", "J", "precise"),
    size=lambda mu, q, n, p, values, only, *, B, J, **_: (
        mu.shape[0] * (B + J) // _one_direction_work(only)
    ),
    latency_first=lambda *, precise=False, **_: precise,
)
def _sums_program(mu, q, n, p, values, only, *, loss, B, J, precise=False):
    return _sums(mu, q, n, p, values, only, loss=loss, B=B, J=J, precise=precise)


@programs.stored(
    static_argnames=("loss", "B", "J", "length", "precise"),
    size=lambda mu, q, n, p, values, only, *_, B, J, length, **__: (
        length * (B + J) // _one_direction_work(only)
    ),
    latency_first=lambda *, precise=False, **_: precise,
)
def _part_sums_program(
    mu, q, n, p, values, only, start, count, *, loss, B, J, length, precise=False
):
    """:func:`_sums_program` over the ``count`` phases from ``start`` (see
    :func:`_slice_phases`)."""
    cut, steps = _slice_phases(n, start, count, length)
    part = p._replace(xp=cut(p.xp), pp=cut(p.pp))
    return _sums(
        cut(mu), cut(q), steps, part, cut(values), only, loss=loss, B=B, J=J, precise=precise
    )


@programs.stored(static_argnames=("J", "query", "halving"), size=lambda *_, J, **__: J)
def _bounds_stage(carry, p, tau, tilts, n_tot, target, gam, valid, *, J, query, halving=False):
    """The bounds of a pass (:func:`inversion.query_bounds`); ``halving``: its trapezoid
    sums by halving, for the passes with double-double transforms."""
    out, diag = inversion.query_bounds(
        carry, p, tau, tilts, n_tot, target, gam, J=J, query=query, halving=halving
    )
    return Bounds(*(jnp.where(valid, v, jnp.nan) for v in out)), diag


# Eager schedules of at least this many phases (with steps) on a CPU run the plan's
# per-phase part and the phase sums in two halves side by side (programs.side_by_side): as
# for FINE_SIZES_FROM, from 64 phases on the work, not the compilation, is what costs.
# Alternating processes on a 2-core CPU: K = 100 71 → 53 ms warm, K = 300 145 → 105 ms,
# K = 450 176 → 125 ms (first calls within ±0.5 s); K = 10⁴ phase sums 2.2–2.6 → 1.5 s and
# plan 1.94 → 1.7 s; the sums equal to 6e-15 relative (another order of the same additions).
_HALVES_FROM = 64
# (start, count) of a half, as the eager calls pass them (their dtype is in the program's key).
_ZEROS = (np.int64(0), np.int64(0))


def _halves(n, *inputs):
    """``(first, used, length)`` where a program over the phases of ``n`` runs in two
    halves, else None.

    Halves run on a CPU, from ``_HALVES_FROM`` phases with steps on, with no input traced
    (``n`` and ``inputs``, the program's other arguments: tracers belong to the calling
    thread's transformation, e.g. an eager ``jax.grad``), and where both slices lie within
    the padded phases (always in a bucket). The first half is phases ``[0, first)``, the
    second ``[first, used)`` (``used``: up to the last phase with steps), each sliced
    ``length`` long.
    """
    if is_traced(n, *inputs) or jax.default_backend() != "cpu":
        return None
    steps = np.asarray(n)
    if np.count_nonzero(steps > 0) < _HALVES_FROM:
        return None
    used = int(np.flatnonzero(steps > 0)[-1]) + 1
    first = (used + 1) // 2
    length = bucket(first, minimum=PHASE_FLOOR)
    return None if first + length > steps.shape[0] else (first, used, length)


def _slice_phases(n, start, count, length):
    """``(cut, steps)`` of a half: ``cut`` takes ``length`` phases from ``start`` of a
    per-phase array, and ``steps`` composes the first ``count`` of them (the rest 0
    times). The caller keeps ``start + length`` within the phases (:func:`_halves`), so
    that the slices are not moved."""

    def cut(v):
        return lax.dynamic_slice_in_dim(v, start, length, axis=0)

    return cut, jnp.where(jnp.arange(length) < count, cut(n), 0)


def _side_by_side(halves, part):
    """``[part(0, first), part(first, used − first)]`` side by side
    (:func:`programs.side_by_side`; ``start`` and ``count`` as int64, as the programs'
    keys expect)."""
    first, used, _ = halves
    return programs.side_by_side(
        lambda: part(np.int64(0), np.int64(first)),
        lambda: part(np.int64(first), np.int64(used - first)),
    )


def _sums_in_halves(halves, mu, q, n, p, values, only, **static):
    """``_sums_program`` in the two ``halves`` of the phases (:func:`_halves`), side by
    side, their carries added.

    The carry is a sum over phases, so the halves' carries add up to the whole's, in
    another order of the same additions (the rounding terms assume none). Each half is a
    slice of the same (padded) arrays, taken inside :func:`_part_sums_program`. While
    programs are prepared (:func:`programs.preparing`), the one program of both halves is
    prepared, and its output shapes (the whole's) returned.
    """

    def part(start, count):
        return _part_sums_program(
            mu, q, n, p, values, only, start, count, length=halves[2], **static
        )

    if programs.preparing_now():
        return part(*_ZEROS)
    first_out, second_out = _side_by_side(halves, part)
    carry = jax.tree_util.tree_map(
        lambda a, b: np.asarray(a) + np.asarray(b), first_out[0], second_out[0]
    )
    return (carry, *first_out[1:])


def _staged(
    valid, mu, q, n, target, p, *, adversary, d, neighbouring, B, J, query, only=None,
    precise=False,
):  # fmt: skip
    """The phase sums and bounds of plan ``p``; ``only``: the index of the one direction
    to compose (the answer is then that direction's, not the maximum over directions).

    A pass over every direction that runs whole (not in halves, :func:`_halves`) on
    untraced inputs composes them apart, one pass per direction side by side
    (:func:`programs.side_by_side`), and answers their maximum (:func:`_either`). A pass
    of a few phases then always runs the one-direction program, whose direction is data:
    where the plan or a first pass shows one direction deciding (:func:`_lead_alone`,
    :func:`_deciding_direction`), that direction alone, else each of them; so the first
    pass prepared before its plan is known (:func:`_prepare_first_pass`) is the one that
    runs. One phase (σ = 1, q = 0.01, N = 1000, δ = 1e-5), alternating processes on a
    2-core CPU: 7.2–8.0 → 4.5–4.8 ms warm (the remove direction alone); σ = 1, q = 1e-4,
    N = 5·10⁶, δ = 1e-7, where both directions may decide: 7.4 → 6.0–6.4 ms (the two side
    by side); K = 10 phases 34 → 19 ms.
    """
    loss, values = losses.program_key(adversary, d, neighbouring, mu.shape[0])
    halves = _halves(n, mu, q, p, values)
    one = functools.partial(
        _one_pass, valid, mu, q, n, target, p, loss, values, halves, B=B, J=J, query=query,
        precise=precise,
    )  # fmt: skip
    if not _apart(loss, halves, only) or is_traced(valid, mu, q, n, target, p, values):
        return one(only)
    if programs.preparing_now():  # (one program serves each direction)
        return one(0)
    n_dir = len(losses.loss_directions(loss))
    return _either(programs.side_by_side(*(functools.partial(one, i) for i in range(n_dir))))


def _apart(loss, halves, only):
    """Whether an untraced pass over direction ``only`` (None: every one) with phase sums
    in ``halves`` composes its directions apart (see :func:`_staged`)."""
    return only is None and halves is None and len(losses.loss_directions(loss)) > 1


def _one_pass(
    valid, mu, q, n, target, p, loss, values, halves, only, *, B, J, query, precise=False
):  # fmt: skip
    """:func:`_staged`'s pass over direction ``only`` (every direction: None), its phase
    sums in ``halves`` (:func:`_halves`; None: whole)."""
    index = None if only is None else np.int64(only)
    sums = dict(loss=loss, B=B, J=J, precise=precise)
    if halves is not None:
        out = _sums_in_halves(halves, mu, q, n, p, values, index, **sums)
    else:
        out = _sums_program(mu, q, n, p, values, index, **sums)
    carry, tau, tilts = out[:3]
    gam = (B + 4) * UNIT_ROUNDOFF
    # Only per-direction data goes on: the bounds program does not depend on K.
    per_direction = p._replace(xp=None, pp=None) if only is None else out[3]
    if isinstance(n, jax.core.Tracer):
        n_tot = jnp.sum(n.astype(jnp.float64))
    else:  # on the host: no program of its own (integers, so the sum is exact either way)
        n_tot = np.sum(np.asarray(n, np.float64))
    many = mu.shape[0] >= QUICK_BOUNDS_FROM
    with programs.quick_compile() if many else contextlib.nullcontext():
        # (a pass with double-double transforms sums the trapezoid rule by halving too:
        # with the transforms' rounding gone, the dot products' was the largest error
        # term left at the Chernoff scale of a bimodal round; inversion.query_bounds)
        return _bounds_stage(
            carry,
            per_direction,
            tau,
            tilts,
            n_tot,
            target,
            gam,
            valid,
            J=J,
            query=query,
            halving=precise,
        )


def _either(passes):
    """One answer from the ``(bounds, diag)`` of one pass per direction, as a pass over
    them all gives it: the answer is the maximum over the directions, so its upper bound
    and estimate are the largest, and so is its lower bound (each direction's lower bound
    is one on the maximum); the diagnostics per direction side by side, and the deciding
    direction's (the largest estimate) where there is one value."""
    bounds = [np.asarray(b, np.float64) for b, _ in passes]  # (lower, estimate, upper) each
    lower, estimate, upper = np.maximum.reduce(bounds)
    decide = int(np.argmax([b[1] for b in bounds]))
    diags = [diag for _, diag in passes]
    diag = {
        key: np.concatenate([np.asarray(d[key]) for d in diags])
        if np.ndim(value) > 0
        else diags[decide][key]
        for key, value in diags[0].items()
    }
    answer = (lower, np.clip(estimate, lower, upper), upper)
    return Bounds(*(jax.device_put(np.float64(v)) for v in answer)), diag


def _one_direction(p, i):
    """Plan ``p`` for its direction ``i`` alone (every per-direction field sliced; ``i``
    may be traced)."""

    def take(v, axis=0):
        return lax.dynamic_slice_in_dim(v, i, 1, axis=axis)

    one = {k: take(v) for k, v in p._asdict().items() if k not in ("xp", "pp")}
    return p._replace(xp=take(p.xp, 1), pp=take(p.pp, 1), **one)


@functools.partial(jax.jit, static_argnames=("adversary", "d", "neighbouring", "B", "J", "query"))
def compose_query(
    mu,
    q,
    n,
    target,
    tol,
    hint=jnp.nan,
    tau_cap=jnp.inf,
    floor=0.0,
    *,
    adversary,
    d,
    neighbouring,
    B,
    J,
    query,
):
    """Bounds on ε(δ = target) or δ(ε = target) for K phases; returns (Bounds, diag).

    One program for the three stages (for callers inside ``jit``, e.g. calibration).
    ``hint``: an ε known to lie at or below the answer (ε queries), to plan with when the
    saddle-point guess from the Chernoff bound is too high; for δ queries, a δ near the
    answer, to size the damping's scale with instead of the Chernoff bound; NaN for none.
    ``tau_cap`` caps the smoothing width the plan sizes the nodes for, for losses whose density at
    ε is large compared with the saddle-point picture (``diag["smoothing"]`` says when);
    ``inf`` for none. ``floor``: a certified lower bound on ε (ε queries; 0 for none), at
    which the damping and the period are planned when it lies above the guess from below
    (the guess still sizes the smoothing and the grid points).
    """
    static = dict(adversary=adversary, d=d, neighbouring=neighbouring)
    valid, mu, q, n, target = _sanitize(mu, q, n, target, tol, query)
    p = _plan_stage(mu, q, n, target, tol, hint, tau_cap, floor, query=query, **static)
    return _staged(valid, mu, q, n, target, p, B=B, J=J, query=query, **static)


# The default relative tolerance of the public entry points.
DEFAULT_TOL = 1e-3
# Re-plans of an eager query whose answer contradicts the plan (see _refine), and the
# narrowest smoothing they plan for, relative to the first answer's.
_REPLANS = 4
# The most work of a pass with double-double transforms (see _refine): phases with steps
# × nodes (the transforms skip padding phases). Their transforms cost about 20 ms each at
# 16384 nodes and 4096 points (float64: 1.4 ms), two per phase and direction: K = 10 at
# q = 1e-4, δ = 1e-12 takes one such pass at 16384 nodes, 0.40 s warm in all on a 2-core
# CPU (0.15–0.19 s with float64 transforms alone); a pass at 65536 nodes made its first
# call's passes 10–13 s. One phase may go to 2¹⁸ nodes (GLRT d = 10 at σ = 0.9, q = 1e-4,
# N = 100, δ = 1e-15: [0.00256, 0.0158] → [0.00300, 0.00339], 0.43 → 1.1 s warm). 2¹⁹
# rather than 2¹⁸ since the float64 rounding held two schedules of few sampled rounds
# outside the tolerance just past 2¹⁸ (NPO; warm once compiled for speed, 2-core CPU):
# 5 phases (σ 0.55–6.6, q 3e-6–5e-5, 18–20673 steps, δ = 4.2e-12) at 65536 nodes,
# [0.48406, 0.57051] → [0.5323433, 0.5323481], 0.9–1.1 → 1.4 s (first call 9.5 → 14.7 s);
# 200 phases (σ 0.5–3, q 1e-6–1e-4, 5·10⁷ steps in all, δ = 1.3e-8) at 2048 nodes,
# [2.78686, 2.79860] → [2.79212, 2.79306], 0.5–0.6 → 0.9 s (first call 13.8 → 15.3 s).
_PRECISE_WORK = 1 << 19
_TAU_CAP_MIN = 1.0 / 256.0
# Per-round grid points and frequency nodes (powers of two). From FINE_SIZES_FROM phases
# on, where the work, not the compilation, is what costs, the eager entry points choose
# from all of them (at most 2× the work of the exact need). Below, they choose from a
# coarse ladder that starts at COARSE_FLOOR (steps of four: at most 4× the need, and
# never less than the floor): a query of a few phases costs milliseconds at any of these
# sizes, while each new size is a new compiled program (seconds), so most queries share
# the floor's programs. A re-plan (a need past the floor: few rounds at small q) chooses
# from all sizes, where the coarse ladder would cost up to 4× the work.
POINTS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
NODES = tuple(1 << k for k in range(8, planning.MAX_NODES.bit_length()))  # 256 … 2¹⁸
FINE_SIZES_FROM = 64
# ... where the grid points also come in between, at three quarters of each size (192,
# 384, …; at most 1.5× the need instead of 2×): the phase sums of many phases cost about in
# proportion to the points (the spreading of the non-uniform FFTs, the bins' tails, the
# split), while the nodes (powers of two for the FFTs) keep their ladder. Alternating
# processes on a 2-core CPU, NPO, distinct phases: K = 10⁴ 512 → 384 points, warm
# 3.34 → 2.96–3.03 s, the upper bound 33.00257 → 33.00324 (2e-5 relative, within tol = 1e-3);
# K = 1000 362–399 → 282–291 ms (7.467182 → 7.467336); K = 100 68–72 → 49–50 ms (2.350861 →
# 2.350945).
BETWEEN_POINTS = tuple(3 * b // 4 for b in POINTS[1:])
COARSE_FLOOR = (512, 4096)

# The bounds of a pass over at least this many (padded) phases compile for latency
# (programs.quick_compile): their run takes milliseconds beside the phase sums' tenths of a
# second, while their compilation shares the two cores of a first call with the phase
# sums'. A program of its own (the options are in its key), not the one of a few phases.
# Alternating processes on a 2-core CPU: first call K = 100 9.7-10.2 -> 8.8-9.2 s,
# K = 1000 14.0-15.1 -> 12.5-13.0 s; warm unchanged within the noise.
QUICK_BOUNDS_FROM = FINE_SIZES_FROM

# Grid points of a schedule of at most FEW_PHASES phases (a uniform run, a report): they
# cost little next to the nodes there (2048 points add about 20 % to a query of 4096
# nodes), so such schedules take FEW_PHASES_MARGIN times the points the tolerance asks for
# (the discretisation's share of the error falls as 1/B²; on the composition page's cases
# the upper bound comes 3–5× closer to ε).
FEW_PHASES, FEW_PHASES_MARGIN = planning.FEW_PHASES, 4.0
# ... and at least one grid point per FEW_PHASES_NODES_PER_POINT nodes (the points cost
# little next to the nodes): at the floor's 4096 nodes, 2048 points (the coarse ladder's
# size above 1024) settle in one pass what 512 left to a re-plan of 2¹⁸ nodes (σ = 0.92,
# q = 1e-3, N = 1000, δ = 1e-10: 227 → 5 ms, 3.9e-4 tighter); where a re-plan raises the
# nodes (N = 10, q = 1e-3, δ = 1e-5, when it still re-planned: 16384), the upper bound
# came from 1.3e-4 to 6.2e-5 above ε (17 → 20 ms).
FEW_PHASES_NODES_PER_POINT = 4
# Nodes past planning.MANY_PHASES_MAX_NODES (2¹⁶) serve schedules of at most FEW_PHASES
# phases only (planning.max_nodes): an ε far below the loss's scale next to a near-atom of
# the composed loss (N·q ≪ 1 at small σ, e.g. σ = 0.5, q = 1e-5, N = 10: ε ≈ 4.4e-4) needs
# a smoothing width below ε/6, and 2¹⁸ nodes bring such a bound from 3 % to 0.2 % above ε
# in 0.6 s; for many distinct phases they would cost each phase four times the work and
# memory of 2¹⁶.
# (points, nodes) under jit, where tol cannot choose them.
JIT_SIZES = (512, 4096)


def _ladder(sizes, floor):
    """The coarse ladder: from ``floor`` in steps of four, and the largest size."""
    up = sizes[sizes.index(floor) :: 2]
    return up if up[-1] == sizes[-1] else up + sizes[-1:]


def _sizes_for(p, at_least=(0, 0), replan=False):
    """(B, J) from :data:`POINTS` and :data:`NODES` that meet the plan's needs (largest if none).

    ``at_least``: sizes already compiled for this query (a re-plan keeps them when they
    suffice, rather than compiling smaller programs). ``replan``: a re-plan chooses from
    all sizes (its need is past the floor, where the coarse ladder would cost up to 4×
    the work).
    """
    b_need, j_need = float(np.max(np.asarray(p.b_need))), float(np.max(np.asarray(p.j_need)))
    return _sizes_for_needs(p.xp.shape[0], b_need, j_need, at_least, replan)


def _sizes_for_needs(k, b_need, j_need, at_least=(0, 0), replan=False):
    """:func:`_sizes_for` for ``k`` (padded) phases needing ``b_need`` points and
    ``j_need`` nodes."""
    fine = replan or k >= FINE_SIZES_FROM
    points = POINTS if fine else _ladder(POINTS, COARSE_FLOOR[0])
    if k >= FINE_SIZES_FROM:
        points = tuple(sorted(points + BETWEEN_POINTS))
    nodes = NODES if fine else _ladder(NODES, COARSE_FLOOR[1])
    nodes = tuple(j for j in nodes if j <= planning.max_nodes(k))
    if k <= FEW_PHASES:
        b_need = FEW_PHASES_MARGIN * b_need
    b_need, j_need = max(1.1 * b_need, at_least[0]), max(1.1 * j_need, at_least[1])
    j = next((s for s in nodes if s >= j_need), nodes[-1])
    if k <= FEW_PHASES:
        b_need = max(b_need, j / FEW_PHASES_NODES_PER_POINT)
    b = next((s for s in points if s >= b_need), points[-1])
    return b, j


def choose_sizes(mu, q, n, target, tol, hint=jnp.nan, tau_cap=jnp.inf, *, query, **static):
    """(B, J) from :data:`POINTS` and :data:`NODES` that meet ``tol`` (largest if none)."""
    hint = jnp.asarray(hint, jnp.float64)
    tau_cap = jnp.asarray(tau_cap, jnp.float64)
    return _sizes_for(_plan_stage(mu, q, n, target, tol, hint, tau_cap, query=query, **static))


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------


def _validate_phases(noise_multiplier, sampling_rate, steps):
    """Eager checks (concrete values only); returns the common length K."""
    arrays = {}
    for name, value in (
        ("noise_multiplier", noise_multiplier),
        ("sampling_rate", sampling_rate),
        ("steps", steps),
    ):
        if isinstance(value, jax.core.Tracer):
            arrays[name] = None
            continue
        arr = np.asarray(value)
        if arr.ndim > 1:
            raise ValueError(
                f"{name} must be a scalar or a 1-D array of phases; got shape {arr.shape}"
            )
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric; got {value!r}")
        arrays[name] = np.atleast_1d(arr)
    sizes = {name: a.size for name, a in arrays.items() if a is not None}
    if len(set(sizes.values()) - {1}) > 1:
        raise ValueError(
            f"noise_multiplier, sampling_rate and steps must have one length; got {sizes}"
        )
    sig, q, st = arrays["noise_multiplier"], arrays["sampling_rate"], arrays["steps"]
    if sig is not None:
        check_range("noise_multiplier", sig, lo=0.0, lo_open=True)
    if q is not None:
        check_range("sampling_rate", q, lo=0.0, hi=1.0, lo_open=True)
    if st is not None:
        check_range("steps", st, lo=0.0, integer=True)
        if not np.any(st > 0):
            raise ValueError(f"steps must contain at least one count >= 1; got {steps!r}")
    return max(sizes.values()) if sizes else None


def validate_options(adversary, d, neighbouring):
    """Eager checks of the adversary, the query dimension and the neighbouring relation."""
    check_choice("adversary", adversary, ADVERSARIES)
    check_choice("neighbouring", neighbouring, NEIGHBOURINGS)
    _check_dimension(d)


def _check_dimension(d):
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be an integer in [1, inf); got {d!r}")


def phase_dimensions(d, phases):
    """Eager checks of ``d`` for a schedule: an int, or a tuple of ints one per phase.

    ``phases``: the schedule's length K (None if traced). A sequence of one value, or of
    equal values, is that int.
    """
    if isinstance(d, jax.core.Tracer):
        raise ValueError("d must be concrete (it selects the compiled program); got a tracer")
    arr = np.asarray(d)
    if arr.ndim == 0:
        _check_dimension(d if isinstance(d, bool) else arr.item())
        return int(arr)
    if arr.ndim > 1 or arr.size == 0:
        raise ValueError(f"d must be an integer or a 1-D array, one per phase; got {d!r}")
    if arr.dtype.kind not in "iu" or np.any(arr < 1):
        raise ValueError(f"d must hold integers in [1, inf), one per phase; got {d!r}")
    if phases is not None and arr.size not in (1, phases):
        raise ValueError(
            f"d must have one value per phase ({phases}) or be a scalar; got {arr.size} values"
        )
    values = tuple(int(v) for v in arr)
    return values[0] if len(set(values)) == 1 else values


def merge_phases(sig, q, n, d):
    """Phases with equal ``(σ, q, d)`` merged into one, in order of first appearance.

    Composition is commutative, so this is exact: a schedule that returns to the same
    settings (cyclic or alternating schedules) costs what its distinct settings cost.
    Phases without steps are dropped (unless no phase has any).

    Args:
      sig, q, n: concrete (K,) arrays (noise multipliers, sampling rates, counts).
      d: an int, or a tuple of K ints (:func:`phase_dimensions`).

    Returns:
      ``(sig, q, n, d)`` of the merged schedule (``d`` an int where all values agree).

    Example:
      >>> import numpy as np
      >>> s, q, n, d = merge_phases(np.array([1.0, 2.0, 1.0]), np.array([0.1, 0.1, 0.1]),
      ...                           np.array([5, 7, 3]), 1)
      >>> s.tolist(), n.tolist(), d
      ([1.0, 2.0], [8, 7], 1)
    """
    keep = n > 0
    if not np.any(keep):
        return sig, q, n, d
    dv = np.broadcast_to(np.asarray(d, np.float64), sig.shape)
    keys = np.stack([sig, q, dv], axis=1)[keep]
    uniq, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    if uniq.shape[0] == sig.shape[0]:
        return sig, q, n, d
    counts = np.zeros(uniq.shape[0], np.int64)
    np.add.at(counts, inverse.reshape(-1), n[keep])
    order = np.argsort(first)
    d_merged = tuple(int(v) for v in uniq[order, 2])
    d_merged = d_merged[0] if len(set(d_merged)) == 1 else d_merged
    return uniq[order, 0], uniq[order, 1], counts[order], d_merged


def validate_sizes(tol, points, nodes):
    """Eager checks of the accuracy and size arguments (``points``/``nodes``: None = auto)."""
    check_range("tol", tol, lo=1e-7, hi=0.5)
    if points is not None and points not in POINTS:
        raise ValueError(f"points must be one of {POINTS}; got {points!r}")
    if nodes is not None and nodes not in NODES:
        raise ValueError(f"nodes must be one of {NODES}; got {nodes!r}")


def _refine(
    bounds, diag, plan, valid, mu, q, n, target, tol, sizes, static, only=None,
    others_up=-np.inf, record=None,
):  # fmt: skip
    """Eager re-plans when the answer shows the plan's assumptions did not hold.

    In order: an ε answer near or below the planning guess ``eps_ref`` (one or a few
    heavy-tailed rounds: plan again from below, and damp at the Chernoff optimum at that
    ε); a δ answer outside the tolerance (plan again once with its estimate in place of
    the Chernoff bound on δ); a smoothing share above the tolerance (a steep loss tail at
    ε: less smoothing, more nodes); when none of these applies or a re-plan stopped
    improving the bound, a bracket more than tol/2 away from the estimate on either side
    of which the per-round transforms' rounding (:func:`_rounding_share`) makes a tenth or
    more (small q and tiny δ, where the Chernoff scale of the error terms lies far above
    δ: the same plan with double-double transforms, ``nufft.sums(precise=True)``, for
    this pass and every one after it); an upper bound more than tol/2 above the estimate
    (the grids' discretisation: four times the points); and, with the upper bound
    settled, a lower bound more than tol/2 below the estimate (its smoothing deficit:
    half the smoothing, twice the nodes). Each re-plan gives another valid bracket; the
    intersection is kept. A bracket with ``upper ≤ (1 + tol)·lower`` already proves the
    tolerance met (the truth is at least ``lower``) and ends the re-plans, whatever the
    plan's guesses were. Where the directions' upper bounds show that one direction alone
    decides the answer (:func:`_deciding_direction`), the re-plans compose that direction
    alone; ``only`` and ``others_up``: a first pass that composed direction ``only``
    alone (the others' bound ``others_up``, see :func:`_lead_alone`); ``plan``: the plan
    of the pass behind ``bounds``.

    A re-plan from below whose plan damps and spaces the nodes as the one before it
    (:func:`_same_transforms`) changes the smoothing only, not the grids'
    discretisation: where the upper bound also lies more than tol/2 above the estimate,
    it takes four times the points in the same pass (K = 10 phases, σ_k ∈ [0.8, 1.5],
    q_k ∈ [0.005, 0.02], 10 steps each, δ = 1e-5 at tol = 3e-6: its pass at the same
    2048 points and 65536 nodes gave the same bracket to eight digits, and only the one
    after it, at 8192 points, the answer). A re-plan with the arguments of the plan
    before it (more points or nodes) takes that plan rather than planning again, and a
    pass that would repeat the one before it (:func:`_pass_key`: a smoothing re-plan at
    the most nodes, whose narrower width no node resolves) is not run: it is the same
    bracket, which did not improve the bound. ``record``: see :func:`_query_once` (each
    pass that lowers the upper bound replaces its entry).
    """
    hint, cap, floor = jnp.nan, np.inf, 0.0
    planned = (hint, cap, floor)  # the arguments that gave ``plan``
    passed = _pass_key(plan, sizes, only, False)  # the pass behind ``bounds``
    precise = False
    # (the phases with steps: those the transforms are computed for, see _PRECISE_WORK)
    active = int(np.count_nonzero(np.asarray(n) > 0))
    last = bounds  # the bracket of the pass behind ``diag``
    share_max = 0.5 * float(tol)
    tau_min = _TAU_CAP_MIN * float(diag["tau_decide"])
    settled = False  # a re-plan that did not improve the bound: only more points are left
    for _ in range(_REPLANS):
        if _meets(bounds, tol, static["query"]):
            break
        if only is None:
            only, others_up = _deciding_direction(diag, bounds)
        # the plan behind the bracket
        kept = (hint, cap, floor, sizes, diag, precise, last, plan, planned, passed)
        again = False
        est = float(bounds.estimate)
        eps_ref = float(np.max(np.asarray(diag["eps_ref"])))  # (the plan's guess of ε)
        rounding = _rounding_share(diag, bounds)
        affordable = active * sizes[1] <= _PRECISE_WORK
        # Where the transforms' rounding exceeds the answer itself, the estimate is noise:
        # double-double transforms first, and the re-plans that read the estimate and the
        # smoothing's share after them (σ = 0.9, q = 1e-5, N = 10⁶, δ = 1e-15: first
        # estimates of 0.1235 or 0.1292 from the same plan, depending on the last bits of
        # programs compiled for other queries, led to brackets 6.9e-4 and 9.5e-2 wide).
        noisy = affordable and not precise and rounding > 1.0
        if static["query"] == "epsilon" and not (settled or noisy):
            if np.isfinite(est) and est < 1.2 * eps_ref:
                # (and the bracket's lower bound, certified, for the damping and period)
                hint, floor, again = 0.5 * est, max(float(bounds.lower), 0.0), True
        elif not (settled or noisy) and np.isnan(hint) and np.isfinite(est) and est > 0:
            # δ queries: plan again with the first answer's δ in place of the Chernoff
            # bound's (see planning.plan), once.
            hint, again = 0.5 * est, True
        share = float(diag["smoothing"])
        from_below = again
        replan = np.isfinite(share) and share > 0 and (share > share_max or again)
        if replan and not (settled or noisy):
            # The share grows like τ²: cap the width the nodes are planned for at the
            # one that brings it to 0.3 tol (the plan's own width may be narrower still,
            # e.g. when the hint lowers its guess of ε). A share above tol/2 asks for a
            # re-plan of at least half the width; a re-plan for another reason plans its
            # width from the share measured here too (the plan's saddle-point picture can
            # put the density at ε far too low: N = 10, q = 1e-3, where this pass's share
            # lies just within tol/2).
            step = math.sqrt(0.3 * float(tol) / share)
            if share > share_max:
                step, again = min(step, 0.5), True
            cap = max(min(cap, step * float(diag["tau_decide"])), tau_min)
        p, same = None, False
        if from_below and not share > share_max:
            p = _plan_at(hint, cap, floor, mu, q, n, target, tol, static)
            same = _same_transforms(p, plan, only)
        known = np.isfinite(est) and est > 0
        # (the upper bound as before the Jensen step's gap was taken off it: the sizes were
        # tuned on that; less the gap, K = 10 phases at tol = 1e-4 fell just within tol/2
        # of the estimate, and a pass at the same sizes, then one at four times the nodes,
        # replaced the pass at four times the points: 13.8 instead of 8.5 s, a bracket
        # 9.9e-5 instead of 3.5e-5 wide)
        gap = (float(bounds.upper) - est) / est + float(diag["jensen"]) if known else np.nan
        low = (est - float(bounds.lower)) / est if known else np.nan
        # Either bound far from the estimate, and the per-round transforms' rounding
        # (relative to the Chernoff scale, which a bimodal round puts far above δ: small
        # q, tiny δ) a tenth of that gap or more: the same plan, its transforms in
        # double-double (nufft.sums_double: about 3e-20 instead of 400u per round, and
        # the log near 1 relative to itself, transform.node_terms; the trapezoid summed
        # by halving, inversion.trapezoid_sum), for this pass and the re-plans after it.
        # σ = 0.9, q = 1e-4, N = 100, δ = 1e-15: [0.391383, 0.392341] → [0.391812,
        # 0.391937] (the map of benchmarks/certify.py: 66 → 72 of 80 cells within tol;
        # 73, then 79 since).
        wide = max(gap, low) if known else np.nan
        more_precise = (
            affordable and not (again or precise) and wide > share_max and rounding > 0.1 * wide
        )
        # With the plan settled, an upper bound far above the estimate is the per-round
        # grids' discretisation (its other terms are sized far below tol): the plan's
        # b_need comes from a variance picture that few heavy-tailed rounds at a small δ
        # break (N = 10, q = 1e-3, δ = 1e-10 needs 2048 points, not 512). Four times the
        # points; in the same pass as double-double transforms when the gap without the
        # rounding is still above tol/2 (K = 10 phases of σ from 0.9 to 1.0, q = 1e-4,
        # 1000 steps each, δ = 1e-12: 2.2e-2 above the estimate, 1.8e-2 of it rounding;
        # a double-double pass at 512 points then stood 5.3e-3 above, and only the one
        # after it, at 2048, gave the final bracket: now the first does).
        rest = gap - rounding if more_precise else gap
        # (and with a re-plan from below that keeps the damping and period, see above)
        more_points = (same or not again) and rest > share_max and sizes[0] < POINTS[-1]
        # The upper bound settled and the lower bound far below the estimate: its
        # smoothing deficit (and aliasing) shrink with the width τ. Half the width (twice
        # the nodes); one round at σ = 0.9, q = 1e-3, δ = 1e-9: [0, 0.22046] at 4096
        # nodes, [0.22026, 0.22046] at 8192.
        # (with double-double transforms, only as many nodes as they can afford: beyond,
        # float64 transforms would bring the rounding back)
        more_nodes = (
            not (again or more_points or more_precise)
            and low > share_max
            and sizes[1] < NODES[-1]
            and not (precise and active * 2 * sizes[1] > _PRECISE_WORK)
        )
        if more_nodes:
            cap = max(min(cap, 0.5 * float(diag["tau_decide"])), tau_min)
            # The plan's guess of ε from below (its damping's scale and the aliasing from
            # above are planned there) lying above the certified upper bound is wrong:
            # plan at the estimate instead. σ = 0.9, q = 1e-5, N = 10⁴, δ = 1e-12: after a
            # re-plan from below that did not improve the upper bound, the first plan's
            # guess, 0.114, came back with its period (0.83 where 1.24 is needed at ε =
            # 0.023: the aliasing 5.8e-2 of δ) and the bracket [0.02280, 0.02323];
            # [0.023221, 0.023223] so.
            guessed = static["query"] == "epsilon" and np.isnan(hint)
            if guessed and eps_ref > float(bounds.upper):
                hint = 0.5 * est
        if not (again or more_points or more_nodes or more_precise):
            break
        precise = precise or more_precise
        if p is None:
            args = zip((hint, cap, floor), planned, strict=True)
            unchanged = all(_same_value(x, y) for x, y in args)
            p = plan if unchanged else _plan_at(hint, cap, floor, mu, q, n, target, tol, static)
        plan, planned = p, (hint, cap, floor)
        at_least = sizes
        if more_points or more_nodes:  # four times the points, or twice the nodes
            at_least = (4 * sizes[0], sizes[1]) if more_points else (sizes[0], 2 * sizes[1])
        sizes = _sizes_for(p, at_least=at_least, replan=True)
        # (a re-plan's sizes may outgrow what double-double transforms can afford)
        exact = precise and active * sizes[1] <= _PRECISE_WORK
        key = _pass_key(p, sizes, only, exact)
        if _same_pass(key, passed):  # the same computation: the same bracket and diag
            new = last
        else:
            _prepare_pass(valid, mu, q, n, target, p, sizes, only, static, exact)
            new, diag = _staged(
                valid, mu, q, n, target, p, B=sizes[0], J=sizes[1], only=only, precise=exact,
                **static,
            )  # fmt: skip
            if only is not None:  # the answer is the maximum over directions
                up = jax.device_put(np.maximum(np.asarray(new.upper), others_up))
                new = new._replace(upper=up)
        passed = key
        lowered = float(new.upper) < float(bounds.upper)  # (the pass behind the answer's upper)
        if more_nodes:
            better = float(new.lower) > float(bounds.lower)
        elif more_precise:  # (against the same plan's bracket without it)
            better = float(new.upper) - float(new.lower) < float(last.upper) - float(last.lower)
        else:
            better = lowered
        if record is not None and lowered:
            record[:] = [(*planned, sizes, only, others_up, exact)]
        bounds, last = _intersect(bounds, new), new
        if not better:
            if not again:  # more points, nodes or precision for the plan did not help
                break
            # More points or nodes then refine the plan that gave the bracket, not the one
            # that did not improve it (σ = 0.9, q = 1e-5, N = 10⁴, δ = 1e-6: the re-plan at
            # the estimate took 2¹⁸ nodes and a bracket 3.8e-2 wide, after which no more
            # nodes were left for the first plan's 1.4e-3).
            settled = True
            hint, cap, floor, sizes, diag, precise, last, plan, planned, passed = kept
    return bounds


def _plan_at(hint, cap, floor, mu, q, n, target, tol, static):
    """A re-plan's plan (:func:`_plan_stage`) at ``hint``, ``cap`` and ``floor``."""
    args = (np.float64(hint), np.float64(cap), np.float64(floor))
    return _plan_stage(mu, q, n, target, tol, *args, **static)


# The plan's leaves that only size a pass (and are reported by it): passes of two plans
# equal in every other leaf, at the same sizes, compute the same bracket.
_SIZING_ONLY = ("tau_tol", "b_need", "j_need")


def _pass_key(p, sizes, only, precise):
    """What a pass of plan ``p`` computes from: the plan, its sizes, its direction and
    its arithmetic (compared by :func:`_same_pass`)."""
    return p, tuple(int(s) for s in sizes), only, bool(precise)


def _same_pass(x, y):
    """Whether two :func:`_pass_key` describe the same computation: the same sizes,
    direction and arithmetic, and plans equal in every leaf but those that only size a
    pass (compared last, and only as far as they agree: at many phases the planning
    points are megabytes)."""
    (px, *rest_x), (py, *rest_y) = x, y
    if rest_x != rest_y:
        return False
    fields = (f for f in px._fields if f not in _SIZING_ONLY)
    return all(
        np.array_equal(np.asarray(getattr(px, f)), np.asarray(getattr(py, f)), equal_nan=True)
        for f in fields
    )


def _same_value(x, y):
    """Equal floats, NaN equal to NaN (an unset hint)."""
    x, y = float(x), float(y)
    return x == y or (math.isnan(x) and math.isnan(y))


def _same_transforms(p, plan, only):
    """Whether plans ``p`` and ``plan`` have the same damping and period on the directions
    a pass composes (``only``, or every one): at the same sizes, passes of the two then
    compute the same per-round transforms, and differ only by their smoothing."""

    def on(v):
        v = np.asarray(v, np.float64)
        return v if only is None else v[only]

    return np.array_equal(on(p.a), on(plan.a)) and np.array_equal(on(p.W), on(plan.W))


def _deciding_direction(diag, bounds):
    """``(i, up)`` when only direction ``i`` can decide the answer, else ``(None, -inf)``.

    The answer is the maximum over the directions of the neighbouring relation; a
    direction whose certified upper bound (``diag["ups"]``) lies at or below the answer's
    lower bound cannot change it. Re-plans then compose the deciding direction alone (half
    the phase sums: N = 10, σ = 1, q = 1e-3, δ = 1e-10: the add direction's ε is at most
    0.0082 where the answer's lower bound is 0.2703), and the others' bound, ``up``, stays
    in the answer's upper bound.
    """
    ups = np.asarray(diag["ups"], np.float64)
    if ups.size < 2:
        return None, -np.inf
    i = int(np.argmax(ups))
    rest = np.delete(ups, i)
    if not np.all(rest <= float(bounds.lower)):
        return None, -np.inf
    return i, float(np.max(rest))


def _rounding_share(diag, bounds):
    """The per-round transforms' share of the error (``diag["roundings"]``, each
    direction's relative to its own answer) in the directions whose upper bound lies above
    the answer's lower bound: any of them may hold the bracket wide, not only the one whose
    estimate decides. σ = 0.9, q = 1e-6, N = 10⁶, δ = 1e-15: the add direction decides,
    [0.0105458, 0.0105459], with its transforms' share 1e-9, while the remove direction's
    upper bound, 0.0349, held by the rounding of its float64 transforms (a share of 2e3),
    was the answer's."""
    shares = np.asarray(diag["roundings"], np.float64)
    live = np.asarray(diag["ups"], np.float64) > float(bounds.lower)
    return float(np.max(shares[live])) if live.any() else float(diag["rounding"])


def _intersect(bounds, new):
    """Both brackets are valid: their intersection, with the estimate of the lower upper bound."""
    better = float(new.upper) < float(bounds.upper)
    return Bounds(
        jax.device_put(np.maximum(np.asarray(bounds.lower), np.asarray(new.lower))),
        new.estimate if better else bounds.estimate,
        jax.device_put(np.minimum(np.asarray(bounds.upper), np.asarray(new.upper))),
    )


def _meets(bounds, tol, query="epsilon"):
    """The bracket proves ``tol``: ``upper ≤ (1 + tol)·lower ≤ (1 + tol)·truth``; for a δ
    query also ``upper − lower ≤ tol·SMALL_DELTA`` (below ``planning.SMALL_DELTA`` its
    accuracy is absolute)."""
    up, lo = float(bounds.upper), float(bounds.lower)
    if up <= (1.0 + float(tol)) * lo:
        return True
    return query == "delta" and up - lo <= float(tol) * planning.SMALL_DELTA


@programs.query
def _query(query, *args, tol, points, nodes, record=None, **kwargs):
    """The engine behind schedule_epsilon/_delta (see :func:`_query_once`; ``record``:
    see there).

    A tighter tolerance than the default plans wider per-round ranges (a smaller failure
    mass) and narrower smoothing. Where the composed loss is far from the saddle-point
    picture (small q and tiny δ: σ = 0.89, q = 2.8e-5, N = 1.6e6, δ = 1.5e-12), that plan
    can resolve less than the default's ([0, 0.831] at tol = 1e-5 against [0.3597,
    0.3756]): when an eager answer does not meet even the default tolerance, the
    default's bracket, valid too, is intersected with it.

    The GLRT adversary is never stronger than NPO (the most powerful test of each round;
    composition keeps the order), so NPO's upper bound is one for GLRT as well. Where the
    GLRT answer misses its tolerance (the same regime: σ = 0.89, q = 2.8e-5, N = 1.6e6,
    δ = 1.5e-12 gave GLRT ε ≤ 0.743 where NPO's ε ≤ 0.376), NPO's bound caps it.

    An eager derivative (``jax.grad``, ``jax.jvp`` without ``jit`` or ``vmap``) follows
    the re-plans: see :func:`_along_the_replans`.
    """
    if points is None and nodes is None and _derivative_of_known(*args, tol):
        return _along_the_replans(query, *args, tol=tol, **kwargs)
    bounds = _query_once(
        query, *args, tol=tol, points=points, nodes=nodes, record=record, **kwargs
    )  # fmt: skip
    eager = points is None and nodes is None and not is_traced(*args, tol)
    if eager and float(tol) < DEFAULT_TOL and not _meets(bounds, DEFAULT_TOL, query):
        coarse = _query_once(query, *args, tol=DEFAULT_TOL, points=None, nodes=None, **kwargs)
        bounds = _intersect(bounds, coarse)
    if eager and kwargs["adversary"] == "glrt" and not _meets(bounds, tol, query):
        npo = _query(query, *args, tol=tol, points=None, nodes=None, **(kwargs | _NPO))
        if float(npo.upper) < float(bounds.upper):
            bounds = _intersect(bounds, Bounds(np.float64(0.0), npo.upper, npo.upper))
    if eager and query == "epsilon" and float(bounds.lower) == 0.0 and not _meets(bounds, tol):
        # ε = 0 is the answer when δ(0) ≤ δ, which a δ query at 0 certifies directly; an
        # ε query's plan, tilted for a positive ε, may not resolve δ there (one round at
        # σ = 0.3166, q = 6.02e-5, δ = 3.84e-4: [0, 0.0629], while δ(0) ≤ 7.2e-5).
        at_zero = _query_once("delta", *args[:3], 0.0, tol=tol, points=None, nodes=None, **kwargs)
        if float(at_zero.upper) <= float(args[3]):
            zero = jax.device_put(np.float64(0.0))
            bounds = Bounds(zero, zero, zero)
    return bounds


# NPO's options for the GLRT cap (NPO does not depend on d: d = 1 shares its programs).
_NPO = dict(adversary="npo", d=1)


def _derivative_of_known(*values):
    """Whether ``values`` are traced by autodiff alone: an eager ``jax.grad`` or
    ``jax.jvp``, whose inputs' values are known once their derivatives are stopped (under
    ``jit`` or ``vmap`` they are still tracers then)."""
    if not is_traced(values):
        return False
    return not is_traced(jax.tree_util.tree_map(lax.stop_gradient, values))


def _along_the_replans(query, *args, tol, **kwargs):
    """An eager derivative's query: the eager answer, re-plans included, with the
    derivative of the pass behind its upper bound.

    The eager query runs on the inputs' values (their derivatives stopped) and records
    the plan's arguments, sizes, direction and precision of the pass whose upper bound is
    the answer's (:func:`_query_once`'s ``record``); that pass is then run again on the
    traced inputs (``replay``), and its upper bound's derivative (the implicit function
    at its root, :func:`inversion.query_bounds`) is the answer's. The value beside the
    derivative is so the eager answer's, and the derivative that of a bound within the
    tolerance. Before, an eager ``jax.grad`` took the first pass alone: σ = 0.9,
    q = 1e-5, N = 10⁴, δ = 1e-15, the first pass's upper bound 0.140 (the answer 0.0655)
    and a derivative in σ of −0.0022 where a central difference of the answer gives
    −0.67. Where a GLRT answer is capped by NPO's bound, or a tighter ``tol``'s by the
    default's, the derivative stays the query's own pass's. An answer of one round from
    its tails (no pass) takes the first pass's derivative, as before; an answer of ε = 0
    has none.
    """
    known_args, known_tol = jax.tree_util.tree_map(lax.stop_gradient, (args, tol))
    record = []
    answer = _query(
        query, *known_args, tol=known_tol, points=None, nodes=None, record=record, **kwargs
    )  # fmt: skip
    if float(answer.upper) == 0.0:
        return answer
    replay = record[0] if record else None
    passed = _query_once(
        query, *args, tol=tol, points=None, nodes=None, replay=replay, **kwargs
    )  # fmt: skip
    up = passed.upper
    step = jnp.where(jnp.isfinite(up), up - lax.stop_gradient(up), 0.0)
    return answer._replace(upper=answer.upper + step)


def _query_once(
    query,
    noise_multiplier,
    sampling_rate,
    steps,
    target,
    *,
    d,
    adversary,
    neighbouring,
    tol,
    points,
    nodes,
    merge=True,
    record=None,
    replay=None,
):
    """One query at ``tol``. ``merge=False`` keeps repeated phases apart (for tests of the
    engine's own composition).

    ``record``: a list that an eager query fills with the configuration of the pass
    behind its answer's upper bound, ``(hint, cap, floor, sizes, only, others_up,
    precise)`` (the plan's arguments, ``(points, nodes)``, the one direction composed or
    None with the others' bound, double-double transforms); ``replay``: such a
    configuration, whose pass alone a traced query then runs (:func:`_along_the_replans`).
    """
    check_x64("the composition engine")
    validate_options(adversary, 1, neighbouring)
    validate_sizes(tol, points, nodes)
    k = _validate_phases(noise_multiplier, sampling_rate, steps)
    d = phase_dimensions(d, k)
    if not isinstance(target, jax.core.Tracer):
        tv = np.asarray(target, dtype=np.float64)
        if tv.ndim != 0:
            raise ValueError(
                f"{'delta' if query == 'epsilon' else 'epsilon'} must be a scalar; got shape "
                f"{tv.shape} (use jax.vmap over it)"
            )
        if query == "epsilon":
            check_range("delta", target, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        else:
            check_range("epsilon", target)
    # Concrete inputs are prepared with NumPy: eager jax operations would each be a
    # compiled program of their own.
    traced = is_traced(noise_multiplier, sampling_rate, steps, target, tol)
    xp = jnp if traced else np
    sig = xp.atleast_1d(xp.asarray(noise_multiplier, np.float64))
    q = xp.atleast_1d(xp.asarray(sampling_rate, np.float64))
    n = xp.atleast_1d(xp.asarray(steps))
    if not jnp.issubdtype(n.dtype, jnp.integer):
        n = xp.round(n).astype(np.int64)
    n = n.astype(np.int64)
    sig, q, n = xp.broadcast_arrays(sig, q, n)
    if isinstance(d, tuple) and len(d) != sig.shape[0]:
        raise ValueError(f"d must have one value per phase ({sig.shape[0]}); got {len(d)}")
    if merge and not is_traced(noise_multiplier, sampling_rate, steps):
        sig, q, n, d = merge_phases(np.asarray(sig), np.asarray(q), np.asarray(n), d)
    exact = None
    if _exact_one_round(query, n, target, points, nodes, traced):
        i = int(np.argmax(n))
        di = d[i] if isinstance(d, tuple) else d
        answer = one_round.one_round(
            query, sig[i], q[i], target, adversary=adversary, d=di, neighbouring=neighbouring
        )
        exact = Bounds(*(jax.device_put(v) for v in answer))
        if _meets(exact, tol, query):
            return exact
    sig, q, n = pad_phases(sig, q, n, xp)
    mu = 1.0 / sig
    target = xp.asarray(target, np.float64)
    tol_a = xp.asarray(tol, np.float64)
    static = dict(adversary=adversary, d=d, neighbouring=neighbouring, query=query)
    valid, mu, q, n, target = _sanitize(mu, q, n, target, tol_a, query)
    nan, inf = np.float64(np.nan), np.float64(np.inf)
    auto = points is None and nodes is None
    if auto and not traced:
        _prepare_first_pass(valid, mu, q, n, target, tol_a, static)
    if replay is not None:
        hint, cap, floor, (points, nodes), only, others_up, precise = replay
        p = _plan_at(hint, cap, floor, mu, q, n, target, tol_a, static)
        bounds, _ = _staged(
            valid, mu, q, n, target, p, B=points, J=nodes, only=only, precise=precise, **static
        )  # fmt: skip
        return bounds._replace(upper=jnp.maximum(bounds.upper, others_up))
    p = _plan_stage(mu, q, n, target, tol_a, nan, inf, **static)
    if points is None or nodes is None:
        # A plan made eagerly (its inputs' values known: an eager jax.grad stops them,
        # _plan_stage) chooses the sizes; under jit or vmap they are fixed.
        b, j = JIT_SIZES if is_traced(p) else _sizes_for(p)
        points = b if points is None else points
        nodes = j if nodes is None else nodes
    only, others_up = None, -np.inf
    if auto and not traced:
        only, others_up = _lead_alone(p)
        # (a first pass of a few phases is mostly prepared already)
        _prepare_pass(valid, mu, q, n, target, p, (points, nodes), only, static)
    bounds, diag = _staged(valid, mu, q, n, target, p, B=points, J=nodes, only=only, **static)
    if only is not None and others_up > float(bounds.lower):
        # The plan's bound leaves another direction able to decide: compose the others too,
        # each alone, and answer the maximum (:func:`_either`; the lead's compiled
        # programs serve them, the direction being data).
        bounds, diag = _with_the_others(
            (bounds, diag), only, valid, mu, q, n, target, p, B=points, J=nodes, **static
        )
        only, others_up = None, -np.inf
    if record is not None:
        record[:] = [(np.nan, np.inf, 0.0, (points, nodes), only, others_up, False)]
    if auto and not traced:
        sizes = (points, nodes)
        args = (valid, mu, q, n, target, tol_a, sizes, static, only, others_up)
        bounds = _refine(bounds, diag, p, *args, record=record)
    return bounds if exact is None else _intersect(bounds, exact)


# Whether eager queries of one round are answered from the round's tails
# (:mod:`glrt_jax._src.one_round`); tests of the engine's own one-round answers turn it off.
EXACT_ONE_ROUND = True


def _exact_one_round(query, n, target, points, nodes, traced):
    """Whether :func:`_query_once` answers from one round's tails: an eager query of
    automatic sizes whose steps add up to one (ε queries; δ queries at an ε up to
    ``one_round.EPS_MAX``)."""
    if not EXACT_ONE_ROUND or traced or points is not None:
        return False
    if nodes is not None or int(np.sum(n)) != 1:
        return False
    return query == "epsilon" or float(target) <= one_round.EPS_MAX


def _with_the_others(
    lead, only, valid, mu, q, n, target, p, *, adversary, d, neighbouring, **sizes
):
    """The answer over every direction from ``lead``, the ``(bounds, diag)`` of a pass over
    direction ``only`` alone: each other direction composed alone (:func:`_staged`, by the
    lead's compiled programs: the direction is data), and the maximum over them all
    (:func:`_either`), as a pass over every direction apart gives it. For a first pass
    whose plan left out a direction that may decide (:func:`_lead_alone`); the times
    against composing every direction again are in ``docs/measurements.md``."""
    static = dict(adversary=adversary, d=d, neighbouring=neighbouring, **sizes)
    loss, _ = losses.program_key(adversary, d, neighbouring, mu.shape[0])
    passes = [
        lead if i == only else _staged(valid, mu, q, n, target, p, only=i, **static)
        for i in range(len(losses.loss_directions(loss)))
    ]
    return _either(passes)


def _lead_alone(p):
    """``(i, up)`` when the plan shows that direction ``i`` alone decides the answer, else
    ``(None, -inf)``: the others' certified bounds (``p.bound``) lie below ``i``'s
    saddle-point estimate (``p.estimate``), so that the first pass composes ``i`` alone
    (half the phase sums); the caller checks ``up`` against the answer's lower bound and
    composes the other directions too when the estimate was too high
    (:func:`_with_the_others`). Schedules of K = 1000 and 10⁴ distinct phases
    (σ_k ∈ [0.8, 1.5], q_k ∈ [0.005, 0.02], 10 steps, δ = 1e-5): the add direction's ε
    at most 7.10 and 32.62 against the remove direction's 7.56 and 32.99.
    """
    bound = np.asarray(p.bound, np.float64)
    if bound.size < 2:
        return None, -np.inf
    guess = np.asarray(p.estimate, np.float64)
    i = int(np.argmax(guess))
    rest = float(np.max(np.delete(bound, i)))
    if not rest < guess[i]:
        return None, -np.inf
    return i, rest


def _prepare_first_pass(valid, mu, q, n, target, tol, static):
    """On a query's first eager call, trace its phase sums and bounds programs in the
    background while the plan compiles (:func:`programs.preparing`,
    :func:`programs.ahead`): a one-phase query's first call spends about as long tracing
    the three programs as compiling them. Their sizes come from the plan's outputs; the
    guess is the smallest, which a query of a few phases at the default tolerance mostly
    uses."""
    if mu.shape[0] >= FINE_SIZES_FROM:
        return
    nan, inf = np.float64(np.nan), np.float64(np.inf)
    args = (mu, q, n, target, tol, nan, inf, _NO_FLOOR)
    loss, values = losses.program_key(
        static["adversary"], static["d"], static["neighbouring"], mu.shape[0]
    )
    if _plan_program.loaded(*args, values, loss=loss, query=static["query"]):
        return
    try:
        with programs.preparing():
            p = _plan_stage(*args, **static)
    except Exception:  # the eager call prepares it (and raises what is wrong)
        return
    _prepare_pass(valid, mu, q, n, target, p, _sizes_for_needs(mu.shape[0], 0.0, 0.0), None, static)


def _prepare_pass(valid, mu, q, n, target, p, sizes, only, static, precise=False):
    """A pass whose phase sums are not compiled yet (the first pass, whose plan ``p`` may
    be its output shapes, or a re-plan): its sums and bounds are traced in the background
    (:func:`programs.ahead`), the bounds while the sums compile, so that the two compile
    side by side (first calls of K = 100, 1000 and 10⁴ distinct phases 0.1–0.25 s shorter:
    XLA's compilation of one program already keeps both cores of a 2-core CPU busy much
    of the time)."""
    loss, values = losses.program_key(
        static["adversary"], static["d"], static["neighbouring"], mu.shape[0]
    )
    B, J = sizes
    sums = dict(loss=loss, B=B, J=J, precise=precise)
    halves = _halves(n, mu, q, p, values)
    index = None if only is None else np.int64(only)
    if _apart(loss, halves, only):
        index = np.int64(0)  # (one program serves each direction)
    if halves is None:
        if _sums_program.loaded(mu, q, n, p, values, index, **sums):
            return
    elif _part_sums_program.loaded(mu, q, n, p, values, index, *_ZEROS, length=halves[2], **sums):
        return
    programs.ahead(
        lambda: _staged(valid, mu, q, n, target, p, B=B, J=J, only=only, precise=precise, **static)
    )


def schedule_epsilon(
    noise_multiplier,
    sampling_rate,
    steps,
    delta,
    *,
    d: int | Sequence[int] = 1,
    adversary: str = "npo",
    neighbouring: str = "add_remove",
    tol: float = DEFAULT_TOL,
    points: int | None = None,
    nodes: int | None = None,
) -> Bounds:
    """Certified bounds on ε at ``delta`` for a schedule of K phases of DP-SGD.

    Phase k is ``steps[k]`` rounds of the Poisson-subsampled Gaussian mechanism with
    noise multiplier ``noise_multiplier[k]`` (σ/Δ) and sampling rate
    ``sampling_rate[k]``; all rounds are composed per round (independent rounds, each
    seen on its own; the GLRT adversary sees ``‖y_i‖²`` of each round).

    Args:
      noise_multiplier: σ/Δ > 0, scalar or shape (K,).
      sampling_rate: q in (0, 1], scalar or shape (K,).
      steps: non-negative integers, scalar or shape (K,) (at least one positive).
      delta: δ in (0, 1) (scalar; ``jax.vmap`` over it for several).
      d: query dimension seen by the GLRT adversary (ignored by NPO): an integer ≥ 1,
        or one per phase, shape (K,) (concrete; every ``d`` other than all-ones shares
        one compiled program, the values are data).
      adversary: ``"npo"`` or ``"glrt"``.
      neighbouring: ``"add_remove"`` or ``"replace_one"``.
      tol: relative accuracy of the upper bound: the per-round grids and the
        smoothing are chosen so that ``upper`` exceeds ε by about ``tol · ε`` at most
        (1e-3 by default; down to 1e-7).
      points: per-round grid points, one of :data:`POINTS`; ``nodes``: frequency
        nodes, one of :data:`NODES`. ``None`` picks what ``tol`` needs (eagerly, re-plans
        included, and so for an eager ``jax.grad``, whose value is the eager answer
        and whose derivative is that of the pass behind its upper bound) or
        :data:`JIT_SIZES` under ``jit``/``vmap`` (always valid bounds; looser if
        fewer than ``tol`` asks for). The cost is about ``K`` non-uniform FFTs of
        ``points`` points onto ``4 · nodes`` frequencies, independent of the number of
        steps; with concrete phases, ``K`` counts distinct ``(σ, q, d)`` only (repeated
        phases are merged first, :func:`merge_phases`: exact, composition commutes).

    Returns:
      :class:`Bounds` ``(lower, estimate, upper)`` of 0-d arrays, with
      ``lower ≤ ε ≤ upper``; report ``upper``. ``upper`` is ``inf`` when no ε up to
      about four times the Chernoff bound is certified (ε in the thousands, or
      far too few ``nodes``). Invalid inputs under ``jit`` give NaN.

    The method (characteristic functions of per-round grids at fixed frequency nodes,
    smoothed Fourier inversion, one compiled program for any K and any number of
    steps) and its proof are in :mod:`glrt_jax._src.composition`. An eager query of
    one round (the steps add up to 1) is answered from the round's own tails instead,
    a bracket about 1e-9 wide (:mod:`glrt_jax._src.one_round`). Jittable (with
    static ``d``, ``adversary``, ``neighbouring``, ``points``, ``nodes``), vmappable
    and differentiable in ``noise_multiplier`` and ``sampling_rate`` (implicit
    function of the certified upper bound at its root).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> b = accountant.schedule_epsilon([1.0, 2.0], [0.01, 0.02], [500, 500], 1e-5)
      >>> bool(b.lower <= b.upper)
      True
      >>> # GLRT, a different query dimension in each phase (e.g. layers trained in turn)
      >>> g = accountant.schedule_epsilon(
      ...     [1.0, 2.0], [0.01, 0.02], [500, 500], 1e-5, adversary="glrt", d=[10, 100])
      >>> bool(g.upper < b.lower)
      True
    """
    return _query(
        "epsilon",
        noise_multiplier,
        sampling_rate,
        steps,
        delta,
        d=d,
        adversary=adversary,
        neighbouring=neighbouring,
        tol=tol,
        points=points,
        nodes=nodes,
    )


def schedule_delta(
    noise_multiplier,
    sampling_rate,
    steps,
    epsilon,
    *,
    d: int | Sequence[int] = 1,
    adversary: str = "npo",
    neighbouring: str = "add_remove",
    tol: float = DEFAULT_TOL,
    points: int | None = None,
    nodes: int | None = None,
) -> Bounds:
    """Certified bounds on δ at ``epsilon`` for a schedule of K phases (see
    :func:`schedule_epsilon` for the arguments; ``epsilon`` is a real scalar).

    ``tol`` is relative down to δ = 10⁻¹⁵ (``planning.SMALL_DELTA``, below any δ a
    guarantee uses) and absolute below it: an eager answer is final once
    ``upper − lower ≤ tol·10⁻¹⁵``. (Every δ query's upper bound also counts the per-round
    grids' failure mass, at most about 2.8·10⁻²³, so no δ below it is resolved.)

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> b = accountant.schedule_delta(1.0, 0.01, 1000, 2.0)
      >>> bool(b.lower <= b.upper)
      True
    """
    return _query(
        "delta",
        noise_multiplier,
        sampling_rate,
        steps,
        epsilon,
        d=d,
        adversary=adversary,
        neighbouring=neighbouring,
        tol=tol,
        points=points,
        nodes=nodes,
    )
