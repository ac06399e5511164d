"""Closed-form references shared by the tests and benchmarks/certify.py (not a test module).

Nothing here calls glrt_jax: each reference is a closed form, evaluated in SciPy (floats)
or mpmath (50 digits).
"""

import math

import mpmath as mp
from scipy import optimize, stats

_DPS = 50


def gaussian_epsilon(delta, mu):
    """Closed-form ε(δ) of μ-GDP (NPO, q = 1, any number of rounds: μ² = Σ 1/σ_k²)."""

    def gap(e):  # log-space second term: e^ε Φ(·) without overflow
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e + stats.norm.logcdf(-e / mu - mu / 2))

    return optimize.brentq(lambda e: gap(e) - delta, 0.0, 1e4, xtol=1e-13, rtol=1e-14)


def gaussian_delta(eps, mu):
    """Closed-form δ(ε) of μ-GDP, Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) (floats)."""
    return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


def _one_round_directions_mp(sigma, q, eps):
    """δ(ε) of one Poisson-subsampled Gaussian round in each direction, ``(remove, add)``,
    as mpmath numbers: the hockey-stick divergences of the mixture against N(0, 1) and of
    N(0, 1) against the mixture.

    P/Q = 1 − q + q e^{μx − μ²/2} is increasing in x, so each direction's hockey-stick
    integral is one tail beyond the crossing point. With q = 1 this is the Gaussian
    mechanism's closed form, and N rounds of it are one round at σ/√N.
    """
    with mp.workdps(_DPS):
        mu, q, e = 1 / mp.mpf(sigma), mp.mpf(q), mp.mpf(eps)

        def crossing(level):  # x with 1 − q + q e^{μx − μ²/2} = level
            return (mp.log((level - 1 + q) / q) + mu * mu / 2) / mu

        x = crossing(mp.e**e)
        remove = q * mp.ncdf(mu - x) - (mp.e**e - 1 + q) * mp.ncdf(-x)
        add = mp.mpf(0)
        if mp.e ** (-e) > 1 - q:
            y = crossing(mp.e ** (-e))
            add = mp.ncdf(y) - mp.e**e * ((1 - q) * mp.ncdf(y) + q * mp.ncdf(y - mu))
        return max(remove, mp.mpf(0)), max(add, mp.mpf(0))


def _one_round_delta_mp(sigma, q, eps):
    """δ(ε) of one Poisson-subsampled Gaussian round (add/remove) as an mpmath number."""
    return max(_one_round_directions_mp(sigma, q, eps))


def one_round_direction_delta(sigma, q, eps, direction):
    """δ(ε) of one round in one direction (``"remove"`` or ``"add"``), in 50-digit mpmath."""
    remove, add = _one_round_directions_mp(sigma, q, eps)
    return float(remove if direction == "remove" else add)


def one_round_delta(sigma, q, eps):
    """δ(ε) of one Poisson-subsampled Gaussian round (add/remove), in 50-digit mpmath."""
    return float(_one_round_delta_mp(sigma, q, eps))


def one_round_epsilon(sigma, q, delta):
    """ε(δ) of one Poisson-subsampled Gaussian round (add/remove): the root of δ(ε) = delta.

    δ(ε) decreases in ε; the root of log δ(ε) − log δ is bracketed by doubling and found by
    bisection on the mpmath profile (relative accuracy about 1e-15). 0 when δ(0) ≤ delta.
    """
    with mp.workdps(_DPS):
        log_target = mp.log(mp.mpf(delta))

        def gap(e):
            d = _one_round_delta_mp(sigma, q, e)
            return mp.log(d) - log_target if d > 0 else mp.mpf(-mp.inf)

        if gap(0.0) <= 0:
            return 0.0
        hi = 1e-6
        while gap(hi) > 0:
            hi *= 2.0
        lo = hi / 2.0 if hi > 1e-6 else 0.0
        while hi - lo > 1e-16 * hi:
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            lo, hi = (mid, hi) if gap(mid) > 0 else (lo, mid)
        return hi


def one_round_replace_delta(sigma, q, eps):
    """δ(ε) of one Poisson-subsampled Gaussian round under replace-one (NPO), in 50-digit
    mpmath: the hockey-stick divergence of P' = qN(μ, 1) + (1 − q)N(0, 1) against
    Q' = qN(−μ, 1) + (1 − q)N(0, 1) (symmetric, so one direction).

    The ratio P'/Q' is increasing in x, so δ = P'[x > z] − e^ε Q'[x > z] at the point z
    where log(P'/Q') = ε, found by bisection on the density ratio itself (to 2⁻²⁰⁰ of its
    bracket).
    """
    with mp.workdps(_DPS):
        mu, q, e = 1 / mp.mpf(sigma), mp.mpf(q), mp.mpf(eps)

        def log_ratio(x):
            p = q * mp.npdf(x - mu) + (1 - q) * mp.npdf(x)
            r = q * mp.npdf(x + mu) + (1 - q) * mp.npdf(x)
            return mp.log(p / r)

        lo, hi = mp.mpf(-1), mp.mpf(1)
        while log_ratio(lo) > e:
            lo *= 2
        while log_ratio(hi) < e:
            hi *= 2
        for _ in range(200):  # bisection: the ratio is increasing in x
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if log_ratio(mid) < e else (lo, mid)
        z = (lo + hi) / 2
        p_tail = q * mp.ncdf(mu - z) + (1 - q) * mp.ncdf(-z)
        q_tail = q * mp.ncdf(-mu - z) + (1 - q) * mp.ncdf(-z)
        return float(max(p_tail - mp.e**e * q_tail, mp.mpf(0)))


def glrt_one_round_delta(sigma, q, eps, d):
    """δ(ε) of one Poisson-subsampled GLRT round (add/remove; the adversary sees
    T = ‖y‖²/σ², ncx2(d, λ) against χ²_d with λ = 1/σ²), in 30-digit mpmath.

    The base loss ℓ(t) = −λ/2 + log ₀F₁(; d/2; λt/4) is increasing in t, so each
    direction's hockey-stick integral is a tail of T beyond the level's threshold, found
    by bisection on ℓ itself; the tails are the Poisson mixture of regularised incomplete
    gammas (weights e^{−λ/2}(λ/2)^j/j!, summed until they are below 1e-45 of the sum).
    """
    with mp.workdps(30):
        mu, q, e, d = 1 / mp.mpf(sigma), mp.mpf(q), mp.mpf(eps), mp.mpf(d)
        lam = mu * mu

        def ell(t):
            return -lam / 2 + mp.log(mp.hyp0f1(d / 2, lam * t / 4))

        def threshold(b):  # t with ℓ(t) = b, for b above ℓ(0) = −λ/2
            lo, hi = mp.mpf(0), mp.mpf(1)
            while ell(hi) < b:
                hi *= 2
            for _ in range(120):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if ell(mid) < b else (lo, mid)
            return (lo + hi) / 2

        def tails(t, upper):  # (P, Q) tails of T beyond t (upper) or below it
            def gamma(a):
                lims = (t / 2, mp.inf) if upper else (0, t / 2)
                return mp.gammainc(a, *lims, regularized=True)

            p, w, j = mp.mpf(0), mp.exp(-lam / 2), 0
            while j <= lam / 2 or w > mp.mpf(10) ** -45 * max(p, mp.mpf(10) ** -300):
                p += w * gamma(d / 2 + j)
                j += 1
                w *= lam / 2 / j
            return p, gamma(d / 2)

        # remove: (qP + (1 − q)Q, Q); the round's loss exceeds ε where ℓ(T) > b_r
        b_r = mp.log((mp.e**e - 1 + q) / q)
        sp, sq = tails(threshold(b_r), True) if b_r > -lam / 2 else (mp.mpf(1), mp.mpf(1))
        remove = q * sp - (mp.e**e - 1 + q) * sq
        add = mp.mpf(0)  # (Q, qP + (1 − q)Q): where ℓ(T) < b_a
        if mp.e ** (-e) > 1 - q:
            b_a = mp.log((mp.e ** (-e) - 1 + q) / q)
            if b_a > -lam / 2:
                fp, fq = tails(threshold(b_a), False)
                add = fq - mp.e**e * ((1 - q) * fq + q * fp)
        return float(max(remove, add, mp.mpf(0)))
