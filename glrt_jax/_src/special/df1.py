"""The df = 1 distribution in closed form: X = (Z + √nc)².

Owns the log-space closed forms of sf, cdf, pdf and d log pdf/dx for ``df = 1``
(``sf = Q(b − a) + Q(b + a)``, ``cdf = Q(a − b) − Q(a + b)``,
``pdf = [φ(b − a) + φ(b + a)]/(2b)``, ``a = √nc``, ``b = √x``) and the standard normal
tail :func:`log_q_normal` they are built of (also the Lugannani–Rice start of the
quantile layer). :func:`logcdf` says where its difference is usable; elsewhere the
dispatcher falls back to the Poisson mixture.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from glrt_jax._src.numerics import log1mexp

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LN2 = math.log(2.0)


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


def log_q_normal(z):
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


def _sqrt_terms(x, nc):
    """a = √nc, b = √x and b − a computed without cancellation."""
    a = jnp.sqrt(nc)
    b = jnp.sqrt(x)
    s = a + b
    bma = (x - nc) / jnp.where(s > 0, s, 1.0)
    return a, b, bma


def logsf(x, nc):
    """log sf for df = 1: log[Q(b − a) + Q(b + a)], usable everywhere."""
    a, b, bma = _sqrt_terms(x, nc)
    # Both tails in one call: one copy of the normal tail in the compiled program.
    (lq1, lq2), _ = log_q_normal(jnp.stack([bma, b + a]))
    return lq1 + jnp.log1p(jnp.exp(lq2 - lq1))


# Gauss–Legendre rule for the short-interval cdf below (entire integrand).
_GL_NODES, _GL_WEIGHTS = (
    tuple(float(v) for v in arr) for arr in np.polynomial.legendre.leggauss(12)
)


def _logcdf_short(a, b):
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


def logcdf(x, nc):
    """(log cdf, usable).

    cdf = Q(a − b) − Q(a + b) loses accuracy as Q(a + b)/Q(a − b) → 1, which
    happens only for a short interval [a − b, a + b] (b and ab small): there
    quadrature. Elsewhere the difference of two erfc, or, far in the tail
    (a − b > _Z_PLAIN), of their logarithms.
    """
    a, b, bma = _sqrt_terms(x, nc)
    short = (b <= 1.0) & (a * b <= 1.0)

    def difference(a, b, bma):
        u1 = -bma
        (lq1, lq2), (ell1, ell2) = log_q_normal(jnp.stack([u1, a + b]))
        # For u1 ≥ 0 use (u2² − u1²)/2 = 2ab exactly, so diff keeps its relative accuracy.
        diff = jnp.where(u1 >= 0, -2.0 * a * b + ell2 - ell1, lq2 - lq1)
        diff = jnp.minimum(diff, 0.0)
        # L(z) carries an absolute error of ~z² ulp below _Z_ASYM: demand a margin.
        tau = jnp.minimum(_LN2, 0.01 * jnp.maximum(1.0, jnp.minimum(u1, _Z_ASYM + 1.0) ** 2 / 25.0))
        return lq1 + log1mexp(jnp.minimum(diff, -tau)), diff <= -tau

    def quadrature(a, b, bma):
        return _logcdf_short(jnp.where(short, a, 0.0), jnp.where(short, b, 0.5))

    def plain(a, b, bma):
        # Outside the short interval Q(a + b) ≤ Q(a − b)/2 or so: no cancellation
        # to speak of, and erfc is accurate to a few ulp up to a − b = _Z_PLAIN.
        u1 = jnp.minimum(-bma, _Z_PLAIN)
        q1, q2 = jax.scipy.special.erfc(jnp.stack([u1, a + b]) * (1.0 / math.sqrt(2.0)))
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


def logpdf(x, nc):
    """log pdf for df = 1: log{[φ(b − a) + φ(b + a)]/(2b)}."""
    a, b, bma = _sqrt_terms(x, nc)
    return -0.5 * bma * bma - _HALF_LOG_2PI - jnp.log(2.0 * b) + jnp.log1p(jnp.exp(-2.0 * a * b))


def dlogpdf(x, nc):
    """d log pdf / dx = (a tanh(ab) − b − 1/b) / (2b) for df = 1."""
    a, b, _ = _sqrt_terms(x, nc)
    return (a * jnp.tanh(a * b) - b - 1.0 / b) / (2.0 * b)
