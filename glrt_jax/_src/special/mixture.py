"""Peak-centred Poisson-mixture sums: the general method for any df and nc.

Owns the sums

    sf(x)  = Σ_j w_j Q(a + j, y),      cdf(x) = Σ_j w_j P(a + j, y),
    pdf(x) = Σ_j w_j g(a + j - 1, y) / 2

(notation of :mod:`glrt_jax._src.ncx2`), each taken over a window of ``j`` around the
peak of its summand (:func:`peak`), with one incomplete gamma function per point at
the end of the window (:func:`glrt_jax._src.special.incomplete_gamma.log_gamma_pq`)
and the others by the stable recurrences ``Q(b+1, y) = Q(b, y) + g(b, y)`` (upwards,
:func:`log_sf_sum`) and ``P(b, y) = P(b+1, y) + g(b, y)`` (downwards,
:func:`log_cdf_sum`); :func:`log_pdf_sum` sums the Bessel-type density series. All
terms are carried relative to a log-scale offset, rescaled by exact powers of two.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

from glrt_jax._src.numerics import log_poisson, machine_eps, tail_converged
from glrt_jax._src.special.incomplete_gamma import log_gamma_pq

_LN2 = math.log(2.0)

# Window of the Poisson index j around the summand's peak c: from
# c - _WIN_SD * sqrt(c) - _WIN_PAD to where the terms have converged.
_WIN_SD = 8.0
_WIN_PAD = 5.0
# Rebalancing of scaled accumulators: powers of two keep it exact.
_BIG_EXP = {8: 400, 4: 40}  # by itemsize: far from overflow in float64 and float32
_MAX_TERMS = 2_000_000
# Terms per while-loop iteration: the convergence test and the rescaling run once
# per block; terms past the converged point only add negligible mass.
_BLOCK = 4


def _big_exp(dtype) -> int:
    """Exponent e of the power of two 2**e at which scaled accumulators are rescaled."""
    return _BIG_EXP[jnp.dtype(dtype).itemsize]


# ---------------------------------------------------------------------------
# Peak-centred Poisson mixture sums
# ---------------------------------------------------------------------------


def peak(a, m, y):
    """Mode of the Poisson index given the statistic: (j+1)(a+j) ≈ m y."""
    my = m * y
    return 2.0 * my / (a + jnp.sqrt(a * a + 4.0 * my))


def _mixture_sum(x, a, m, upward, with_pdf, central=None):
    """Scaled Poisson-mixture sum of incomplete gammas, 1-D, x > 0.

    upward=True:  log Σ_j w_j Q(a + j, y), started below the peak (Q recurrence up).
    upward=False: log Σ_j w_j P(a + j, y), started above the peak (P recurrence down).
    Returns (log sum, log pdf, d log pdf / dx); the pdf and its slope come from
    the same window (accurate near the peak of the sum, used by the quantile
    solver) or are NaN when ``with_pdf`` is False. With P_j = w_j g(a + j − 1, y)
    the pdf terms, pdf = Σ P_j / 2 and d log pdf/dx = (Σ P_j (a + j − 1) / (y Σ P_j) − 1) / 2.
    ``central``: ``log_gamma_pq(a, x/2)`` if the caller has it (:func:`log_sf_sum_pair`),
    taken where every point's window starts at j = 0.
    """
    eps = machine_eps(x.dtype)
    big, log_big = 2.0 ** _big_exp(x.dtype), _big_exp(x.dtype) * _LN2
    y = 0.5 * x
    jp = peak(a, m, y)
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
    if central is None:
        lp, lq, lg0 = log_gamma_pq(b0, y)
    else:
        lp, lq, lg0 = lax.cond(jnp.any(j0 > 0), lambda: log_gamma_pq(b0, y), lambda: central)
    lgam = lq if upward else lp
    # Scale: the first term is w_j0 * (Q or P)(b0, y) = exp(L).
    L = log_poisson(j0, m, integer=True) + lgam
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


def log_sf_sum(x, a, m, with_pdf=False):
    """(log sf, log pdf, its slope) via the upward Q recurrence. 1-D, x > 0."""
    return _mixture_sum(x, a, m, True, with_pdf)


def log_sf_sum_pair(x, a, m):
    """(log sf of the mixture, log sf of the central χ² with 2a degrees of freedom, i.e.
    m = 0), 1-D, x > 0.

    The central tail is the incomplete gamma ``Q(a, x/2)`` at which the mixture's upward
    window starts where it starts at j = 0 (a small Poisson mean m: the GLRT's P and Q
    at a round's levels), so one incomplete gamma serves both there; where a window
    starts higher the mixture takes its own. The same values as two calls of
    :func:`log_sf_sum`.
    """
    central = log_gamma_pq(a, 0.5 * x)
    lsf, _, _ = _mixture_sum(x, a, m, True, False, central=central)
    return lsf, central[1]


def log_cdf_sum(x, a, m, with_pdf=False):
    """(log cdf, log pdf, its slope) via the downward P recurrence. 1-D, x > 0."""
    return _mixture_sum(x, a, m, False, with_pdf)


def log_pdf_sum(x, a, m):
    """log pdf by the Bessel-type series, summed upward around its peak. x > 0."""
    eps = machine_eps(x.dtype)
    y = 0.5 * x
    c = peak(a, m, y)
    j0 = jnp.floor(jnp.maximum(0.0, c - _WIN_SD * jnp.sqrt(c) - _WIN_PAD))
    j0 = jnp.where(m > 0, j0, 0.0)
    b0 = a + j0
    # log of w_j0 * g(a + j0 - 1, y) / 2 = w_j0 * g(a + j0, y) (a + j0) / (2 y).
    L0 = log_poisson(j0, m, integer=True) + log_poisson(b0, y) + jnp.log(b0) - jnp.log(x)
    my = m * y

    def cond(st):
        j, t, s, prev, L, done, n = st
        return jnp.any(~done) & (n < _MAX_TERMS)

    def body(st):
        j, t, s, prev, L, done, n = st
        s2 = s + t
        new_done = done | ((j > c) & tail_converged(t, prev, s2, eps))
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
