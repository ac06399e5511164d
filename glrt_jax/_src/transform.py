"""Per-round transforms of the composition engine, composed over the phases.

For each phase and direction, the round's two discretisations (:mod:`glrt_jax._src.grids`,
on the companded grid of ``B + 1`` points) give their moment generating functions at the
complex frequencies ``a + iω_j``, ``ω_j = jΔω`` (``j < J``), as
``log M(a) + iωc + log(Σ_b v_b e^{iω(x_b − c)})`` with per-node rounding bounds
(:func:`node_terms`). :func:`phase_sums` multiplies each phase's terms by its count and
sums them over the phases: a ``lax.scan`` over chunks of phases with a ``vmap`` within,
so one compiled program serves any K (padded to a power of two) and any counts, at a
cost of one non-uniform FFT per phase, side and direction (:mod:`glrt_jax._src.nufft`:
about ``B·2M + 4J log₂ 4J`` operations instead of the ``B·J`` of a direct sum),
independent of the number of steps.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import logsumexp

from glrt_jax._src import double_double, grids, losses, nufft, planning
from glrt_jax._src.shapes import phase_block, vmap_block

# Unit roundoff of float64 (the engine's error terms are in units of it).
UNIT_ROUNDOFF = 0.5 * float(np.finfo(np.float64).eps)
# Phases per vmapped chunk of the composition scan: _CHUNK_NODES / J of them, between 8
# and 32 (K = 1024 distinct phases at J = 512: 0.53 s with chunks of 8, 0.41 s with 32, the
# same with 64; a chunk's grids take 4 transforms × 4J complex numbers per phase).
_CHUNK_NODES = 1 << 14
_CHUNK_MIN, _CHUNK_MAX = 8, 32


def chunk_phases(J: int) -> int:
    """Phases per chunk of :func:`phase_sums`'s scan for ``J`` nodes (a power of two)."""
    return max(_CHUNK_MIN, min(_CHUNK_MAX, _CHUNK_NODES // J))


def node_terms(x, p, a, dw, J, precise=False):
    """Per-node ``log`` term (nodes ``kΔω``, k < J), its error bound, tilted mean, log M(a).

    ``Σ_b v_b e^{iω_k(x_b − c)}`` at all ``J`` nodes is one non-uniform FFT
    (:func:`glrt_jax._src.nufft.sums`) with a rigorous bound on its error. The positions
    ``Δω(x_b − c)`` are formed in double-double (exact sum, exact product), so the sum is
    that of the exact phases; the tilted mean ``c`` enters the derivative through an
    explicit factor ``1 − iω(c − c)`` (exactly 1 in value; the first-order expansion of
    ``e^{−iω(c − c)}``, with the same derivative). ``precise`` (static): the sums in
    double-double (their bound about ``u`` instead of ``400u``; the positions' product
    then by :func:`glrt_jax._src.double_double.product`, within ``3u²`` whatever the
    compiler contracts).
    """
    lp = grids.safe_log(p)
    logw = lp + a * x
    log_m = logsumexp(logw)
    v = jnp.exp(logw - log_m)
    c = jnp.sum(v * x)
    c_sg = lax.stop_gradient(c)
    d_hi, d_lo = double_double.two_sum(x, -c_sg)
    product = double_double.product if precise else double_double.two_product
    y_hi, y_err = product(jnp.full_like(x, dw), d_hi)
    y_lo = y_err + dw * d_lo
    y_hi, y_lo = lax.stop_gradient(y_hi), lax.stop_gradient(y_lo)
    if precise:
        s, s_lo, e_sum = nufft.sums_double(y_hi, v, J, y_lo=y_lo)
    else:
        s, e_sum = nufft.sums(y_hi, v, J, y_lo=y_lo)
    om = dw * jnp.arange(J)
    # e^{−iω(c − c_sg)} to first order: exactly 1 in value, its derivative in c (no J
    # complex exponentials of 0 in the compiled program).
    w = s * (1.0 - 1j * om * (c - c_sg))
    e_sum = lax.stop_gradient(e_sum)
    # |ŝ − s| ≤ e_abs: the sum's bound, and 2.01u to spare (|S| ≤ Σv ≈ 1); for the
    # double-double sums, whose low part is left out here, |s_lo| too.
    e_abs = e_sum + 2.01 * UNIT_ROUNDOFF
    if precise:
        e_abs = e_abs + (1.0 + 4.0 * UNIT_ROUNDOFF) * lax.stop_gradient(jnp.abs(s_lo))
    log_w = log_transform(w)
    log_up = jnp.log(jnp.abs(w) + e_abs)
    rel = 4.0 * UNIT_ROUNDOFF * (jnp.abs(log_w) + 1.0)  # rounding of the log itself
    if precise:
        # Near 1 the double-double sum gives S − 1 to u of itself, and log S is taken as
        # log1p of it (log_near_one): its rounding is relative to |log S| rather than to
        # 1, and so is the sum's bound, the low part kept. Composed over n rounds, the
        # former bounds n·4u(|log S| + 1) and n·(|s_lo| + 2.01u) are the ones that a
        # bimodal round (small q, tiny δ) puts far above δ at the Chernoff scale.
        v1 = (w - 1.0) + s_lo
        near = jnp.abs(2.0 * v1.real + (v1.real * v1.real + v1.imag * v1.imag)) <= NEAR_ONE
        log_n, rel_n = log_near_one(jnp.where(near, v1, 0.0))
        # log(|S| + e) ≤ Re log S + rel_n + e/|S| (|S| ≥ 0.89), and 3u|log| to spare
        # for the rounding of this sum.
        up_n = jnp.real(log_n) + (rel_n + 2.01 * e_sum + 3.0 * UNIT_ROUNDOFF * jnp.abs(log_n))
        log_w = jnp.where(near, log_n, log_w)
        log_up = jnp.where(near, up_n, log_up)
        rel = jnp.where(near, rel_n, rel)
    return log_w, log_up, rel, c, log_m


# Where |S|² − 1 lies within this of 0 (|S| between 0.89 and 1.1, at any angle), the
# precise path takes the log of a transform S by :func:`log_near_one`.
NEAR_ONE = 0.2


def log_near_one(v):
    """``log(1 + v)`` for a complex ``v`` with ``|2 Re v + |v|²| ≤ 0.2`` (``|1 + v|² − 1``),
    and a bound on its error: ``u|v|(10 + 7|v|) + 4u|log(1 + v)|``.

    As ``½ log1p(t) + i·atan2(Im v, 1 + Re v)``, ``t = 2 Re v + |v|²``. The computed
    ``t`` is within ``1.01u(2|v| + 3|v|²)``, which moves ``½ log1p`` by at most 0.63 of
    that (its slope ``1/(2|1 + v|²)``, ``|1 + v|² ≥ 0.8``); rounding ``1 + Re v`` (at
    most ``u(1 + |v|)``) moves the angle by at most ``1.25|v|`` times that (its slope
    ``|Im v|/|1 + v|²``); an input within ``2.02u|v|`` of the exact ``v`` (the caller's
    ``(S − 1) + S_lo``) moves the log by ``2.3u|v|`` (``|1 + v| ≥ 0.89``):
    ``u|v|(4.83 + 3.15|v|)`` in all, charged twice. So the error is relative to ``|v|``
    and ``|log(1 + v)|``, with no absolute term, also for a transform of modulus near 1
    and any angle. XLA's ``log1p`` (on ``|t| ≤ 0.25``; about
    240 ulp off near −0.41, so no further) and ``atan2`` round within about ``1.2u`` of
    their results (``tests/test_elementary.py`` measures the whole against extended
    precision), charged ``4u``.

    Example:
      >>> import jax, numpy as np
      >>> with jax.enable_x64(True):
      ...     v = 1e-6 + 3e-7j
      ...     out, err = log_near_one(np.complex128(v))
      ...     series = v - v**2 / 2 + v**3 / 3 - v**4 / 4  # (the rest below 1e-30)
      ...     bool(abs(complex(out) - series) <= float(err) < 1e-20)
      True
    """
    re, im = jnp.real(v), jnp.imag(v)
    t = 2.0 * re + (re * re + im * im)
    out = 0.5 * jnp.log1p(t) + 1j * jnp.arctan2(im, 1.0 + re)
    size = jnp.abs(v)
    err = UNIT_ROUNDOFF * (size * (10.0 + 7.0 * size) + 4.0 * jnp.abs(out))
    return out, err


def log_transform(w):
    """``log w`` for a round's transform ``w`` (``|w| ≤ 1``), within 4u(|log w| + 1).

    As ``log|w| + i·arg w`` from ``hypot`` and ``atan2``: XLA's complex ``log`` and
    ``log1p`` take ``log|w|`` through a real ``log1p`` of ``|w|² − 1``, which is about 240
    ulp off (relative) near −0.41, so they reach about 19u(|log w| + π) at ``|w| ≈ 0.77``;
    this form stays within 2u(|log w| + 1) on the unit disc, about 2u|log w| (the
    rounding of ``log`` and ``atan2`` relative to their results) and 2u (``hypot``'s
    relative rounding, absolute after the log) (``tests/test_elementary.py`` measures
    both bounds against extended precision).
    """
    return jnp.log(jnp.hypot(w.real, w.imag)) + 1j * jnp.arctan2(w.imag, w.real)


def row_length(J):
    """Row length of a two-table phase product over ``J`` nodes: about √J, a power of two."""
    return 1 << max(3, (int(math.isqrt(J)) - 1).bit_length())


def phase_sums(mu, q, n, p, values, a, dw, tilts, *, loss, B, J, direction=None, precise=False):
    """Σ_k n_k × (phase k's per-round terms), per direction.

    Args:
      mu, q, n: per phase, shape (K,) (padding phases have ``n = 0``).
      p: the :class:`glrt_jax._src.planning.Plan` (planning points and pmf per phase).
      values: per phase, shape (K,): the loss's values of
        :func:`glrt_jax._src.losses.program_key`.
      a, dw, tilts: per direction: damping, node spacing and the bound tilts.
      loss: the static key of :func:`glrt_jax._src.losses.program_key`; B, J: grid
        points and nodes; direction: ``None`` to compose every direction of the loss's
        :func:`glrt_jax._src.losses.loss_directions`, or the index of the one direction to
        compose (an integer, traced is fine: one program serves each direction; ``p``,
        ``a``, ``dw`` and ``tilts`` are then that direction's alone).
      precise: (static) each round's transform in double-double (:func:`node_terms`).

    Returns:
      ``(upper_side, lower_side, (keep, dv))``, leaves with a leading direction axis:
      each side is ``(log terms, their log upper bounds, relative rounding, tilted
      mean, log M(a), log MGFs at the tilts, the rounding of the sums of the tilted
      mean, log M(a) and the MGFs)`` summed over rounds; ``keep`` is the log of the mass
      inside the grids (lowered by its sum's rounding), ``dv`` the split's added tilted
      variance.
    """
    is_add = grids.direction_flags(losses.loss_directions(loss))
    if direction is not None:
        is_add = lax.dynamic_slice_in_dim(is_add, direction, 1)
    value = losses.phase_value(loss, values)
    many = planning.many_phases(mu.shape[0])

    # The sums over the phases of n_k·log w_k and n_k·log(|w_k| + e_k) (the terms and
    # their upper envelope) round too: a product by n_k, then additions in any order (a
    # sum within each chunk, the scan across chunks, and the two halves' carries added
    # after, :func:`glrt_jax._src.composition._sums_in_halves`). Only additions of two
    # nonzero partial sums round (padding phases add exact zeros), so a term goes through
    # at most m = min(active − 1, (chunk − 1) + (chunks − 1)) + 2 roundings, and each sum
    # is within γ_m Σ_k n_k |term_k| of the exact one. The terms' sum is charged with
    # the log's own rounding, 2γ_m |log w_k| per round (twice: the charge's own sum
    # rounds too); each term of the envelope is raised by 2γ_m |log(|w_k| + e_k)|, so
    # that its rounded sum stays above the exact sum of the terms before. The per-phase
    # scalars go through the same sums: the tilted means, the normalisers log M_k(a)
    # and the MGFs at the bound tilts carry their bounds beside them (2γ_m of each
    # term's size, summed like the terms: the side's last leaf), and each log of the
    # mass kept, never positive, is lowered by 2γ_m of itself (so that the failure mass
    # from their rounded sum is not below the exact one).
    active = jnp.sum(n > 0).astype(jnp.float64)
    kk = mu.shape[0]
    batched = losses.batch_phases(loss) and not precise
    chunk = phase_block(kk, chunk_phases(J)) if batched else 1
    m_round = jnp.minimum(active - 1.0, (chunk - 1) + (kk // chunk - 1)) + 2.0
    gamma_sum = 2.0 * m_round * UNIT_ROUNDOFF / (1.0 - m_round * UNIT_ROUNDOFF)

    def sum_bound(v):
        """A per-phase term's share of its sum's rounding bound; none for an infinite
        term (e.g. the log of no mass), which makes its sum so whatever the rounding."""
        return jnp.where(jnp.isfinite(v), gamma_sum * jnp.abs(v), 0.0)

    def one_direction(x, pi, kappa, outside, a_i, dw_i, b_i):
        """One phase's terms in one direction (per round), from its grid and bin masses."""
        p_up, up = grids.split(pi, kappa, x, many)
        x_lo, p_lo = grids.merge(pi, kappa, x)
        x_lo = lax.stop_gradient(x_lo)
        # MGFs for the Chernoff and aliasing bounds, from the split pair for both sides:
        # it dominates the round, which dominates the merged pair, and for b ≥ 0
        # E_P[e^{bL}] = E_Q[(P/Q)^{1+b}] is an f-divergence (data processing).
        mg = grids.log_mgf(x, p_up, b_i)
        # Both discretisations in one vmapped call (one copy in the compiled program): the
        # merged pair, one point shorter, is padded with a massless point.
        x_lo_pad = jnp.concatenate([x_lo, x_lo[-1:]])
        p_lo_pad = jnp.concatenate([p_lo, jnp.zeros((1,), p_lo.dtype)])
        terms = jax.vmap(lambda xx, pv: node_terms(xx, pv, a_i, dw_i, J, precise))(
            jnp.stack([x, x_lo_pad]), jnp.stack([p_up, p_lo_pad])
        )
        log_w, log_up, rel, c, log_m = terms
        terms = (log_w, log_up + sum_bound(log_up), rel + sum_bound(log_w), c, log_m)
        # (per side: the bounds for the tilted mean, log M(a) and the MGFs, in that order)
        mg_err = jnp.broadcast_to(sum_bound(mg), (2,) + mg.shape)
        errs = jnp.concatenate([sum_bound(jnp.stack([c, log_m], -1)), mg_err], -1)
        sides = [tuple(t[k] for t in terms) + (mg, errs[k]) for k in (0, 1)]
        h = x[1:] - x[:-1]
        theta = jnp.where(pi > 0, up / jnp.where(pi > 0, pi, 1.0), 0.0)
        lw = grids.safe_log(pi) + a_i * 0.5 * (x[1:] + x[:-1])
        wt = jnp.exp(lw - logsumexp(lw))
        dv = jnp.sum(wt * theta * (1.0 - theta) * h * h)
        keep = jnp.log1p(-jnp.minimum(outside, 1.0)) * (1.0 + gamma_sum)
        return sides[0], sides[1], (keep, dv)

    def contribution(args):
        """One phase's terms, already multiplied by its count (zero for padding)."""
        m, r, k, dk, xp, pp = args
        grid = jax.vmap(lambda xp_i, pp_i, a_i: grids.companded_grid(xp_i, pp_i, a_i, B, many))
        x = lax.stop_gradient(grid(xp, pp, a))
        # Every direction's bin masses in one call of the tails (see grids.bins).
        pi, kappa, outside = grids.bins(loss, value(dk), is_add, m, r, x)
        terms = jax.vmap(one_direction)(x, pi, kappa, outside, a, dw, tilts)
        kf = k.astype(jnp.float64)
        return jax.tree_util.tree_map(lambda v: jnp.where(k > 0, kf * v, 0.0 * v), terms)

    # Phases in chunks: a scan over chunks (memory of one chunk), a vmap within (one
    # phase per chunk where the loss branches by phase: losses.batch_phases, and with
    # double-double transforms, whose arrays are eight times larger: K = 10 at 16384
    # nodes, first-tier code, 2.3 s per pass in chunks of 8, 1.4 s one phase at a time).
    xs = (mu, q, n, values, p.xp, p.pp)
    xs = jax.tree_util.tree_map(lambda v: v.reshape((kk // chunk, chunk) + v.shape[1:]), xs)

    def chunk_sum(block):
        return jax.tree_util.tree_map(lambda v: jnp.sum(v, axis=0), vmap_block(contribution, block))

    # Reverse-mode derivatives of many phases keep each chunk's inputs alone and compute
    # the chunk again for its transpose (jax.checkpoint; nothing changes where nothing is
    # differentiated). Kept whole, the chunks' intermediates (the spreading's tables of
    # 2M complex terms per grid point, above all) grow with K: a jitted jax.grad of K =
    # 1000 distinct phases (the tables' schedule, sizes as under jit) took 5.0 GB of
    # scratch memory (6.2 GB peak for the process), 0.07 GB so (1.1–1.2 GB), and its run
    # 4.5 → 3.4 s; GLRT with d = 10 5.1 → 0.05 GB (6.9 → 1.8 GB peak), its run 5.7 → 6.8–7.5
    # s (the non-central χ² tails computed again); K = 10⁴ asked for 79 GB and failed, and
    # now runs in 1.7 GB (35 s, NPO). Fewer phases keep their intermediates (and their
    # speed): they are few.
    if many:
        chunk_sum = jax.checkpoint(chunk_sum)

    def body(acc, block):
        def add(acc):
            return jax.tree_util.tree_map(jnp.add, acc, chunk_sum(block))

        # A chunk of padding phases (n = 0) adds exactly nothing: not computed.
        return lax.cond(jnp.any(block[2] > 0), add, lambda a: a, acc), None

    n_dir = 1 if is_add is None else is_add.shape[0]
    carry, _ = lax.scan(body, _zero_terms(n_dir, J, tilts.shape[-1]), xs)
    return carry  # leaves with a leading direction axis


def _zero_terms(n_dir, J, n_tilts):
    """Zeros shaped like one phase's terms (``one_direction``'s output over the directions).

    Written out rather than found by ``jax.eval_shape``, which would trace the per-phase
    code a second time (half the tracing time of a query); a mismatch fails the scan's
    carry check.
    """

    def zeros(*shape, dtype=jnp.float64):
        return jnp.zeros((n_dir, *shape), dtype)

    def side():  # log terms, their log upper bounds, rounding, tilted mean, log M(a), MGFs,
        # and the sums' bounds for the tilted mean, log M(a) and the MGFs
        log_w = zeros(J, dtype=jnp.complex128)
        return (log_w, zeros(J), zeros(J), zeros(), zeros(), zeros(n_tilts), zeros(2 + n_tilts))

    return side(), side(), (zeros(), zeros())
