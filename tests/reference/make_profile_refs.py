"""Generate ``profile_refs.json``: mpmath reference values for ROC curves and privacy profiles.

Independent of ``glrt_jax``: everything here is computed from first principles with mpmath at
``--dps`` (default 60) significant digits; values are written with 40 significant digits.

Run from anywhere (takes a few minutes on 2 cores)::

    python tests/reference/make_profile_refs.py [--jobs 2] [--dps 60] [--out PATH]

Notation
--------
mu = Delta/sigma, lam = mu**2, Q = standard normal survival function, Phi_N its CDF.
ncx2(d, lam) is the non-central chi-squared law; Psi_lam is its survival function, Phi_lam its
CDF (lam = 0: central chi-squared).  ell(t) = -lam/2 + log 0F1(; d/2; lam t / 4) is the
log-likelihood ratio log f_lam(t) - log f_0(t) of the GLRT statistic T = ||y||^2 / sigma^2.

Schema of the JSON file
-----------------------
Top level: a dict with metadata keys ``schema`` ("glrt_jax.profile_refs/1"), ``generator``,
``mpmath_version``, ``working_dps``, ``digits``, ``notes`` and one list of records per kind:

Inputs.  Grid inputs (``alpha``, ``mu``, ``eps``, ``delta``, ``d``) are JSON numbers; the
references are computed at the *exact binary64 value* of those numbers (what a float64 test
passes in), with lam = mu**2 formed exactly in mpmath.  Settings given by a ratio (section d,
e) store ``lam`` / ``mu`` as 40-digit strings computed from the exact rational.

Outputs are decimal strings with 40 significant digits (parse with ``float`` or
``mpmath.mpf``; a string may be far below the double range, ``float`` then gives 0.0).
``log_*`` fields are natural logarithms.

``roc_npo``      {alpha, mu, R, one_minus_R}: R = Q(Q^-1(alpha) - mu); one_minus_R = 1 - R
                 computed without cancellation.
``roc_glrt``     {alpha, mu, lam, d, t, R, one_minus_R, t_prime, R_prime, one_minus_R_prime}:
                 t = Psi_0^-1(alpha), R = Psi_lam(t); t_prime = Phi_lam^-1(alpha),
                 R_prime = Phi_0(t_prime).  Records with R or R_prime < 1e-300 are dropped.
``profile_npo``  {eps, mu, delta, log_delta}: Balle-Wang closed form
                 Phi_N(-eps/mu + mu/2) - e^eps Phi_N(-eps/mu - mu/2); kept if delta >= 1e-300.
``profile_glrt`` {eps, mu, lam, d, delta, log_delta, delta_R, delta_R_prime, c, c_prime,
                 branch}: delta = max(delta_R, delta_R_prime); delta_R = Psi_lam(c) -
                 e^eps Psi_0(c) with ell(c) = eps; delta_R_prime = Phi_0(c') - e^eps Phi_lam(c')
                 with ell(c') = -eps, and "0" with c_prime null when eps >= lam/2.  branch is
                 "R" or "R_prime" (the larger one).  Kept if delta >= 1e-300.
``eps_npo``      {delta, mu, eps, delta_at_0}: eps > 0 with delta_npo(eps) = delta (root found
                 to ~50 digits); delta_at_0 = delta_npo(0) = total variation.  Combos with
                 delta_at_0 <= delta (eps = 0) are dropped.
``eps_glrt``     {delta, mu, lam, d, eps, branch, delta_at_0}: same for the GLRT profile.
``paper``        the numbers of docs/design.md section 3: {name, adversary ("npo"/"glrt"), d
                 (null for npo), Delta, sigma2, N, mu, lam, delta, eps, design_value,
                 matches}: mu = sqrt(N) Delta / sigma, lam = N Delta^2 / sigma^2 (composition
                 with a shared direction), Delta, sigma2 and delta taken as exact decimals;
                 ``matches`` says whether eps rounds to design_value at the number of
                 decimals printed there.
``clt``          Theorem 3 (docs/design.md section 2, Asymptotics) at Delta = 1, sigma2 = 100,
                 d = 300: {N, lam, d, alpha, R, R_prime, refined_R, refined_R_prime, gdp,
                 mu_gdp}: exact GLRT R and R' with lam = N Delta^2/sigma^2; refined_R =
                 Q((Q^-1(a) - lam/sqrt(2d)) / sqrt(1 + 2 lam/d)) (normal approximations
                 N(d, 2d) and N(d + lam, 2d + 4 lam) of the two laws); refined_R_prime the
                 same approximation of R' = Q((s1 Q^-1(a) - lam)/s0), s0 = sqrt(2d),
                 s1 = sqrt(2d + 4 lam); gdp = Q(Q^-1(a) - mu_gdp), mu_gdp = lam / sqrt(2d).
                 Note: at fixed d = 300 the exact curves do NOT approach the limits as N
                 grows (the gap is the skewness of chi2_300 and grows with lam); the normal
                 approximation improves with d, hence the next block.
``clt_d``        the same fields (no N) at fixed mu_gdp = 10/sqrt(600) (the N = 1000 value
                 above) for d in {300, 3000, 30000, 300000}, lam = mu_gdp sqrt(2d): here
                 R, R' -> gdp as d grows (error roughly ~ 1/sqrt(d)).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import time

import mpmath as mp
from mpmath import mpf

DIGITS = 40
DEFAULT_DPS = 60
MAX_DPS = 3000

ALPHAS = [1e-300, 1e-100, 1e-10, 1e-3, 0.05, 0.3, 0.7, 0.99]
MUS = [1e-3, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0]
ROC_DS = [1, 2, 3, 10, 30, 300, 10000]
EPSS = [0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0]
PROFILE_DS = [1, 2, 3, 10, 50, 300, 10000]
DELTAS = [0.5, 0.1, 1e-2, 1e-5, 1e-10, 1e-30, 1e-100, 1e-300]
CLT_ALPHAS = [1e-6, 1e-3, 0.01, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99]
CLT_NS = [10, 100, 1000]
CLT_DS = [300, 3000, 30000, 300000]
TINY = mpf(10) ** -300


def _s(x):
    """40-significant-digit decimal string (or None)."""
    if x is None:
        return None
    if x == 0:
        return "0.0"
    return mp.nstr(x, DIGITS, min_fixed=-4, max_fixed=6)


# ----------------------------------------------------------------------------------------
# Special functions (private, at the current mp precision)
# ----------------------------------------------------------------------------------------


def _norm_sf(z):
    return mp.erfc(z / mp.sqrt(2)) / 2


def _norm_cdf(z):
    return mp.erfc(-z / mp.sqrt(2)) / 2


def _log0f1_peak(b, z):
    """log 0F1(; b; z) for z > 0 by summing the series outward from its largest term."""
    ks = (-(b - 1) + mp.sqrt((b - 1) ** 2 + 4 * z)) / 2
    k0 = max(int(mp.floor(ks)), 0)
    logt0 = k0 * mp.log(z) - mp.loggamma(k0 + 1) - (mp.loggamma(b + k0) - mp.loggamma(b))
    tol = mpf(10) ** (-mp.mp.dps - 5)
    s = mpf(1)
    t = mpf(1)
    k = k0
    while True:
        t *= z / ((k + 1) * (b + k))
        k += 1
        s += t
        if t < tol * s:
            break
    t = mpf(1)
    k = k0
    while k > 0:
        t *= k * (b + k - 1) / z
        k -= 1
        s += t
        if t < tol * s:
            break
    return logt0 + mp.log(s)


def _log0f1(b, z):
    if z == 0:
        return mpf(0)
    try:
        return mp.log(mp.hyp0f1(b, z))
    except mp.libmp.NoConvergence:
        return _log0f1_peak(b, z)


def _llr(t, d, lam):
    """ell(t) = log f_lam(t) - log f_0(t) for the ncx2(d, lam) vs chi2(d) statistic."""
    return -lam / 2 + _log0f1(mpf(d) / 2, lam * t / 4)


def _chi2_logpdf(x, d):
    k = mpf(d) / 2
    return (k - 1) * mp.log(x) - x / 2 - k * mp.log(2) - mp.loggamma(k)


def _ncx2_logpdf(x, d, lam):
    if lam == 0:
        return _chi2_logpdf(x, d)
    return _chi2_logpdf(x, d) + _llr(x, d, lam)


def _p_series(a, y):
    """Regularized lower gamma P(a, y) = y^a e^-y / Gamma(a+1) sum_k y^k / (a+1)_k."""
    tol = mpf(10) ** (-mp.mp.dps - 5)
    s = mpf(1)
    t = mpf(1)
    k = 0
    while True:
        k += 1
        t *= y / (a + k)
        s += t
        if t < tol * s and a + k > y:
            break
    return mp.exp(a * mp.log(y) - y - mp.loggamma(a + 1)) * s


def _gamma_p(a, y):
    try:
        return mp.gammainc(a, 0, y, regularized=True)
    except mp.libmp.NoConvergence:  # mpmath gives up for a ~ y ~ 1e5
        return _p_series(a, y)


def _gamma_q(a, y):
    try:
        return mp.gammainc(a, y, mp.inf, regularized=True)
    except mp.libmp.NoConvergence:  # only near y ~ a, where Q is not small
        with mp.workdps(2 * mp.mp.dps):
            return 1 - _p_series(a, y)


def _poisson_range(m):
    """Mode and [j_lo, j_hi] outside of which Poisson(m) weights are < 10^-(dps+20) x mode."""
    mf = float(m)
    mode = int(math.floor(mf))
    budget = (mp.mp.dps + 20) * math.log(10)

    def lp(j):
        return j * math.log(mf) - math.lgamma(j + 1) if mf > 0 else (0.0 if j == 0 else -1e300)

    top = lp(mode)
    step = max(1, int(math.sqrt(mf + 1)) // 4)
    lo = mode
    while lo > 0 and lp(lo) > top - budget:
        lo = max(0, lo - step)
    hi = mode
    while lp(hi) > top - budget:
        hi += step
    return mode, lo, hi


def _log_poisson(j, m):
    return -m + j * mp.log(m) - mp.loggamma(j + 1)


def _ncx2_sf(x, d, lam):
    """Survival function of ncx2(d, lam): Poisson mixture of regularized upper gammas.

    Starts at the low end of the Poisson weights and recurses upwards in the shape with
    Q(a+1, y) = Q(a, y) + y^a e^-y / Gamma(a+1) (sums of positive terms only)."""
    if x <= 0:
        return mpf(1)
    y = x / 2
    a = mpf(d) / 2
    if lam == 0:
        return _gamma_q(a, y)
    m = lam / 2
    mode, j, _ = _poisson_range(m)
    a = a + j
    q = _gamma_q(a, y)
    inc = mp.exp(a * mp.log(y) - y - mp.loggamma(a + 1))
    w = mp.exp(_log_poisson(j, m))
    term = w * q
    s = term
    tol = mpf(10) ** (-mp.mp.dps - 5)
    for _ in range(10**7):
        q += inc
        inc *= y / (a + 1)
        a += 1
        j += 1
        w *= m / j
        prev, term = term, w * q
        s += term
        if j > mode and term < prev / 2 and term < tol * s:
            return s
    raise RuntimeError("ncx2 sf did not converge")


def _ncx2_cdf(x, d, lam):
    """CDF of ncx2(d, lam): starts above the Poisson mode and recurses downwards with
    P(a, y) = P(a+1, y) + y^a e^-y / Gamma(a+1) (sums of positive terms only)."""
    if x <= 0:
        return mpf(0)
    y = x / 2
    a0 = mpf(d) / 2
    if lam == 0:
        return _gamma_p(a0, y)
    m = lam / 2
    _, _, j = _poisson_range(m)
    a = a0 + j
    p = _gamma_p(a, y)
    w = mp.exp(_log_poisson(j, m))
    s = w * p
    inc = mp.exp((a - 1) * mp.log(y) - y - mp.loggamma(a))  # y^(a-1) e^-y / Gamma(a)
    while j > 0:
        p += inc
        a -= 1
        inc *= a / y
        w *= j / m
        j -= 1
        s += w * p
    return s


# ----------------------------------------------------------------------------------------
# Root finding: safeguarded Newton on a bracket
# ----------------------------------------------------------------------------------------


def _newton_bracket(fn, lo, hi, x0, increasing, rtol=None, max_iter=500):
    """Root of a monotone fn (returns (f, f')) in [lo, hi] with sign change."""
    if rtol is None:
        rtol = mpf(10) ** (-(mp.mp.dps - 8))
    sgn = 1 if increasing else -1
    x = x0 if lo <= x0 <= hi else (lo + hi) / 2
    for _ in range(max_iter):
        f, df = fn(x)
        g = sgn * f
        if g == 0:
            return x
        if g > 0:
            hi = x
        else:
            lo = x
        newx = None
        if df != 0 and mp.isfinite(df):
            cand = x - f / df
            if lo < cand < hi:
                newx = cand
        if newx is None:
            newx = (lo + hi) / 2
        scale = max(abs(newx), mpf(1))
        if abs(newx - x) <= rtol * scale or (hi - lo) <= rtol * scale:
            return newx
        x = newx
    raise RuntimeError("root finding did not converge")


def _bracket(fn_val, x0, step, increasing, lower=None):
    """Expand from x0 until the monotone fn changes sign; returns ((lo, hi), the end with
    the smaller |fn|)."""
    f0 = fn_val(x0)
    sgn = 1 if increasing else -1
    if sgn * f0 == 0:
        return (x0, x0), x0
    direction = -1 if sgn * f0 > 0 else 1
    a, fa = x0, f0
    h = step
    for _ in range(4000):
        b = a + direction * h
        if lower is not None and b <= lower:
            b = lower
        fb = fn_val(b)
        if fb * f0 <= 0 or (lower is not None and b == lower):
            best = b if abs(fb) < abs(fa) else a
            return ((b, a) if direction < 0 else (a, b)), best
        a, fa = b, fb
        h *= 2
    raise RuntimeError("bracketing failed")


def _solve_log(fn, x0, increasing):
    """Root in x > 0 of a monotone fn(x) -> (f, df/dx), solved in u = log x."""

    def g(u):
        x = mp.exp(u)
        f, df = fn(x)
        return f, df * x

    u0 = mp.log(x0)
    (lo, hi), start = _bracket(lambda u: g(u)[0], u0, mpf(1) / 2, increasing)
    if lo == hi:
        return mp.exp(lo)
    return mp.exp(_newton_bracket(g, lo, hi, start, increasing))


# ----------------------------------------------------------------------------------------
# Quantiles
# ----------------------------------------------------------------------------------------


def _norm_isf(alpha):
    if alpha == mpf(1) / 2:
        return mpf(0)
    if alpha > mpf(1) / 2:
        return -_norm_isf(1 - alpha)
    la = mp.log(alpha)

    def fn(z):
        q = _norm_sf(z)
        return mp.log(q) - la, -mp.npdf(z) / q

    z0 = mp.sqrt(-2 * la)
    (lo, hi), start = _bracket(lambda z: fn(z)[0], z0, mpf(1), False)
    return _newton_bracket(fn, lo, hi, start, False)


def _guess(d, lam, z):
    mean = d + lam
    sd = mp.sqrt(2 * d + 4 * lam)
    return max(mean + z * sd, mean / 100)


def _chi2_isf(alpha, d):
    """Psi_0^-1(alpha) for the central chi-squared."""
    la = mp.log(alpha)

    def fn(x):
        sf = _ncx2_sf(x, d, 0)
        return mp.log(sf) - la, -mp.exp(_chi2_logpdf(x, d)) / sf

    return _solve_log(fn, _guess(d, 0, _norm_isf(alpha)), False)


def _ncx2_ppf(alpha, d, lam):
    """Phi_lam^-1(alpha) for the non-central chi-squared."""
    la = mp.log(alpha)

    def fn(x):
        cdf = _ncx2_cdf(x, d, lam)
        return mp.log(cdf) - la, mp.exp(_ncx2_logpdf(x, d, lam)) / cdf

    return _solve_log(fn, _guess(d, lam, -_norm_isf(alpha)), True)


def _llr_root(target, d, lam, guess=None):
    """c > 0 with ell(c) = target (requires target > -lam/2).

    Newton in u = log c: ell(e^u) = -lam/2 + log 0F1(; d/2; lam e^u / 4) is increasing and
    convex in u (log of a power series in e^u with positive coefficients), so Newton
    iterates are monotone after the first step; rightward steps are capped for safety."""
    bb = mpf(d) / 2
    r = target + lam / 2
    if guess is None:
        guess = max(2 * d * r / lam, r * r / lam)
    u = mp.log(guess)
    tol = mpf(10) ** (-(mp.mp.dps - 6))
    for _ in range(400):
        t = mp.exp(u)
        z = lam * t / 4
        l0 = _log0f1(bb, z)
        f = l0 - r
        if f == 0:
            return t
        df = z / bb * mp.exp(_log0f1(bb + 1, z) - l0)  # d ell / d u
        step = -f / df
        if step > 20:
            step = mpf(20)
        u += step
        if abs(step) <= tol * max(abs(u), mpf(1)):
            return mp.exp(u)
    raise RuntimeError("ell root did not converge")


# ----------------------------------------------------------------------------------------
# Profiles at adaptive precision
# ----------------------------------------------------------------------------------------


def _lost_digits(big, diff):
    if diff <= 0:
        return mp.inf
    return max(mpf(0), mp.log10(big / diff))


def _adaptive(compute, dps):
    """Run compute() -> (result, lost_digits) at rising precision until at least dps - 10
    significant digits survive the cancellation; returns result."""
    work = dps
    while True:
        with mp.workdps(work):
            res, lost = compute()
        if work - lost >= dps - 10:
            return res
        if work >= MAX_DPS:
            raise RuntimeError(f"cancellation needs more than {MAX_DPS} digits")
        work = min(MAX_DPS, 2 * work if not mp.isfinite(lost) else int(lost) + dps + 10)


def npo_delta(eps, mu, dps):
    """NPO profile: (delta, d delta / d eps)."""

    def compute():
        e, m = mpf(eps), mpf(mu)
        a = _norm_cdf(-e / m + m / 2)
        b = mp.exp(e) * _norm_cdf(-e / m - m / 2)
        dlt = a - b
        return (+dlt, -b), _lost_digits(a, dlt)

    out = _adaptive(compute, dps)
    return +out[0], +out[1]


def glrt_delta(eps, d, lam, dps, warm=None):
    """GLRT profile pieces: dict with delta_R, delta_Rp, c, cp and the eps-derivatives.

    ``warm`` (a dict, updated in place) carries the last thresholds c, c' as Newton starts."""
    e, lm = +eps, +lam
    warm = {} if warm is None else warm

    def comp_r():
        c = _llr_root(e, d, lm, warm.get("c"))
        warm["c"] = c
        a = _ncx2_sf(c, d, lm)
        b = mp.exp(e) * _ncx2_sf(c, d, 0)
        dlt = a - b
        return (+dlt, -b), _lost_digits(a, dlt)

    def comp_rp():
        c = _llr_root(-e, d, lm, warm.get("cp"))
        warm["cp"] = c
        a = _ncx2_cdf(c, d, 0)
        b = mp.exp(e) * _ncx2_cdf(c, d, lm)
        dlt = a - b
        return (+dlt, -b), _lost_digits(a, dlt)

    dr, ddr = _adaptive(comp_r, dps)
    c = +warm["c"]
    if e < lm / 2:
        drp, ddrp = _adaptive(comp_rp, dps)
        cp = +warm["cp"]
    else:
        drp, ddrp, cp = mpf(0), mpf(0), None
    return {"delta_R": +dr, "delta_Rp": +drp, "c": c, "cp": cp, "ddR": +ddr, "ddRp": +ddrp}


def _glrt_delta_and_slope(eps, d, lam, dps, warm=None):
    g = glrt_delta(eps, d, lam, dps, warm)
    if g["delta_R"] >= g["delta_Rp"]:
        return g["delta_R"], g["ddR"], "R", g
    return g["delta_Rp"], g["ddRp"], "R_prime", g


def _eps_of_delta(delta_fn, target, hi=None):
    """eps > 0 solving delta(eps) = target for a decreasing profile; delta_fn(eps) ->
    (delta, d delta / d eps).  Newton on log delta starting from eps = 0 (so that it
    approaches from the side where delta >= target, avoiding costly evaluations far out in
    the tail), safeguarded by bisection on the bracket [0, hi]."""
    lt = mp.log(target)

    def fn(e):
        dl, dd = delta_fn(e)
        if dl <= 0:
            return -mp.inf, mpf(0)
        return mp.log(dl) - lt, dd / dl

    lo = mpf(0)
    if hi is None:
        hi = mpf(1)
        while fn(hi)[0] > 0:
            lo, hi = hi, hi * 2
            if hi > 1e7:
                raise RuntimeError("eps bracket failed")
    return _newton_bracket(fn, lo, hi, lo, False, rtol=mpf(10) ** -45)


# ----------------------------------------------------------------------------------------
# Tasks
# ----------------------------------------------------------------------------------------


def task_roc_npo(alpha, mu, dps):
    with mp.workdps(dps):
        z = _norm_isf(mpf(alpha))
        r = _norm_sf(z - mpf(mu))
        omr = _norm_cdf(z - mpf(mu))
        return {"alpha": alpha, "mu": mu, "R": _s(r), "one_minus_R": _s(omr)}


def task_roc_glrt(alpha, mu, d, dps):
    with mp.workdps(dps):
        a, lam = mpf(alpha), mpf(mu) ** 2
        t = _chi2_isf(a, d)
        r, omr = _ncx2_sf(t, d, lam), _ncx2_cdf(t, d, lam)
        tp = _ncx2_ppf(a, d, lam)
        rp, omrp = _ncx2_cdf(tp, d, 0), _ncx2_sf(tp, d, 0)
        if r < TINY or rp < TINY:
            return None
        return {
            "alpha": alpha,
            "mu": mu,
            "lam": _s(lam),
            "d": d,
            "t": _s(t),
            "R": _s(r),
            "one_minus_R": _s(omr),
            "t_prime": _s(tp),
            "R_prime": _s(rp),
            "one_minus_R_prime": _s(omrp),
        }


def _log_delta(dl, one_minus):
    """log delta, through log1p(-(1 - delta)) when delta is close to 1."""
    if dl > mpf(1) / 2:
        return mp.log1p(-one_minus())
    return mp.log(dl)


def task_profile_npo(eps, mu, dps):
    with mp.workdps(dps):
        e, m = mpf(eps), mpf(mu)
        dl, _ = npo_delta(e, m, dps)
        if dl < TINY:
            return None

        def one_minus():
            return _norm_sf(-e / m + m / 2) + mp.exp(e) * _norm_cdf(-e / m - m / 2)

        return {"eps": eps, "mu": mu, "delta": _s(dl), "log_delta": _s(_log_delta(dl, one_minus))}


def task_profile_glrt(eps, mu, d, dps):
    with mp.workdps(dps):
        lam = mpf(mu) ** 2
        e = mpf(eps)
        dl, _, branch, g = _glrt_delta_and_slope(e, d, lam, dps)
        if dl < TINY:
            return None

        def one_minus():
            if branch == "R":
                c = g["c"]
                return _ncx2_cdf(c, d, lam) + mp.exp(e) * _ncx2_sf(c, d, 0)
            c = g["cp"]
            return _ncx2_sf(c, d, 0) + mp.exp(e) * _ncx2_cdf(c, d, lam)

        return {
            "eps": eps,
            "mu": mu,
            "lam": _s(lam),
            "d": d,
            "delta": _s(dl),
            "log_delta": _s(_log_delta(dl, one_minus)),
            "delta_R": _s(g["delta_R"]),
            "delta_R_prime": _s(g["delta_Rp"]),
            "c": _s(g["c"]),
            "c_prime": _s(g["cp"]),
            "branch": branch,
        }


def _npo_eps(delta, mu, dps):
    """(eps, delta_at_0) or (None, delta_at_0)."""
    m = mpf(mu)
    d0 = _norm_cdf(m / 2) - _norm_cdf(-m / 2)
    if d0 <= delta:
        return None, d0
    return _eps_of_delta(lambda e: npo_delta(e, m, dps), delta), d0


def _glrt_eps(delta, d, lam, dps):
    """(eps, delta_at_0, branch); eps None when delta_at_0 <= delta.  The NPO epsilon is an
    upper bound (the GLRT adversary is weaker) and brackets the root."""
    warm = {}
    d0 = _glrt_delta_and_slope(mpf(0), d, lam, dps, warm)[0]
    if d0 <= delta:
        return None, d0, None
    hi, _ = _npo_eps(delta, mp.sqrt(lam), dps)
    eps = _eps_of_delta(lambda e: _glrt_delta_and_slope(e, d, lam, dps, warm)[:2], delta, hi)
    branch = _glrt_delta_and_slope(eps, d, lam, dps, warm)[2]
    return eps, d0, branch


def task_eps_npo(delta, mu, dps):
    with mp.workdps(dps):
        eps, d0 = _npo_eps(mpf(delta), mpf(mu), dps)
        if eps is None or eps <= 0:
            return None
        return {"delta": delta, "mu": mu, "eps": _s(eps), "delta_at_0": _s(d0)}


def task_eps_glrt(delta, mu, d, dps):
    with mp.workdps(dps):
        lam = mpf(mu) ** 2
        eps, d0, branch = _glrt_eps(mpf(delta), d, lam, dps)
        if eps is None or eps <= 0:
            return None
        return {
            "delta": delta,
            "mu": mu,
            "lam": _s(lam),
            "d": d,
            "eps": _s(eps),
            "branch": branch,
            "delta_at_0": _s(d0),
        }


# docs/design.md section 3: (name, adversary, d, Delta, sigma2, N, delta, printed value)
PAPER = [
    ("teaser NPO, Delta/sigma = 0.3", "npo", None, "0.3", "1", 1, 1e-4, "0.9501"),
    (
        "teaser NPO, Delta/sigma = 0.5 (the paper's caption)",
        "npo",
        None,
        "0.5",
        "1",
        1,
        1e-4,
        "1.6981",
    ),
    ("teaser GLRT d = 1, Delta/sigma = 0.3", "glrt", 1, "0.3", "1", 1, 1e-4, "0.3768"),
    ("Delta = sigma^2 = 1, d = 1", "glrt", 1, "1", "1", 1, 1e-4, "3.1114"),
    ("Delta = sigma^2 = 1, d = 30", "glrt", 30, "1", "1", 1, 1e-4, "0.4612"),
    ("Delta = 1, sigma^2 = 36, N = 70, d = 1", "glrt", 1, "1", "36", 70, 1e-2, "2.9437"),
    ("Delta = 1, sigma^2 = 36, N = 70, NPO", "npo", None, "1", "36", 70, 1e-2, "3.6367"),
    ("Delta = 1, sigma^2 = 12.25, N = 50, d = 50", "glrt", 50, "1", "12.25", 50, 1e-2, "0.7599"),
    ("Delta = 1, sigma^2 = 12.25, N = 50, d = 1", "glrt", 1, "1", "12.25", 50, 1e-2, "5.3907"),
    ("Delta = 1, sigma^2 = 12.25, N = 50, NPO", "npo", None, "1", "12.25", 50, 1e-2, "6.0839"),
]


def task_paper(idx, dps):
    name, adv, d, delta_s, sigma2_s, n, delta, printed = PAPER[idx]
    with mp.workdps(dps):
        big_delta, sigma2 = mpf(delta_s), mpf(sigma2_s)
        lam = n * big_delta**2 / sigma2
        mu = mp.sqrt(lam)
        if adv == "npo":
            eps, _ = _npo_eps(mpf(repr(delta)), mu, dps)
        else:
            eps, _, _ = _glrt_eps(mpf(repr(delta)), d, lam, dps)
        decimals = len(printed.split(".")[1])
        rounded = mp.nstr(eps, 30, min_fixed=-4, max_fixed=6)
        ok = f"{float(rounded):.{decimals}f}" == printed
        return {
            "name": name,
            "adversary": adv,
            "d": d,
            "Delta": float(big_delta),
            "sigma2": float(sigma2),
            "N": n,
            "mu": _s(mu),
            "lam": _s(lam),
            "delta": delta,
            "eps": _s(eps),
            "design_value": printed,
            "matches": ok,
        }


def task_clt(n, alpha, dps):
    d = 300
    with mp.workdps(dps):
        a = mpf(alpha)
        lam = mpf(n) / 100  # N Delta^2 / sigma^2 with Delta = 1, sigma^2 = 100
        t = _chi2_isf(a, d)
        r = _ncx2_sf(t, d, lam)
        tp = _ncx2_ppf(a, d, lam)
        rp = _ncx2_cdf(tp, d, 0)
        z = _norm_isf(a)
        s0, s1 = mp.sqrt(2 * d), mp.sqrt(2 * d + 4 * lam)
        mu_gdp = lam / mp.sqrt(2 * d)
        refined = _norm_sf((z - mu_gdp) / mp.sqrt(1 + 2 * lam / d))
        refined_p = _norm_sf((s1 * z - lam) / s0)
        gdp = _norm_sf(z - mu_gdp)
        return {
            "N": n,
            "lam": _s(lam),
            "d": d,
            "alpha": alpha,
            "R": _s(r),
            "R_prime": _s(rp),
            "refined_R": _s(refined),
            "refined_R_prime": _s(refined_p),
            "gdp": _s(gdp),
            "mu_gdp": _s(mu_gdp),
        }


def task_clt_d(d, alpha, dps):
    """Fixed mu_gdp = lam / sqrt(2d) (the N = 1000 value of the clt block), growing d."""
    with mp.workdps(dps):
        a = mpf(alpha)
        mu_gdp = mpf(10) / mp.sqrt(600)
        lam = mu_gdp * mp.sqrt(2 * mpf(d))
        t = _chi2_isf(a, d)
        r = _ncx2_sf(t, d, lam)
        tp = _ncx2_ppf(a, d, lam)
        rp = _ncx2_cdf(tp, d, 0)
        z = _norm_isf(a)
        s0, s1 = mp.sqrt(2 * d), mp.sqrt(2 * d + 4 * lam)
        refined = _norm_sf((z - mu_gdp) / mp.sqrt(1 + 2 * lam / d))
        refined_p = _norm_sf((s1 * z - lam) / s0)
        gdp = _norm_sf(z - mu_gdp)
        return {
            "lam": _s(lam),
            "d": d,
            "alpha": alpha,
            "R": _s(r),
            "R_prime": _s(rp),
            "refined_R": _s(refined),
            "refined_R_prime": _s(refined_p),
            "gdp": _s(gdp),
            "mu_gdp": _s(mu_gdp),
        }


TASKS = {
    "roc_npo": task_roc_npo,
    "roc_glrt": task_roc_glrt,
    "profile_npo": task_profile_npo,
    "profile_glrt": task_profile_glrt,
    "eps_npo": task_eps_npo,
    "eps_glrt": task_eps_glrt,
    "paper": task_paper,
    "clt": task_clt,
    "clt_d": task_clt_d,
}


def all_tasks():
    tasks = []
    for a in ALPHAS:
        for m in MUS:
            tasks.append(("roc_npo", (a, m)))
            tasks.extend(("roc_glrt", (a, m, d)) for d in ROC_DS)
    for e in EPSS:
        for m in MUS:
            tasks.append(("profile_npo", (e, m)))
            tasks.extend(("profile_glrt", (e, m, d)) for d in PROFILE_DS)
    for dl in DELTAS:
        for m in MUS:
            tasks.append(("eps_npo", (dl, m)))
            tasks.extend(("eps_glrt", (dl, m, d)) for d in PROFILE_DS)
    tasks.extend(("paper", (i,)) for i in range(len(PAPER)))
    for n in CLT_NS:
        tasks.extend(("clt", (n, a)) for a in CLT_ALPHAS)
    for d in CLT_DS:
        tasks.extend(("clt_d", (d, a)) for a in CLT_ALPHAS)
    return tasks


def _run(item):
    i, kind, args, dps = item
    t0 = time.time()
    rec = TASKS[kind](*args, dps)
    return i, kind, rec, time.time() - t0


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--dps", type=int, default=DEFAULT_DPS)
    p.add_argument("--out", default=os.path.join(here, "profile_refs.json"))
    p.add_argument("--only", default=None, help="comma-separated kinds to compute")
    args = p.parse_args(argv)

    tasks = all_tasks()
    if args.only:
        keep = set(args.only.split(","))
        tasks = [t for t in tasks if t[0] in keep]
    # Expensive kinds first so that the pool stays busy to the end.
    order = {"eps_glrt": 0, "profile_glrt": 1, "roc_glrt": 2, "paper": 3, "clt": 4}
    items = [(i, k, a, args.dps) for i, (k, a) in enumerate(tasks)]
    items.sort(key=lambda it: order.get(it[1], 9))
    t0 = time.time()
    results = {}
    slow = []
    if args.jobs > 1:
        with multiprocessing.Pool(args.jobs) as pool:
            for i, kind, rec, dt in pool.imap_unordered(_run, items, chunksize=1):
                results[i] = (kind, rec)
                slow.append((dt, kind, tasks[i][1]))
    else:
        for it in items:
            i, kind, rec, dt = _run(it)
            results[i] = (kind, rec)
            slow.append((dt, kind, tasks[i][1]))

    out = {
        "schema": "glrt_jax.profile_refs/1",
        "generator": "tests/reference/make_profile_refs.py",
        "mpmath_version": mp.__version__,
        "working_dps": args.dps,
        "digits": DIGITS,
        "notes": "See the docstring of the generator for the meaning of every field.",
    }
    for kind in TASKS:
        out[kind] = []
    for i in sorted(results):
        kind, rec = results[i]
        if rec is not None:
            out[kind].append(rec)
    if args.only:
        out = {k: v for k, v in out.items() if not isinstance(v, list) or v}
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=0, separators=(",", ":"))
        fh.write("\n")
    counts = {k: len(v) for k, v in out.items() if isinstance(v, list)}
    print(f"wrote {args.out} in {time.time() - t0:.1f} s: {counts}")
    per_kind = {}
    for dt, kind, _ in slow:
        per_kind[kind] = per_kind.get(kind, 0.0) + dt
    print("  cpu seconds by kind: " + ", ".join(f"{k} {v:.0f}" for k, v in per_kind.items()))
    slow.sort(reverse=True)
    for dt, kind, a in slow[:5]:
        print(f"  slowest: {kind}{a} {dt:.1f} s")
    for rec in out.get("paper", []):
        flag = "ok" if rec["matches"] else "MISMATCH"
        print(f"  {rec['name']}: eps = {rec['eps']} (DESIGN {rec['design_value']}) {flag}")


if __name__ == "__main__":
    main()
