"""Generate ``ncx2_refs.json``: high-precision reference values of the non-central chi-squared.

Usage (from this directory, or with it on the path)::

    python make_ncx2_refs.py              # writes ncx2_refs.json next to this file
    python make_ncx2_refs.py --validate   # checks the JSON against scipy and closed forms
    python make_ncx2_refs.py --workers 4  # parallelism (default 2)

All values come from ``mp_ncx2.py`` (mpmath, 60 working digits), never from glrt_jax.

Grid: df in {1, 2, 3, 10, 50, 300, 1e4, 1e5} x nc in {0, 1e-4, 0.25, 1, 36, 1e3, 1e5}.
For every (df, nc) pair, points x (exact doubles) are placed approximately at

    upper tail: sf(x)  ~ 0.5, 0.1, 1e-3, 1e-10, 1e-30, 1e-100, 1e-200, 1e-300,
                logsf(x)  ~ -2000, -5000              (below double range)
    lower tail: cdf(x) ~ 0.1, 1e-3, 1e-10, 1e-30, 1e-100, 1e-200, 1e-300,
                logcdf(x) ~ -2000, -5000

(lower-tail targets that would need x < 1e-300 are skipped); the reference values are then
computed at exactly that double x.

JSON schema: a list of records (dicts).  Numbers that must be exact beyond double precision
are decimal strings with 36 significant digits (they may lie far outside the double range,
e.g. "1.2e-2172"); df, nc, x of points, p and logp are JSON floats (exact doubles).

    {"kind": "point", "df": float, "nc": float, "x": float,
     "tail": "upper" | "lower",        # which tail the target refers to
     "target": float,                  # the approximate target, as log(probability)
     "sf": str, "cdf": str, "pdf": str,
     "logsf": str, "logcdf": str, "logpdf": str,
     "dpdf": str}                      # d pdf / dx

    {"kind": "isf", "df": float, "nc": float, "p": float, "x": str}
        # p a double (the double nearest sf at a stored point), x the exact root of sf(x) = p
    {"kind": "ppf", "df": float, "nc": float, "p": float, "x": str}
        # root of cdf(x) = p
    {"kind": "logisf", "df": float, "nc": float, "logp": float, "x": str}
        # root of logsf(x) = logp, logp in {-1000, -5000, -10000}
    {"kind": "logppf", "df": float, "nc": float, "logp": float, "x": str}
        # root of logcdf(x) = logp, only where the root is a normal double > 1e-300

isf pairs are made from every upper-tail point with sf >= 1e-300 (and from the lower-tail
point at cdf ~ 0.1); ppf pairs from every lower-tail point with cdf >= 1e-300 (and from the
upper-tail points at sf ~ 0.5 and 0.1).  Their roots come from a Halley step at the stored
point (relative error ~1e-45 since p differs from the tail value by ~1e-16 relative).
"""

import argparse
import json
import math
import multiprocessing
import os
import sys
import time

import mpmath as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import mp_ncx2 as M  # noqa: E402

OUT = os.path.join(HERE, "ncx2_refs.json")
DIGITS = 36
DFS = [1.0, 2.0, 3.0, 10.0, 50.0, 300.0, 1e4, 1e5]
NCS = [0.0, 1e-4, 0.25, 1.0, 36.0, 1e3, 1e5]
UPPER = [0.5, 0.1, 1e-3, 1e-10, 1e-30, 1e-100, 1e-200, 1e-300]
LOWER = [0.1, 1e-3, 1e-10, 1e-30, 1e-100, 1e-200, 1e-300]
BEYOND = [-2000.0, -5000.0]  # log-probability targets below double range
LOG_QUANTILES = [-1000.0, -5000.0, -10000.0]
X_MIN = 1e-300
TINY = 2.2250738585072014e-308  # smallest normal double


def _s(v):
    return mp.nstr(v, DIGITS, strip_zeros=False, min_fixed=-5, max_fixed=6)


def _point(df, nc, x, tail, target, v):
    return {
        "kind": "point",
        "df": df,
        "nc": nc,
        "x": float(x),
        "tail": tail,
        "target": float(target),
        "sf": _s(v["sf"]),
        "cdf": _s(v["cdf"]),
        "pdf": _s(v["pdf"]),
        "logsf": _s(v["logsf"]),
        "logcdf": _s(v["logcdf"]),
        "logpdf": _s(v["logpdf"]),
        "dpdf": _s(v["dpdf"]),
    }


def _pair(kind, df, nc, x, v):
    upper = kind == "isf"
    p = float(v["sf"] if upper else v["cdf"])
    if not (TINY <= p < 1.0):
        return None
    root = M.refine_root(upper, mp.mpf(p), x, df, nc, values=v)
    return {"kind": kind, "df": df, "nc": nc, "p": p, "x": _s(root)}


def work(args):
    """All records for one (df, nc) pair."""
    df, nc = args
    mp.mp.dps = M.DPS
    t0 = time.time()
    recs = []
    # lowest log cdf reachable with x >= X_MIN
    lc_min = M.logcdf(X_MIN, df, nc)

    targets = [(True, math.log(p), p) for p in UPPER] + [(True, b, None) for b in BEYOND]
    targets += [(False, math.log(p), p) for p in LOWER] + [(False, b, None) for b in BEYOND]
    for upper, lt, p in targets:
        if not upper and lt < lc_min + 1.0:
            continue
        tol = 1e-3 * max(1.0, abs(lt))
        x, v, _ = M._solve(upper, lt, df, nc, tol=tol, to_double=True)
        x = float(x)
        if not (X_MIN <= x < math.inf):
            continue
        recs.append(_point(df, nc, x, "upper" if upper else "lower", lt, v))
        if p is None:
            continue
        kinds = ["isf"] if upper else ["ppf"]
        if upper and p >= 0.1:
            kinds.append("ppf")
        if not upper and p >= 0.1:
            kinds.append("isf")
        for kind in kinds:
            r = _pair(kind, df, nc, x, v)
            if r is not None:
                recs.append(r)

    for lp in LOG_QUANTILES:
        x, _, _ = M._solve(True, lp, df, nc)
        recs.append({"kind": "logisf", "df": df, "nc": nc, "logp": lp, "x": _s(x)})
        if lp < lc_min + 1.0:
            continue
        x, _, _ = M._solve(False, lp, df, nc)
        if x >= X_MIN:
            recs.append({"kind": "logppf", "df": df, "nc": nc, "logp": lp, "x": _s(x)})
    return df, nc, recs, time.time() - t0


def generate(workers):
    t0 = time.time()
    # most expensive pairs first (large nc, then large df)
    tasks = sorted(((df, nc) for df in DFS for nc in NCS), key=lambda t: (-t[1], -t[0]))
    out = {}
    with multiprocessing.Pool(workers) as pool:
        for df, nc, recs, dt in pool.imap_unordered(work, tasks):
            out[(df, nc)] = recs
            print(f"df={df:g} nc={nc:g}: {len(recs)} records, {dt:.1f} s", flush=True)
    records = [r for df in DFS for nc in NCS for r in out[(df, nc)]]
    with open(OUT, "w") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(r) for r in records))
        f.write("\n]\n")
    counts = {}
    for r in records:
        counts[r["kind"]] = counts.get(r["kind"], 0) + 1
    print(f"wrote {OUT}: {len(records)} records {counts}, {time.time() - t0:.0f} s")


# ---------------------------------------------------------------------------
# validation (scipy where it is accurate, closed forms, quantile round trips)
# ---------------------------------------------------------------------------


def _rel(a, b):
    a, b = mp.mpf(a), mp.mpf(b)
    return mp.mpf(0) if a == b else abs(a - b) / max(abs(a), abs(b))


def _check_record(r):
    """Independent re-checks of one record; returns {name: max relative error}."""
    mp.mp.dps = M.DPS
    res = {}

    def note(k, e):
        res[k] = max(res.get(k, 0.0), float(e))

    df, nc = r["df"], r["nc"]
    if r["kind"] == "point":
        x = mp.mpf(r["x"])
        sf, cdf, pdf = mp.mpf(r["sf"]), mp.mpf(r["cdf"]), mp.mpf(r["pdf"])
        note(
            "point: log fields consistent",
            max(
                _rel(mp.log(pdf), r["logpdf"]),
                _rel(mp.log(sf), r["logsf"]) if sf < 0.5 else 0,
                _rel(mp.log(cdf), r["logcdf"]) if cdf < 0.5 else 0,
            ),
        )
        note("point: sf + cdf - 1 (abs)", abs(sf + cdf - 1))
        if nc == 0:
            a = mp.mpf(df) / 2
            try:
                with mp.workdps(M.DPS + 20):
                    q = mp.gammainc(a, x / 2, mp.inf, regularized=True)
                    p = mp.gammainc(a, 0, x / 2, regularized=True)
                    d = mp.exp((a - 1) * mp.log(x / 2) - x / 2 - mp.loggamma(a)) / 2
                note("nc=0 vs mpmath.gammainc: sf", _rel(sf, q))
                note("nc=0 vs mpmath.gammainc: cdf", _rel(cdf, p))
                note("nc=0 vs closed-form pdf", _rel(pdf, d))
            except mp.libmp.NoConvergence:
                note("nc=0: mpmath.gammainc did not converge (count)", 1)
        if df == 1:
            rx, rl = mp.sqrt(x), mp.sqrt(mp.mpf(nc))
            loss = -math.log10(min(1.0, float(rx) * max(1.0, float(rl))))
            with mp.workdps(M.DPS + 30 + int(loss)):
                s2 = mp.sqrt(2)
                q = (mp.erfc((rx - rl) / s2) + mp.erfc((rx + rl) / s2)) / 2
                p = (mp.erfc((rl - rx) / s2) - mp.erfc((rl + rx) / s2)) / 2
                d = (mp.exp(-((rx - rl) ** 2) / 2) + mp.exp(-((rx + rl) ** 2) / 2)) / (
                    2 * mp.sqrt(2 * mp.pi * x)
                )
            note("df=1 vs erfc: sf", _rel(sf, q))
            note("df=1 vs erfc: cdf", _rel(cdf, p))
            note("df=1 vs closed-form pdf", _rel(pdf, d))
        if nc <= 1e3 and min(sf, cdf) >= 1e-100:
            import numpy as np
            from scipy import stats

            ss = np.float64(stats.ncx2.sf(r["x"], df, nc)) if nc > 0 else stats.chi2.sf(r["x"], df)
            cc = (
                np.float64(stats.ncx2.cdf(r["x"], df, nc)) if nc > 0 else stats.chi2.cdf(r["x"], df)
            )
            dd = (
                np.float64(stats.ncx2.pdf(r["x"], df, nc)) if nc > 0 else stats.chi2.pdf(r["x"], df)
            )
            tag = "scipy" + (" (nc=0: chi2)" if nc == 0 else "")
            note(f"{tag}: smaller tail", _rel(sf, ss) if sf < cdf else _rel(cdf, cc))
            note(f"{tag}: pdf", _rel(pdf, dd))
    elif r["kind"] in ("isf", "ppf"):
        x = mp.mpf(r["x"])
        v = M.evaluate(x, df, nc)
        t = v["sf"] if r["kind"] == "isf" else v["cdf"]
        note(f"{r['kind']}: |tail(x) - p| / p", _rel(t, r["p"]))
    else:
        x = mp.mpf(r["x"])
        v = M.evaluate(x, df, nc)
        t = v["logsf"] if r["kind"] == "logisf" else v["logcdf"]
        note(f"{r['kind']}: |logtail(x) - logp|", abs(t - r["logp"]))
    return res


def validate(workers):
    t0 = time.time()
    with open(OUT) as f:
        records = json.load(f)
    worst = {}
    with multiprocessing.Pool(workers) as pool:
        for res in pool.imap_unordered(_check_record, records, chunksize=4):
            for k, e in res.items():
                if k.endswith("(count)"):
                    worst[k] = worst.get(k, 0) + e
                else:
                    worst[k] = max(worst.get(k, 0.0), e)
    width = max(len(k) for k in worst)
    for k in sorted(worst):
        print(f"{k:<{width}}  max {worst[k]:.3g}")
    print(f"validated {len(records)} records in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--validate", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    if a.validate:
        validate(a.workers)
    else:
        generate(a.workers)
