"""High-precision reference implementation of the non-central chi-squared distribution.

Independent of ``glrt_jax``: pure mpmath (plus the standard library), used only to generate
test fixtures (``make_ncx2_refs.py``) and never imported by the library.

Distribution: ncx2(df, nc), df > 0 real, nc >= 0.  With y = x/2, a = df/2, m = nc/2 and
w_j = Pois(j; m) = exp(-m) m^j / j!,

    sf(x)  = sum_j w_j Q(a + j, y),        Q = regularized upper incomplete gamma
    cdf(x) = sum_j w_j P(a + j, y),        P = 1 - Q
    pdf(x) = 1/2 sum_j w_j g(a + j - 1, y), g(b, y) = y^b e^-y / Gamma(b + 1)

Only one incomplete gamma is evaluated per call; the other terms follow from the exact,
subtraction-free recurrences

    Q(b + 1, y) = Q(b, y) + g(b, y)      (used upward in j for sf)
    P(b, y)     = P(b + 1, y) + g(b, y)  (used downward in j for cdf)

and every sum is truncated with a rigorous bound on the neglected remainder (relative
1e-80), so the summand's actual peak is always covered (in the deep upper tail it lies far
above the Poisson mode m).  Work precision is ``DPS`` decimal digits (60); the results
(mpf, carrying that precision) are accurate to well over 40 significant digits.  mpf has an
unbounded exponent, so sf = 1e-5000 and its logarithm are represented without trouble.

Public functions take anything ``mpmath.mpf`` accepts (floats are converted exactly) and
return ``mpmath.mpf``:

    sf, cdf, pdf, logsf, logcdf, logpdf, dpdf (d pdf / dx),
    isf(p), ppf(p), logisf(logp), logppf(logp)

Run this file directly for the self-test (cross-checks against mpmath.gammainc, closed
forms for nc = 0 and df = 1, the Bessel form of the pdf, quadrature, brute-force sums and
scipy.stats.ncx2 where scipy is accurate).
"""

import math

import mpmath as mp

DPS = 60
_REL = mp.mpf(10) ** -80  # relative truncation bound for every series
_LOG_CUT = 190.0  # Poisson weights below exp(-_LOG_CUT) * mode are never needed


# ---------------------------------------------------------------------------
# Regularized incomplete gamma functions P(a, y), Q(a, y), a > 0, y >= 0.
# ---------------------------------------------------------------------------


def _log_g(b, y):
    """log g(b, y) = b log y - y - log Gamma(b + 1)  (b > -1, y > 0)."""
    return b * mp.log(y) - y - mp.loggamma(b + 1)


def _p_series(a, y):
    """P(a, y) = g(a, y) * sum_n y^n / ((a+1)...(a+n)); all terms positive."""
    term = mp.mpf(1)
    total = mp.mpf(1)
    n = 0
    while True:
        n += 1
        term = term * y / (a + n)
        total += term
        if a + n > y and term < total * _REL:
            # remaining terms are bounded by a geometric series with ratio y/(a+n+1) < 1
            r = y / (a + n + 1)
            if term * r / (1 - r) < total * _REL:
                break
    return mp.exp(_log_g(a, y)) * total


def _q_cf(a, y):
    """Q(a, y) by the Legendre continued fraction (modified Lentz), for y > a - 1."""
    tiny = mp.mpf(10) ** (-(3 * DPS))
    eps = mp.mpf(10) ** (-(DPS + 5))
    b = y + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    i = 0
    while True:
        i += 1
        an = -i * (i - a)
        b += 2
        d = an * d + b
        if abs(d) < tiny:
            d = tiny
        c = b + an / c
        if abs(c) < tiny:
            c = tiny
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < eps:
            break
    return mp.exp(a * mp.log(y) - y - mp.loggamma(a)) * h


def gammainc_pq(a, y):
    """(P(a, y), Q(a, y)) at the working precision.

    The smaller of the two (up to a factor ~2) is computed directly, the other as its
    complement, so neither loses more than about one digit.
    """
    with mp.workdps(DPS):
        a = mp.mpf(a)
        y = mp.mpf(y)
        if y == 0:
            return mp.mpf(0), mp.mpf(1)
        if mp.isinf(y):
            return mp.mpf(1), mp.mpf(0)
        if y < a + 1:
            p = _p_series(a, y)
            return p, 1 - p
        q = _q_cf(a, y)
        return 1 - q, q


# ---------------------------------------------------------------------------
# Poisson weights (range finding in double precision, values in mpmath)
# ---------------------------------------------------------------------------


def _logw_float(j, m):
    return -m + j * math.log(m) - math.lgamma(j + 1.0)


def _poisson_range(m):
    """(j_lo, j_hi): Poisson(m) mass outside [j_lo, j_hi] is below exp(-_LOG_CUT + 5)."""
    if m == 0:
        return 0, 0
    mode = int(math.floor(m))
    top = _logw_float(mode, m)
    lo = 0
    if _logw_float(0, m) < top - _LOG_CUT:
        a, b = 0, mode  # logw(a) below the cut, logw(b) above
        while b - a > 1:
            c = (a + b) // 2
            if _logw_float(c, m) < top - _LOG_CUT:
                a = c
            else:
                b = c
        lo = a
    a = mode
    step = max(16, int(math.sqrt(m)) + 1)
    b = mode + step
    while _logw_float(b, m) >= top - _LOG_CUT:
        a, b = b, b + 2 * (b - a)
    while b - a > 1:
        c = (a + b) // 2
        if _logw_float(c, m) < top - _LOG_CUT:
            b = c
        else:
            a = c
    return lo, b


def _w(j, m):
    """Poisson pmf w_j = exp(-m) m^j / j! in mpmath."""
    if m == 0:
        return mp.mpf(1) if j == 0 else mp.mpf(0)
    return mp.exp(-m + j * mp.log(m) - mp.loggamma(j + 1))


# ---------------------------------------------------------------------------
# The three sums
# ---------------------------------------------------------------------------


def _sf_sum(y, a, m, mf):
    """sum_j w_j Q(a + j, y), upward from the lower end of the Poisson range."""
    if m == 0:
        return gammainc_pq(a, y)[1]
    j, _ = _poisson_range(mf)
    Q = gammainc_pq(a + j, y)[1]
    t = mp.exp(_log_g(a + j, y))  # g(a + j, y) = Q(a + j + 1) - Q(a + j)
    w = _w(j, m)
    total = mp.mpf(0)
    while True:
        total += w * Q
        Q += t
        t = t * y / (a + j + 1)
        w = w * m / (j + 1)
        j += 1
        # now w = w_j, Q = Q(a + j), t = g(a + j); remainder = sum_{k >= j} w_k Q_k
        if j % 8 == 0 and j > m + 1:
            tail_w = w / (1 - m / (j + 1))  # >= sum_{k >= j} w_k
            if a + j + 1 > y:
                r = y / (a + j + 1)
                qb = min(mp.mpf(1), Q + t / (1 - r))
            else:
                qb = mp.mpf(1)
            if tail_w * qb < total * _REL:
                return total


def _cdf_sum(y, a, m, mf):
    """sum_j w_j P(a + j, y), downward from the upper end of the Poisson range."""
    if m == 0:
        return gammainc_pq(a, y)[0]
    _, j = _poisson_range(mf)
    P = gammainc_pq(a + j, y)[0]
    u = mp.exp(_log_g(a + j - 1, y))  # g(a + j - 1) = P(a + j - 1) - P(a + j)
    w = _w(j, m)
    total = mp.mpf(0)
    while True:
        total += w * P
        if j == 0:
            return total
        P += u
        u = u * (a + j - 1) / y
        w = w * j / m
        j -= 1
        # now w = w_j, P = P(a + j), u = g(a + j - 1); remainder = sum_{k <= j} w_k P_k
        if j % 8 == 0 and j < m - 1:
            tail_w = w / (1 - j / m)  # >= sum_{k <= j} w_k
            if a + j - 1 < y and j > 0:
                r = (a + j - 1) / y
                pb = min(mp.mpf(1), P + u / (1 - r))
            else:
                pb = mp.mpf(1)
            if tail_w * pb < total * _REL:
                return total


def _pdf_terms_range(yf, ly, af, mf):
    """Integer range carrying the pdf mixture sum (log-concave summand in j).

    yf = float(y) (may underflow to 0), ly = float(log y), af = a, mf = m as floats.
    """
    if mf == 0:
        return 0, 0
    lm = math.log(mf)

    def L(j):
        return -mf + j * lm - math.lgamma(j + 1.0) + (af + j - 1) * ly - yf - math.lgamma(af + j)

    # L(j+1) - L(j) = log(m y) - log((j+1)(a+j)) > 0  <=>  (j+1)(a+j) < m y
    bq = af + 1.0
    cq = af - mf * yf
    root = (-bq + math.sqrt(bq * bq - 4.0 * cq)) / 2.0
    pk = max(0, int(math.floor(root)))
    for c in (pk - 1, pk + 1, pk + 2):
        if c >= 0 and L(c) > L(pk):
            pk = c
    top = L(pk)
    cut = top - _LOG_CUT
    lo = pk
    if L(0) < cut:
        a_, b_ = 0, pk
        while b_ - a_ > 1:
            c = (a_ + b_) // 2
            if L(c) < cut:
                a_ = c
            else:
                b_ = c
        lo = a_
    else:
        lo = 0
    a_ = pk
    b_ = pk + 16
    while L(b_) >= cut:
        a_, b_ = b_, b_ + 2 * (b_ - a_)
    while b_ - a_ > 1:
        c = (a_ + b_) // 2
        if L(c) < cut:
            b_ = c
        else:
            a_ = c
    return lo, b_


def _pdf_sum(y, a, m, af, mf):
    """(pdf, dpdf/dx) = (1/2 sum w_j g(a+j-1), 1/4 sum w_j g(a+j-1) ((a+j-1)/y - 1))."""
    lo, hi = _pdf_terms_range(float(y), float(mp.log(y)), af, mf)
    t = mp.exp(_log_g(a + lo - 1, y))
    w = _w(lo, m)
    s = mp.mpf(0)
    ds = mp.mpf(0)
    for j in range(lo, hi + 1):
        term = w * t
        s += term
        ds += term * ((a + j - 1) / y - 1)
        t = t * y / (a + j)
        w = w * m / (j + 1)
    return s / 2, ds / 4


# ---------------------------------------------------------------------------
# Public interface
# ---------------------------------------------------------------------------


def _check(df, nc):
    df = mp.mpf(df)
    nc = mp.mpf(nc)
    if not df > 0 or not nc >= 0 or mp.isinf(df) or mp.isinf(nc):
        raise ValueError(f"need df > 0 and nc >= 0 finite, got df={df}, nc={nc}")
    return df, nc


def _edge(x, df, nc):
    """Values at x <= 0 or x = inf as (sf, cdf, pdf), else None."""
    if x < 0:
        return mp.mpf(1), mp.mpf(0), mp.mpf(0)
    if x == 0:
        if df < 2:
            pdf = mp.inf
        elif df == 2:
            pdf = mp.exp(-nc / 2) / 2
        else:
            pdf = mp.mpf(0)
        return mp.mpf(1), mp.mpf(0), pdf
    if mp.isinf(x):
        return mp.mpf(0), mp.mpf(1), mp.mpf(0)
    return None


def sf(x, df, nc):
    with mp.workdps(DPS):
        x = mp.mpf(x)
        df, nc = _check(df, nc)
        e = _edge(x, df, nc)
        if e is not None:
            return e[0]
        return _sf_sum(x / 2, df / 2, nc / 2, float(nc) / 2)


def cdf(x, df, nc):
    with mp.workdps(DPS):
        x = mp.mpf(x)
        df, nc = _check(df, nc)
        e = _edge(x, df, nc)
        if e is not None:
            return e[1]
        return _cdf_sum(x / 2, df / 2, nc / 2, float(nc) / 2)


def _pdf_and_deriv(x, df, nc):
    with mp.workdps(DPS):
        x = mp.mpf(x)
        df, nc = _check(df, nc)
        e = _edge(x, df, nc)
        if e is not None:
            return e[2], mp.nan
        y = x / 2
        return _pdf_sum(y, df / 2, nc / 2, float(df) / 2, float(nc) / 2)


def pdf(x, df, nc):
    return _pdf_and_deriv(x, df, nc)[0]


def dpdf(x, df, nc):
    """Derivative of the pdf with respect to x."""
    return _pdf_and_deriv(x, df, nc)[1]


def _tails(x, df, nc):
    """(sf, cdf, logsf, logcdf) at x (x, df, nc already mpf and checked, 0 < x < inf).

    The smaller tail is summed directly; the larger one is its complement when the smaller
    is below 0.1 (so the complement loses nothing, and its log is log1p(-smaller), exact
    even when the smaller tail is 1e-5000), otherwise it is summed directly too.
    """
    y, a, m = x / 2, df / 2, nc / 2
    mf = float(nc) / 2
    if x > df + nc - mp.mpf(2) / 3:  # above a rough median: sf is the smaller tail
        s = _sf_sum(y, a, m, mf)
        if s < 0.1:
            return s, 1 - s, mp.log(s), mp.log1p(-s)
        c = _cdf_sum(y, a, m, mf)
    else:
        c = _cdf_sum(y, a, m, mf)
        if c < 0.1:
            return 1 - c, c, mp.log1p(-c), mp.log(c)
        s = _sf_sum(y, a, m, mf)
    return s, c, mp.log(s), mp.log(c)


def _logs(x, df, nc):
    with mp.workdps(DPS):
        x = mp.mpf(x)
        df, nc = _check(df, nc)
        e = _edge(x, df, nc)
        if e is not None:
            return mp.log(e[0]), mp.log(e[1])
        return _tails(x, df, nc)[2:]


def logsf(x, df, nc):
    return _logs(x, df, nc)[0]


def logcdf(x, df, nc):
    return _logs(x, df, nc)[1]


def logpdf(x, df, nc):
    with mp.workdps(DPS):
        return mp.log(pdf(x, df, nc))


def evaluate(x, df, nc):
    """All values at x in one go: dict of mpf with keys
    sf, cdf, pdf, dpdf (d pdf/dx), logsf, logcdf, logpdf."""
    with mp.workdps(DPS):
        x = mp.mpf(x)
        df, nc = _check(df, nc)
        e = _edge(x, df, nc)
        if e is not None:
            s, c, p = e
            return {
                "sf": s,
                "cdf": c,
                "pdf": p,
                "dpdf": mp.nan,
                "logsf": mp.log(s),
                "logcdf": mp.log(c),
                "logpdf": mp.log(p),
            }
        s, c, ls, lc = _tails(x, df, nc)
        y = x / 2
        p, dp = _pdf_sum(y, df / 2, nc / 2, float(df) / 2, float(nc) / 2)
        return {
            "sf": s,
            "cdf": c,
            "pdf": p,
            "dpdf": dp,
            "logsf": ls,
            "logcdf": lc,
            "logpdf": mp.log(p),
        }


# ---------------------------------------------------------------------------
# Quantiles: safeguarded Newton in u = log x on the log of the tail probability
# ---------------------------------------------------------------------------


def _initial_guess(upper, logp, df, nc):
    """Patnaik approximation ncx2(df, nc) ~ c * chi2(nu), solved in mpmath (cheap)."""
    df, nc = mp.mpf(df), mp.mpf(nc)
    c = (df + 2 * nc) / (df + nc)
    nu = (df + nc) ** 2 / (df + 2 * nc)
    a = nu / 2
    u = mp.log(c * nu)  # start at the mean
    for _ in range(100):
        x = mp.exp(u)
        yy = x / (2 * c)
        P, Q = gammainc_pq(a, yy)
        dens = mp.exp(_log_g(a - 1, yy)) * yy  # = x * d/dx of P
        if upper:
            G, dG = mp.log(Q) - logp, -dens / Q
        else:
            G, dG = mp.log(P) - logp, dens / P
        step = -G / dG
        step = max(min(step, mp.mpf(3)), mp.mpf(-3))
        u += step
        if abs(step) < 1e-6:
            break
    return u


def _solve(upper, logp, df, nc, x0=None, tol=None, to_double=False, max_iter=100):
    """Root of log tail(x) = logp.  Returns (x, info) where info holds the values at x.

    Newton on G(u) = log tail(e^u) - logp with G'(u) = -+ x pdf / tail, kept inside a
    bracket once one is known (bisection in u as fallback).  ``to_double`` rounds every
    iterate to a float so the final evaluation happens exactly at the returned double.
    ``tol`` bounds |G| at the returned point (default: 1e-45, i.e. an exact root).
    """
    with mp.workdps(DPS):
        logp = mp.mpf(logp)
        if tol is None:
            tol = mp.mpf(10) ** -45
        u = mp.log(x0) if x0 is not None else _initial_guess(upper, logp, df, nc)
        lo, hi = None, None  # G(lo) sign / G(hi) sign: G decreasing in u (upper) or increasing
        sgn = -1 if upper else 1
        best = None
        for _ in range(max_iter):
            x = mp.exp(u)
            if to_double:
                x = mp.mpf(float(x))
                u = mp.log(x)
            v = evaluate(x, df, nc)
            tail = v["sf"] if upper else v["cdf"]
            G = (v["logsf"] if upper else v["logcdf"]) - logp
            best = (x, v, G)
            if abs(G) <= tol:
                return x, v, G
            # bracket in terms of h(u) = sgn * G(u), increasing in u
            h = sgn * G
            if h < 0:
                lo = u if lo is None or u > lo else lo
            else:
                hi = u if hi is None or u < hi else hi
            dG = sgn * x * v["pdf"] / tail
            un = u - G / dG if dG != 0 else None
            if un is None or (lo is not None and un <= lo) or (hi is not None and un >= hi):
                if lo is not None and hi is not None:
                    un = (lo + hi) / 2
                elif lo is not None:
                    un = lo + 1
                else:
                    un = hi - 1
            if to_double and float(mp.exp(un)) == float(x):
                return best  # cannot get closer with a double
            u = un
        raise RuntimeError(f"no convergence: upper={upper} logp={logp} df={df} nc={nc}")


def logisf(logp, df, nc):
    """x with log sf(x) = logp."""
    return _solve(True, logp, df, nc)[0]


def logppf(logp, df, nc):
    """x with log cdf(x) = logp."""
    return _solve(False, logp, df, nc)[0]


def isf(p, df, nc):
    with mp.workdps(DPS):
        return logisf(mp.log(mp.mpf(p)), df, nc)


def ppf(p, df, nc):
    with mp.workdps(DPS):
        return logppf(mp.log(mp.mpf(p)), df, nc)


def refine_root(upper, p, x, df, nc, values=None):
    """One Halley step from x towards the root of tail(x) = p (p a probability).

    With x a double whose tail value rounds to p, the step error is O(1e-48) relative.
    Returns the refined root (mpf).  ``values``: evaluate(x, df, nc) if already known.
    """
    with mp.workdps(DPS):
        x = mp.mpf(x)
        v = values if values is not None else evaluate(x, df, nc)
        if upper:
            F, F1, F2 = v["sf"] - p, -v["pdf"], -v["dpdf"]
        else:
            F, F1, F2 = v["cdf"] - p, v["pdf"], v["dpdf"]
        return x - 2 * F * F1 / (2 * F1 * F1 - F * F2)


# ---------------------------------------------------------------------------
# Self-test (not part of pytest): python mp_ncx2.py
# ---------------------------------------------------------------------------


def _relerr(a, b):
    a, b = mp.mpf(a), mp.mpf(b)
    if a == b:
        return mp.mpf(0)
    return abs(a - b) / max(abs(a), abs(b))


def _self_test():  # pragma: no cover - manual tool
    import time

    t_start = time.time()
    mp.mp.dps = DPS
    worst = {}

    def note(name, err):
        if name not in worst:
            print(f"  [{time.time() - t_start:6.1f} s] {name}", flush=True)
        worst[name] = max(worst.get(name, mp.mpf(0)), err)

    # 1. incomplete gamma against mpmath.gammainc (where mpmath converges)
    for a in [0.5, 1, 2.5, 17, 150.5, 5000, 50000.5]:
        for rel in [1e-6, 0.01, 0.3, 0.9, 1.0, 1.1, 2, 5, 40]:
            y = mp.mpf(a) * rel
            P, Q = gammainc_pq(a, y)
            try:
                Pr = mp.gammainc(a, 0, y, regularized=True)
                Qr = mp.gammainc(a, y, mp.inf, regularized=True)
            except mp.libmp.NoConvergence:
                continue
            note("P vs mpmath.gammainc", _relerr(P, Pr))
            note("Q vs mpmath.gammainc", _relerr(Q, Qr))
    # series and continued fraction agree where both are usable
    for a, y in [(10, 12), (1000, 1010), (50000, 50400), (3.5, 4.6)]:
        a, y = mp.mpf(a), mp.mpf(y)
        note("series vs CF", _relerr(1 - _p_series(a, y), _q_cf(a, y)))

    # 2. nc = 0 is the central chi-squared (mpmath.gammainc)
    for df in [1, 3, 10, 300]:
        for x in [1e-200, 1e-5, 0.3, 2.0, 50.0, 700.0, 5000.0]:
            v = evaluate(x, df, 0)
            note(
                "nc=0 sf",
                _relerr(
                    v["sf"], mp.gammainc(mp.mpf(df) / 2, mp.mpf(x) / 2, mp.inf, regularized=True)
                ),
            )
            note(
                "nc=0 cdf",
                _relerr(v["cdf"], mp.gammainc(mp.mpf(df) / 2, 0, mp.mpf(x) / 2, regularized=True)),
            )

    # 3. df = 1 closed forms (erfc), deep tails included; pdf closed form
    for nc in [1e-4, 0.25, 1, 36, 1000, 1e5]:
        for x in [1e-100, 1e-6, 0.04, 1.0, 30.0, 1200.0, 1.5e5, 2.1e5]:
            loss = -math.log10(min(1.0, math.sqrt(x) * max(1.0, math.sqrt(nc))))
            with mp.workdps(DPS + 30 + int(loss)):
                rx, rl = mp.sqrt(mp.mpf(x)), mp.sqrt(mp.mpf(nc))
                s2 = mp.sqrt(2)
                sf_ref = (mp.erfc((rx - rl) / s2) + mp.erfc((rx + rl) / s2)) / 2
                cdf_ref = (mp.erfc((rl - rx) / s2) - mp.erfc((rl + rx) / s2)) / 2
                pdf_ref = (mp.exp(-((rx - rl) ** 2) / 2) + mp.exp(-((rx + rl) ** 2) / 2)) / (
                    2 * mp.sqrt(2 * mp.pi * x)
                )
            s, c, p = sf(x, 1, nc), cdf(x, 1, nc), pdf(x, 1, nc)
            note("df=1 sf vs erfc", _relerr(s, sf_ref))
            note("df=1 cdf vs erfc", _relerr(c, cdf_ref))
            note("df=1 pdf closed form", _relerr(p, pdf_ref))

    # 4. pdf against the Bessel form 1/2 e^{-(x+nc)/2} (x/nc)^{df/4-1/2} I_{df/2-1}(sqrt(nc x))
    for df in [1, 2, 3, 10, 50]:
        for nc in [0.25, 1, 36, 1000]:
            for x in [0.01, 1.0, 30.0, 900.0, 4000.0]:
                x_, d_, n_ = mp.mpf(x), mp.mpf(df), mp.mpf(nc)
                ref = (
                    mp.exp(-(x_ + n_) / 2)
                    * (x_ / n_) ** (d_ / 4 - mp.mpf(1) / 2)
                    * mp.besseli(d_ / 2 - 1, mp.sqrt(n_ * x_))
                    / 2
                )
                note("pdf vs Bessel", _relerr(pdf(x, df, nc), ref))

    # 5. sf + cdf = 1 with both summed directly; sf' = -pdf; dpdf = pdf'
    for df in [1, 3, 50, 1e4, 1e5]:
        for nc in [1e-4, 1, 36, 1e3, 1e5]:
            mean, sd = df + nc, math.sqrt(2 * (df + 2 * nc))
            for z in [-3.0, -0.5, 0.0, 1.0, 4.0]:
                x = mean + z * sd
                if x <= 0:
                    continue
                note("sf+cdf-1", abs(sf(x, df, nc) + cdf(x, df, nc) - 1))
            x = mp.mpf(mean + sd)
            h = x * mp.mpf(10) ** -12
            with mp.workdps(DPS):
                d_sf = (sf(x + h, df, nc) - sf(x - h, df, nc)) / (2 * h)
                d_pdf = (pdf(x + h, df, nc) - pdf(x - h, df, nc)) / (2 * h)
            note("d sf/dx + pdf (finite diff, O(h^2))", _relerr(-d_sf, pdf(x, df, nc)))
            note("d pdf/dx (finite diff, O(h^2))", _relerr(d_pdf, dpdf(x, df, nc)))

    # 6. brute force: every j with mpmath.gammainc, no recurrences (small cases)
    for df, nc, x in [(3, 36, 250.0), (3, 36, 0.5), (2, 1, 80.0), (10, 0.25, 1e-3), (1, 36, 2e3)]:
        with mp.workdps(DPS):
            m = mp.mpf(nc) / 2
            y = mp.mpf(x) / 2
            s = c = mp.mpf(0)
            for j in range(0, int(m + 40 * mp.sqrt(m) + 150)):
                wj = _w(j, m)
                s += wj * mp.gammainc(mp.mpf(df) / 2 + j, y, mp.inf, regularized=True)
                c += wj * mp.gammainc(mp.mpf(df) / 2 + j, 0, y, regularized=True)
        note("brute-force sf", _relerr(sf(x, df, nc), s))
        note("brute-force cdf", _relerr(cdf(x, df, nc), c))

    # 7. quadrature of the pdf
    for df, nc, x in [(3, 36, 120.0), (50, 1, 20.0)]:
        with mp.workdps(20):
            # the pdf beyond x + 3000 is below 1e-300 for these cases
            q = mp.quad(lambda t, d=df, n=nc: pdf(t, d, n), [x, x + 30, x + 150, x + 600, x + 3000])
        note("quad of pdf vs sf (20 digits)", _relerr(q, sf(x, df, nc)))

    # 8. quantiles round trip, incl. far below double range
    for df, nc, lp in [(3, 36, -2000), (1, 1e5, -5000), (300, 1000, -1000), (1e4, 1, -10000)]:
        for upper in (True, False):
            try:
                x = _solve(upper, lp, df, nc)[0]
            except RuntimeError:
                continue
            val = logsf(x, df, nc) if upper else logcdf(x, df, nc)
            note("log-quantile round trip (abs in log)", abs(val - lp))
    x = isf(mp.mpf("1e-30"), 10, 36)
    note("isf round trip", _relerr(sf(x, 10, 36), mp.mpf("1e-30")))
    x = ppf(mp.mpf("1e-30"), 10, 36)
    note("ppf round trip", _relerr(cdf(x, 10, 36), mp.mpf("1e-30")))

    # 9. scipy where it is accurate
    try:
        import numpy as np
        from scipy import stats
    except ImportError:  # pragma: no cover
        stats = None
    if stats is not None:
        for df in [1, 3, 10, 50]:
            for nc in [0.25, 1, 36]:
                for x in [0.5, 3.0, 20.0, 60.0, 100.0]:
                    s = sf(x, df, nc)
                    if s > 1e-12 and s < 0.999:
                        note("scipy sf", _relerr(s, np.float64(stats.ncx2.sf(x, df, nc))))
                        note(
                            "scipy pdf",
                            _relerr(pdf(x, df, nc), np.float64(stats.ncx2.pdf(x, df, nc))),
                        )

    width = max(len(k) for k in worst)
    for k, v in worst.items():
        print(f"{k:<{width}}  max err {mp.nstr(v, 3)}")
    print(f"self-test done in {time.time() - t_start:.1f} s")


if __name__ == "__main__":
    _self_test()
