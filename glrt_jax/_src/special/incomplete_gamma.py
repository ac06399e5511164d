"""Regularised incomplete gamma functions P(b, y) and Q(b, y) in log space.

Owns :func:`log_gamma_pq`: the power series of P below ``y = b + 1`` and the continued
fraction of Q (modified Lentz) above it, each in a ``lax.while_loop`` over blocks of
terms, with the complement by ``log1mexp``. The Poisson-mixture sums
(:mod:`glrt_jax._src.special.mixture`) evaluate it once per point, at the end of
their window.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from glrt_jax._src.numerics import log1mexp, log_poisson, machine_eps

_MAX_TERMS = 2_000_000
# Terms per while-loop iteration: the convergence test runs once per block; terms
# past the converged point only add negligible mass.
_BLOCK = 4


def log_gamma_pq(b, y):
    """Return (log P(b, y), log Q(b, y), log g(b, y)) for b > 0, y ≥ 0 (elementwise, 1-D).

    g(b, y) = y^b e^{-y} / Γ(b + 1) is the prefactor both expansions share.
    """
    dtype = b.dtype
    eps = machine_eps(dtype)
    tiny = float(jnp.finfo(dtype).tiny) / eps
    lg = log_poisson(b, y)  # log g(b, y)
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

    logp = jnp.where(use_series, logp_series, log1mexp(logq_cf))
    logq = jnp.where(use_series, log1mexp(logp_series), logq_cf)
    logp = jnp.where(y == 0, -jnp.inf, logp)
    logq = jnp.where(y == 0, 0.0, logq)
    return logp, logq, lg
