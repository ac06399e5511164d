"""Non-central chi-squared distribution: accurate, jittable, differentiable.

Notation: ``df = k > 0``, ``nc = λ ≥ 0``, ``a = k/2``, ``m = λ/2``, ``y = x/2``.
The distribution is the Poisson mixture

    sf(x)  = Σ_j w_j Q(a + j, y),      cdf(x) = Σ_j w_j P(a + j, y),
    pdf(x) = Σ_j w_j g(a + j - 1, y) / 2,

with ``w_j = e^{-m} m^j / j!``, ``P``/``Q`` the regularised incomplete gamma
functions and ``g(b, y) = y^b e^{-y} / Γ(b + 1)``.

How it is evaluated:

* Every sum is taken over a window of ``j`` placed around the peak of its summand
  (the posterior mode of the Poisson index given the observation, which in the
  deep upper tail lies many Poisson standard deviations above ``m``), not around
  the Poisson mode.
* Only one incomplete gamma function is evaluated per point, at the end of the
  window; the others follow from the recurrences ``Q(b+1, y) = Q(b, y) + g(b, y)``
  (upwards, for the survival function) and ``P(b, y) = P(b+1, y) + g(b, y)``
  (downwards, for the cdf). Both add positive terms, so they are stable.
* All terms are carried relative to a log-scale offset, so ``logsf``/``logcdf``/
  ``logpdf`` stay finite and accurate far beyond the range of doubles.
* ``log g`` and the Poisson weights use Loader's saddle-point formulas
  (``stirlerr`` and ``bd0``), which keep full relative accuracy for large
  arguments.

* For ``df = 1`` the distribution is that of ``(Z + √nc)²`` and everything is in
  closed form: ``sf = Q(b − a) + Q(b + a)``, ``cdf = Q(a − b) − Q(a + b)``,
  ``pdf = [φ(b − a) + φ(b + a)]/(2b)`` with ``a = √nc``, ``b = √x``, evaluated in
  log space (``b − a = (x − nc)/(b + a)``; ``log Q`` from ``erfc`` up to z = 20 and
  from its asymptotic series beyond). The cdf difference is used only where it
  loses at most a few digits; very small ``x`` falls back to the mixture.

* Where ``df + 2 nc v`` is large (``v`` at the saddle point), the saddle-point
  contour integral below replaces the mixture: O(1) work per point, whatever nc.

The sums run in ``lax.while_loop`` over chunks of the flattened input whose size
is chosen per platform when the program is lowered: cache-sized on CPU, so a
batch of millions of points streams through the loop without round-trips to main
memory, and millions of points on accelerators, where each chunk's loop
iterations cost kernel launches.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_derivatives import SymbolicZero

from glrt_jax._src import solvers
from glrt_jax._src.shapes import bucketed

_LOG_2PI = math.log(2.0 * math.pi)
_HALF_LOG_2PI = 0.5 * _LOG_2PI
_LN2 = math.log(2.0)

# Window of the Poisson index j around the summand's peak c: from
# c - _WIN_SD * sqrt(c) - _WIN_PAD to where the terms have converged.
_WIN_SD = 8.0
_WIN_PAD = 5.0
# Rebalancing of scaled accumulators: powers of two keep it exact.
_BIG_EXP = {8: 400, 4: 40}  # by itemsize: far from overflow in float64 and float32
_MAX_TERMS = 2_000_000
_CHUNK = 4096  # points per chunk on CPU
_CHUNK_ACCEL = 1 << 22  # on GPU/TPU: ~30 MiB per float64 state array
# Terms per while-loop iteration: the convergence test and the rescaling run once
# per block; terms past the converged point only add negligible mass.
_BLOCK = 4


# ---------------------------------------------------------------------------
# dtype plumbing
# ---------------------------------------------------------------------------


def _promote(*args):
    """Promote arguments to a common inexact dtype and broadcast them."""
    dtype = jnp.result_type(*args)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    args = [jnp.asarray(a, dtype) for a in args]
    return jnp.broadcast_arrays(*args)


def _eps(dtype) -> float:
    return float(jnp.finfo(dtype).eps)


def _big_exp(dtype) -> int:
    """Exponent e of the power of two 2**e at which scaled accumulators are rescaled."""
    return _BIG_EXP[jnp.dtype(dtype).itemsize]


def _map_chunks(fn: Callable, chunk: int, *flat):
    """Run ``fn`` over 1-D arrays in sequential chunks of at most ``chunk`` elements.

    The chunks are balanced (their number is the least that respects ``chunk``,
    their lengths differ by padding of fewer elements than there are chunks), so
    a size just above a multiple of ``chunk`` does not pay for a nearly empty one.
    """
    size = flat[0].shape[0]
    if size <= chunk:
        return tuple(fn(*flat))
    n_chunks = -(-size // chunk)
    chunk = -(-size // n_chunks)
    pad = n_chunks * chunk - size
    # Pad with a copy of the first element: a valid, cheap point.
    padded = [jnp.concatenate([f, jnp.broadcast_to(f[:1], (pad,))]) for f in flat]
    stacked = [p.reshape(n_chunks, chunk) for p in padded]
    outs = lax.map(lambda xs: fn(*xs), stacked)
    return tuple(o.reshape(-1)[:size] for o in outs)


def _chunked(fn: Callable, *args, n_out: int):
    """Apply an elementwise ``fn`` to broadcast arrays in chunks.

    ``fn`` maps 1-D arrays to a tuple of ``n_out`` 1-D arrays of the same length.
    The kernels are while loops that run until their slowest element is done, and
    the chunk size is chosen per platform when the computation is lowered
    (``lax.platform_dependent``): on CPU small chunks keep the loop state in
    cache and stop each chunk early; on accelerators large chunks keep the device
    busy, since every chunk costs a few kernel launches per loop iteration.
    """
    shape = args[0].shape
    flat = [a.reshape(-1) for a in args]
    if math.prod(shape) <= _CHUNK:
        outs = fn(*flat)
    else:
        outs = lax.platform_dependent(
            *flat,
            cpu=functools.partial(_map_chunks, fn, _CHUNK),
            default=functools.partial(_map_chunks, fn, _CHUNK_ACCEL),
        )
    assert len(outs) == n_out
    return tuple(o.reshape(shape) for o in outs)


# ---------------------------------------------------------------------------
# Loader's saddle-point helpers
# ---------------------------------------------------------------------------

# Stirling series coefficients: stirlerr(n) ~ sum_k _STIRLING[k] / n^(2k+1).
_STIRLING = (
    1.0 / 12.0,
    -1.0 / 360.0,
    1.0 / 1260.0,
    -1.0 / 1680.0,
    1.0 / 1188.0,
    -691.0 / 360360.0,
    1.0 / 156.0,
)


# stirlerr(n) for n = 1..15 (mpmath, 40 digits); index 0 is unused.
_STIRLERR_INT = (
    0.0,
    0.08106146679532725822,
    0.041340695955409294094,
    0.027677925684998339149,
    0.020790672103765093112,
    0.016644691189821192163,
    0.013876128823070747999,
    0.011896709945891770095,
    0.010411265261972096497,
    0.0092554621827127329177,
    0.0083305634333628712565,
    0.007573675487951840795,
    0.0069428401072095298657,
    0.0064089941880042070684,
    0.0059513701127588477356,
    0.005554733551962801371,
)


def _stirlerr(n, integer=False):
    """log Γ(n+1) − [(n + 1/2) log n − n + log √(2π)] for real n > 0.

    With ``integer=True`` the caller promises whole n, and n ≤ 15 is a table
    lookup instead of ``lgamma`` (the costliest piece of the function).
    """
    big = n > 15.0
    nb = jnp.where(big, n, 16.0)
    inv2 = 1.0 / (nb * nb)
    series = _STIRLING[-1]
    for c in reversed(_STIRLING[:-1]):
        series = c + inv2 * series
    series = series / nb
    if integer:
        idx = jnp.clip(n, 0.0, 15.0).astype(jnp.int32)
        direct = jnp.asarray(_STIRLERR_INT, n.dtype)[idx]
    else:
        ns = jnp.where(big, 1.0, n)
        direct = lax.lgamma(ns + 1.0) - (ns + 0.5) * jnp.log(ns) + ns - _HALF_LOG_2PI
    return jnp.where(big, series, direct)


# bd0 series in v = (x - M)/(x + M):  sum_{k>=1} v^(2k) / (2k + 1), |v| < 1/2.
_BD0_TERMS = 28


def _bd0(x, M):
    """x log(x/M) + M − x, without cancellation (Loader 2000). x ≥ 0, M > 0."""
    d = x - M
    s = x + M
    v = d / jnp.where(s > 0, s, 1.0)
    small = jnp.abs(v) < 0.5
    vs = jnp.where(small, v, 0.0)
    v2 = vs * vs
    poly = 1.0 / (2 * _BD0_TERMS + 1)
    for k in range(_BD0_TERMS - 1, 0, -1):
        poly = 1.0 / (2 * k + 1) + v2 * poly
    series = d * vs + 2.0 * x * vs * v2 * poly
    xs = jnp.where(x > 0, x, 1.0)
    direct = jnp.where(x > 0, xs * jnp.log(xs / M), 0.0) + M - x
    return jnp.where(small, series, direct)


def _log_poisson(n, mean, integer=False):
    """log( mean^n e^{-mean} / Γ(n+1) ) for real n ≥ 0 (whole n if ``integer``), mean ≥ 0."""
    n_pos = n > 0
    ns = jnp.where(n_pos, n, 1.0)
    mean_pos = mean > 0
    ms = jnp.where(mean_pos, mean, 1.0)
    val = -_stirlerr(ns, integer) - _bd0(ns, ms) - 0.5 * (_LOG_2PI + jnp.log(ns))
    val = jnp.where(mean_pos, val, -jnp.inf)
    return jnp.where(n_pos, val, -mean)


def _log1mexp(t):
    """log(1 − e^t) for t ≤ 0."""
    return jnp.where(t > -_LN2, jnp.log(-jnp.expm1(t)), jnp.log1p(-jnp.exp(t)))


# ---------------------------------------------------------------------------
# Regularised incomplete gamma in log space: (log P(b, y), log Q(b, y)).
# ---------------------------------------------------------------------------


def _log_gamma_pq(b, y):
    """Return (log P(b, y), log Q(b, y), log g(b, y)) for b > 0, y ≥ 0 (elementwise, 1-D).

    g(b, y) = y^b e^{-y} / Γ(b + 1) is the prefactor both expansions share.
    """
    dtype = b.dtype
    eps = _eps(dtype)
    tiny = float(jnp.finfo(dtype).tiny) / eps
    lg = _log_poisson(b, y)  # log g(b, y)
    use_series = y < b + 1.0

    # Series: P = g(b, y) * sum_{n>=0} y^n / ((b+1)...(b+n)).
    def s_cond(st):
        n, term, tot, done = st
        return jnp.any(~done) & (n < _MAX_TERMS)

    def s_body(st):
        n, term, tot, done = st
        for k in range(_BLOCK):
            term = term * y / (b + n + k)
            tot = tot + term
        done = done | (term <= eps * 0.5 * tot)
        return n + _BLOCK, term, tot, done

    one = jnp.ones_like(b)
    _, _, ssum, _ = lax.while_loop(
        s_cond, s_body, (jnp.asarray(1.0, dtype), one, one, ~use_series | (y == 0))
    )
    logp_series = lg + jnp.log(ssum)

    # Continued fraction (modified Lentz): Q = b g(b, y) * h.
    yc = jnp.where(use_series, b + 2.0, y)
    bb0 = yc + 1.0 - b
    c0 = jnp.full_like(b, 1.0 / tiny)
    d0 = 1.0 / bb0

    def c_cond(st):
        i, bb, c, d, h, done = st
        return jnp.any(~done) & (i < _MAX_TERMS)

    def c_body(st):
        i, bb, c, d, h, done = st
        for _ in range(_BLOCK):
            an = -i * (i - b)
            bb = bb + 2.0
            d = an * d + bb
            d = jnp.where(jnp.abs(d) < tiny, tiny, d)
            c = bb + an / c
            c = jnp.where(jnp.abs(c) < tiny, tiny, c)
            d = 1.0 / d
            delta = d * c
            h = h * delta
            i = i + 1.0
        done = done | (jnp.abs(delta - 1.0) <= eps)
        return i, bb, c, d, h, done

    _, _, _, _, h, _ = lax.while_loop(
        c_cond, c_body, (jnp.asarray(1.0, dtype), bb0, c0, d0, d0, use_series)
    )
    logq_cf = lg + jnp.log(b) + jnp.log(h)

    logp = jnp.where(use_series, logp_series, _log1mexp(logq_cf))
    logq = jnp.where(use_series, _log1mexp(logp_series), logq_cf)
    logp = jnp.where(y == 0, -jnp.inf, logp)
    logq = jnp.where(y == 0, 0.0, logq)
    return logp, logq, lg


# ---------------------------------------------------------------------------
# Peak-centred Poisson mixture sums
# ---------------------------------------------------------------------------


def _peak(a, m, y):
    """Mode of the Poisson index given the statistic: (j+1)(a+j) ≈ m y."""
    my = m * y
    return 2.0 * my / (a + jnp.sqrt(a * a + 4.0 * my))


def _converged(t, prev, tot, eps):
    """Log-concave tail bound: remaining ≤ t r / (1 − r) with r = t / prev."""
    r = t / jnp.where(prev > 0, prev, 1.0)
    return (t == 0) | ((t < prev) & (t * r <= eps * tot * (1.0 - r)))


def _mixture_sum(x, a, m, upward, with_pdf):
    """Scaled Poisson-mixture sum of incomplete gammas, 1-D, x > 0.

    upward=True:  log Σ_j w_j Q(a + j, y), started below the peak (Q recurrence up).
    upward=False: log Σ_j w_j P(a + j, y), started above the peak (P recurrence down).
    Returns (log sum, log pdf, d log pdf / dx); the pdf and its slope come from
    the same window (accurate near the peak of the sum, used by the quantile
    solver) or are NaN when ``with_pdf`` is False. With P_j = w_j g(a + j − 1, y)
    the pdf terms, pdf = Σ P_j / 2 and d log pdf/dx = (Σ P_j (a + j − 1) / (y Σ P_j) − 1) / 2.
    """
    eps = _eps(x.dtype)
    big, log_big = 2.0 ** _big_exp(x.dtype), _big_exp(x.dtype) * _LN2
    y = 0.5 * x
    jp = _peak(a, m, y)
    if upward:
        c = jnp.maximum(m, jp)
        j0 = jnp.floor(jnp.maximum(0.0, c - _WIN_SD * jnp.sqrt(c) - _WIN_PAD))
    else:
        c = jnp.minimum(m, jp)
        # Above the peak the terms fall by about rho per step; when rho is tiny
        # (deep lower tail) a few steps reach 1e-20, and starting higher would
        # only multiply huge ratios.
        rho = m * y / ((c + 1.0) * (a + c + 1.0))
        k_fast = jnp.ceil(46.0 / jnp.maximum(-jnp.log(jnp.maximum(rho, 1e-300)), 1e-3)) + 1.0
        span = jnp.minimum(k_fast, _WIN_SD * jnp.sqrt(c) + _WIN_PAD)
        # rho < 1e-17: the terms j >= 1 are below rounding; j = 0 alone is exact.
        j0 = jnp.where(rho < 1e-17, 0.0, jnp.ceil(c + span))
    j0 = jnp.where(m > 0, j0, 0.0)
    b0 = a + j0
    lp, lq, lg0 = _log_gamma_pq(b0, y)
    lgam = lq if upward else lp
    # Scale: the first term is w_j0 * (Q or P)(b0, y) = exp(L).
    L = _log_poisson(j0, m, integer=True) + lgam
    # The loop carries the current term T_j = w_j G_j and the increment
    # U_j = w_j g_j of the incomplete gamma G (Q upward, P downward), both in
    # units of exp(L); g_j = g(b0 + j - j0, y) upward, g(b0 + j - j0 - 1, y)
    # downward, with g(b, y) = y^b e^{-y} / Γ(b + 1):
    #   upward:   T_{j+1} = (T_j + U_j) m / (j + 1),  U_{j+1} = U_j m y / ((j + 1)(a + j + 1))
    #   downward: T_{j-1} = (T_j + U_j) j / m,        U_{j-1} = U_j j (a + j - 1) / (m y)
    u0 = jnp.exp(lg0 - lgam)
    if not upward:
        u0 = u0 * b0 / y
    ms = jnp.where(m > 0, m, 1.0)
    my = m * y
    inv_m, inv_my = 1.0 / ms, 1.0 / jnp.where(my > 0, my, 1.0)
    one, zero = jnp.ones_like(x), jnp.zeros_like(x)

    def step(j, b, t, u, s, sp, sq):
        """Add the term of index j (b = a + j), then move to the next index."""
        s = s + t
        if with_pdf:
            pj = u * b if upward else u
            sp, sq = sp + pj, sq + pj * (b - 1.0)
        if upward:
            j, b = j + 1.0, b + 1.0
            inv = 1.0 / (j * b)
            return j, b, (t + u) * (m * b) * inv, u * my * inv, s, sp, sq
        jc = jnp.maximum(j, 0.0)
        t, u = (t + u) * (jc * inv_m), u * (jc * (b - 1.0) * inv_my)
        return jnp.maximum(j - 1.0, -1.0), b - 1.0, t, u, s, sp, sq

    def cond(st):
        return jnp.any(~st[-2]) & (st[-1] < _MAX_TERMS)

    def body(st):
        j, b, t, u, s, sp, sq, L, done, n = st
        # Checks on the carried (materialised) state, so that they do not
        # recompute the block's recurrences. Keep everything inside the range
        # of the dtype by exact power-of-two moves.
        f = jnp.where(jnp.maximum(s, t) > big, 1.0 / big, 1.0)
        t, u, s = t * f, u * f, s * f
        if with_pdf:
            sp, sq = sp * f, sq * f
        L = L + jnp.where(f < 1.0, log_big, 0.0)
        # Past the peak the terms are log-concave and falling: everything not
        # yet added is at most t / (1 − ρ), ρ = T_next / T the next ratio.
        step_ratio = (m / (j + 1.0)) if upward else (j * inv_m)
        rho = (1.0 + u / jnp.where(t > 0, t, 1.0)) * step_ratio
        past = (j > c) if upward else (j < c)
        tail_ok = (t == 0) | ((rho < 1.0) & (t <= eps * s * (1.0 - rho)))
        done = done | (j < 0) | (past & tail_ok)
        for _ in range(_BLOCK):
            j, b, t, u, s, sp, sq = step(j, b, t, u, s, sp, sq)
        return j, b, t, u, s, sp, sq, L, done, n + _BLOCK

    init = (j0, b0, one, u0, zero, zero, zero, L, jnp.zeros(x.shape, bool), 0)
    _, _, _, _, s, sp, sq, L, _, _ = lax.while_loop(cond, body, init)
    if with_pdf:
        lpdf = L + jnp.log(sp) + (-jnp.log(x) if upward else -_LN2)
        dlpdf = (sq / (sp * y) - 1.0) * 0.5
    else:
        lpdf = dlpdf = jnp.full_like(x, jnp.nan)
    return L + jnp.log(s), lpdf, dlpdf


def _log_sf_sum(x, a, m, with_pdf=False):
    """(log sf, log pdf, its slope) via the upward Q recurrence. 1-D, x > 0."""
    return _mixture_sum(x, a, m, True, with_pdf)


def _log_cdf_sum(x, a, m, with_pdf=False):
    """(log cdf, log pdf, its slope) via the downward P recurrence. 1-D, x > 0."""
    return _mixture_sum(x, a, m, False, with_pdf)


def _log_pdf_sum(x, a, m):
    """log pdf by the Bessel-type series, summed upward around its peak. x > 0."""
    eps = _eps(x.dtype)
    y = 0.5 * x
    c = _peak(a, m, y)
    j0 = jnp.floor(jnp.maximum(0.0, c - _WIN_SD * jnp.sqrt(c) - _WIN_PAD))
    j0 = jnp.where(m > 0, j0, 0.0)
    b0 = a + j0
    # log of w_j0 * g(a + j0 - 1, y) / 2 = w_j0 * g(a + j0, y) (a + j0) / (2 y).
    L0 = _log_poisson(j0, m, integer=True) + _log_poisson(b0, y) + jnp.log(b0) - jnp.log(x)
    my = m * y

    def cond(st):
        j, t, s, prev, L, done, n = st
        return jnp.any(~done) & (n < _MAX_TERMS)

    def body(st):
        j, t, s, prev, L, done, n = st
        s2 = s + t
        new_done = done | ((j > c) & _converged(t, prev, s2, eps))
        t2 = t * my / ((j + 1.0) * (a + j))
        big = 2.0 ** _big_exp(x.dtype)
        f = jnp.where(s2 > big, 1.0 / big, 1.0)
        keep = lambda new, old: jnp.where(done, old, new)  # noqa: E731
        return (
            keep(j + 1.0, j),
            keep(t2 * f, t),
            keep(s2 * f, s),
            keep(t * f, prev),
            keep(L - jnp.log(f), L),
            new_done,
            n + 1,
        )

    init = (
        j0,
        jnp.ones_like(x),
        jnp.zeros_like(x),
        jnp.zeros_like(x),
        L0,
        jnp.zeros(x.shape, bool),
        jnp.asarray(0, jnp.int32),
    )
    _, _, s, _, L, _, _ = lax.while_loop(cond, body, init)
    return L + jnp.log(s)


# ---------------------------------------------------------------------------
# df = 1 in closed form: X = (Z + √nc)², so with a = √nc, b = √x
#   sf = Q(b − a) + Q(b + a),   cdf = Q(a − b) − Q(a + b),
#   pdf = [φ(b − a) + φ(b + a)] / (2b),
# Q the standard normal survival function, all in log space.
# ---------------------------------------------------------------------------

# Above this z, log Q(z) comes from the asymptotic series (the erfc of XLA
# loses about z² ulp there and underflows past z ≈ 37).
_Z_ASYM = 20.0
_ASYM_TERMS = 14
# Up to this z the df = 1 cdf is the plain difference of two erfc.
_Z_PLAIN = 8.0


def _log_q_normal(z):
    """Return (log Q(z), L(z)) with L(z) = log Q(z) + z²/2 for z ≥ 0.

    For z < 0 the second value is unused (returned as log Q(z) + z²/2 too).
    """
    big = z > _Z_ASYM

    def asymptotic(z):
        zs = jnp.where(big, z, _Z_ASYM + 1.0)
        inv2 = 1.0 / (zs * zs)
        # Q(z) = φ(z)/z · Σ_n (−1)^n (2n − 1)!! z^{−2n}, summed by Horner.
        s = jnp.ones_like(z)
        for n in range(_ASYM_TERMS, 0, -1):
            s = 1.0 - (2 * n - 1) * inv2 * s
        return -jnp.log(zs) - _HALF_LOG_2PI + jnp.log(s)

    # Only computed when a point of the batch is that far out (Q(z) < 3e-89).
    l_asym = lax.cond(jnp.any(big), asymptotic, jnp.zeros_like, z)
    zm = jnp.where(big, 0.0, z)
    lq_direct = jnp.log(0.5 * jax.scipy.special.erfc(zm * (1.0 / math.sqrt(2.0))))
    half_z2 = 0.5 * z * z
    lq = jnp.where(big, l_asym - half_z2, lq_direct)
    ell = jnp.where(big, l_asym, lq_direct + half_z2)
    return lq, ell


def _d1_sqrt_terms(x, nc):
    """a = √nc, b = √x and b − a computed without cancellation."""
    a = jnp.sqrt(nc)
    b = jnp.sqrt(x)
    s = a + b
    bma = (x - nc) / jnp.where(s > 0, s, 1.0)
    return a, b, bma


def _d1_logsf(x, nc):
    a, b, bma = _d1_sqrt_terms(x, nc)
    lq1, _ = _log_q_normal(bma)
    lq2, _ = _log_q_normal(b + a)
    return lq1 + jnp.log1p(jnp.exp(lq2 - lq1))


# Gauss–Legendre rule for the short-interval cdf below (entire integrand).
_GL_NODES, _GL_WEIGHTS = (
    tuple(float(v) for v in arr) for arr in np.polynomial.legendre.leggauss(12)
)


def _d1_logcdf_short(a, b):
    """log cdf = log ∫_{−b}^{b} φ(a + u) du, by quadrature; for b ≤ 1 and ab ≤ 1.

    φ(a + u) = φ(a) e^{−au − u²/2}: every node is positive, nothing cancels,
    and on this interval the integrand is so smooth that 12 nodes are exact
    to rounding.
    """
    total = jnp.zeros_like(b)
    for xi, wi in zip(_GL_NODES, _GL_WEIGHTS, strict=True):
        u = b * xi
        total = total + wi * jnp.exp(-u * (a + 0.5 * u))
    return -0.5 * a * a - _HALF_LOG_2PI + jnp.log(b * total)


def _d1_logcdf(x, nc):
    """(log cdf, usable).

    cdf = Q(a − b) − Q(a + b) loses accuracy as Q(a + b)/Q(a − b) → 1, which
    happens only for a short interval [a − b, a + b] (b and ab small): there
    quadrature. Elsewhere the difference of two erfc, or, far in the tail
    (a − b > _Z_PLAIN), of their logarithms.
    """
    a, b, bma = _d1_sqrt_terms(x, nc)
    short = (b <= 1.0) & (a * b <= 1.0)

    def difference(a, b, bma):
        u1 = -bma
        lq1, ell1 = _log_q_normal(u1)
        lq2, ell2 = _log_q_normal(a + b)
        # For u1 ≥ 0 use (u2² − u1²)/2 = 2ab exactly, so diff keeps its relative accuracy.
        diff = jnp.where(u1 >= 0, -2.0 * a * b + ell2 - ell1, lq2 - lq1)
        diff = jnp.minimum(diff, 0.0)
        # L(z) carries an absolute error of ~z² ulp below _Z_ASYM: demand a margin.
        tau = jnp.minimum(_LN2, 0.01 * jnp.maximum(1.0, jnp.minimum(u1, _Z_ASYM + 1.0) ** 2 / 25.0))
        return lq1 + _log1mexp(jnp.minimum(diff, -tau)), diff <= -tau

    def quadrature(a, b, bma):
        return _d1_logcdf_short(jnp.where(short, a, 0.0), jnp.where(short, b, 0.5))

    def plain(a, b, bma):
        # Outside the short interval Q(a + b) ≤ Q(a − b)/2 or so: no cancellation
        # to speak of, and erfc is accurate to a few ulp up to a − b = _Z_PLAIN.
        u1 = jnp.minimum(-bma, _Z_PLAIN)
        q1 = jax.scipy.special.erfc(u1 * (1.0 / math.sqrt(2.0)))
        q2 = jax.scipy.special.erfc((a + b) * (1.0 / math.sqrt(2.0)))
        return jnp.log(0.5 * (q1 - q2))

    far = ~short & (-bma > _Z_PLAIN)
    mid = ~short & ~far

    def nothing(a, b, bma):
        return jnp.zeros_like(x)

    # Each form is computed only if a point of the batch needs it.
    quad = lax.cond(jnp.any(short), quadrature, nothing, a, b, bma)
    direct = lax.cond(jnp.any(mid), plain, nothing, a, b, bma)
    logs, usable = lax.cond(
        jnp.any(far), difference, lambda *r: (nothing(*r), jnp.ones(x.shape, bool)), a, b, bma
    )
    return jnp.where(short, quad, jnp.where(far, logs, direct)), usable | ~far


def _d1_logpdf(x, nc):
    a, b, bma = _d1_sqrt_terms(x, nc)
    return -0.5 * bma * bma - _HALF_LOG_2PI - jnp.log(2.0 * b) + jnp.log1p(jnp.exp(-2.0 * a * b))


def _d1_dlogpdf(x, nc):
    """d log pdf / dx = (a tanh(ab) − b − 1/b) / (2b) for df = 1."""
    a, b, _ = _d1_sqrt_terms(x, nc)
    return (a * jnp.tanh(a * b) - b - 1.0 / b) / (2.0 * b)


# ---------------------------------------------------------------------------
# Saddle-point contour integral: O(1) work per point once k + 2λ is large.
#
# With the cumulant generating function K(s) = −(k/2) log(1 − 2s) + λ s/(1 − 2s),
#   sf(x)  =  (1/2πi) ∫ e^{K(s) − s x} ds / s   along Re s = c ∈ (0, ½),
#   cdf(x) = −(1/2πi) ∫ e^{K(s) − s x} ds / s   along Re s = c < 0,
#   pdf(x) =  (1/2πi) ∫ e^{K(s) − s x} ds        along any Re s = c < ½.
# The line goes through the saddle point K'(c) = x (a quadratic in 1/(1 − 2c)),
# so the smaller tail is computed directly and, in log space, far into the tail.
# With v = 1/(1 − 2c), r = v − 1 and τ = 2 t v along s = c + i t,
#   K(s) − s x − [K(c) − c x] = −(k/4) log(1 + τ²) − L R
#                               + i[(k/2)(atan τ − τ) − L τ R − t δ],
# L = λ v/2, R = τ²/(1 + τ²), δ = x − K'(c); in units of τ the integrand is
# close to a Gaussian of width √(2/κ), κ = k + 2 λ v. The trapezoidal rule with a
# step of 0.4 of that width converges like exp(−2π²/0.16) for the smooth part;
# the pole of 1/s, at distance |c| from the line, adds 1/(e^{2π|c|/h} − 1) (the
# coth sum of a simple pole). Within a few widths of the line that term is
# exact and subtracted; farther out the step is shortened until it is below
# e^{-40} of the result. Near the mean the line is moved to |c| ≥ one width.
# The rule is used where its error is provably negligible (large κ, integrand
# decayed by e^{-40} at the last node, pole correction below the result);
# elsewhere the Poisson mixture is summed.
# ---------------------------------------------------------------------------

_CT_NODES = 26
_CT_STEP = 0.4  # trapezoid step, in Gaussian widths
_CT_KAPPA_MIN = 150.0
_CT_MIX_COST = 45.0  # mixture cost (see _contour_applies) above which the rule is used
_CT_TAIL = 40.0  # required log-drop of the integrand at the last node
_CT_POLE = 8.0  # required log-margin of the result over the pole correction
_CT_NEAR = 4.0  # |c| below this many widths: pole correction instead of a finer step

_PIO2_HI = 1.5707963267948966
_PIO2_LO = 6.123233995736766e-17
_SIN = tuple((-1.0) ** n / math.factorial(2 * n + 1) for n in range(9))
_COS = tuple((-1.0) ** n / math.factorial(2 * n) for n in range(10))


def _sincos(b):
    """(sin b, cos b) by quadrant reduction and Taylor polynomials (vectorises)."""
    q = jnp.round(b * (2.0 / math.pi))
    r = (b - q * _PIO2_HI) - q * _PIO2_LO
    r2 = r * r
    s = _SIN[-1]
    for co in reversed(_SIN[:-1]):
        s = co + r2 * s
    s = r * s
    c = _COS[-1]
    for co in reversed(_COS[:-1]):
        c = co + r2 * c
    quad = q - 4.0 * jnp.floor(0.25 * q)
    swap = (quad == 1.0) | (quad == 3.0)
    sin = jnp.where(swap, c, s)
    cos = jnp.where(swap, s, c)
    sin = jnp.where(quad >= 2.0, -sin, sin)
    cos = jnp.where((quad == 1.0) | (quad == 2.0), -cos, cos)
    return sin, cos


_ATAN_TERMS = 16


def _atan_minus_id(t):
    """atan t − t for 0 ≤ t ≤ 2, to full relative accuracy.

    Two half-angle steps y = t/(1 + √(1 + t²)) (atan t = 2 atan y) bring the
    argument below 0.3; each step's ``2y − t = −t³/(1 + √(1 + t²))²`` is exact in
    form, so every piece is negative and nothing cancels.
    """
    s1 = 1.0 + jnp.sqrt(1.0 + t * t)
    y = t / s1
    s2 = 1.0 + jnp.sqrt(1.0 + y * y)
    z = y / s2
    z2 = z * z
    poly = (-1.0) ** _ATAN_TERMS / (2 * _ATAN_TERMS + 1)
    for j in range(_ATAN_TERMS - 1, 0, -1):
        poly = (-1.0) ** j / (2 * j + 1) + z2 * poly
    # atan z − z = z³ Σ_{j≥1} (−1)^j z^{2j−2}/(2j + 1)
    inner = z * z2 * poly
    return 4.0 * inner - 2.0 * (y * y * y) / (s2 * s2) - (t * t * t) / (s1 * s1)


def _r_minus_log1p(r):
    """r − log(1 + r) for r > −1, without cancellation near 0 (log1p(r) = 2 atanh u)."""
    small = jnp.abs(r) < 0.5
    rs = jnp.where(small, r, 0.0)
    u = rs / (2.0 + rs)
    u2 = u * u
    poly = 1.0 / 41.0
    for j in range(19, 0, -1):
        poly = 1.0 / (2 * j + 1) + u2 * poly
    series = rs * u - 2.0 * u * u2 * poly
    rb = jnp.where(small, 1.0, r)
    return jnp.where(small, series, rb - jnp.log1p(rb))


def _saddle(x, k, lam):
    """r = v − 1 at the saddle point, v = 1/(1 − 2c) solving λ v² + k v = x, stably."""
    sq = jnp.sqrt(k * k + 4.0 * lam * x)
    tk = 2.0 * x - k
    num = jnp.where(tk > 0, 4.0 * x * (x - k - lam) / jnp.where(tk > 0, tk + sq, 1.0), tk - sq)
    return num / (k + sq)


def _contour_applies(x, a, m):
    """Cheap pre-test of the contour rule, where it is also the cheaper method.

    The rule needs κ = k + 2λv ≥ _CT_KAPPA_MIN at the saddle and costs about
    the same everywhere; the mixture costs about 6√c + √(a + c) units (c the
    peak of the Poisson index: its window, then the incomplete gamma at its
    start). The two cost the same at about _CT_MIX_COST units: break-even
    timed on XLA:CPU for df from 10 to 1e5 and nc from 0 to 400. Either
    method is accurate on both sides; only speed depends on the choice.
    """
    kappa_ok = 2.0 * a + 4.0 * m * (1.0 + _saddle(x, 2.0 * a, 2.0 * m)) >= _CT_KAPPA_MIN
    c = jnp.maximum(m, _peak(a, m, 0.5 * x))
    return kappa_ok & (6.0 * jnp.sqrt(c) + jnp.sqrt(a + c) >= _CT_MIX_COST)


def _contour(x, k, lam, with_pdf):
    """Trapezoidal saddle-point integral. 1-D, x > 0.

    Returns (log tail, upper, log pdf or NaN, d log pdf/dx or NaN, ok): the tail
    is the survival function where ``upper`` and the cdf elsewhere (the side of
    the mean x is on); ``ok`` marks the points where the rule's error is
    negligible. The slope of the pdf is the same rule applied to
    pdf'(x) = (1/2πi) ∫ (−s) e^{K(s) − s x} ds.
    """
    dtype = x.dtype
    mu = k + lam
    r_hat = _saddle(x, k, lam)
    v_hat = 1.0 + r_hat
    s_hat = r_hat / (2.0 * v_hat)
    w_hat = 1.0 / (v_hat * jnp.sqrt(2.0 * (k + 2.0 * lam * v_hat)))  # 1/√K''
    upper = r_hat >= 0
    sgn = jnp.where(upper, 1.0, -1.0)
    # Keep the line at least one width from the pole at s = 0.
    moved = jnp.abs(s_hat) < w_hat
    c = jnp.where(moved, sgn * w_hat, s_hat)
    r = jnp.where(moved, 2.0 * c / (1.0 - 2.0 * c), r_hat)
    v = 1.0 + r
    delta = jnp.where(moved, (x - mu) - r * (k + lam * (v + 1.0)), 0.0)
    # K(c) − c x, as a sum of non-positive terms (plus −cδ off the saddle).
    phi = -0.5 * k * _r_minus_log1p(r) - 0.5 * lam * r * r - c * delta
    kappa = k + 2.0 * lam * v
    w = 1.0 / (v * jnp.sqrt(2.0 * kappa))  # 1/√K''(c)
    # Pole near the line (|c| < 4 widths): inside the strip that bounds the
    # smooth part's error, so its trapezoid error is exactly the coth term below.
    # Pole far: step small enough that its error e^{-2π|c|/h} is below e^{-40}
    # of the result, whatever the strip; no correction.
    near = jnp.abs(c) < _CT_NEAR * w
    h_t = _CT_STEP * w
    h_t = jnp.where(near, h_t, jnp.minimum(h_t, 2.0 * math.pi * jnp.abs(c) / (40.0 - phi)))
    h_tau = 2.0 * v * h_t
    ell = 0.5 * lam * v
    j = jnp.arange(1, _CT_NODES, dtype=dtype)
    tau = h_tau[:, None] * j
    t = h_t[:, None] * j
    tau2 = tau * tau
    rr = tau2 / (1.0 + tau2)
    amp = -0.25 * k[:, None] * jnp.log1p(tau2) - ell[:, None] * rr
    phase = 0.5 * k[:, None] * _atan_minus_id(tau) - ell[:, None] * tau * rr - t * delta[:, None]
    e = jnp.exp(amp)
    sin, cos = _sincos(phase)
    cc = c[:, None]
    terms = e * (cc * cos + t * sin) / (cc * cc + t * t)
    total = (h_t / math.pi) * (0.5 / c + jnp.sum(terms, axis=1))
    # Trapezoid error of the pole part, in units of e^{phi}.
    z = 2.0 * math.pi * jnp.abs(c) / h_t
    log_corr = jnp.where(near, -(z + jnp.log1p(-jnp.exp(-z))), -jnp.inf)
    val = sgn * total - jnp.exp(jnp.minimum(log_corr - phi, 0.0))
    ltail = phi + jnp.log(jnp.where(val > 0, val, 1.0))
    if with_pdf:
        dsum = 0.5 + jnp.sum(e * cos, axis=1)
        dens = (h_t / math.pi) * dsum
        lpdf = phi + jnp.log(jnp.where(dens > 0, dens, 1.0))
        dlpdf = jnp.sum(e * t * sin, axis=1) / dsum - c
    else:
        lpdf = dlpdf = jnp.full_like(x, jnp.nan)
    ok = (
        (kappa >= _CT_KAPPA_MIN)
        & (amp[:, -1] <= -_CT_TAIL)
        & (log_corr - phi <= -_CT_POLE)
        & (val > 0)
        & jnp.isfinite(ltail)
    )
    if with_pdf:
        ok = ok & (dens > 0)
    return ltail, upper, lpdf, dlpdf, ok


# ---------------------------------------------------------------------------
# Elementwise kernels with domain handling
# ---------------------------------------------------------------------------


def _bad_params(df, nc):
    return ~(df > 0) | ~(nc >= 0) | jnp.isinf(df) | jnp.isinf(nc)


def _safe_inputs(x, df, nc):
    """Replace points that are handled by a closed-form branch by a benign one."""
    bad = _bad_params(df, nc) | jnp.isnan(x)
    interior = ~bad & (x > 0) & jnp.isfinite(x)
    xs = jnp.where(interior, x, 1.0)
    dfs = jnp.where(bad, 1.0, df)
    ncs = jnp.where(bad, 0.0, nc)
    return bad, interior, xs, dfs, ncs


def _tiers(x, a, m, tiers, n_out):
    """First usable result among several methods, each run only where it may serve.

    ``tiers`` are pairs ``(applies, f)``, tried in order: ``applies(x, a, m)`` is a
    cheap mask of the points the method may serve, ``f(x, a, m) -> (outs, usable)``
    evaluates it. A method runs (under ``lax.cond``) only if an unserved point of
    the chunk is in its mask, and then on benign inputs elsewhere, so a batch pays
    only for the methods its points need. The last method must serve every point.
    """
    need = jnp.ones(x.shape, bool)
    outs = tuple(jnp.full_like(x, jnp.nan) for _ in range(n_out))

    def keep(outs, need, *_):
        return outs, need

    def run(outs, need, mine, f):
        xb = jnp.where(mine, x, 1.0)
        ab = jnp.where(mine, a, 1.0)
        mb = jnp.where(mine, m, 0.0)
        new, usable = f(xb, ab, mb)
        take = mine & usable
        outs = tuple(jnp.where(take, n, o) for n, o in zip(new, outs, strict=True))
        return outs, need & ~take

    def attempt(outs, need, applies, f):
        mine = need & applies(x, a, m)
        return lax.cond(jnp.any(mine), functools.partial(run, f=f), keep, outs, need, mine)

    for applies, f in tiers:
        # Once every point is served, later methods are not even tested.
        outs, need = lax.cond(
            jnp.any(need), functools.partial(attempt, applies=applies, f=f), keep, outs, need
        )
    return outs


def _is_df1(x, a, m):
    return a == 0.5


def _everywhere(x, a, m):
    return jnp.ones(x.shape, bool)


def _d1_pdf_pair(x, m, with_pdf):
    """(log pdf, d log pdf/dx) for df = 1 (nc = 2m), or NaNs unless ``with_pdf``."""
    if not with_pdf:
        nan = jnp.full_like(x, jnp.nan)
        return nan, nan
    return _d1_logpdf(x, 2.0 * m), _d1_dlogpdf(x, 2.0 * m)


def _eval_logsf(xs, dfs, ncs, with_pdf=False):
    """(log sf, log pdf, d log pdf/dx) at interior points (NaN unless ``with_pdf``).

    Closed form for df = 1, else the saddle-point contour where it is accurate,
    else the Poisson mixture.
    """

    def closed(x, a, m):
        lpdf, dlpdf = _d1_pdf_pair(x, m, with_pdf)
        return (_d1_logsf(x, 2.0 * m), lpdf, dlpdf), a == 0.5

    def contour(x, a, m):
        lt, upper, lpdf, dlpdf, ok = _contour(x, 2.0 * a, 2.0 * m, with_pdf)
        return (jnp.where(upper, lt, _log1mexp(lt)), lpdf, dlpdf), ok

    def mixture(x, a, m):
        return _log_sf_sum(x, a, m, with_pdf), jnp.ones(x.shape, bool)

    return _tiers(
        xs,
        0.5 * dfs,
        0.5 * ncs,
        ((_is_df1, closed), (_contour_applies, contour), (_everywhere, mixture)),
        3,
    )


def _eval_logcdf(xs, dfs, ncs, with_pdf=False):
    """(log cdf, log pdf, d log pdf/dx) at interior points; as ``_eval_logsf``."""

    def closed(x, a, m):
        lcdf, usable = _d1_logcdf(x, 2.0 * m)
        lpdf, dlpdf = _d1_pdf_pair(x, m, with_pdf)
        return (lcdf, lpdf, dlpdf), (a == 0.5) & usable

    def contour(x, a, m):
        lt, upper, lpdf, dlpdf, ok = _contour(x, 2.0 * a, 2.0 * m, with_pdf)
        return (jnp.where(upper, _log1mexp(lt), lt), lpdf, dlpdf), ok

    def mixture(x, a, m):
        return _log_cdf_sum(x, a, m, with_pdf), jnp.ones(x.shape, bool)

    return _tiers(
        xs,
        0.5 * dfs,
        0.5 * ncs,
        ((_is_df1, closed), (_contour_applies, contour), (_everywhere, mixture)),
        3,
    )


def _kernel_logsf(x, df, nc):
    bad, interior, xs, dfs, ncs = _safe_inputs(x, df, nc)
    lsf, _, _ = _eval_logsf(xs, dfs, ncs)
    lsf = jnp.minimum(lsf, 0.0)  # rounding (float32) must not give sf > 1
    out = jnp.where(x <= 0, 0.0, jnp.where(jnp.isposinf(x), -jnp.inf, lsf))
    return (jnp.where(bad, jnp.nan, out),)


def _kernel_logcdf(x, df, nc):
    bad, interior, xs, dfs, ncs = _safe_inputs(x, df, nc)
    lcdf, _, _ = _eval_logcdf(xs, dfs, ncs)
    lcdf = jnp.minimum(lcdf, 0.0)
    out = jnp.where(x <= 0, -jnp.inf, jnp.where(jnp.isposinf(x), 0.0, lcdf))
    return (jnp.where(bad, jnp.nan, out),)


def _kernel_logpdf(x, df, nc):
    bad, interior, xs, dfs, ncs = _safe_inputs(x, df, nc)

    def closed(x, a, m):
        return (_d1_logpdf(x, 2.0 * m),), a == 0.5

    def contour(x, a, m):
        _, _, lpdf, _, ok = _contour(x, 2.0 * a, 2.0 * m, True)
        return (lpdf,), ok

    def series(x, a, m):
        return (_log_pdf_sum(x, a, m),), jnp.ones(x.shape, bool)

    (lpdf,) = _tiers(
        xs,
        0.5 * dfs,
        0.5 * ncs,
        ((_is_df1, closed), (_contour_applies, contour), (_everywhere, series)),
        1,
    )
    # At x = 0 the density is +inf (df < 2), e^{-λ/2}/2 (df = 2) or 0 (df > 2).
    at0 = jnp.where(dfs < 2, jnp.inf, jnp.where(dfs == 2, -_LN2 - 0.5 * ncs, -jnp.inf))
    out = jnp.where(x < 0, -jnp.inf, jnp.where(x == 0, at0, lpdf))
    out = jnp.where(jnp.isposinf(x), -jnp.inf, out)
    return (jnp.where(bad, jnp.nan, out),)


@jax.jit
def _logsf_impl(x, df, nc):
    x, df, nc = _promote(x, df, nc)
    return _chunked(_kernel_logsf, x, df, nc, n_out=1)[0]


@jax.jit
def _logcdf_impl(x, df, nc):
    x, df, nc = _promote(x, df, nc)
    return _chunked(_kernel_logcdf, x, df, nc, n_out=1)[0]


@jax.jit
def _logpdf_impl(x, df, nc):
    x, df, nc = _promote(x, df, nc)
    return _chunked(_kernel_logpdf, x, df, nc, n_out=1)[0]


# ---------------------------------------------------------------------------
# Quantiles: Taylor steps on the smaller tail, in solvers.find_root
# ---------------------------------------------------------------------------

_NEWTON_ITERS = 60  # evaluations, at most
# Largest step in log x (the start is within 0.6 of the root; see _initial_guess).
_MAX_LOG_STEP = 2.0
# Residual of the log tail at which the iteration stops, in ulps of max(1, |log p|).
_RESID_ULPS = 4.0
# Newton steps of the start on the saddle-point approximation, at most; a step
# below _LR_SETTLED (in log x) is left to the solver.
_LR_STEPS = 2
_LR_SETTLED = 3e-3
# Order of the Taylor polynomial of the log tail that each solver step inverts.
_TAYLOR_ORDER = 8
# Newton iterations on that polynomial, from its second-order reversion.
_TAYLOR_NEWTON = 2


def _z_from_logq(logq):
    """Standard normal upper quantile z with Q_N(z) ≈ e^{logq}, any logq ≤ log ½.

    Abramowitz & Stegun 26.2.23 in t = √(−2 logq): absolute error below 4.5e-4,
    ample for a start (Sankaran's approximation is itself coarser), and no
    exp/log, so it holds for probabilities far below the smallest double.
    """
    t = jnp.sqrt(-2.0 * logq)
    num = 2.515517 + t * (0.802853 + t * 0.010328)
    den = 1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))
    return t - num / den


def _once_if_uniform(fn: Callable, v):
    """``fn(v)`` elementwise, evaluated once when ``v`` is the same at every point
    (a scalar parameter broadcast over a batch, the usual case)."""
    first = jnp.ravel(v)[:1]
    return lax.cond(
        jnp.all(v == first),
        lambda v: jnp.broadcast_to(fn(first).reshape(()), v.shape),
        fn,
        v,
    )


def _lower_asymptote(logq, k, lam):
    """log x with log cdf(x) ≈ logq from the small-x expansion, and a validity measure.

    With y = x/2, a = k/2, m = λ/2 and A = e^{−m} y^a / Γ(a + 1), expanding
    P(b, y) = y^b / Γ(b + 1) · Σ_n b (−y)^n / ((b + n) n!) inside the mixture gives
    cdf = A (1 + c₁ y + d₂ y² + O(y³)) with c₁ = (m − a)/(a + 1) and
    d₂ = [a(a + 1) − 2m(a + 1) + m²] / (2(a + 1)(a + 2)). The equation
    a v + c₁ e^v + e₂ e^{2v} = logq + m + log Γ(a + 1) in v = log y, with
    e₂ = d₂ − c₁²/2 (the expansion of the log), is solved by four damped Newton
    steps from the one-term root. Returns (log x, size of the neglected terms'
    scale): the guess is good where that measure is small. In log space, so a
    root far below the smallest double is still located.
    """
    a = 0.5 * k
    m = 0.5 * lam
    c1 = (m - a) / (a + 1.0)
    d2 = (a * (a + 1.0) - 2.0 * m * (a + 1.0) + m * m) / (2.0 * (a + 1.0) * (a + 2.0))
    e2 = d2 - 0.5 * c1 * c1
    rhs = logq + m + _once_if_uniform(lambda a: lax.lgamma(a + 1.0), a)
    v = rhs / a
    for _ in range(4):
        y = jnp.exp(v)
        g = a * v + y * (c1 + e2 * y) - rhs
        slope = a + y * (c1 + 2.0 * e2 * y)
        v = v - g / jnp.maximum(slope, 0.5 * a)
    y = jnp.exp(v)
    return _LN2 + v, jnp.maximum(0.2 * jnp.abs(c1) * y, jnp.abs(e2) * y * y)


def _lr_logtail(x, k, lam, upper):
    """Lugannani–Rice saddle-point approximation of log sf (``upper``) or log cdf.

    With the saddle point c (``_saddle``; r = v − 1, c = r/(2v)),
    w = sign(c) √(2(c x − K(c))), w² = k (r − log(1 + r)) + λ r², and
    ũ = c √K''(c) = r √((k + 2 λ v)/2):
    sf ≈ Q(w) + φ(w)(1/ũ − 1/w) above the mean, cdf ≈ Φ(w) + φ(w)(1/w − 1/ũ)
    below it; on the smaller tail both read Q(|w|)(1 + M(|w|)(1/|ũ| − 1/|w|))
    with the Mills ratio M = φ/Q. Returns (log tail, d log tail/d log x ≈
    ∓ x |c| M(|w|)/|w|, |w| where x is on the requested tail's side of the
    mean, else 0); a start for the solver, not a value to return.
    """
    r = _saddle(x, k, lam)
    v = 1.0 + r
    w = jnp.sqrt(k * _r_minus_log1p(r) + lam * r * r)
    ut = jnp.abs(r) * jnp.sqrt(0.5 * (k + 2.0 * lam * v))
    lq, ell = _log_q_normal(w)  # log Q(|w|) and log Q(|w|) + w²/2
    mills = jnp.exp(-_HALF_LOG_2PI - ell)
    wp = jnp.where(w > 0, w, 1.0)
    log_tail = lq + jnp.log1p(mills * (1.0 / jnp.where(ut > 0, ut, 1.0) - 1.0 / wp))
    slope = jnp.where(upper, -x, x) * mills * (jnp.abs(r) / (2.0 * v)) / wp
    # The approximation is of the tail on the saddle point's side of the mean.
    right_side = jnp.where(upper, r > 0, r < 0)
    return log_tail, slope, jnp.where(right_side, w, 0.0)


def _initial_guess(logq, upper, k, lam):
    """Start of the quantile solver, as log x.

    In the lower tail, the two-term small-x expansion (``_lower_asymptote``)
    where its neglected terms are at most 0.2: measured over df ≤ 10, nc ≤ 36,
    p ≥ 1e-12 it is within 4 % in x there, where Sankaran's cube-root normal
    approximation can be off by factors up to e^90 (df = 1/2). Elsewhere
    Sankaran's approximation (off by up to e^{±0.7} at (10, 36), p = 1e-12),
    refined by up to ``_LR_STEPS`` Newton steps in log x on the Lugannani–Rice
    approximation (``_lr_logtail``), each taken only if a point of the batch
    still moves by more than ``_LR_SETTLED``. Measured on df ∈ {0.5, 1, 3, 10,
    50, 300, 1e4} × nc ∈ {0, 0.25, 1, 36, 1e3, 1e5}, both tails: for p in
    [1e-12, 0.5] within 1e-2 in log x except at df ≤ 1 (up to 0.15) and small df
    with nc = 36 (up to 0.11), and within 3e-5 wherever df + 2 nc ≥ 100, so the
    solver's first step is usually final; for p down to 1e-300, up to 0.33
    (upper tail, df ≤ 3) and 0.6 (lower tail, (50, 1e3)): a second step.

    ``upper``: solve sf(x) = e^{logq}; else cdf(x) = e^{logq}.
    """
    mu = k + lam
    h = 1.0 - (2.0 / 3.0) * (k + lam) * (k + 3.0 * lam) / (k + 2.0 * lam) ** 2
    p = (k + 2.0 * lam) / mu**2
    mm = (h - 1.0) * (1.0 - 3.0 * h)
    mean = 1.0 + h * p * (h - 1.0 - 0.5 * (2.0 - h) * mm * p)
    sd = h * jnp.sqrt(2.0 * p * (1.0 + 0.5 * mm * p))
    z = _z_from_logq(logq)
    z = jnp.where(upper, z, -z)
    base = mean + sd * z
    u_sank = jnp.log(mu) + jnp.log(jnp.maximum(base, 1e-3)) / h
    lower = ~upper

    def lower_asymptote(u):
        u_low, neglected = _lower_asymptote(logq, k, lam)
        use = lower & jnp.isfinite(u_low) & ((neglected <= 0.2) | (base <= 1e-3))
        return jnp.where(use, u_low, u), use

    u0, use_low = lax.cond(
        jnp.any(lower), lower_asymptote, lambda u: (u, jnp.zeros(u.shape, bool)), u_sank
    )

    def lugannani_rice(u0, moving):
        log_tail, slope, w = _lr_logtail(jnp.exp(u0), k, lam, upper)
        step = jnp.clip((log_tail - logq) / slope, -2.0, 2.0)
        sloped = jnp.where(upper, slope < 0, slope > 0)
        ok = moving & (w > 0.1) & sloped & jnp.isfinite(step)
        return jnp.where(ok, u0 - step, u0), ok & (jnp.abs(step) > _LR_SETTLED)

    # Newton steps on the approximation while a point still moves by more than
    # the solver's first step absorbs (each step only if one does).
    moving = ~use_low
    for _ in range(_LR_STEPS):
        u0, moving = lax.cond(
            jnp.any(moving), lugannani_rice, lambda u, mv: (u, jnp.zeros_like(mv)), u0, moving
        )
    return u0


def _taylor_step(c, lval, lpdf, dlpdf, x, upper, k, lam):
    """Step t in u = log x with log tail(x e^t) = lval + c, from one evaluation.

    With ν = k/2 − 1, z = √(λx) and q = z I_{ν+1}(z)/I_ν(z), the density obeys
    2 x ℓ' = 2ν − x + q (ℓ = log pdf), and Bessel's recurrence gives the Riccati
    equation D q = (λx − 2ν q − q²)/2 in D = d/du. The log tail F = log sf or
    log cdf has D F = g with g = ∓x pdf/tail, and D g = g (1 + xℓ' − g)
    = g ((k − x + q)/2 − g). So the Taylor coefficients of F in t, to any order,
    follow by recursion from (F, g, q) at one point: F from the evaluation, g
    from the density, q from d log pdf/dx (O(order²) operations, no further
    evaluation). The polynomial of order ``_TAYLOR_ORDER`` is inverted by
    Newton iterations from its second-order reversion. Halley's method is the
    order-2 case of this step.

    Returns (t, an error bound in units of F, the Newton step c / F₁). The
    bound is the polynomial's residual plus twice the last two kept terms and
    the first neglected one at t: the terms decay geometrically inside the
    radius of convergence, but complex singularities make them oscillate, so
    one small term alone proves nothing.
    """
    order = _TAYLOR_ORDER
    g = [jnp.where(upper, -x, x) * jnp.exp(lpdf - lval)]
    q = [2.0 * x * dlpdf + x - k + 2.0]
    a = []  # (k − x + q)/2 − g
    for n in range(order):
        x_n = x * (1.0 / math.factorial(n))
        a.append(0.5 * (q[n] - x_n + (k if n == 0 else 0.0)) - g[n])
        g.append(sum(g[i] * a[n - i] for i in range(n + 1)) * (1.0 / (n + 1)))
        if n + 1 < order:
            qq = sum(q[i] * q[n - i] for i in range(n + 1))
            q.append((lam * x_n - (k - 2.0) * q[n] - qq) * (0.5 / (n + 1)))
    f = [g[n - 1] * (1.0 / n) for n in range(1, order + 2)]  # F_1 .. F_{order+1}

    def poly(t):
        """(Σ_{n≤order} F_n t^n, its derivative), by Horner."""
        p, dp = f[order - 1], order * f[order - 1]
        for n in range(order - 1, 0, -1):
            p, dp = p * t + f[n - 1], dp * t + n * f[n - 1]
        return p * t, dp

    newton = c / f[0]
    # Second-order reversion, then Newton on the polynomial (quadratic from an
    # error of O(t³)).
    t = newton * (1.0 - newton * f[1] / f[0])
    for _ in range(_TAYLOR_NEWTON):
        p, dp = poly(t)
        t = t - (p - c) / dp
    p, _ = poly(t)
    at = jnp.abs(t)
    tail = sum(jnp.abs(f[n - 1]) * at**n for n in (order - 1, order, order + 1))
    return t, jnp.abs(p - c) + 2.0 * tail, newton


def _evaluate_tail(x, upper, k, lam):
    """(log tail, log pdf, d log pdf/dx) on the tail each point asks for.

    One evaluation per point: only the needed tail when the batch asks for one.
    """

    def both():
        on_sf = _eval_logsf(x, k, lam, True)
        on_cdf = _eval_logcdf(x, k, lam, True)
        return tuple(jnp.where(upper, a, b) for a, b in zip(on_sf, on_cdf, strict=True))

    return lax.cond(
        jnp.all(upper),
        lambda: _eval_logsf(x, k, lam, True),
        lambda: lax.cond(jnp.all(~upper), lambda: _eval_logcdf(x, k, lam, True), both),
    )


def _quantile_residual(u, theta):
    """log tail(e^u) − logq, its slope in u and the Taylor step (``_taylor_step``).

    The step is the inverted Taylor polynomial where its higher terms are a correction
    to Newton's, with its error bound (within the tolerance, the solver takes it without
    a confirming evaluation); else Newton's step, in x for the upper tail (where log sf
    is nearly linear in x), in u for the lower one.
    """
    logq, upper, k, lam = theta
    x = jnp.exp(u)
    lval, lpdf, dlpdf = _evaluate_tail(x, upper, k, lam)
    f = lval - logq
    # The barrier keeps XLA from recomputing the step in each consumer.
    t, t_err, t_newton = lax.optimization_barrier(
        _taylor_step(-f, lval, lpdf, dlpdf, x, upper, k, lam)
    )
    use_taylor = jnp.isfinite(t) & (jnp.abs(t - t_newton) <= 0.5 * jnp.abs(t_newton))
    x_newton = x * (1.0 + t_newton)
    newton = jnp.where(upper, jnp.log(jnp.where(x_newton > 0, x_newton, 0.5 * x)) - u, t_newton)
    slope = jnp.where(upper, -x, x) * jnp.exp(lpdf - lval)
    return solvers.Residual(
        f,
        slope,
        step=jnp.where(use_taylor, t, newton),
        step_bound=jnp.where(use_taylor, t_err, jnp.inf),
    )


def _solve_tail(logq, upper, k, lam):
    """x with log sf(x) = logq (upper) or log cdf(x) = logq (lower). 1-D arrays.

    :func:`glrt_jax._src.solvers.find_root` (``side="any"``) in u = log x, on the log
    tail (decreasing in u for the upper tail, increasing for the lower), with the steps
    of ``_quantile_residual``: each evaluates the tail, the density and its slope once
    and inverts the Taylor polynomial of the log tail, whose error bound says when to
    stop; from ``_initial_guess``, which is close enough that one step is usually
    final. It also stops when the residual is at the rounding level of the tail
    (``_RESID_ULPS`` ulps of max(1, |log p|)) or the step at that of u. Searched
    between the logs of the smallest normal double (times e) and of the largest
    (over e): a root below is returned as 0, one above as inf; NaN if not converged in
    ``_NEWTON_ITERS`` evaluations.
    """
    dtype = logq.dtype
    eps = _eps(dtype)
    finfo = jnp.finfo(dtype)
    lo = math.log(float(finfo.tiny)) + 1.0
    hi = math.log(float(finfo.max)) - 1.0
    # A start beyond the doubles (a lower-tail root below the smallest one) is
    # clipped into the interval; the first evaluation then ends such a point.
    u0 = jnp.clip(_initial_guess(logq, upper, k, lam), lo, hi)
    root = solvers.find_root(
        _quantile_residual,
        (logq, upper, k, lam),
        lo,
        hi,
        u0,
        ftol=_RESID_ULPS * eps * jnp.maximum(1.0, jnp.abs(logq)),
        xtol=64.0 * eps,
        xrtol=64.0 * eps,
        side="any",
        increasing=~upper,
        residual=True,
        max_iter=_NEWTON_ITERS,
        max_step=_MAX_LOG_STEP,
    )
    x = jnp.where(root.status == solvers.ROOT_BELOW, 0.0, jnp.exp(root.x))
    return jnp.where(root.status == solvers.ROOT_ABOVE, jnp.inf, x)


def _kernel_quantile(logq, upper, df, nc):
    """Quantile for a probability given in log space on the stated tail."""
    bad = _bad_params(df, nc) | jnp.isnan(logq) | (logq > 0)
    dfs = jnp.where(bad, 1.0, df)
    ncs = jnp.where(bad, 0.0, nc)
    interior = ~bad & (logq < 0) & jnp.isfinite(logq)
    lq = jnp.where(interior, logq, -1.0)
    x = _solve_tail(lq, upper, dfs, ncs)
    # Boundaries: probability 1 on the tail -> x = 0 (upper) / inf (lower);
    # probability 0 on the tail -> x = inf (upper) / 0 (lower).
    at_one = jnp.where(upper, 0.0, jnp.inf)
    at_zero = jnp.where(upper, jnp.inf, 0.0)
    x = jnp.where(logq == 0, at_one, jnp.where(jnp.isneginf(logq), at_zero, x))
    return (jnp.where(bad, jnp.nan, x),)


def _quantile_impl(logq, upper, df, nc):
    logq, df, nc = _promote(logq, df, nc)
    upper = jnp.broadcast_to(upper, logq.shape)
    return _chunked(_kernel_quantile, logq, upper, df, nc, n_out=1)[0]


@jax.jit
def _quantile_any(v, log_input, lower_tail, df, nc):
    """The four quantile functions in one program (one compilation serves all four).

    ``v`` is a probability, or a log-probability where ``log_input``; the quantile
    is of the survival function, or of the cdf where ``lower_tail``. The solver
    works on whichever tail is smaller.
    """
    v, df, nc = _promote(v, df, nc)
    log_input = jnp.broadcast_to(log_input, v.shape)
    lower_tail = jnp.broadcast_to(lower_tail, v.shape)
    small = jnp.where(log_input, v <= -_LN2, v <= 0.5)
    logv = jnp.where(log_input, v, jnp.log(v))

    def other_tail(logq):
        log_other = jnp.where(log_input, _log1mexp(jnp.minimum(v, 0.0)), jnp.log1p(-v))
        return jnp.where(small, logq, log_other)

    # log(1 − p) only where a point of the batch asks for the larger tail.
    logq = lax.cond(jnp.all(small), lambda q: q, other_tail, logv)
    out = _quantile_impl(logq, small != lower_tail, df, nc)
    invalid = jnp.where(log_input, v > 0, (v < 0) | (v > 1))
    return jnp.where(invalid, jnp.nan, out)


def _quantile(v, df, nc, *, log_input, lower_tail):
    return bucketed(lambda *a: _quantile_any(a[0], log_input, lower_tail, *a[1:]), v, df, nc)


# ---------------------------------------------------------------------------
# Public functions with custom JVPs
# ---------------------------------------------------------------------------


def _no_df_tangent(t_df, name):
    if not isinstance(t_df, SymbolicZero):
        raise NotImplementedError(
            f"glrt_jax.ncx2.{name}: the derivative with respect to df is not implemented; "
            "differentiate with respect to x (or p) and nc only, or wrap df in "
            "jax.lax.stop_gradient."
        )


def _tangent(t, like):
    if isinstance(t, SymbolicZero):
        return jnp.zeros_like(like)
    return jnp.broadcast_to(t, like.shape).astype(like.dtype)


@jax.custom_jvp
def logsf(x, df, nc):
    """Log of the survival function of the non-central χ² distribution.

    ``logsf(x, df, nc) = log P[X > x]`` for ``X ~ ncx2(df, nc)``. Finite and
    accurate even when the survival function is far below the smallest double.

    Args:
      x: quantile (broadcasts with ``df`` and ``nc``).
      df: degrees of freedom, real ``> 0``.
      nc: non-centrality ``λ ≥ 0``; ``nc = 0`` is the central χ².

    Returns:
      ``log sf`` in the promoted floating dtype. ``x < 0`` gives 0; invalid
      ``df``/``nc`` or NaN give NaN.

    Derivatives: ``∂/∂x = −pdf/sf``, ``∂/∂nc = pdf(x; df + 2, nc)/sf``; the
    derivative in ``df`` raises ``NotImplementedError``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> float(ncx2.logsf(4000.0, 10.0, 36.0)) < -1500
      True
    """
    return bucketed(_logsf_impl, x, df, nc)


def _logsf_jvp(primals, tangents):
    x, df, nc = primals
    tx, tdf, tnc = tangents
    _no_df_tangent(tdf, "logsf")
    out = logsf(x, df, nc)
    lpdf = logpdf(x, df, nc)
    xb, dfb, ncb = _promote(x, df, nc)
    dx = -jnp.exp(lpdf - out) * _tangent(tx, out)
    dnc = jnp.exp(logpdf(xb, dfb + 2.0, ncb) - out) * _tangent(tnc, out)
    return out, jnp.where(jnp.isfinite(out), dx + dnc, 0.0)


logsf.defjvp(_logsf_jvp, symbolic_zeros=True)


@jax.custom_jvp
def logcdf(x, df, nc):
    """Log of the cumulative distribution function of the non-central χ².

    Args:
      x: quantile. df: degrees of freedom ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``log P[X ≤ x]``; ``−inf`` for ``x ≤ 0``, NaN for invalid parameters.
      Accurate far below the double range (e.g. ``log cdf ≈ −5000``).

    Derivatives: ``∂/∂x = pdf/cdf``, ``∂/∂nc = −pdf(x; df + 2, nc)/cdf``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> float(ncx2.logcdf(1e-3, 10.0, 36.0)) < -50
      True
    """
    return bucketed(_logcdf_impl, x, df, nc)


def _logcdf_jvp(primals, tangents):
    x, df, nc = primals
    tx, tdf, tnc = tangents
    _no_df_tangent(tdf, "logcdf")
    out = logcdf(x, df, nc)
    lpdf = logpdf(x, df, nc)
    xb, dfb, ncb = _promote(x, df, nc)
    dx = jnp.exp(lpdf - out) * _tangent(tx, out)
    dnc = -jnp.exp(logpdf(xb, dfb + 2.0, ncb) - out) * _tangent(tnc, out)
    return out, jnp.where(jnp.isfinite(out), dx + dnc, 0.0)


logcdf.defjvp(_logcdf_jvp, symbolic_zeros=True)


@jax.custom_jvp
def logpdf(x, df, nc):
    """Log of the density of the non-central χ² distribution.

    Args:
      x: point. df: degrees of freedom ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``log pdf``; ``−inf`` for ``x < 0``, NaN for invalid parameters.

    Derivatives (closed form, so higher orders work too):
    ``∂pdf/∂x = ((df/2 − 1)/x − 1/2) pdf_df + nc/(2x) pdf_{df+2}`` and
    ``∂pdf/∂nc = (pdf_{df+2} − pdf_df)/2``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> round(float(jax.numpy.exp(ncx2.logpdf(2.0, 2.0, 0.0))), 12)  # e^{-1}/2
      0.183939720586
    """
    return bucketed(_logpdf_impl, x, df, nc)


def _logpdf_jvp(primals, tangents):
    x, df, nc = primals
    tx, tdf, tnc = tangents
    _no_df_tangent(tdf, "logpdf")
    out = logpdf(x, df, nc)
    xb, dfb, ncb = _promote(x, df, nc)
    r = jnp.exp(logpdf(xb, dfb + 2.0, ncb) - out)
    dldx = (0.5 * dfb - 1.0) / xb - 0.5 + 0.5 * ncb / xb * r
    dldnc = 0.5 * (r - 1.0)
    tan = dldx * _tangent(tx, out) + dldnc * _tangent(tnc, out)
    return out, jnp.where(jnp.isfinite(out), tan, 0.0)


logpdf.defjvp(_logpdf_jvp, symbolic_zeros=True)


def sf(x, df, nc):
    """Survival function ``P[X > x]`` of the non-central χ² distribution.

    Computed as ``exp(logsf)``, so its relative accuracy holds down to the
    smallest normal double; below that it underflows to 0 (use :func:`logsf`).

    Args:
      x: quantile. df: degrees of freedom ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``sf``; 1 for ``x < 0`` (jax.scipy convention), NaN for invalid parameters.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.sf(1.0, 1.0, 0.0)):.12f}"  # 2 Q_N(1)
      '0.317310507863'
    """
    return jnp.exp(logsf(x, df, nc))


def cdf(x, df, nc):
    """Cumulative distribution function ``P[X ≤ x]`` (``exp(logcdf)``).

    Args:
      x: quantile. df: degrees of freedom ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``cdf``; 0 for ``x < 0``, NaN for invalid parameters.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.cdf(2.0, 2.0, 0.0)):.12f}"  # 1 - e^{-1}
      '0.632120558829'
    """
    return jnp.exp(logcdf(x, df, nc))


def pdf(x, df, nc):
    """Density of the non-central χ² distribution (``exp(logpdf)``).

    Args:
      x: point. df: degrees of freedom ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``pdf``; 0 for ``x < 0``, NaN for invalid parameters.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.pdf(2.0, 2.0, 0.0)):.12f}"
      '0.183939720586'
    """
    return jnp.exp(logpdf(x, df, nc))


def _quantile_tangent(x, df, nc, t_nc, dprob_over_pdf):
    """Shared implicit-function tangent of a quantile x(p, nc)."""
    lpdf = logpdf(x, df, nc)
    r = jnp.exp(logpdf(x, df + 2.0, nc) - lpdf)
    return dprob_over_pdf(lpdf) + r * _tangent(t_nc, x)


@jax.custom_jvp
def isf(p, df, nc):
    """Inverse survival function: ``x`` with ``sf(x, df, nc) = p``.

    Solved on the smaller tail by safeguarded steps that invert the log tail's
    Taylor polynomial (usually one evaluation per point), started from
    Sankaran's approximation refined on the Lugannani–Rice saddle-point
    approximation (in the lower tail, where it holds, a small-x expansion);
    relative accuracy ~1e-13 in float64 for ``p`` down to the smallest normal
    double (use :func:`logisf` below that).

    Args:
      p: probability in ``[0, 1]``. df: degrees of freedom ``> 0``.
      nc: non-centrality ``≥ 0``.

    Returns:
      ``x``; ``isf(0) = inf``, ``isf(1) = 0``, NaN outside ``[0, 1]`` or for
      invalid parameters.

    Derivatives: ``∂x/∂p = −1/pdf(x)``, ``∂x/∂nc = pdf(x; df + 2, nc)/pdf(x)``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.isf(0.5, 2.0, 0.0)):.12f}"  # 2 log 2
      '1.386294361120'
    """
    return _quantile(p, df, nc, log_input=False, lower_tail=False)


def _isf_jvp(primals, tangents):
    p, df, nc = primals
    tp, tdf, tnc = tangents
    _no_df_tangent(tdf, "isf")
    x = isf(p, df, nc)
    _, dfb, ncb = _promote(x, df, nc)
    tan = _quantile_tangent(x, dfb, ncb, tnc, lambda lpdf: -jnp.exp(-lpdf) * _tangent(tp, x))
    return x, jnp.where(jnp.isfinite(x) & (x > 0), tan, 0.0)


isf.defjvp(_isf_jvp, symbolic_zeros=True)


@jax.custom_jvp
def ppf(p, df, nc):
    """Percent point function: ``x`` with ``cdf(x, df, nc) = p``.

    Args:
      p: probability in ``[0, 1]``. df: degrees of freedom ``> 0``.
      nc: non-centrality ``≥ 0``.

    Returns:
      ``x``; ``ppf(0) = 0``, ``ppf(1) = inf``, NaN outside ``[0, 1]``.

    Derivatives: ``∂x/∂p = 1/pdf(x)``, ``∂x/∂nc = pdf(x; df + 2, nc)/pdf(x)``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.ppf(0.5, 2.0, 0.0)):.12f}"
      '1.386294361120'
    """
    return _quantile(p, df, nc, log_input=False, lower_tail=True)


def _ppf_jvp(primals, tangents):
    p, df, nc = primals
    tp, tdf, tnc = tangents
    _no_df_tangent(tdf, "ppf")
    x = ppf(p, df, nc)
    _, dfb, ncb = _promote(x, df, nc)
    tan = _quantile_tangent(x, dfb, ncb, tnc, lambda lpdf: jnp.exp(-lpdf) * _tangent(tp, x))
    return x, jnp.where(jnp.isfinite(x) & (x > 0), tan, 0.0)


ppf.defjvp(_ppf_jvp, symbolic_zeros=True)


@jax.custom_jvp
def logisf(logp, df, nc):
    """``x`` with ``logsf(x, df, nc) = logp``: inverts probabilities below 1e-308.

    Args:
      logp: log-probability ``≤ 0`` (e.g. ``-10000``). df: degrees of freedom
        ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``x``; ``logisf(0) = 0``, ``logisf(-inf) = inf``, NaN for ``logp > 0``.

    Derivatives: ``∂x/∂logp = −sf/pdf``, ``∂x/∂nc = pdf(x; df + 2, nc)/pdf(x)``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.logisf(-1000.0, 2.0, 0.0)):.6f}"  # sf = e^{-x/2}
      '2000.000000'
    """
    return _quantile(logp, df, nc, log_input=True, lower_tail=False)


def _logisf_jvp(primals, tangents):
    lp, df, nc = primals
    tlp, tdf, tnc = tangents
    _no_df_tangent(tdf, "logisf")
    x = logisf(lp, df, nc)
    lpb, dfb, ncb = _promote(lp, df, nc)
    tan = _quantile_tangent(x, dfb, ncb, tnc, lambda lpdf: -jnp.exp(lpb - lpdf) * _tangent(tlp, x))
    return x, jnp.where(jnp.isfinite(x) & (x > 0), tan, 0.0)


logisf.defjvp(_logisf_jvp, symbolic_zeros=True)


@jax.custom_jvp
def logppf(logp, df, nc):
    """``x`` with ``logcdf(x, df, nc) = logp``: the lower-tail twin of :func:`logisf`.

    Args:
      logp: log-probability ``≤ 0``. df: degrees of freedom ``> 0``.
      nc: non-centrality ``≥ 0``.

    Returns:
      ``x``; ``logppf(0) = inf``, ``logppf(-inf) = 0``, NaN for ``logp > 0``.

    Derivatives: ``∂x/∂logp = cdf/pdf``, ``∂x/∂nc = pdf(x; df + 2, nc)/pdf(x)``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> x = float(ncx2.logppf(-600.0, 2.0, 0.0))  # cdf = 1 − e^{−x/2}: x ≈ 2e^{−600}
      >>> f"{x:.10e}"
      '5.3007931060e-261'
    """
    return _quantile(logp, df, nc, log_input=True, lower_tail=True)


def _logppf_jvp(primals, tangents):
    lp, df, nc = primals
    tlp, tdf, tnc = tangents
    _no_df_tangent(tdf, "logppf")
    x = logppf(lp, df, nc)
    lpb, dfb, ncb = _promote(lp, df, nc)
    tan = _quantile_tangent(x, dfb, ncb, tnc, lambda lpdf: jnp.exp(lpb - lpdf) * _tangent(tlp, x))
    return x, jnp.where(jnp.isfinite(x) & (x > 0), tan, 0.0)


logppf.defjvp(_logppf_jvp, symbolic_zeros=True)
