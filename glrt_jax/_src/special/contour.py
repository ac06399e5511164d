"""The saddle-point contour integral: O(1) work per point once df + 2 nc v is large.

Owns the trapezoidal rule along the line through the saddle point (:func:`contour`),
its cheap pre-test (:func:`contour_applies`, where it is also faster than the
mixture), the saddle point itself (:func:`saddle`) and the cancellation-free
elementary pieces it needs (:func:`r_minus_log1p`, and private sin/cos and
atan t − t). :func:`saddle` and :func:`r_minus_log1p` also serve the
Lugannani–Rice start of the quantile layer.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from glrt_jax._src.special.mixture import peak

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
_CT_MIX_COST = 45.0  # mixture cost (see contour_applies) above which the rule is used
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


def r_minus_log1p(r):
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


def saddle(x, k, lam):
    """r = v − 1 at the saddle point, v = 1/(1 − 2c) solving λ v² + k v = x, stably."""
    sq = jnp.sqrt(k * k + 4.0 * lam * x)
    tk = 2.0 * x - k
    num = jnp.where(tk > 0, 4.0 * x * (x - k - lam) / jnp.where(tk > 0, tk + sq, 1.0), tk - sq)
    return num / (k + sq)


def contour_applies(x, a, m):
    """Cheap pre-test of the contour rule, where it is also the cheaper method.

    The rule needs κ = k + 2λv ≥ _CT_KAPPA_MIN at the saddle and costs about
    the same everywhere; the mixture costs about 6√c + √(a + c) units (c the
    peak of the Poisson index: its window, then the incomplete gamma at its
    start). The two cost the same at about _CT_MIX_COST units: break-even
    timed on XLA:CPU for df from 10 to 1e5 and nc from 0 to 400. Either
    method is accurate on both sides; only speed depends on the choice.
    """
    kappa_ok = 2.0 * a + 4.0 * m * (1.0 + saddle(x, 2.0 * a, 2.0 * m)) >= _CT_KAPPA_MIN
    c = jnp.maximum(m, peak(a, m, 0.5 * x))
    return kappa_ok & (6.0 * jnp.sqrt(c) + jnp.sqrt(a + c) >= _CT_MIX_COST)


def contour(x, k, lam, with_pdf):
    """Trapezoidal saddle-point integral. 1-D, x > 0.

    Returns (log tail, upper, log pdf or NaN, d log pdf/dx or NaN, ok): the tail
    is the survival function where ``upper`` and the cdf elsewhere (the side of
    the mean x is on); ``ok`` marks the points where the rule's error is
    negligible. The slope of the pdf is the same rule applied to
    pdf'(x) = (1/2πi) ∫ (−s) e^{K(s) − s x} ds.
    """
    dtype = x.dtype
    mu = k + lam
    r_hat = saddle(x, k, lam)
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
    phi = -0.5 * k * r_minus_log1p(r) - 0.5 * lam * r * r - c * delta
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
