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
query is about ``K · B · J`` complex multiply-adds (B grid points per round, J nodes).

Method (and why each step is a bound)
-------------------------------------
1. **Per-round grids.** Phase k's loss range ``[lo, hi]`` (P-tails beyond it below
   ``m``, counted as failure mass) is covered by ``B + 1`` points placed by companding:
   point density ∝ (tilted mass density)^{1/3}, which minimises the split's added
   variance ``Σ_b w_b h_b²`` for a given number of points. Geometric planning points near
   the ends and near 0 resolve the near-atom of unsampled rounds (losses of order q).
2. **Two discretisations per round.** *Upper:* connect-the-dots, each bin's P- and
   Q-masses split onto its end points; the pair dominates the round (δ can only grow).
   *Lower:* each bin merged into one atom at ``log(π_b/κ_b)``: binning the output is
   post-processing, so this pair is dominated by the round. Composition preserves both
   orders, and both errors are second order in the bin widths.
3. **Moment generating functions at nodes.** For a damping ``a > 0`` and nodes
   ``ω_j = jΔω`` (``j < J``), each phase contributes ``n_k log M_k(a + iω_j)``, evaluated as
   ``log M_k(a) + iω c_k + log1p(Σ_b v_b e^{iω(x_b − c_k)} − 1)`` (tilted weights ``v``,
   tilted mean ``c_k``). The phases ``e^{iω_j x_b}`` come from two tables of running
   powers and one complex matrix product. Phases are a ``lax.scan`` over chunks: one
   compiled program for any K and any counts.
4. **Smoothed inversion.** With ``X = S + τZ`` (``Z`` standard normal, independent),
   ``E g_ε(X) = (1/2π) ∫ M_S(a+iω) e^{τ²(a+iω)²/2} ĝ(ω) dω`` with
   ``ĝ(ω) = e^{−(a+iω)ε}/((a+iω)(a+1+iω))``. The trapezoid rule with step ``Δω = 2π/W``
   equals ``E g_ε(X)`` plus the aliasing terms ``Σ_{m≠0} e^{amW} δ_X(ε + mW)`` (Poisson
   summation), all non-negative: the sum is an upper bound before truncation, and the
   aliasing is bounded by Chernoff bounds of X for the lower side. Truncating at
   ``Ω = JΔω`` costs at most ``(C/π) e^{−τ²Ω²/2}/(τ²Ω³)``, ``C = M_X(a) e^{−aε}``.
   The damping ``a`` and the period ``W`` are chosen together (aliasing far below
   ``tol·δ`` with the fewest nodes); ``τ²`` is a share of ``tol·ε``.
5. **Removing the smoothing.** Upper: since ``E_Z g_ε(s + τZ) ≥ 1 − e^{ε−s+τ²/2}``,
   ``δ_S(ε) ≤ δ_X(ε) + (e^{τ²/2} − 1) P(S > ε)``, and ``P(S > ε) ≤ δ_S(ε − c)/(1 − e^{−c})``.
   Lower: ``E_Z g_ε(s + τZ) − g_ε(s) ≤ C_τ e^{−(s−ε)²/(8τ²)}`` with
   ``C_τ = e^{2τ²/3}(τ/√(2π) + τ²)``, so ``δ_S(ε) ≥ δ_X(ε) − C_τ 2τ√(2π) f_{S+2τZ}(ε)``;
   the density is one more trapezoid sum on the same nodes. Both are second order in τ.
6. **Floating point.** Per node and phase ``|ŝ − s| ≤ e`` (sums of B terms, the running
   powers), so ``Π_k(|1 + ŝ_k| + e)^{n_k} − Π_k|1 + ŝ_k|^{n_k}`` bounds the error of the
   composed transform at that node; the logs' own rounding, the normalisers
   ``log M_k(a)`` (``(B + 4)u`` relative each) and the phases ``ω(c − ε)`` add their
   terms. All enter the bounds. (The tails of one round are taken as exact to a few
   ulps.)

ε(δ) is found per direction by bisection on the certified bounds: any ε with
upper-δ(ε) ≤ δ is a valid upper bound on ε whatever the bound's shape, and it is
differentiated by the implicit-function rule at that root (grids held fixed).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import logsumexp

from glrt_jax._src import losses
from glrt_jax._src.validation import ADVERSARIES, NEIGHBOURINGS, check_choice, check_x64

_U = 0.5 * float(np.finfo(np.float64).eps)
# Planning points per direction (uniform, geometric from each end, geometric around 0).
_N_UNIFORM = 256
_N_GEOM = 192
_GEOM = np.geomspace(1e-13, 1.0, _N_GEOM)
# Chernoff tilts of the planner.
_T_POS = np.geomspace(1e-3, 1e6, 73)
# Extra tilts (as multiples of 1/s, s the tilted spread) for Chernoff and aliasing bounds.
_U_MULT = np.array([0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
# Frequency truncation: e^{−τ²Ω²/2} = e^{−_TRUNC_EXP} at the last node.
_TRUNC_EXP = 45.0
# Shifts c (multiples of log(1 + 1/a)) tried when the smoothing is removed.
_C_LADDER = (0.1, 0.3, 1.0, 3.0)
# Largest log of (trapezoid scale M(a) e^{−aε}) / δ the damping may bring.
_LOG_SCALE_MAX = 12.0
_BISECT = 64
# Share of the tolerance given to the smoothing.
_TAU_SHARE = 0.35
_BATCH = 8
# Phases per vmapped chunk of the composition scan.
_CHUNK = 8


class Bounds(NamedTuple):
    """A (lower, estimate, upper) triple; the true value lies in [lower, upper]."""

    lower: Any
    estimate: Any
    upper: Any


def _safe_log(v):
    pos = v > 0
    return jnp.where(pos, jnp.log(jnp.where(pos, v, 1.0)), -jnp.inf)


def _planning_points(lo, hi):
    """Sorted planning points on [lo, hi]: uniform, geometric from both ends and around 0."""
    w = hi - lo
    g = jnp.asarray(_GEOM)
    u = jnp.linspace(0.0, 1.0, _N_UNIFORM)
    around = jnp.concatenate([g, -g]) * jnp.maximum(jnp.abs(lo), jnp.abs(hi))
    pts = jnp.concatenate([lo + w * u, lo + w * g, hi - w * g, jnp.clip(around, lo, hi)])
    return jnp.sort(pts)


def _is_add(directions):
    """Per-direction flags for :func:`_bins` (``None`` for the single replace pair)."""
    if directions == ("replace",):
        return None
    return jnp.asarray([direction == "add" for direction in directions])


def _bins(adversary, d, is_add, mu, q, x):
    """P- and Q-masses of the bins between consecutive points, and the outside P-mass.

    ``is_add``: a boolean scalar (traced is fine) for the add/remove pairs, ``None`` for
    the replace pair.
    """
    is_add = None if is_add is None else jnp.broadcast_to(is_add, x.shape)
    sp, fp, sq, fq = losses.segment_tails(adversary, d, mu, q, x, is_add)
    # Differences of the smaller tail (full relative accuracy).
    pi = jnp.where(sp[:-1] < 0.5, sp[:-1] - sp[1:], fp[1:] - fp[:-1])
    kappa = jnp.where(sq[:-1] < 0.5, sq[:-1] - sq[1:], fq[1:] - fq[:-1])
    outside = fp[0] + sp[-1]
    return jnp.maximum(pi, 0.0), jnp.maximum(kappa, 0.0), outside


def _split(pi, kappa, x):
    """Connect-the-dots pmf on the points ``x`` (bins of any widths)."""
    h = x[1:] - x[:-1]
    exp_x = jnp.exp(jnp.clip(x[:-1], -700.0, 700.0))
    up = jnp.clip((pi - exp_x * kappa) / -jnp.expm1(-jnp.maximum(h, 1e-300)), 0.0, pi)
    return jnp.pad(pi - up, (0, 1)) + jnp.pad(up, (1, 0)), up


def _merge(pi, kappa, x):
    """Binned pair: one atom per bin at log(π/κ) (bins with a zero mass dropped)."""
    ok = (pi > 0) & (kappa > 0)
    loc = jnp.where(ok, _safe_log(pi) - _safe_log(kappa), 0.5 * (x[:-1] + x[1:]))
    loc = jnp.clip(loc, x[:-1], x[1:])
    return loc, jnp.where(ok, pi, 0.0)


def _log_mgf(x, p, ts):
    return logsumexp(ts[..., None] * x + _safe_log(p), axis=-1)


def _plan_phase(adversary, d, directions, mu, q, log_m):
    """Planning points, split pmf and ranges of one phase, per direction."""
    bound = 0.5 * mu * mu + 40.0 * mu + 10.0 - jnp.log(q)
    lo, hi = losses.probe_ranges(adversary, d, directions, mu, q, jnp.exp(log_m), bound)
    is_add = _is_add(directions)

    def one(lo_i, hi_i, add_i):
        x = _planning_points(lo_i, hi_i)
        pi, kappa, _ = _bins(adversary, d, add_i, mu, q, x)
        return x, _split(pi, kappa, x)[0]

    xs, ps = jax.vmap(one, in_axes=(0, 0, None if is_add is None else 0))(lo, hi, is_add)
    return lo, hi, xs, ps


def _compand_counts(xp, pmf, t):
    """Per planning bin: the companding share ``w^{1/3} h^{2/3}`` (tilted and plain mass)."""
    logw = _safe_log(pmf) + t * xp
    w = jnp.exp(logw - logsumexp(logw))
    w0 = pmf / jnp.sum(pmf)
    wb = 0.5 * (w[:-1] + w[1:]) + 0.5 * (w0[:-1] + w0[1:])  # tilted and untilted, per bin
    width = jnp.maximum(xp[1:] - xp[:-1], 0.0)
    dens = jnp.where(width > 0, (wb / jnp.where(width > 0, width, 1.0)) ** (1.0 / 3.0), 0.0)
    return dens * width, width


def _companded_grid(xp, pmf, t, B):
    """B + 1 points on [xp_0, xp_-1], density ∝ (tilted mass density)^{1/3}.

    With a share 0.9 of the points placed so, the split's ``Σ_b w_b h_b²`` is at most
    ``(Σ_b w_b^{1/3} h_b^{2/3})³ / (0.81 B²)`` (Hölder's equality case).
    """
    count, width = _compand_counts(xp, pmf, t)
    total = jnp.sum(count)
    # A floor: a tenth of the points spread uniformly, so no bin is ever empty of points.
    count = 0.9 * count / total + 0.1 * width / jnp.sum(width)
    cum = jnp.concatenate([jnp.zeros(1), jnp.cumsum(count)])
    cum = cum / cum[-1]
    levels = jnp.linspace(0.0, 1.0, B + 1)
    x = jnp.interp(levels, cum, xp)
    return x.at[0].set(xp[0]).at[-1].set(xp[-1])


def _nodes_terms(x, p, a, dw, J):
    """Per-node ``log1p`` term (nodes ``kΔω``, k < J), its error bound, tilted mean, log M(a).

    ``Σ_b v_b e^{iω_k(x_b − c)}`` for ``k = k0 R + k1`` is a product of two tables of
    phases, ``e^{i k0 R Δω (x − c)}`` and ``e^{i k1 Δω (x − c)}``, each the running
    product of one phase per point: one sine and cosine per point and one complex
    matrix product, instead of J·B of them.
    """
    lp = _safe_log(p)
    logw = lp + a * x
    log_m = logsumexp(logw)
    v = jnp.exp(logw - log_m)
    c = jnp.sum(v * x)
    xc = x - c
    R = _row(J)
    e1 = jnp.exp(1j * dw * xc)
    t1, eR = _powers(e1, R)  # e1^k1 (k1 < R), e1^R
    t0, _ = _powers(eR, J // R)  # (e1^R)^k0
    s_all = ((t0 * v) @ t1.T).reshape(-1) - 1.0
    # Rounding: the sum of B terms, the running products and the final subtraction give
    # |ŝ − s| ≤ e_abs; so |φ/M(a)| ≤ |1 + ŝ| + e_abs at every node, whatever ŝ is.
    gam = (x.shape[0] + 2 * R + 2 * (J // R) + 16) * _U
    e_abs = 4.0 * gam
    l1p = jnp.log1p(s_all)
    log_up = jnp.log(jnp.abs(1.0 + s_all) + e_abs)
    rel = 4.0 * _U * (jnp.abs(l1p) + jnp.pi)  # rounding of log1p itself
    return l1p, log_up, rel, c, log_m


def _powers(e, n):
    """Rows ``e^k`` for ``k < n`` (n a power of two) by doubling, and ``e^n``."""
    table = jnp.ones((1,) + e.shape, e.dtype)
    p = e
    while table.shape[0] < n:
        table = jnp.concatenate([table, table * p])
        p = p * p
    return table, p


def _row(J):
    """Row length of the two-table phase product: about √J, a power of two."""
    return 1 << max(3, (int(math.isqrt(J)) - 1).bit_length())


def _plan(adversary, d, neighbouring, mu, q, n, query, target, tol, J, hint=jnp.nan, tau_scale=1.0):
    directions = losses.directions(adversary, neighbouring)
    nf = n.astype(jnp.float64)
    n_tot = jnp.sum(nf)
    log_target = jnp.log(target) if query == "epsilon" else jnp.log(1e-12)
    log_m = jnp.minimum(log_target, jnp.log(1e-12)) - 25.0 - jnp.log(n_tot)

    def one(args):
        m, r = args
        return _plan_phase(adversary, d, directions, m, r, log_m)

    lo, hi, xp, pp = lax.map(one, (mu, q), batch_size=_BATCH)  # (K, n_dir[, P])
    ts = jnp.asarray(_T_POS)
    lam = jax.vmap(jax.vmap(lambda x, p: _log_mgf(x, p, ts)))(xp, pp)  # (K, n_dir, T)
    lam_tot = jnp.einsum("k,kdt->dt", nf, lam)

    def tilted_var(x, p, tt):
        logw = _safe_log(p) + tt * x
        w = jnp.exp(logw - logsumexp(logw))
        m1 = jnp.sum(w * x)
        return jnp.sum(w * (x - m1) ** 2)

    def composed_sd(tt):  # (n_dir,) spread of S under the tilt tt (per direction)
        var = jax.vmap(jax.vmap(tilted_var, in_axes=(0, 0, 0)), in_axes=(0, 0, None))(xp, pp, tt)
        return jnp.sqrt(jnp.maximum(jnp.einsum("k,kd->d", nf, var), 1e-30))

    if query == "epsilon":
        eps_ch = (lam_tot - log_target) / ts
        it = jnp.argmin(eps_ch, axis=-1)
        eps_ch_min = jnp.min(eps_ch, axis=-1)
        # Planning needs ε from below: the saddle-point correction of the Chernoff bound
        # (δ ≈ e^{Λ(t)−tε}/(t(1+t)√(2π)s)), with a margin.
        t_s = ts[it]
        corr = jnp.log(t_s * (1.0 + t_s) * math.sqrt(2.0 * math.pi) * composed_sd(t_s)) / t_s
        eps_sp = eps_ch_min - jnp.maximum(corr, 0.0)
        eps_ref = jnp.maximum(0.8 * eps_sp, 0.1 * eps_ch_min)
        eps_ref = jnp.where(jnp.isfinite(hint), jnp.minimum(eps_ref, hint), eps_ref)
        eps_ref = jnp.maximum(eps_ref, 1e-9)
        log_delta_ref = jnp.full(eps_ref.shape, log_target)
    else:
        obj = lam_tot - ts * target
        it = jnp.argmin(obj, axis=-1)
        # δ(ε) to a relative tol: an ε-error of tol/a (a the saddle point).
        eps_ref = 1.0 / ts[it]
        eps_ch_min = jnp.full(eps_ref.shape, target)
        log_delta_ref = jnp.min(obj, axis=-1) - 5.0
    # Damping a and period W of the trapezoid rule. Aliasing from below is at most
    # e^{−aW}/(1 − e^{−aW}) and from above M(b) e^{−bε}/(e^{(b−a)W} − 1) for b > a; both
    # must stay far below tol·δ. Choose, among a no larger than the saddle point and with
    # the scale M(a) e^{−aε} within e^{_LOG_SCALE_MAX} of δ (rounding errors are relative to
    # the scale), the one that needs the fewest nodes
    # (∝ W/τ).
    log_margin = 8.0 - jnp.log(tol) - log_delta_ref[:, None]  # (n_dir, 1)
    w_below = log_margin / ts[None, :]
    num = lam_tot - ts[None, :] * eps_ref[:, None] + log_margin  # (n_dir, T) at b
    gap = ts[None, :] - ts[:, None]  # [a, b]
    w_above = jnp.min(
        jnp.where(gap[None] > 0, num[:, None, :] / jnp.where(gap > 0, gap, 1.0)[None], jnp.inf),
        axis=-1,
    )
    w_cand = jnp.maximum(jnp.maximum(w_below, w_above), 1e-3)
    c_cand = jnp.log1p(1.0 / ts)[None, :]
    factor_c = 0.5 * (1.0 + ts) + 0.5 * jnp.exp(ts * c_cand) / (ts * -jnp.expm1(-c_cand))
    tau_c = jnp.sqrt(_TAU_SHARE * tol * eps_ref[:, None] / factor_c)
    log_scale = lam_tot - ts[None, :] * eps_ref[:, None] - log_delta_ref[:, None]
    ok = (ts[None, :] <= ts[it][:, None]) & (log_scale <= _LOG_SCALE_MAX) & jnp.isfinite(w_cand)
    ok = ok & (ts < ts[-1])[None, :]
    cost = jnp.where(ok, w_cand / tau_c, jnp.inf)
    ia = jnp.where(jnp.any(ok, axis=-1), jnp.argmin(cost, axis=-1), it)
    a = ts[ia]
    W = jnp.take_along_axis(w_cand, ia[:, None], axis=-1)[:, 0]
    W = jnp.where(jnp.isfinite(W), W, 100.0)
    tau_tol = tau_scale * jnp.take_along_axis(tau_c, ia[:, None], axis=-1)[:, 0]

    s_a = composed_sd(a)
    omega_max = J * 2.0 * jnp.pi / W
    tau_nodes = math.sqrt(2.0 * _TRUNC_EXP) / omega_max
    tau = jnp.maximum(tau_tol, tau_nodes)
    # Points per round: the split adds at most Σ_k n_k (Σ c)³/(0.81 B²)/4 of tilted
    # variance; it moves ε by about (1 + a)/2 times that. Give it 0.3 tol ε.
    share = jax.vmap(
        jax.vmap(lambda x, p, tt: jnp.sum(_compand_counts(x, p, tt)[0]), (0, 0, 0)),
        (0, 0, None),
    )(xp, pp, a)
    v_b = jnp.einsum("k,kd->d", nf, share**3) / (0.81 * 4.0)
    b_need = jnp.sqrt(v_b * (1.0 + a) / (2.0 * 0.3 * tol * eps_ref))
    j_need = math.sqrt(2.0 * _TRUNC_EXP) / tau_tol * W / (2.0 * math.pi)
    # Only the directions that can decide the answer ask for accuracy; the others are
    # computed at whatever sizes (their bounds stay valid, and far below).
    if query == "epsilon":
        relevant = eps_ch_min >= 0.5 * jnp.max(eps_ch_min)
    else:
        log_ch = jnp.min(obj, axis=-1)
        relevant = log_ch >= jnp.max(log_ch) - math.log(100.0)
    b_need = jnp.where(relevant, b_need, 0.0)
    j_need = jnp.where(relevant, j_need, 0.0)
    return dict(
        sup=jnp.einsum("k,kd->d", nf, hi),
        b_need=b_need,
        j_need=j_need,
        directions=directions,
        a=a,
        tau=tau,
        tau_tol=tau_tol,
        W=W,
        s_a=s_a,
        lo=lo,
        hi=hi,
        xp=xp,
        pp=pp,
        eps_ref=eps_ref,
        eps_ch=eps_ch_min,
    )


@functools.partial(jax.jit, static_argnames=("adversary", "d", "neighbouring", "B", "J", "query"))
def compose_query(
    mu, q, n, target, tol, hint=jnp.nan, tau_scale=1.0, *, adversary, d, neighbouring, B, J, query
):
    """Bounds on ε(δ = target) or δ(ε = target) for K phases; returns (Bounds, diag).

    ``hint``: an ε known to lie at or below the answer (ε queries), to plan with when the
    saddle-point guess from the Chernoff bound is too high; NaN for none. ``tau_scale``
    (≤ 1) shrinks the planned smoothing, for losses whose density at ε is large compared
    with the saddle-point picture (``diag["smoothing"]`` says when).
    """
    valid = jnp.all((mu > 0) & jnp.isfinite(mu) & (q > 0) & (q <= 1) & (n >= 0))
    valid = valid & jnp.any(n > 0) & jnp.isfinite(target) & (tol > 0)
    if query == "epsilon":
        valid = valid & (target > 0) & (target < 1)
    mu = jnp.where(valid, mu, 1.0)
    q = jnp.where(valid, q, 0.5)
    n = jnp.where(valid, n, 1)
    target = jnp.where(valid, target, 0.5)
    plan = _plan(adversary, d, neighbouring, mu, q, n, query, target, tol, J, hint, tau_scale)
    plan = {k: (lax.stop_gradient(v) if isinstance(v, jax.Array) else v) for k, v in plan.items()}
    is_add = _is_add(plan["directions"])
    add_axis = None if is_add is None else 0
    a, tau, W = plan["a"], plan["tau"], plan["W"]
    dw = 2.0 * jnp.pi / W  # (n_dir,)
    # Tilts for Chernoff and aliasing bounds: a ± multiples of 1/s, and 0 < b < a.
    g = jnp.asarray(_U_MULT)
    b_up = a[:, None] + g[None, :] / plan["s_a"][:, None]
    b_dn = a[:, None] * jnp.asarray([0.0, 0.25, 0.5, 0.75, 0.9])[None, :]
    b_all = jnp.concatenate([b_up, b_dn, a[:, None]], axis=-1)  # (n_dir, nb)

    def one_direction(m, r, xp, pp, a_i, dw_i, b_i, add_i):
        """One phase's terms in one direction (per round)."""
        x = lax.stop_gradient(_companded_grid(xp, pp, a_i, B))
        pi, kappa, outside = _bins(adversary, d, add_i, m, r, x)
        p_up, up = _split(pi, kappa, x)
        x_lo, p_lo = _merge(pi, kappa, x)
        x_lo = lax.stop_gradient(x_lo)
        # MGFs for the Chernoff and aliasing bounds, from the split pair for both sides:
        # it dominates the round, which dominates the merged pair, and for b ≥ 0
        # E_P[e^{bL}] = E_Q[(P/Q)^{1+b}] is an f-divergence (data processing).
        mg = _log_mgf(x, p_up, b_i)
        sides = []
        for xx, pv in ((x, p_up), (x_lo, p_lo)):
            l1p, log_up, rel, c, log_m = _nodes_terms(xx, pv, a_i, dw_i, J)
            sides.append((l1p, log_up, rel, c, log_m, mg))
        h = x[1:] - x[:-1]
        theta = jnp.where(pi > 0, up / jnp.where(pi > 0, pi, 1.0), 0.0)
        lw = _safe_log(pi) + a_i * 0.5 * (x[1:] + x[:-1])
        wt = jnp.exp(lw - logsumexp(lw))
        dv = jnp.sum(wt * theta * (1.0 - theta) * h * h)
        keep = jnp.log1p(-jnp.minimum(outside, 1.0))
        return sides[0], sides[1], (keep, dv)

    per_direction = jax.vmap(one_direction, in_axes=(None, None, 0, 0, 0, 0, 0, add_axis))

    def contribution(args):
        """One phase's terms, already multiplied by its count (zero for padding)."""
        m, r, k, xp, pp = args
        terms = per_direction(m, r, xp, pp, a, dw, b_all, is_add)
        kf = k.astype(jnp.float64)
        return jax.tree_util.tree_map(lambda v: jnp.where(k > 0, kf * v, 0.0 * v), terms)

    # Phases in chunks: a scan over chunks (memory of one chunk), a vmap within.
    kk = mu.shape[0]
    chunk = math.gcd(kk, _CHUNK)
    xs = (mu, q, n, plan["xp"], plan["pp"])
    xs = jax.tree_util.tree_map(lambda v: v.reshape((kk // chunk, chunk) + v.shape[1:]), xs)

    def body(acc, block):
        part = jax.vmap(contribution)(block)
        part = jax.tree_util.tree_map(lambda v: jnp.sum(v, axis=0), part)
        return jax.tree_util.tree_map(jnp.add, acc, part), None

    init = jax.tree_util.tree_map(
        jnp.zeros_like, jax.eval_shape(contribution, jax.tree_util.tree_map(lambda v: v[0, 0], xs))
    )
    carry, _ = lax.scan(body, init, xs)  # leaves with a leading direction axis
    n_tot = jnp.sum(n.astype(jnp.float64))
    gam = (B + 4) * _U
    wk = jnp.full((J,), 2.0).at[0].set(1.0)  # trapezoid weights on k ≥ 0 (real parts)
    R = _row(J)

    def evaluate(cr, a_i, tau_i, W_i, dw_i, b_i, sup_i):
        """One direction's (upper, lower, estimate, smoothing share) for the query."""
        om = dw_i * jnp.arange(J)  # nodes, 0 included
        z = a_i + 1j * om
        om_max = J * dw_i
        cr_sg = lax.stop_gradient(cr)

        def prepare(side, var, weight, cap, trunc):
            """Node values of one smoothed transform, with ε-free error terms.

            ``(Δω/2π) Σ_k w_k Re[M_S(a+iω_k)/M_S(a) e^{var((a+iω)²−a²)/2} e^{−iωε} weight_k]``
            is ``trap(prepared, ε)``; it is relative to the scale
            ``M_S(a) e^{var a²/2 − aε}``.
            """
            lam, log_up, rel, cs, lm, _ = side
            factor = jnp.exp(0.5 * var * (z * z - a_i * a_i) + 1j * om * cs) * weight
            g = jnp.exp(lam) * factor
            mag = jnp.abs(g)
            # Per node: Π(|φ̂_k| + e)^{n_k} − Π|φ̂_k|^{n_k} bounds the error of the product,
            # and the rounding of the logs adds e^{rel} − 1 relative.
            node_err = jnp.abs(factor) * (jnp.exp(log_up) - jnp.exp(jnp.real(lam)))
            node_err = node_err + mag * jnp.expm1(rel)
            fp = dw_i / (2.0 * jnp.pi) * jnp.sum(wk * jnp.minimum(node_err, jnp.abs(factor) + cap))
            # The sums' rounding, and the phases ω(c − ε) rounded to a few ulps of their
            # size (the latter grows with |c| + |ε|: kept apart).
            total_mag = dw_i / (2.0 * jnp.pi) * jnp.sum(wk * mag)
            fp = fp + 4.0 * J * _U * total_mag
            phase = 8.0 * _U * om[-1] * total_mag
            base = (wk * g).reshape(J // R, R)
            return base, fp + trunc, phase, jnp.abs(cs), lm + 0.5 * var * a_i * a_i

        def trap(prep, eps):
            base, err, phase, abs_c, log_c0 = prep
            err = err + phase * (abs_c + jnp.abs(eps))
            p1 = jnp.exp(-1j * dw_i * eps * jnp.arange(R))
            p0 = jnp.exp(-1j * (R * dw_i) * eps * jnp.arange(J // R))
            val = dw_i / (2.0 * jnp.pi) * jnp.real(p0 @ (base @ p1))
            return val, err, log_c0 - a_i * eps

        def side_eval(side):
            """δ_X, the density of S + 2τZ, Chernoff and aliasing bounds, as functions of ε."""
            mgs = side[-1]
            safe_om = jnp.where(om > 0, om, 1.0)
            cap = jnp.where(om > 0, jnp.exp(-0.5 * tau_i**2 * om * om) / safe_om**2, jnp.inf)
            trunc = jnp.exp(-0.5 * tau_i**2 * om_max**2) / (jnp.pi * tau_i**2 * om_max**3)
            prep_d = prepare(side, tau_i**2, 1.0 / (z * (z + 1.0)), cap, trunc)
            v = 4.0 * tau_i**2
            cap_f = jnp.exp(-0.5 * v * om * om)
            trunc_f = jnp.exp(-0.5 * v * om_max**2) / (jnp.pi * v * om_max)
            prep_f = prepare(side, v, 1.0, cap_f, trunc_f)

            def delta_x(eps):  # E g_ε(S + τZ)
                return trap(prep_d, eps)

            def density(eps):  # density of S + 2τZ at ε
                return trap(prep_f, eps)

            def chernoff(y):  # bound on P(S > y)
                vals = jnp.where(b_i > 0, mgs - b_i * y, jnp.inf)
                return jnp.exp(jnp.minimum(jnp.min(vals), 0.0))

            def alias(eps):  # Σ_{m≠0} e^{amW} δ_X(ε + mW)
                log_mx = mgs + 0.5 * tau_i**2 * b_i * b_i
                above = jnp.where(
                    b_i > a_i, log_mx - b_i * eps - _log_expm1((b_i - a_i) * W_i), jnp.inf
                )
                below = jnp.where(
                    b_i < a_i,
                    jnp.where(b_i > 0, log_mx - b_i * eps, 0.0) - _log_expm1((a_i - b_i) * W_i),
                    jnp.inf,
                )
                return jnp.exp(jnp.min(above)) + jnp.exp(jnp.min(below))

            return delta_x, density, chernoff, alias

        live_up = side_eval(cr[0])
        sg_up, sg_lo = side_eval(cr_sg[0]), side_eval(cr_sg[1])

        def upper_delta(eps, live=False):
            keep = (cr if live else cr_sg)[2][0]
            delta_x, _, chern, _ = live_up if live else sg_up

            def tplus(e):
                val, err, log_c = delta_x(e)
                return jnp.maximum(val + err, 0.0) * jnp.exp(log_c + n_tot * gam)

            gm = jnp.expm1(0.5 * tau_i**2)

            def smooth_at(c):  # (e^{τ²/2} − 1) P(S > ε), P(S > ε) ≤ δ_S(ε − c)/(1 − e^{−c})
                return gm / -jnp.expm1(-c) * (tplus(eps - c) + gm * chern(eps - c))

            cs = jnp.log1p(1.0 / a_i) * jnp.asarray(_C_LADDER)
            smooth = jnp.min(jax.vmap(smooth_at)(cs))
            fail = -jnp.expm1(keep)
            # Above the largest composed loss of the grids only the failure mass is left.
            inside = jnp.where(eps < sup_i, tplus(eps) + smooth, 0.0)
            return jnp.minimum(inside + fail, 1.0)

        def lower_delta(eps):
            delta_x, density, _, alias = sg_lo
            val, err, log_c = delta_x(eps)
            val = (val - err) * jnp.exp(log_c - n_tot * gam) - alias(eps)
            f, f_err, log_cf = density(eps)
            c_tau = jnp.exp(tau_i**2 * (0.5 + 1.0 / 6.0)) * (
                tau_i / math.sqrt(2.0 * math.pi) + tau_i**2
            )
            deficit = c_tau * 2.0 * tau_i * math.sqrt(2.0 * math.pi) * jnp.maximum(f + f_err, 0.0)
            deficit = deficit * jnp.exp(log_cf + n_tot * gam)
            return jnp.where(eps < sup_i, jnp.maximum(val - deficit, 0.0), 0.0)

        def raw_delta(eps):  # the two discretisations' δ_X, averaged
            out = 0.0
            for delta_x, _, _, _ in (sg_up, sg_lo):
                val, _, log_c = delta_x(eps)
                out = out + 0.5 * jnp.maximum(val, 0.0) * jnp.exp(log_c)
            return jnp.where(eps < sup_i, out, 0.0)

        def raw_density(eps):
            f, _, log_cf = sg_up[1](eps)
            return jnp.maximum(f, 0.0) * jnp.exp(log_cf)

        # Smoothing's share of the error, relative: δ_X − δ_S ≈ (τ²/2)(f_S(ε) − …), which
        # the plan sized from the saddle-point picture; a loss with a steep tail at ε (one
        # round, small q) has a density there far above it. Reported so that an eager
        # caller can re-plan.
        tiny = jnp.finfo(jnp.float64).tiny
        if query == "delta":
            eps = target
            up = upper_delta(eps, live=True)
            low, est = lower_delta(eps), raw_delta(eps)
            share = 0.5 * tau_i**2 * raw_density(eps) / jnp.maximum(est, tiny)
            return up, low, est, share
        delta = lax.stop_gradient(target)
        hi0 = 4.0 * jnp.max(plan["eps_ch"]) + 10.0
        eu = _first_below(upper_delta, delta, jnp.asarray(0.0), hi0)
        ee = _first_below(raw_delta, delta, jnp.asarray(0.0), hi0)
        el = _last_above(lower_delta, delta, jnp.where(jnp.isfinite(eu), eu, ee))
        # Implicit-function derivative at the root: U(ε(θ), θ) = δ.
        finite = jnp.isfinite(eu) & (eu > 0)
        e0 = jnp.where(finite, eu, 1.0)
        slope = lax.stop_gradient(jax.grad(upper_delta)(e0))
        ok = finite & (slope < 0)
        # U(ε, θ) = δ: dε = −(∂U/∂θ dθ − dδ)/(∂U/∂ε), δ included (calibration needs it).
        val = upper_delta(e0, live=True) - (target - lax.stop_gradient(target))
        corr = (val - lax.stop_gradient(val)) / jnp.where(ok, slope, 1.0)
        up = jnp.where(ok, eu - corr, eu)
        e1 = jnp.where(jnp.isfinite(ee) & (ee > 0), ee, 1.0)
        rate = jnp.abs(jax.grad(raw_delta)(e1))
        share = 0.5 * tau_i**2 * raw_density(e1) / jnp.maximum(rate * e1, tiny)
        return up, el, ee, share

    ups, lows, ests, shares = jax.vmap(evaluate)(carry, a, tau, W, dw, b_all, plan["sup"])
    up = jnp.max(ups)
    low = lax.stop_gradient(jnp.max(lows))
    est = lax.stop_gradient(jnp.max(ests))
    out = Bounds(low, jnp.clip(est, low, up), up)
    out = Bounds(*(jnp.where(valid, v, jnp.nan) for v in out))
    decide = jnp.argmax(ests)
    diag = dict(
        a=a,
        tau=tau,
        tau_tol=plan["tau_tol"],
        W=W,
        dv=carry[2][1],
        eps_ref=plan["eps_ref"],
        b_need=plan["b_need"],
        j_need=plan["j_need"],
        smoothing=lax.stop_gradient(shares[decide]),
        tau_over_tol=(tau / plan["tau_tol"])[decide],
        ups=ups,
    )
    return out, diag


def _log_expm1(x):
    return jnp.where(x > 30.0, x, jnp.log(jnp.expm1(jnp.minimum(x, 30.0))))


def _first_below(fn, level, lo, hi):
    """Smallest ε found in [lo, hi] with fn(ε) ≤ level (bisection; inf if fn(hi) > level).

    Only points where fn was evaluated and found ≤ level are ever returned, so the result
    is valid whatever the shape of fn. (They are not evaluated again: a second evaluation
    of the same expression, compiled differently, may round to the other side of level.)
    """
    lo_ok, hi_ok = jax.vmap(fn)(jnp.stack([lo, hi])) <= level

    def body(_, state):
        a, b, b_ok = state
        mid = 0.5 * (a + b)
        ok = fn(mid) <= level
        return jnp.where(ok, a, mid), jnp.where(ok, mid, b), b_ok | ok

    _, b, b_ok = lax.fori_loop(0, _BISECT, body, (lo, hi, hi_ok))
    return jnp.where(lo_ok, lo, jnp.where(b_ok, b, jnp.inf))


_LADDER = np.concatenate([[0.0], np.geomspace(1e-7, 1.0, 29)])


def _last_above(fn, level, start):
    """A large ε ≤ start with fn(ε) ≥ level (0 if none): a ladder down, then bisection.

    As in :func:`_first_below`, only points found to pass are returned.
    """
    pts = start * (1.0 - jnp.asarray(_LADDER))
    ok = jax.vmap(fn)(pts) >= level
    j = jnp.argmax(ok)  # first passing rung (largest ε)
    any_ok = jnp.any(ok)
    good = pts[j]
    bad = jnp.where(j > 0, pts[jnp.maximum(j - 1, 0)], good)

    def body(_, ab):
        g, b = ab
        mid = 0.5 * (g + b)
        m_ok = fn(mid) >= level
        return jnp.where(m_ok, mid, g), jnp.where(m_ok, b, mid)

    g, _ = lax.fori_loop(0, 40, body, (good, bad))
    return jnp.where(any_ok, g, 0.0)


# Re-plans of an eager query whose answer contradicts the plan (see _refine), and the
# smallest smoothing scale they go down to.
_REPLANS = 4
_TAU_SCALE_MIN = 1.0 / 256.0
# Per-round grid points and frequency nodes the eager entry points choose from (steps of
# four: fewer compiled programs, at most 4× the work of the exact need).
POINTS = (128, 512, 2048, 8192, 16384)
NODES = (256, 1024, 4096, 16384, 65536)
# (points, nodes) under jit, where tol cannot choose them.
JIT_SIZES = (512, 4096)


@functools.partial(jax.jit, static_argnames=("adversary", "d", "neighbouring", "query"))
def _needed_sizes(mu, q, n, target, tol, hint, tau_scale, *, adversary, d, neighbouring, query):
    """Grid points and nodes the planned tilt, window and smoothing ask for."""
    plan = _plan(
        adversary, d, neighbouring, mu, q, n, query, target, tol, NODES[0], hint, tau_scale
    )
    return jnp.max(plan["b_need"]), jnp.max(plan["j_need"])


def choose_sizes(mu, q, n, target, tol, hint=jnp.nan, tau_scale=1.0, **static):
    """(B, J) from :data:`POINTS` and :data:`NODES` that meet ``tol`` (largest if none)."""
    hint = jnp.asarray(hint, jnp.float64)
    tau_scale = jnp.asarray(tau_scale, jnp.float64)
    needed = _needed_sizes(mu, q, n, target, tol, hint, tau_scale, **static)
    b_need, j_need = (float(v) for v in needed)
    b = next((s for s in POINTS if s >= 1.1 * b_need), POINTS[-1])
    j = next((s for s in NODES if s >= 1.1 * j_need), NODES[-1])
    return b, j


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------


def _is_traced(*values) -> bool:
    return any(isinstance(v, jax.core.Tracer) for v in values)


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
    if sig is not None and (not np.all(np.isfinite(sig)) or np.any(sig <= 0)):
        raise ValueError(f"noise_multiplier must be finite and > 0; got {noise_multiplier!r}")
    if q is not None and (not np.all(np.isfinite(q)) or np.any(q <= 0) or np.any(q > 1)):
        raise ValueError(f"sampling_rate must lie in (0, 1]; got {sampling_rate!r}")
    if st is not None:
        stf = st.astype(np.float64)
        if not np.all(np.isfinite(stf)) or np.any(stf != np.round(stf)) or np.any(stf < 0):
            raise ValueError(f"steps must be non-negative integers; got {steps!r}")
        if not np.any(stf > 0):
            raise ValueError(f"steps must contain at least one positive count; got {steps!r}")
    return max(sizes.values()) if sizes else None


def _validate_options(adversary, d, neighbouring):
    check_choice("adversary", adversary, ADVERSARIES)
    check_choice("neighbouring", neighbouring, NEIGHBOURINGS)
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be an integer >= 1; got {d!r}")


def validate_sizes(tol, points, nodes):
    """Eager checks of the accuracy and size arguments (``points``/``nodes``: None = auto)."""
    if not isinstance(tol, jax.core.Tracer) and not (1e-7 <= float(tol) <= 0.5):
        raise ValueError(f"tol must lie in [1e-7, 0.5]; got {tol!r}")
    if points is not None and points not in POINTS:
        raise ValueError(f"points must be one of {POINTS}; got {points!r}")
    if nodes is not None and nodes not in NODES:
        raise ValueError(f"nodes must be one of {NODES}; got {nodes!r}")


def _bucket(k: int) -> int:
    return 1 << max(0, (k - 1).bit_length())


def _refine(bounds, diag, mu, q, n, target, tol, static):
    """Eager re-plans when the answer shows the plan's assumptions did not hold.

    Two cases: an ε answer near or below the planning guess ``eps_ref`` (one or a few
    heavy-tailed rounds: plan again from below), and a smoothing share above the
    tolerance (a steep loss tail at ε: plan with less smoothing and more nodes). Each
    re-plan gives another valid bracket; the intersection is kept.
    """
    hint, scale = jnp.nan, 1.0
    share_max = 0.5 * float(tol)
    for _ in range(_REPLANS):
        again = False
        est = float(bounds.estimate)
        if static["query"] == "epsilon":
            eps_ref = float(jnp.max(diag["eps_ref"]))
            if np.isfinite(est) and est < 1.2 * eps_ref:
                hint, again = 0.5 * est, True
        share = float(diag["smoothing"])
        if np.isfinite(share) and share > share_max:
            step = math.sqrt(0.3 * float(tol) / share) * float(diag["tau_over_tol"])
            scale, again = max(scale * min(step, 0.5), _TAU_SCALE_MIN), True
        if not again:
            break
        hint_a = jnp.asarray(hint, jnp.float64)
        b2, j2 = choose_sizes(mu, q, n, target, tol, hint_a, scale, **static)
        new, diag = compose_query(mu, q, n, target, tol, hint_a, scale, B=b2, J=j2, **static)
        better = float(new.upper) < float(bounds.upper)
        bounds = Bounds(
            jnp.maximum(bounds.lower, new.lower),
            new.estimate if better else bounds.estimate,
            jnp.minimum(bounds.upper, new.upper),
        )
        if not better:
            break
    return bounds


def _query(
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
):
    check_x64("the composition engine")
    _validate_options(adversary, d, neighbouring)
    validate_sizes(tol, points, nodes)
    _validate_phases(noise_multiplier, sampling_rate, steps)
    if not isinstance(target, jax.core.Tracer):
        tv = np.asarray(target, dtype=np.float64)
        if tv.ndim != 0:
            raise ValueError(
                f"{'delta' if query == 'epsilon' else 'epsilon'} must be a scalar; "
                "use jax.vmap over it"
            )
        if query == "epsilon" and not (0 < tv < 1):
            raise ValueError(f"delta must lie in (0, 1); got {target!r}")
        if query == "delta" and not np.isfinite(tv):
            raise ValueError(f"epsilon must be finite; got {target!r}")
    sig = jnp.atleast_1d(jnp.asarray(noise_multiplier, jnp.float64))
    q = jnp.atleast_1d(jnp.asarray(sampling_rate, jnp.float64))
    n = jnp.atleast_1d(jnp.asarray(steps))
    if not jnp.issubdtype(n.dtype, jnp.integer):
        n = jnp.round(n).astype(jnp.int64)
    n = n.astype(jnp.int64)
    sig, q, n = jnp.broadcast_arrays(sig, q, n)
    kk = sig.shape[0]
    kb = _bucket(kk)
    if kb > kk:  # pad with copies of phase 0 composed 0 times
        pad = kb - kk
        sig = jnp.concatenate([sig, jnp.repeat(sig[:1], pad)])
        q = jnp.concatenate([q, jnp.repeat(q[:1], pad)])
        n = jnp.concatenate([n, jnp.zeros((pad,), jnp.int64)])
    mu = 1.0 / sig
    target = jnp.asarray(target, jnp.float64)
    tol_a = jnp.asarray(tol, jnp.float64)
    static = dict(adversary=adversary, d=int(d), neighbouring=neighbouring, query=query)
    auto = points is None and nodes is None
    if points is None or nodes is None:
        if _is_traced(sig, q, n, target, tol_a):
            b, j = JIT_SIZES
        else:
            b, j = choose_sizes(mu, q, n, target, tol_a, **static)
        points = b if points is None else points
        nodes = j if nodes is None else nodes
    bounds, diag = compose_query(mu, q, n, target, tol_a, B=points, J=nodes, **static)
    if auto and not _is_traced(sig, q, n, target, tol_a):
        bounds = _refine(bounds, diag, mu, q, n, target, tol_a, static)
    return bounds


def schedule_epsilon(
    noise_multiplier,
    sampling_rate,
    steps,
    delta,
    *,
    d: int = 1,
    adversary: str = "npo",
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
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
      d: query dimension seen by the GLRT adversary (ignored by NPO).
      adversary: ``"npo"`` or ``"glrt"``.
      neighbouring: ``"add_remove"`` or ``"replace_one"``.
      tol: relative accuracy of the upper bound: the per-round grids and the
        smoothing are chosen so that ``upper`` exceeds ε by about ``tol · ε`` at most
        (1e-3 by default; down to 1e-7).
      points: per-round grid points, one of :data:`POINTS`; ``nodes``: frequency
        nodes, one of :data:`NODES`. ``None`` picks what ``tol`` needs (eagerly) or
        :data:`JIT_SIZES` under ``jit``/``vmap`` (always valid bounds; looser if
        fewer than ``tol`` asks for). The cost is about ``K · points · nodes``,
        independent of the number of steps.

    Returns:
      :class:`Bounds` ``(lower, estimate, upper)`` of 0-d arrays, with
      ``lower ≤ ε ≤ upper``; report ``upper``. ``upper`` is ``inf`` when no ε up to
      about four times the Chernoff bound is certified (ε in the thousands, or
      far too few ``nodes``). Invalid inputs under ``jit`` give NaN.

    The method (characteristic functions of per-round grids at fixed frequency nodes,
    smoothed Fourier inversion, one compiled program for any K and any number of
    steps) and its proof are in :mod:`glrt_jax._src.composition`. Jittable (with
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
    d: int = 1,
    adversary: str = "npo",
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
    points: int | None = None,
    nodes: int | None = None,
) -> Bounds:
    """Certified bounds on δ at ``epsilon`` for a schedule of K phases (see
    :func:`schedule_epsilon` for the arguments; ``epsilon`` is a real scalar).

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
