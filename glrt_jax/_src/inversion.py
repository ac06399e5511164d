"""Smoothed Fourier inversion of the composed transform, and its certified bounds.

Given the composed per-node terms of :func:`glrt_jax._src.transform.phase_sums`, this
module evaluates, per direction of the neighbouring relation and as functions of ε,

* ``δ_X(ε) = E g_ε(S + τZ)`` by the trapezoid rule at the nodes (upper side before
  truncation: the aliasing terms are non-negative), with per-node rounding bounds;
* the density of ``S + τZ`` (to remove the smoothing on the lower side), that of
  ``S + 2τZ`` (the smoothing's share, for re-plans) and the aliasing bounds, from the
  MGFs at the bound tilts;
* the upper bound ``δ_S(ε) ≤ δ_X(ε − τ²/2) − E m(S − ε) + failure mass`` (Jensen, less a
  lower bound on its gap: ``m`` a minorant of the gap, see ``_JENSEN_ROWS``) and the lower bound
  ``δ_S(ε) ≥ δ_X(ε) − aliasing − τ² f_{S+τZ}(ε)`` (proofs in
  :mod:`glrt_jax._src.composition`);

and answers the query: δ(ε) directly, or ε(δ) by searching the certified bounds
(:func:`first_below`, :func:`last_above`: only points where a bound was evaluated and
found on the safe side are returned, so the answer is valid whatever the bound's shape),
with the implicit-function derivative of the upper bound at its root.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from glrt_jax._src import transform
from glrt_jax._src.numerics import computed_once
from glrt_jax._src.transform import UNIT_ROUNDOFF


def _pick_min(x):
    """``min(x)`` of a 1-D array, differentiated through the element it picks.

    ``jnp.min``'s derivative finds the minimum by comparing the operand with the result;
    where the compiler evaluates the operand twice and rounds the two copies differently
    (fused multiply-adds in one fusion and not in the other), no element compares equal and
    the derivative is 0/0. Indexing at ``argmin`` gives the same value and a derivative that
    does not depend on such rounding.
    """
    return x[jnp.argmin(x)]


def _pick_max(x):
    """``max(x)`` of a 1-D array, differentiated through the element it picks (see
    :func:`_pick_min`)."""
    return x[jnp.argmax(x)]


# The smoothing deficit's second density (see query_bounds' lower_delta) is taken at the
# variance c²τ² whose transform has decayed to e^{-_DEFICIT_DECAY} at the last node (c ≥ 1).
_DEFICIT_DECAY = 40.0


def _deficit_variance(tau, om_max):
    """c²τ² = max(τ², 2·_DEFICIT_DECAY/ω_max²): the variance of the smoothing deficit's
    second density, whose truncation term e^{−c²τ²ω_max²/2}/(π c²τ² ω_max) is negligible
    where that of S + τZ is not (σ = 0.9, q = 1e-5, N = 10⁴, δ(0.0655): τ·ω_max = 6.6,
    e^{−21.7}, the deficit 3·10⁻² of δ from that term alone)."""
    return jnp.maximum(tau**2, 2.0 * _DEFICIT_DECAY / om_max**2)


# The Jensen step's gap, bounded below (see query_bounds' upper_delta): with u = s − ε and
# t = u/τ, the gap of one point s is k(u) = E(1 − e^{−u}Y)₊ − (1 − e^{−u})₊ ≥ 0,
# Y = e^{−τ²/2−τZ}, whose integral over u is τ²/2 and which tends to τψ(t),
# ψ(t) = φ(t) − |t|Φ(−|t|), as τ → 0. Its minorants, one per row (c, c₀, c₂):
#   m(u) = s(τ) τ² (c₀ + c₂t'²) φ_{cτ}(u),   t' = u/(cτ),   s(τ) = max(0.97 − 0.6τ, 0):
# m ≤ 0 ≤ k where c₀ + c₂t'² ≤ 0, and on |t'| < √(−c₀/c₂) m ≤ k is checked against k's
# closed form in 50 digits (tests/test_composition.py; min k/m over u at τ → 0, 0.1, 0.5,
# 1: 1.033, 1.046, 1.125, 1.43 for c = 1; 1.024, 1.026, 1.060, 1.29 for c = 1.2). Each row's
# polynomial is near the best of degree 2 at its width; ∫m = (c₀ + c₂)τ²s: 0.69 and 0.56
# of the gap's τ²/2. Width τ takes the most, but its sum needs the transform of φ_τ
# resolved at the last node, where the nodes only resolve δ_X's (whose weight falls like
# 1/ω²): 1.2τ's transform has decayed e^{4.4} further there (τ²Ω²/2 ≥ 10). The bound
# takes the larger of the two; widths below τ would need more nodes, and Gaussians wider
# than τ alone cannot stay below k's tails.
_JENSEN_ROWS = ((1.0, 0.5, -5.0 / 32.0), (1.2, 0.48, -0.2))


def _jensen_scale(tau):
    """s(τ) of the Jensen gap's minorants (see _JENSEN_ROWS)."""
    return jnp.maximum(0.97 - 0.6 * tau, 0.0)


def _jensen_sup(c0, c2):
    """``sup_y |c₀ + c₂y²| e^{−y²/4}`` (c₀ > 0 > c₂): at y = 0, or at the negative lobe's
    y² = 4 + c₀/|c₂|. Then |c₀ + c₂t'²| φ_{cτ}(u) ≤ √2 · sup · φ_{√2cτ}(u), for the
    aliasing of a signed minorant."""
    return max(c0, 4.0 * -c2 * np.exp(-1.0 + c0 / (4.0 * c2)))


def query_bounds(carry, p, tau, tilts, n_tot, target, gam, *, J, query, halving=False):
    """(lower, estimate, upper) of the answer, and diagnostics.

    Args:
      carry: the composed terms of :func:`glrt_jax._src.transform.phase_sums`.
      p: the :class:`glrt_jax._src.planning.Plan` (its per-direction fields; the per-phase
        planning points are not used); tau: smoothing width per direction;
        tilts: the bound tilts per direction.
      n_tot: total steps (float); target: δ (``query="epsilon"``) or ε (``query="delta"``);
        gam: relative rounding of one round's normaliser, ``(B + 4)u``.
      J: nodes; query: ``"epsilon"`` or ``"delta"``.
      halving: (static) the trapezoid sums by halving (:func:`trapezoid_sum`), charged
        ``(log₂J + 8)u`` instead of the ``(R + J/R + 8)u`` of two dot products of unknown
        order, at several times their cost (J = 4096: 88 against 10 µs per evaluation
        of δ, J = 65536: 0.74 against 0.08 ms); for the passes with double-double
        transforms, where the rounding of the dot products was the largest error term
        left at the Chernoff scale of a bimodal round.

    Returns:
      ``((lower, estimate, upper), diag)``: the answer is the maximum over directions;
      ``upper`` carries the derivative (implicit function at the root for ε queries).
    """
    a, W = p.a, p.W
    dw = 2.0 * jnp.pi / W
    wk = jnp.full((J,), 2.0).at[0].set(1.0)  # trapezoid weights on k ≥ 0 (real parts)
    R = transform.row_length(J)

    def setup(cr, a_i, tau_i, dw_i):
        """One direction's node values, ε-free: (δ_X, density) of each side."""
        om = dw_i * jnp.arange(J)  # nodes, 0 included
        om_max = J * dw_i
        # The terms left out, k ≥ J, under a decreasing majorant g: Δω Σ_{k≥J} g(kΔω) ≤
        # ∫_{(J−1)Δω}^∞ g, so the truncation integrals start at the last node.
        om_cut = (J - 1) * dw_i
        # The weight of E g_ε, 1/(z(z+1)) at z = a + iω, as conj(w)/|w|² with w = z(z+1)
        # (no complex division).
        w_re, w_im = a_i * (a_i + 1.0) - om * om, om * (2.0 * a_i + 1.0)
        w_abs2 = w_re * w_re + w_im * w_im
        inv_w = (w_re - 1j * w_im) / w_abs2
        abs_inv_w = lax.rsqrt(w_abs2)

        def prepare(side, node, var, weight, abs_weight, cap, trunc):
            """Node values of one smoothed transform, with ε-free error terms.

            ``(Δω/2π) Σ_k w_k Re[M_S(a+iω_k)/M_S(a) e^{var((a+iω)²−a²)/2} e^{−iωε} weight_k]``
            is ``trap(prepared, ε)``; it is relative to the scale
            ``M_S(a) e^{var a²/2 − aε}``. ``node``: the side's per-node values that do not
            depend on the transform (:func:`node_values`).
            """
            _, _, _, cs, lm, _, sums_err = side
            e_lam, m_lam, d_up, e_rel = node
            e_c, e_lm = sums_err[0], sums_err[1]  # (the sums over the phases' rounding)
            # e^{var((a+iω)²−a²)/2 + iωc} = e^{−var ω²/2} e^{iωθ}, θ = var·a + c; the phases
            # e^{iωθ} at ω = k·Δω as a product of two tables of √J each (as in trap).
            theta = var * a_i + cs
            rows = computed_once(jnp.exp(1j * (R * dw_i) * theta * jnp.arange(J // R)))
            cols = computed_once(jnp.exp(1j * dw_i * theta * jnp.arange(R)))
            turn = (rows[:, None] * cols[None, :]).reshape(J)
            gauss = jnp.exp(-0.5 * var * om * om)
            factor = gauss * turn * weight
            abs_factor = gauss * abs_weight
            g = e_lam * factor
            mag = m_lam * abs_factor
            # Per node: Π(|φ̂_k| + e)^{n_k} − Π|φ̂_k|^{n_k} bounds the error of the product,
            # and the rounding of the logs adds e^{rel} − 1 relative.
            node_err = abs_factor * d_up
            node_err = node_err + mag * e_rel
            scale = dw_i / (2.0 * jnp.pi)
            fp = scale * jnp.sum(wk * jnp.minimum(node_err, abs_factor + cap))
            nodes_fp = fp  # (the transforms' and their logs' share, for the diagnostics)
            # The sums' rounding: a node's value rounds by a few u of its size (its factors'
            # products, 8u in all), and the trapezoid sum is two dot products (rows of R
            # nodes, then J/R rows; any order: γ_n of the terms' sizes each), so
            # (R + J/R + 8)u relative, twice over for the complex products and the
            # real parts; by halving (``halving``), each term passes through log₂R and
            # log₂(J/R) additions: (log₂J + 8)u. And each node's phases ω_k(θ − ε),
            # rounded to a few ulps of their size (8u·ω_k·(|θ| + |ε|); kept apart, as it
            # grows with |c| + |ε|).
            total_mag = scale * jnp.sum(wk * mag)
            count = J.bit_length() - 1 if halving else R + J // R
            fp = fp + 2.0 * (count + 8) * UNIT_ROUNDOFF * total_mag
            spread = scale * jnp.sum(wk * om * mag)
            phase = 8.0 * UNIT_ROUNDOFF * spread
            # The tilted mean's sum over the phases, off by at most e_c, turns each node by
            # at most ω·e_c; log M(a)'s, off by at most e_lm, scales every term by e^{±e_lm}.
            fp = fp + e_c * spread
            base = (wk * g).reshape(J // R, R)
            log_c0 = lm + 0.5 * var * a_i * a_i
            return base, fp + trunc, phase, jnp.abs(theta), log_c0, nodes_fp, e_lm

        def node_values(side):
            """The side's per-node values shared by its transforms: e^{λ}, |e^{λ}|, the
            product's error bound ``e^{log_up} − |e^{λ}|`` and the logs' ``e^{rel} − 1``,
            each computed once (:func:`~glrt_jax._src.numerics.computed_once`; so are the
            phase tables of :func:`prepare`). XLA's CPU backend otherwise recomputes them
            inside each transform's fusion, per node: e^{λ}'s cosine and sine, and the
            tables' before their product (an optimisation barrier, which this used, does
            not keep them out). The bounds of one phase (σ = 1, q = 0.01, N = 1000,
            δ = 1e-5, 4096 nodes, one direction) 3.5–3.8 → 1.8–2.1 ms alone, 3.4–3.8 →
            2.5–2.9 ms in the query."""
            lam, log_up, rel = side[:3]
            m_lam = jnp.exp(jnp.real(lam))
            values = (jnp.exp(lam), m_lam, jnp.exp(log_up) - m_lam, jnp.expm1(rel))
            return tuple(computed_once(v) for v in values)

        def side_setup(side, *variances):
            """The side's δ_X at variance τ² and its density at each of ``variances``."""
            safe_om = jnp.where(om > 0, om, 1.0)
            cap = jnp.where(om > 0, jnp.exp(-0.5 * tau_i**2 * om * om) / safe_om**2, jnp.inf)
            trunc = jnp.exp(-0.5 * tau_i**2 * om_cut**2) / (jnp.pi * tau_i**2 * om_cut**3)
            node = node_values(side)
            prep_d = prepare(side, node, tau_i**2, inv_w, abs_inv_w, cap, trunc)

            def density(v):
                cap_f = jnp.exp(-0.5 * v * om * om)
                trunc_f = jnp.exp(-0.5 * v * om_cut**2) / (jnp.pi * v * om_cut)
                return prepare(side, node, v, 1.0, 1.0, cap_f, trunc_f)

            return node, (prep_d, *(density(v) for v in variances))

        def minorant(side, node, c, c0, c2):
            """``E[(c₀ + c₂t'²) φ_{cτ}(S − ε)]``, t' = (S − ε)/(cτ), as a trapezoid sum: its
            transform is ``((c₀ + c₂) + c₂vz²) e^{vz²/2}``, v = c²τ², z = a + iω."""
            v = c * c * tau_i**2
            c0, c2 = c0 + c2, c2 * v
            weight = (c0 + c2 * (a_i * a_i - om * om)) + 1j * (2.0 * c2 * a_i * om)
            abs_weight = jnp.abs(weight)
            # |weight| ≤ |c₀ + c₂| + |c₂|v(a² + ω²) (|z|² = a² + ω²), and from Ω, the last
            # node: ∫ e^{−vω²/2} ≤ e^{−vΩ²/2}/(vΩ), ∫ ω² e^{−vω²/2} ≤ e^{−vΩ²/2}(Ω/v + 1/(v²Ω)).
            tail = jnp.exp(-0.5 * v * om_cut**2)
            trunc = (
                (jnp.abs(c0) + jnp.abs(c2) * a_i * a_i) * tail / (v * om_cut)
                + jnp.abs(c2) * tail * (om_cut / v + 1.0 / (v * v * om_cut))
            ) / jnp.pi
            cap = jnp.exp(-0.5 * v * om * om) * abs_weight
            return prepare(side, node, v, weight, abs_weight, cap, trunc)

        # The upper side's density (of S + 2τZ) measures the smoothing's share, and its
        # minorant sum bounds the Jensen step's gap from below (see upper_delta); the lower
        # side's densities, of S + τZ and of S + cτZ, bound its smoothing deficit (see
        # lower_delta).
        wide = _deficit_variance(tau_i, om_max)
        node_up, upper = side_setup(cr[0], 4.0 * tau_i**2)
        _, lower = side_setup(cr[1], tau_i**2, wide)
        return (*upper, *(minorant(cr[0], node_up, *row) for row in _JENSEN_ROWS)), lower

    preps = jax.vmap(setup)(carry, a, tau, dw)
    # Per direction: the node values, the scalars, the MGFs of the lower side (aliasing)
    # and the log of the mass kept; ``live`` carries derivatives, ``frozen`` does not.
    # (the MGFs' sums raised by their rounding: they enter only as upper bounds, of the
    # aliasing and of the Chernoff cap)
    mgs = carry[1][5] + carry[1][6][..., 2:]
    mgs_up = carry[0][5] + carry[0][6][..., 2:]
    live = (preps, a, tau, W, dw, tilts, p.sup, mgs, carry[2][0], mgs_up)
    frozen = lax.stop_gradient(live)

    def trap(prep, a_i, dw_i, eps):
        base, err, phase, abs_c, log_c0, *_ = prep
        err = err + phase * (abs_c + jnp.abs(eps))
        p1 = jnp.exp(-1j * dw_i * eps * jnp.arange(R))
        p0 = jnp.exp(-1j * (R * dw_i) * eps * jnp.arange(J // R))
        if halving:
            val = dw_i / (2.0 * jnp.pi) * trapezoid_sum(base, p0, p1)
        else:
            val = dw_i / (2.0 * jnp.pi) * jnp.real(p0 @ (base @ p1))
        return val, err, log_c0 - a_i * eps

    def upper_delta(d, eps):
        """Certified upper bound on δ_S(ε) (one direction; ``d``: its slice of ``live``)."""
        return upper_parts(d, eps)[0]

    def upper_parts(d, eps):
        """:func:`upper_delta`, and the lower bound on the Jensen step's gap taken off it."""
        ((prep_up, _, *preps_m), _), a_i, tau_i, W_i, dw_i, b_i, sup_i, _, keep, mgs_up = d
        # Jensen: with h(x) = E_P(1 − x e^{−S})_+ convex in x, δ_X(e) = E_Z h(e^{e − τZ})
        # ≥ h(e^{e + τ²/2}) = δ_S(e + τ²/2); so δ_S(ε) ≤ δ_X(ε − τ²/2), and the gap is
        # E_P k(S − ε) ≥ E_P m(S − ε) for each minorant m (see _JENSEN_ROWS), bounded below
        # by its trapezoid sum less the sum's error terms and its aliasing.
        val, err, log_c = trap(prep_up, a_i, dw_i, eps - 0.5 * tau_i**2)
        tplus = jnp.maximum(val + err, 0.0) * jnp.exp(log_c + n_tot * gam + prep_up[6])
        gap = 0.0
        for prep_m, (c, c0, c2) in zip(preps_m, _JENSEN_ROWS, strict=True):
            m_val, m_err, log_cm = trap(prep_m, a_i, dw_i, eps)
            m_low = (m_val - m_err) * jnp.exp(log_cm - n_tot * gam - prep_m[6])
            # f_{S+√2cτZ}(y) ≤ M_S(b) e^{b²c²τ² − by}/√(4πc²τ²) for every tilt b.
            v = c * c * tau_i**2
            log_f = mgs_up + v * b_i * b_i - 0.5 * jnp.log(4.0 * jnp.pi * v)
            m_alias = np.sqrt(2.0) * _jensen_sup(c0, c2) * _aliasing(log_f, a_i, W_i, b_i, eps)
            gap = jnp.maximum(gap, jnp.maximum(m_low - m_alias, 0.0))
        # (its own derivative left out: the minorant's sums at widths of τ follow the grids'
        # points, spaced wider than τ, where δ_X's hinge averages over them. Two rounds at
        # σ = 0.9, q = 1e-3, δ = 1e-9: dε/dσ −1.6271 with it, −1.6202 without, the truth's
        # −1.6191, a central difference of the tol = 1e-6 bracket)
        gap = lax.stop_gradient(_jensen_scale(tau_i) * tau_i**2 * gap)
        fail = -jnp.expm1(keep)
        # Above the largest composed loss of the grids only the failure mass is left.
        inside = jnp.where(eps < sup_i, jnp.maximum(tplus - gap, 0.0), 0.0)
        return jnp.minimum(inside + fail, 1.0), jnp.where(eps < sup_i, gap, 0.0)

    def alias(d, eps):  # Σ_{m≠0} e^{amW} δ_X(ε + mW), from the MGFs of the lower side
        _, a_i, tau_i, W_i, _, b_i, _, mgs, *_ = d
        # δ_X(y) ≤ M_X(b) e^{−by} (b > 0), and δ_X ≤ 1 (b = 0)
        log_mx = jnp.where(b_i > 0, mgs + 0.5 * tau_i**2 * b_i * b_i, 0.0)
        return _aliasing(log_mx, a_i, W_i, b_i, eps)

    def lower_delta(d, eps):
        """Certified lower bound on δ_S(ε) (one direction)."""
        (_, (prep_lo, *densities)), a_i, tau_i, _, dw_i, _, sup_i, *_ = d
        val, err, log_c = trap(prep_lo, a_i, dw_i, eps)
        val = (val - err) * jnp.exp(log_c - n_tot * gam - prep_lo[6]) - alias(d, eps)
        # E_Z g_ε(s + τZ) − g_ε(s) ≤ τ² φ_τ(s − ε), φ_τ the N(0, τ²) density (proof in
        # glrt_jax._src.composition), so δ_X(ε) − δ_S(ε) ≤ τ² f_{S+τZ}(ε); and for c ≥ 1,
        # φ_τ ≤ c φ_{cτ} pointwise, so f_{S+τZ}(ε) ≤ c f_{S+cτZ}(ε): the smaller bound of
        # the two (_deficit_variance: where the nodes end before the transform of
        # f_{S+τZ} has decayed, its truncation term is the larger).
        wide = _deficit_variance(tau_i, J * dw_i)
        dens = []
        for prep_f, c in zip(densities, (1.0, jnp.sqrt(wide) / tau_i), strict=True):
            f, f_err, log_cf = trap(prep_f, a_i, dw_i, eps)
            log_f = log_cf + n_tot * gam + prep_f[6]
            dens.append(c * jnp.maximum(f + f_err, 0.0) * jnp.exp(log_f))
        deficit = tau_i**2 * jnp.minimum(*dens)
        return jnp.where(eps < sup_i, jnp.maximum(val - deficit, 0.0), 0.0)

    def chernoff(d):
        """Per bound tilt b > 0: log of ``κ_b M(b)`` (split pair, rounding included), and
        the failure mass: ``δ_S(ε) ≤ min_b κ_b M(b) e^{−bε} + fail`` (one direction).

        ``(1 − e^{ε−s})₊ ≤ κ_b e^{b(s−ε)}`` (:func:`log_hinge_factor`). Far looser than
        the inversion where that resolves δ; a cap where it does not (the inversion's
        error terms are relative to ``M(a)e^{−aε}``, which a composed loss far from the
        saddle-point picture can put many orders of magnitude above δ).
        """
        b_i, mgs, keep = d[5], d[7], d[8]
        pos = b_i > 0
        safe_b = jnp.where(pos, b_i, 1.0)
        log_c = jnp.where(pos, mgs + log_hinge_factor(safe_b) + n_tot * gam, jnp.inf)
        return log_c, safe_b, -jnp.expm1(keep)

    def chernoff_delta(d, eps):
        log_c, b_i, fail = chernoff(d)
        return jnp.minimum(jnp.exp(_pick_min(log_c - b_i * eps)) + fail, 1.0)

    def chernoff_epsilon(d, delta):
        log_c, b_i, fail = chernoff(d)
        room = delta - fail
        e_b = (log_c - jnp.log(jnp.where(room > 0, room, 1.0))) / b_i
        return jnp.where(room > 0, jnp.maximum(_pick_min(e_b), 0.0), jnp.inf)

    def raw_delta(d, eps):  # the two discretisations' δ_X, averaged
        ((prep_up, *_), (prep_lo, *_)), a_i, _, _, dw_i, _, sup_i, *_ = d
        out = 0.0
        for prep in (prep_up, prep_lo):
            val, _, log_c = trap(prep, a_i, dw_i, eps)
            out = out + 0.5 * _scaled(val, log_c)
        return jnp.where(eps < sup_i, out, 0.0)

    def raw_density(d, eps):
        ((_, prep_up_f, *_), _), a_i, _, _, dw_i, *_ = d
        f, _, log_cf = trap(prep_up_f, a_i, dw_i, eps)
        return _scaled(f, log_cf)

    def rounding(d, eps):
        """The larger of the two sides' errors in δ from the per-round transforms and
        their logs at ε (one direction): what double-double transforms would remove
        (reported, as the smoothing's share below, relative to the answer: δ, or for ε
        queries ε·|dδ/dε|)."""
        ((prep_up, *_), (prep_lo, *_)), a_i, tau_i, *_ = d
        up = prep_up[5] * jnp.exp(
            prep_up[4] - a_i * (eps - 0.5 * tau_i**2) + n_tot * gam + prep_up[6]
        )
        lo = prep_lo[5] * jnp.exp(prep_lo[4] - a_i * eps + n_tot * gam + prep_lo[6])
        return jnp.maximum(up, lo)

    def per_direction(fn, d=frozen):
        """``fn`` for every direction at once: ε of shape (n_dir,) to values (n_dir,)."""
        return lambda eps: jax.vmap(fn)(d, eps)

    # Smoothing's share of the error, relative: δ_X − δ_S ≈ (τ²/2)(f_S(ε) − …), which
    # the plan sized from the saddle-point picture; a loss with a steep tail at ε (one
    # round, small q) has a density there far above it. Reported so that an eager
    # caller can re-plan.
    tiny = jnp.finfo(jnp.float64).tiny
    if query == "delta":
        eps = jnp.full(a.shape, target)
        ups, gaps = per_direction(upper_parts, live)(eps)
        cap = per_direction(chernoff_delta, live)(eps)
        ups = jnp.where(cap < ups, cap, ups)
        lows, ests = per_direction(lower_delta)(eps), per_direction(raw_delta)(eps)
        shares = 0.5 * tau**2 * per_direction(raw_density)(eps) / jnp.maximum(ests, tiny)
        roundings = per_direction(rounding)(eps) / jnp.maximum(ests, tiny)
        gaps = gaps / jnp.maximum(ests, tiny)
    else:
        delta = lax.stop_gradient(target)
        zero = jnp.zeros(a.shape)
        hi0 = jnp.full(a.shape, 4.0 * jnp.max(p.eps_ch) + 10.0)
        # The direction that decides the answer (the answer is the maximum over them): the
        # plan's guess. The others' searches stop once they pass below its bracket, where
        # they can no longer change the maximum (any point found to pass is valid).
        lead = jnp.arange(a.shape[0]) == jnp.argmax(p.eps_ch)
        # The estimate first, from the plan's guesses (its Chernoff bound and its guess from
        # below); the upper bound's root lies just above the estimate's.
        ee = first_below(
            per_direction(raw_delta), delta, zero, hi0, lead=lead, guesses=(p.eps_ch, p.eps_ref)
        )
        near = jnp.where(jnp.isfinite(ee), ee, p.eps_ch)
        eu = first_below(
            per_direction(upper_delta),
            delta,
            zero,
            hi0,
            lead=lead,
            guesses=(near * (1.0 + 1e-3) + 1e-12, near),
        )
        # Each direction's lower bound, searched down from its own upper bound: any one is
        # a lower bound on the answer (the maximum over the directions), and the largest
        # is kept. (The direction with the largest upper bound alone is not enough where
        # that bound is its Chernoff cap: σ = 0.9, q = 1e-4, N = 10⁶, δ = 1e-15 gave
        # [0, 2.017] from it, [1.161, 2.017] with the other direction's.)
        start = jnp.where(jnp.isfinite(eu), eu, ee)
        lows = last_above(per_direction(lower_delta), delta, start)
        # Implicit-function derivative at the root: U(ε(θ), θ) = δ.
        finite = jnp.isfinite(eu) & (eu > 0)
        e0 = jnp.where(finite, eu, 1.0)
        # U and ∂U/∂ε at the root in one forward pass (one copy of U in the program).
        # (and the gap taken off it there, which carries no derivative)
        u0, slope, gaps = jax.jvp(
            per_direction(upper_parts, live), (e0,), (jnp.ones_like(e0),), has_aux=True
        )
        slope = lax.stop_gradient(slope)
        ok = finite & (slope < 0)
        # U(ε, θ) = δ: dε = −(∂U/∂θ dθ − dδ)/(∂U/∂ε), δ included (calibration needs it).
        val = u0 - (target - lax.stop_gradient(target))
        corr = (val - lax.stop_gradient(val)) / jnp.where(ok, slope, 1.0)
        ups = jnp.where(ok, eu - corr, eu)
        # The Chernoff cap (see ``chernoff``): where the inversion cannot resolve δ (its
        # upper bound infinite), a finite bound, with its own derivative.
        cap = per_direction(chernoff_epsilon, live)(jnp.full(a.shape, target))
        ups = jnp.where(cap < ups, cap, ups)
        ests = ee
        e1 = jnp.where(jnp.isfinite(ee) & (ee > 0), ee, 1.0)
        rate = jnp.abs(jax.vmap(jax.grad(raw_delta, argnums=1))(frozen, e1))
        shares = 0.5 * tau**2 * per_direction(raw_density)(e1) / jnp.maximum(rate * e1, tiny)
        roundings = per_direction(rounding)(e1) / jnp.maximum(rate * e1, tiny)
        # (at the upper bound's root, in ε: the gap over the slope there)
        gaps = jnp.where(ok, gaps / jnp.maximum(jnp.abs(slope) * e0, tiny), 0.0)
    up = _pick_max(ups)
    low = lax.stop_gradient(jnp.max(lows))
    est = lax.stop_gradient(jnp.max(ests))
    decide = jnp.argmax(ests)
    diag = dict(
        a=a,
        tau=tau,
        tau_tol=p.tau_tol,
        W=W,
        dv=carry[2][1],
        eps_ref=p.eps_ref,
        b_need=p.b_need,
        j_need=p.j_need,
        smoothing=lax.stop_gradient(shares[decide]),
        jensen=lax.stop_gradient(gaps[decide]),
        rounding=lax.stop_gradient(roundings[decide]),
        roundings=lax.stop_gradient(roundings),
        tau_decide=tau[decide],
        ups=ups,
    )
    return (low, jnp.clip(est, low, up), up), diag


def pairwise_sum(x):
    """The sum over the last axis of ``x`` (a power of two long) by halving: each term
    passes through ``log₂ n`` additions, so the rounded sum is within ``γ_{log₂ n}`` of
    the terms' sizes summed (a dot product of unknown order: ``γ_n``). The halves are
    slices of the array, added elementwise: an order no compiler pass changes.

    Example:
      >>> import numpy as np
      >>> float(pairwise_sum(np.arange(8.0)))
      28.0
    """
    n = x.shape[-1]
    if n & (n - 1):
        raise ValueError(f"pairwise_sum needs a power of two; got {n}")
    while n > 1:
        n //= 2
        x = x[..., :n] + x[..., n:]
    return x[..., 0]


def trapezoid_sum(base, p0, p1):
    """``Re Σ_{k₁,k₀} p0[k₁]·base[k₁, k₀]·p1[k₀]``: the trapezoid rule's sum over the
    ``J`` nodes as rows of ``R`` (two tables of phases, as :func:`query_bounds` uses them),
    by halving within the rows and then over them (:func:`pairwise_sum`): within
    ``2(log₂J + 8)u`` of the terms' sizes summed, where two dot products of unknown order
    are within ``2(R + J/R + 8)u`` (``tests/test_trapezoid_rounding.py`` measures both).

    Example:
      >>> import numpy as np
      >>> base = np.ones((2, 4), complex); p0 = np.ones(2, complex); p1 = np.ones(4, complex)
      >>> float(trapezoid_sum(base, p0, p1))
      8.0
    """
    return pairwise_sum(jnp.real(p0 * pairwise_sum(base * p1)))


def log_hinge_factor(b):
    """``log κ_b``, ``κ_b = b^b/(b + 1)^{b+1}``: the largest ``(1 − e^{−t})e^{−bt}``, t ≥ 0 (b > 0).

    So ``(1 − e^{ε−s})₊ ≤ κ_b e^{b(s−ε)}`` for every s, and ``δ(ε) ≤ κ_b M(b) e^{−bε}``:
    the Chernoff bound on the hinge ``g_ε``, ``1/(e(b + 1))`` or less times the plain one.
    The maximum is at ``e^{−t} = b/(b + 1)``.

    Example:
      >>> import numpy as np
      >>> t = np.linspace(0.0, 5.0, 200001)
      >>> hinge = (1 - np.exp(-t)) * np.exp(-2.0 * t)
      >>> bool(abs(np.exp(log_hinge_factor(2.0)) - np.max(hinge)) < 1e-9)
      True
    """
    return b * jnp.log(b) - (b + 1.0) * jnp.log1p(b)


def _scaled(v, log_c):
    """``max(v, 0)·e^{log_c}`` with 0 (not NaN) where ``v ≤ 0`` and ``e^{log_c}`` overflows."""
    pos = v > 0
    return jnp.where(pos, jnp.exp(jnp.log(jnp.where(pos, v, 1.0)) + log_c), 0.0)


def _aliasing(log_c, a, W, b, eps):
    """``Σ_{m≠0} e^{amW} v(ε + mW)`` for a non-negative ``v`` with ``v(y) ≤ e^{log_c − by}``
    at each tilt ``b`` (arrays over the tilts): the geometric sums above (``b > a``) and
    below (``b < a``) ε, each at its best tilt."""
    above = jnp.where(b > a, log_c - b * eps - _log_expm1((b - a) * W), jnp.inf)
    below = jnp.where(b < a, log_c - b * eps - _log_expm1((a - b) * W), jnp.inf)
    return jnp.exp(_pick_min(above)) + jnp.exp(_pick_min(below))


def _log_expm1(x):
    return jnp.where(x > 30.0, x, jnp.log(jnp.expm1(jnp.minimum(x, 30.0))))


# The bracketed searches (Dekker's method on log fn, which is nearly linear): a secant
# through the last two points evaluated, where it falls inside the bracket, else the
# midpoint; the midpoint also wherever two passes did not halve the bracket. Once a
# step is shorter than the tolerance, the next point is one tolerance across the last
# point, so that the bracket closes. They stop when the bracket is _RTOL wide (relative;
# about ten passes on the engine's profiles), and after _MAX_PASSES whatever fn is.
_MAX_PASSES = 160
_RTOL = 2.0**-44
# Rungs of last_above's ladder down from its start (fractions of the start). The lower
# bound need not decrease in ε (its smoothing deficit follows the density): one round at
# σ = 2.14, q = 0.01, δ = 1e-3 passes only around 0.3 of the way down, which rungs at
# 0.1 and 0.5 both missed (a lower bound of 0).
_LADDER = np.array([0.0, 1e-6, 1e-4, 1e-3, 1e-2, 0.03, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0])


def _log_ratio(v, level):
    """``log(v / level)``, the scale the searches interpolate on."""
    return jnp.log(jnp.maximum(v, jnp.finfo(jnp.float64).tiny)) - jnp.log(level)


class _Bracket(NamedTuple):
    lo: Any  # the ends: fn fails at one and passes at the other
    hi: Any
    x0: Any  # the last two points evaluated, and their log-ratios
    g0: Any
    x1: Any
    g1: Any
    w1: Any  # the bracket's width before the last pass, and before the one before
    w2: Any


def _open(lo, hi, x0, g0, x1, g1):
    """A bracket whose next pass interpolates."""
    w = hi - lo
    return _Bracket(lo, hi, x0, g0, x1, g1, 2.0 * w, 4.0 * w)


def _tolerance(br):
    return _RTOL * jnp.maximum(jnp.abs(br.lo), jnp.abs(br.hi))


def _narrow_enough(br):
    return br.hi - br.lo <= _tolerance(br)


def _next_point(br):
    """The next point strictly inside ``(lo, hi)`` (see the comment above)."""
    tol = _tolerance(br)
    s = br.x1 - br.g1 * (br.x1 - br.x0) / (br.g1 - br.g0)
    # A step shorter than the tolerance: one tolerance across x1, to the bracket's far side.
    across = jnp.where(br.hi - br.x1 > br.x1 - br.lo, br.x1 + tol, br.x1 - tol)
    s = jnp.where(jnp.abs(s - br.x1) < tol, across, s)
    bisect = (br.hi - br.lo > 0.5 * br.w2) | ~((s > br.lo) & (s < br.hi))
    return jnp.where(bisect, 0.5 * (br.lo + br.hi), s)


def _narrow(br, x, g, to_lo):
    """``x`` (log-ratio ``g``) replaces the ``lo`` end (``to_lo``) or the ``hi`` end."""
    return _Bracket(
        jnp.where(to_lo, x, br.lo),
        jnp.where(to_lo, br.hi, x),
        br.x1,
        br.g1,
        x,
        g,
        br.hi - br.lo,
        br.w1,
    )


def first_below(fn, level, lo, hi, lead=None, guesses=()):
    """Smallest ε found in [lo, hi] with fn(ε) ≤ level (inf if fn(hi) > level).

    The first two passes evaluate the ends; the others narrow the bracket
    ``fn(lo') > level ≥ fn(hi')`` (secant on ``log fn``, bisection safeguard; see the
    comment above :data:`_MAX_PASSES`) until it is ``_RTOL`` wide. Only points where fn
    was evaluated and found ≤ level are ever returned, so the result is valid whatever the
    shape of fn. (They are not evaluated again: a second evaluation of the same
    expression, compiled differently, may round to the other side of level.) ``fn``
    appears once in the compiled program.

    ``lo``, ``hi`` may be arrays (``fn`` then maps arrays of points to arrays of values,
    one search per element). ``lead``: a boolean array marking the search whose result
    matters most when the caller takes the maximum over them; the others stop as soon as
    their passing end lies at or below its failing end (their result can then no longer
    exceed its result). ``guesses``: points (arrays like ``lo``) evaluated after the ends,
    in turn, where they lie inside the bracket (e.g. an estimate of the answer and a point
    just beyond it: the secant then starts next to the root).
    """
    zero = jnp.zeros(jnp.shape(lo))

    def cond(state):
        i, br, lo_ok, hi_ok = state
        done = lo_ok | ~hi_ok | _narrow_enough(br)
        if lead is not None:
            lead_lo = jnp.max(jnp.where(lead, br.lo, -jnp.inf))
            done = done | (~lead & (br.hi <= lead_lo))
        return (i < 2) | (~jnp.all(done) & (i < _MAX_PASSES))

    def body(state):
        i, br, lo_ok, hi_ok = state
        x = _next_point(br)
        for k, guess in enumerate(guesses):
            inside = (guess > br.lo) & (guess < br.hi)
            x = jnp.where((i == 2 + k) & inside, guess, x)
        x = jnp.where(i == 0, lo, jnp.where(i == 1, hi, x))
        v = fn(x)
        ok, g = v <= level, _log_ratio(v, level)
        lo_ok = jnp.where(i == 0, ok, lo_ok)
        hi_ok = jnp.where(i == 1, ok, hi_ok)
        # The first two passes evaluate the ends; the others narrow.
        ends = _open(lo, hi, br.x1, br.g1, x, g)
        br = jax.tree_util.tree_map(
            lambda e, n: jnp.where(i < 2, e, n), ends, _narrow(br, x, g, ~ok)
        )
        return i + 1, br, lo_ok, hi_ok

    false = jnp.zeros(jnp.shape(lo), bool)
    state = (0, _open(lo, hi, zero, zero, zero, zero), false, false)
    _, br, lo_ok, hi_ok = lax.while_loop(cond, body, state)
    return jnp.where(lo_ok, lo, jnp.where(hi_ok, br.hi, jnp.inf))


def last_above(fn, level, start):
    """A large ε ≤ start with fn(ε) ≥ level (0 if none): a ladder down, then a bracket.

    The rungs ``start · (1 − l)``, ``l`` in :data:`_LADDER`, are tried in turn; the first
    that passes and the one above it bracket the answer, which the next passes narrow as
    in :func:`first_below`. Only points found to pass are returned, and ``fn`` appears
    once in the compiled program.
    """
    pts = jnp.asarray(start)[..., None] * (1.0 - jnp.asarray(_LADDER))
    n = len(_LADDER)
    zero = jnp.zeros(jnp.shape(start))

    def cond(state):
        i, br, found, r = state
        done = (found & _narrow_enough(br)) | (~found & (r >= n))
        return ~jnp.all(done) & (i < n + _MAX_PASSES)

    def body(state):
        i, br, found, r = state
        climbing = ~found & (r < n)
        rung = jnp.take_along_axis(pts, jnp.minimum(r, n - 1)[..., None], axis=-1)[..., 0]
        x = jnp.where(climbing, rung, _next_point(br))
        v = fn(x)
        ok, g = v >= level, _log_ratio(v, level)
        # The first rung that passes opens the bracket [it, the rung above] ([start,
        # start] if it is the start); the rungs before it are the last points evaluated.
        first = climbing & ok
        opened = _open(x, jnp.where(r > 0, br.x1, x), br.x1, br.g1, x, g)
        climbed = br._replace(x0=br.x1, g0=br.g1, x1=x, g1=g)

        def pick(o, c, m):
            return jnp.where(first, o, jnp.where(climbing, c, m))

        br = jax.tree_util.tree_map(pick, opened, climbed, _narrow(br, x, g, ok))
        return i + 1, br, found | first, r + climbing

    false = jnp.zeros(jnp.shape(start), bool)
    state = (0, _open(zero, zero, zero, zero, zero, zero), false, jnp.zeros(jnp.shape(start), int))
    _, br, found, _ = lax.while_loop(cond, body, state)
    return jnp.where(found, br.lo, 0.0)
