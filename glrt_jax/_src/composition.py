"""Composition of heterogeneous phases by an exponentially tilted lattice: one compiled program.

What is composed
----------------
A *phase* is ``steps`` identical rounds of the Poisson-subsampled Gaussian mechanism
with noise multiplier σ (μ = 1/σ) and sampling rate q. A schedule is K phases given as
arrays; the composed privacy loss is ``S = Σ_k Σ_{i ≤ n_k} L_{k,i}`` and, per direction
of the neighbouring relation (see :mod:`glrt_jax._src.pld` for the dominating pairs),

    δ(ε) = E_P[(1 − e^{ε − S})_+].

Method (and why it holds)
-------------------------
1. **Per-round lattice pmfs.** Every round's loss is split onto the lattice ``hZ``
   ("connect the dots": each bin's P- and Q-masses go to its two end points, both
   kept). By Jensen the split dominates the round (``δ`` can only grow), so
   ``δ(ε) ≤ δ̃(ε) + P(some round outside its range)``. The mass outside each phase's
   per-round range is computed from the exact tails and counted.
2. **Exponential tilting.** All rounds are tilted by ``e^{tL}`` with the Chernoff
   saddle point ``t`` of the target, so that the composed tilted distribution has its
   bulk where δ(ε) is decided. Its untilted mass at ``y`` is ``e^{log Z − t y}`` times
   the tilted mass (``log Z = Σ n_k log m_k(t)``): floating-point and truncation errors
   of the FFT, which are absolute in the tilted measure, become relative to
   ``e^{log Z − tε}`` (the Chernoff bound of δ itself), so δ down to 1e-15 and below
   keeps its accuracy.
3. **Phases as arrays.** The composed spectrum is ``exp(Σ_k n_k Log φ_k)`` with ``φ_k``
   the FFT of phase k's tilted per-round pmf (integer powers make the principal log
   exact). The phases are mapped over (``lax.map``), never unrolled, so the compiled
   program is the same for any K and any steps.
4. **Window.** The composition is computed modulo ``M`` lattice points around the
   tilted bulk. Tilted mass outside the window is bounded by Chernoff bounds on the
   fine pmfs themselves (``log E_t[e^{uS}] = Σ n_k (log m_k(t+u) − log m_k(t))``).
5. **Error terms.** Upper: δ̃ plus (rounds outside their range) plus (mass above the
   window) plus (mass below the window when ε lies below it) plus the rigorous
   floating-point bound of the transform. Lower: the split noise ``W = S̃ − S`` has
   independent terms, each within h of its mean, means in ``[0, h²/8]`` and a variance
   bounded from the split itself; Bernstein's inequality gives
   ``δ(ε) ≥ δ̃(ε + c_η) − η`` and the folded (aliased) and rounding mass is
   subtracted. Every term is in the module's code beside its formula.

Accuracy knob: the lattice spacing is chosen so that the split's mean bias
``Σ_k n_k E[min(h²/8, h|L|/2)]`` (the exact first-order shift of the upper bound) is at
most ``tol · ε / 4`` after the factor ``1 + t`` (variance inflation at the saddle
point); ``M`` (static) bounds the work. When the window does not fit at
that spacing, the spacing grows and the bounds widen (still valid).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import logsumexp

from glrt_jax._src.pld import (
    _ETA_FRACTIONS,
    Bounds,
    _check_x64,
    _delta_window,
    _directions,
    _epsilon_window,
    _half_spectrum_weights,
    _probe_ranges,
    _segment_tails,
    _suffix_sums,
)

_EPS64 = float(np.finfo(np.float64).eps)
# Coarse per-round pmfs (placement of the tilt, window and spacing only).
_N_COARSE = 192
# |t| grid of the coarse log-MGFs: 0 and a geometric ladder on each side.
_T_POS = np.geomspace(1e-3, 300.0, 40)
_T_GRID = np.concatenate([-_T_POS[::-1], [0.0], _T_POS])
# Candidate spacings for the bias rule.
_H_GRID = np.geomspace(1e-9, 2.0, 48)
# Multiples of 1/s (s: tilted std) at which the fine-pmf Chernoff bounds are taken.
_U_MULT = np.array([0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 11.0, 16.0, 24.0, 40.0])
# Tilted mass allowed outside the window (placement target; the bound is computed).
_LOG_WINDOW_MASS = math.log(1e-15)
# Lattice points kept free at each end of the window.
_MARGIN = 8
# FFT sizes the eager entry points choose from.
SIZES = (2**12, 2**14, 2**16, 2**18, 2**20)
# Phases per lax.map batch.
_BATCH = 8


def _coarse_phase(adversary, d, directions, mu, q, log_m_round):
    """Per-round ranges and a coarse split pmf of one phase, per direction."""
    bound = 0.5 * mu * mu + 40.0 * mu + 10.0 - jnp.log(q)
    lo, hi = _probe_ranges(adversary, 1, directions, mu, q, jnp.exp(log_m_round), bound)
    xs, pmfs = [], []
    for i, direction in enumerate(directions):
        step = (hi[i] - lo[i]) / _N_COARSE
        x = lo[i] + step * jnp.arange(_N_COARSE + 1)
        is_add = None if direction == "replace" else jnp.full(x.shape, direction == "add")
        tails = _segment_tails(adversary, d, mu, q, x, is_add)
        pmf, _, _ = _split(tails, x, step)
        xs.append(x)
        pmfs.append(pmf)
    return lo, hi, jnp.stack(xs), jnp.stack(pmfs)


def _split(tails, x, h):
    """Connect-the-dots split on points ``x`` (spacing h): pmf, bin masses, moved-up parts."""
    sp, fp, sq, fq = tails
    use = sp[:-1] < 0.5
    pi = jnp.where(use, sp[:-1] - sp[1:], fp[1:] - fp[:-1])
    use = sq[:-1] < 0.5
    kappa = jnp.where(use, sq[:-1] - sq[1:], fq[1:] - fq[:-1])
    pi = jnp.maximum(pi, 0.0)
    kappa = jnp.maximum(kappa, 0.0)
    exp_x = jnp.exp(jnp.clip(x[:-1], -700.0, 700.0))
    up = jnp.clip((pi - exp_x * kappa) / -jnp.expm1(-h), 0.0, pi)
    return jnp.pad(pi - up, (0, 1)) + jnp.pad(up, (1, 0)), pi, up


def _fine_phase(adversary, d, directions, mu, q, h, t, lo, us, M):
    """Phase quantities on the lattice, per direction (all of shape (n_dir, ...)).

    Returns the lattice offset of the per-round pmf, its tilted spectrum's principal
    log and magnitude bounds, the tilted log-normaliser, the tilted log-MGF increments
    at ``t + us``, the dropped (untilted) mass, the split's tilted mean bias and a bound
    on the (untilted) variance of the split noise ``L̃ − L``.
    """
    out = []
    for i, direction in enumerate(directions):
        off = jnp.floor(lo[i] / h[i]).astype(jnp.int64) - 1
        x = (off + jnp.arange(M)) * h[i]
        is_add = None if direction == "replace" else jnp.full(x.shape, direction == "add")
        tails = _segment_tails(adversary, d, mu, q, x, is_add)
        pmf, pi, up = _split(tails, x, h[i])
        dropped = tails[1][0] + tails[0][-1]
        logw = _safe_log(pmf) + t[i] * x
        log_m = logsumexp(logw)
        tilted = jnp.exp(logw - log_m)
        mass = jnp.sum(tilted)
        theta = jnp.where(pi > 0, up / jnp.where(pi > 0, pi, 1.0), 0.0)
        w_bin = jnp.exp(_safe_log(pi) + t[i] * x[:-1] - log_m)
        bias = 0.5 * h[i] ** 2 * jnp.sum(w_bin * theta * (1.0 - theta))
        # Var(L̃ − L) ≤ h² E[θ(1−θ)] + b_max² ≤ h² Σ_b π_b θ̄_b(1−θ̄_b) + b_max² (θ concave).
        var = h[i] ** 2 * jnp.sum(pi * theta * (1.0 - theta)) + _b_max(h[i]) ** 2
        mgf = _log_mgf(x, tilted, us[i])
        phi = jnp.fft.rfft(tilted)
        a = jnp.abs(phi)
        nz = a > 0
        safe = jnp.where(nz, phi, 1.0)
        logphi = jnp.where(nz, jnp.log(safe), -jnp.inf + 0j)
        out.append((off, logphi, a, mass, log_m, mgf, dropped, bias, var))
    return tuple(jnp.stack(v) for v in zip(*out, strict=True))


def _b_max(h):
    """Largest mean shift E[L̃ − L | L] of one split (≤ h²/8)."""
    slope = h / -jnp.expm1(-h)
    return slope - 1.0 - jnp.log(slope)


def _bernstein_shift(h, n, var, eta):
    """c with P(S̃ − S ≥ c) ≤ η: n b_max plus Bernstein's deviation for the split noise.

    The terms ``W_i − E W_i`` are independent, bounded by h in absolute value, with
    total variance at most ``var``: ``P(Σ > r) ≤ exp(−r²/(2(var + h r/3)))``.
    """
    log_inv = jnp.log(1.0 / eta)
    a = h * log_inv / 3.0
    return n * _b_max(h) + a + jnp.sqrt(a * a + 2.0 * log_inv * var)


def _bias_curve(x, pmf, t):
    """``E_t[min(h²/8, h|L|/2)]`` for every h of the grid (coarse tilted pmf)."""
    logw = _safe_log(pmf) + t * x
    w = jnp.exp(logw - logsumexp(logw))
    hg = jnp.asarray(_H_GRID)[:, None]
    return jnp.sum(w * jnp.minimum(hg * hg / 8.0, 0.5 * hg * jnp.abs(x)), axis=-1)


def _log_mgf(x, pmf, ts):
    return logsumexp(ts[:, None] * x[None, :] + _safe_log(pmf)[None, :], axis=-1)


def _safe_log(v):
    """log v with log 0 = −inf and a zero (not NaN) derivative there."""
    pos = v > 0
    return jnp.where(pos, jnp.log(jnp.where(pos, v, 1.0)), -jnp.inf)


def _plan(adversary, d, neighbouring, M, mu, q, n, query, target, tol):
    """Tilt, spacing and window per direction from coarse per-round pmfs."""
    directions = _directions(adversary, neighbouring)
    n_dir = len(directions)
    nf = n.astype(jnp.float64)
    n_tot = jnp.sum(nf)
    log_target = jnp.log(target) if query == "epsilon" else jnp.log(1e-12)
    log_m_round = jnp.minimum(log_target, jnp.log(1e-12)) - 20.0 - jnp.log(n_tot)

    def coarse(args):
        m, r = args
        return _coarse_phase(adversary, d, directions, m, r, log_m_round)

    lo, hi, xc, pc = lax.map(coarse, (mu, q), batch_size=_BATCH)  # (K, n_dir[, n_c])
    ts = jnp.asarray(_T_GRID)
    lam = jax.vmap(jax.vmap(lambda x, p: _log_mgf(x, p, ts)))(xc, pc)  # (K, n_dir, n_T)
    lam_tot = jnp.einsum("k,kdt->dt", nf, lam)
    pos = ts > 0
    if query == "epsilon":
        # Chernoff: ε ≤ (Λ(t) − log δ)/t; the minimiser is the tilt.
        eps_ch = jnp.where(pos, (lam_tot - log_target) / jnp.where(pos, ts, 1.0), jnp.inf)
        it = jnp.argmin(eps_ch, axis=-1)
        eps_ref = jnp.maximum(0.6 * jnp.min(eps_ch, axis=-1), 0.05)
    else:
        obj = jnp.where(ts >= 0, lam_tot - ts * target, jnp.inf)
        it = jnp.argmin(obj, axis=-1)
        eps_ref = jnp.full((n_dir,), jnp.maximum(target, 0.05))
    t = ts[it]

    # Tilted mean and spread of the composition (coarse pmfs), then the window from
    # Chernoff bounds of the tilted composition at u = ±g/s around the tilt.
    def tilted_moments(x, p, tt):
        logw = _safe_log(p) + tt * x
        w = jnp.exp(logw - logsumexp(logw))
        m1 = jnp.sum(w * x)
        return m1, jnp.sum(w * (x - m1) ** 2)

    _, var = jax.vmap(jax.vmap(tilted_moments, in_axes=(0, 0, 0)), in_axes=(0, 0, None))(xc, pc, t)
    s_t = jnp.sqrt(jnp.maximum(jnp.einsum("k,kd->d", nf, var), 1e-30))
    g = jnp.asarray(np.concatenate([_U_MULT, -_U_MULT]))
    us = g[None, :] / s_t[:, None]  # (n_dir, n_u)
    lam_u = jax.vmap(
        jax.vmap(
            lambda x, p, uu, tt: _log_mgf(x, p, tt + uu) - _log_mgf(x, p, tt[None]),
            in_axes=(0, 0, 0, 0),
        ),
        in_axes=(0, 0, None, None),
    )(xc, pc, us, t)
    dlam = jnp.einsum("k,kdu->du", nf, lam_u)
    ratio = (dlam - _LOG_WINDOW_MASS) / us
    x_hi = jnp.min(jnp.where(us > 0, ratio, jnp.inf), axis=-1)
    x_lo = jnp.max(jnp.where(us < 0, ratio, -jnp.inf), axis=-1)
    sup_lo = jnp.einsum("k,kd->d", nf, lo)
    sup_hi = jnp.einsum("k,kd->d", nf, hi)
    x_lo = jnp.maximum(jnp.where(jnp.isfinite(x_lo), x_lo, sup_lo), sup_lo)
    x_hi = jnp.minimum(jnp.where(jnp.isfinite(x_hi), x_hi, sup_hi), sup_hi)
    if query == "delta":
        x_lo = jnp.minimum(x_lo, target - 1e-3)
        x_hi = jnp.maximum(x_hi, target + 1e-3)
    else:
        x_lo = jnp.minimum(x_lo, 0.0)
    # Spacing: the bias rule, the window and the longest per-round range.
    bias = jax.vmap(jax.vmap(_bias_curve, in_axes=(0, 0, 0)), in_axes=(0, 0, None))(xc, pc, t)
    # The split shifts the tilted mean by B(h) and inflates the variance by about 2B(h);
    # at the saddle point (ε − mean ≈ t s²) both move ε: by about (1 + t) B(h).
    bias_tot = (1.0 + t)[:, None] * jnp.einsum("k,kdh->dh", nf, bias)  # increasing in h
    budget = 0.25 * tol * eps_ref
    lh = jnp.log(jnp.asarray(_H_GRID))
    lb = jnp.log(jnp.maximum(bias_tot, 1e-300))
    h_bias = jax.vmap(lambda b, y: jnp.exp(jnp.interp(jnp.log(y), b, lh)))(lb, budget)
    h_window = (x_hi - x_lo) / (M - 2 * _MARGIN)
    h_range = jnp.max(hi - lo, axis=0) / (M - 4)
    h = jnp.maximum(jnp.maximum(h_bias, h_window), h_range)
    return dict(
        directions=directions,
        t=t,
        h=h,
        h_bias=h_bias,
        x_lo=x_lo,
        x_hi=x_hi,
        lo=lo,
        hi=hi,
        eps_ref=eps_ref,
        s_t=s_t,
    )


def _inverse_fft_error(log_up, log_val, extra_rel, M):
    """Bound on the error of any run-sum of the inverse transform of the composed spectrum.

    Per frequency, ``|Φ̂ − Φ| ≤ Π(|φ̂_k| + γ m_k)^{n_k} − Π|φ̂_k|^{n_k}`` (product
    difference bound; ``γ`` the forward FFT's error per unit mass), plus the rounding of
    ``exp(Σ n_k Log φ̂_k)`` (``extra_rel`` relative). A run of outputs of the inverse
    transform sums to at most ``(1/M) Σ_k |E_k| w_k`` (Dirichlet weights); the inverse
    transform itself and the suffix sums add ``γ Σ|Φ̂|`` and a few ulps per entry.
    """
    u = 0.5 * _EPS64
    gamma = 6.0 * u * math.log2(M)
    mult, w = _half_spectrum_weights(M)
    weight = jnp.asarray(mult * w / M)
    up = jnp.exp(log_up)
    err = up * -jnp.expm1(jnp.minimum(log_val - log_up, 0.0)) + extra_rel * up
    total = jnp.sum(err * weight, axis=-1)
    total = total + gamma * jnp.sum(jnp.asarray(mult) * jnp.exp(log_val), axis=-1)
    return total + 4.0 * (1024 + M // 1024 + 16) * u


@functools.partial(jax.jit, static_argnames=("adversary", "d", "neighbouring", "M", "query"))
def compose_query(mu, q, n, target, tol, *, adversary, d, neighbouring, M, query):
    """Bounds on ε(δ = target) (``query="epsilon"``) or δ(ε = target) for K phases.

    ``mu``, ``q``: (K,) floats; ``n``: (K,) int64 (0 marks padding). Returns
    ``(Bounds, diagnostics)``; invalid inputs give NaN bounds.
    """
    valid = jnp.all((mu > 0) & jnp.isfinite(mu) & (q > 0) & (q <= 1) & (n >= 0))
    valid = valid & jnp.any(n > 0) & jnp.isfinite(target) & (tol > 0)
    if query == "epsilon":
        valid = valid & (target > 0) & (target < 1)
    mu = jnp.where(valid, mu, 1.0)
    q = jnp.where(valid, q, 0.5)
    n = jnp.where(valid, n, 1)
    target = jnp.where(valid, target, 0.5)
    plan = _plan(adversary, d, neighbouring, M, mu, q, n, query, target, tol)
    plan = jax.tree_util.tree_map(
        lambda v: lax.stop_gradient(v) if isinstance(v, jax.Array) else v, plan
    )
    directions = plan["directions"]
    n_dir = len(directions)
    t, h = plan["t"], plan["h"]
    s_t = plan["s_t"]
    us = jnp.concatenate([jnp.asarray(_U_MULT), -jnp.asarray(_U_MULT)])[None, :] / s_t[:, None]
    us = jnp.maximum(us, -t[:, None] - 1e3)

    nf = n.astype(jnp.float64)
    u = 0.5 * _EPS64
    gamma = 6.0 * u * math.log2(M)
    n_freq = M // 2 + 1

    def body(carry, args):
        m, r, k, lo_k = args
        off, logphi, a, mass, log_m, mgf, dropped, bias, var = _fine_phase(
            adversary, d, directions, m, r, h, t, lo_k, us, M
        )
        kf = k.astype(jnp.float64)
        live = k > 0

        def times(v):  # k·v, and exactly 0 for padding phases (k = 0, v possibly −inf)
            return jnp.where(live, kf * v, jnp.zeros_like(v))

        log_phi_sum, log_up, log_abs, rel, offs, logz, dmgf, log_keep, b, v = carry
        log_a = _safe_log(a)
        return (
            log_phi_sum + times(logphi),
            log_up + times(jnp.log(a + gamma * mass[:, None])),
            log_abs + times(log_a),
            rel + times(jnp.minimum(jnp.abs(log_a), 1e300) + math.pi),
            offs + k * off,
            logz + times(log_m),
            dmgf + times(mgf),
            log_keep + times(jnp.log1p(-jnp.minimum(dropped, 1.0))),
            b + times(bias),
            v + times(var),
        ), None

    zeros_f = jnp.zeros((n_dir, n_freq))
    init = (
        jnp.zeros((n_dir, n_freq), jnp.complex128),
        zeros_f,
        zeros_f,
        zeros_f,
        jnp.zeros((n_dir,), jnp.int64),
        jnp.zeros((n_dir,)),
        jnp.zeros((n_dir, us.shape[-1])),
        jnp.zeros((n_dir,)),
        jnp.zeros((n_dir,)),
        jnp.zeros((n_dir,)),
    )
    # A scan keeps the per-phase arrays (n_dir, M) out of memory beyond one phase.
    carry, _ = lax.scan(body, init, (mu, q, n, plan["lo"]))
    log_phi_sum, log_up, log_abs, rel, offs, logz, dmgf, log_keep, bias, var = carry

    spectrum = jnp.exp(log_phi_sum)
    c = jnp.fft.irfft(spectrum, n=M, axis=-1)
    # Window: lattice indices w0 .. w0 + M − 1, centred on the planned window.
    centre = 0.5 * (plan["x_lo"] + plan["x_hi"])
    w0 = jnp.floor(centre / h).astype(jnp.int64) - M // 2
    idx = jnp.mod(jnp.arange(M)[None, :] + (w0 - offs)[:, None], M)
    c = jnp.take_along_axis(c, idx, axis=-1)
    neg = lax.stop_gradient(jnp.sum(jnp.maximum(-c, 0.0), axis=-1))
    c = jnp.maximum(c, 0.0)
    extra = u * (4.0 + rel)
    num_err = lax.stop_gradient(_inverse_fft_error(log_up, log_abs, extra, M))

    # Untilt: mass at y_i is c_i e^{log Z − t y_i}; scaled at the window centre.
    y0 = w0.astype(jnp.float64) * h
    y_ref = y0 + 0.5 * M * h
    expo = jnp.clip(
        -t[:, None] * ((jnp.arange(M)[None, :] * h[:, None]) + (y0 - y_ref)[:, None]), -700.0, 700.0
    )
    A, B = jax.vmap(_suffix_sums)(c * jnp.exp(expo), h)
    log_scale = logz - t * y_ref

    # Chernoff bounds on the tilted composed mass outside the window (fine pmfs).
    x_top = (y0 + M * h)[:, None]
    x_bot = (y0 - h)[:, None]
    pos_u = us > 0
    log_above = jnp.min(jnp.where(pos_u, dmgf - us * x_top, jnp.inf), axis=-1)
    log_below = jnp.min(jnp.where(~pos_u, dmgf - us * x_bot, jnp.inf), axis=-1)
    m_above = jnp.exp(jnp.minimum(log_above, 0.0))
    m_below = jnp.exp(jnp.minimum(log_below, 0.0))
    outside = -jnp.expm1(log_keep)
    n_tot = jnp.sum(nf)

    def scaled_delta(eps):  # (n_dir,) → computed δ̃ per direction
        d_s = jax.vmap(_delta_window)(A, B, y0, h, eps)
        return d_s * jnp.exp(log_scale)

    def slack_up(eps):
        e = jnp.exp(logz - t * eps)
        below = jnp.where(eps < y0, m_below, 0.0)
        return outside + m_above * jnp.exp(logz - t * x_top[:, 0]) + (below + 3.0 * num_err) * e

    def slack_lo(eps):
        return (m_above + m_below + 3.0 * num_err + neg) * jnp.exp(logz - t * eps)

    def inv(level):  # smallest ε with δ̃(ε) ≤ level, per direction
        lv = level * jnp.exp(-log_scale)
        return jax.vmap(_epsilon_window)(A, B, y0, h, lv)

    fr = jnp.asarray(_ETA_FRACTIONS)
    if query == "delta":
        eps = jnp.full((n_dir,), target)
        d_hat = scaled_delta(eps)
        upper = d_hat + slack_up(eps)
        est = scaled_delta(eps + (1.0 + t) * bias)
        eta = jnp.maximum(fr[:, None] * d_hat[None, :], 1e-300)
        shift = _bernstein_shift(h[None, :], n_tot, var[None, :], eta)
        lows = jax.vmap(lambda e, s: scaled_delta(e) - slack_lo(e))(eps[None, :] + shift, shift)
        lower = jnp.maximum(jnp.max(lows - eta, axis=0), 0.0)
        out = Bounds(
            jnp.max(lower), jnp.clip(jnp.max(est), 0.0, 1.0), jnp.minimum(jnp.max(upper), 1.0)
        )
    else:
        delta = jnp.full((n_dir,), target)
        eps_a = inv(delta)
        upper = inv(delta - slack_up(eps_a))
        upper = jnp.where(delta - slack_up(eps_a) > 0, upper, jnp.inf)
        est = eps_a - (1.0 + t) * bias

        def low_for(f):
            eta = f * delta
            shift = _bernstein_shift(h, n_tot, var, eta)
            eps_x = inv(delta + eta) - shift
            cand = inv(delta + eta + slack_lo(eps_x))
            return jnp.where(cand >= eps_x, cand - shift, -jnp.inf)

        lower = jnp.max(jax.vmap(low_for)(fr), axis=0)
        out = Bounds(
            jnp.maximum(jnp.max(lower), 0.0),
            jnp.maximum(jnp.max(est), 0.0),
            jnp.maximum(jnp.max(upper), 0.0),
        )
    out = Bounds(*(jnp.where(valid, v, jnp.nan) for v in out))
    diag = dict(
        h=h,
        h_bias=plan["h_bias"],
        t=t,
        outside=outside,
        num_err=num_err,
        m_above=m_above,
        m_below=m_below,
        bias=bias,
    )
    return out, diag


@functools.partial(jax.jit, static_argnames=("adversary", "d", "neighbouring", "query"))
def _needed_size(mu, q, n, target, tol, *, adversary, d, neighbouring, query):
    """Lattice points the window and the per-round ranges need at the bias-rule spacing."""
    plan = _plan(adversary, d, neighbouring, SIZES[0], mu, q, n, query, target, tol)
    width = (plan["x_hi"] - plan["x_lo"]) / plan["h_bias"] + 2 * _MARGIN
    ranges = jnp.max(plan["hi"] - plan["lo"], axis=0) / plan["h_bias"] + 4
    return jnp.max(jnp.maximum(width, ranges))


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------

_ADVERSARIES = ("npo", "glrt")
_NEIGHBOURINGS = ("add_remove", "replace_one")


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


def _validate_options(adversary, d, neighbouring, tol):
    if adversary not in _ADVERSARIES:
        raise ValueError(f"adversary must be one of {_ADVERSARIES}; got {adversary!r}")
    if neighbouring not in _NEIGHBOURINGS:
        raise ValueError(f"neighbouring must be one of {_NEIGHBOURINGS}; got {neighbouring!r}")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be an integer >= 1; got {d!r}")
    if not isinstance(tol, jax.core.Tracer) and not (1e-7 <= float(tol) <= 0.5):
        raise ValueError(f"tol must lie in [1e-7, 0.5]; got {tol!r}")


def _bucket(k: int) -> int:
    return 1 << max(0, (k - 1).bit_length())


def _query(
    query, noise_multiplier, sampling_rate, steps, target, *, d, adversary, neighbouring, tol, size
):
    _check_x64()
    _validate_options(adversary, d, neighbouring, tol)
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
    if size is None:
        if _is_traced(sig, q, n, target, tol_a):
            size = 2**16
        else:
            need = float(_needed_size(mu, q, n, target, tol_a, **static))
            size = next((m for m in SIZES if m >= need), SIZES[-1])
    elif size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}; got {size!r}")
    bounds, _ = compose_query(mu, q, n, target, tol_a, M=size, **static)
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
    size: int | None = None,
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
      tol: relative accuracy of the upper bound (the lattice is chosen so that the
        discretisation shifts ε by about ``tol · ε`` at most); 1e-3 by default.
      size: FFT length, one of :data:`SIZES`. ``None`` picks the smallest size that
        meets ``tol`` (eagerly) or 2**16 under ``jit``/``vmap``.

    Returns:
      :class:`Bounds` ``(lower, estimate, upper)`` of 0-d arrays, with
      ``lower ≤ ε ≤ upper``; report ``upper``. ``upper`` is ``inf`` when δ is below
      the certified error terms. Invalid inputs under ``jit`` give NaN.

    The method (tilted lattice composition, one compiled program for any K) and its
    proof are in :mod:`glrt_jax._src.composition`. Jittable (with static ``d``,
    ``adversary``, ``neighbouring``, ``size``), vmappable and differentiable in
    ``noise_multiplier`` and ``sampling_rate``.

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
        size=size,
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
    size: int | None = None,
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
        size=size,
    )
