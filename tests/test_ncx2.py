"""Tests of glrt_jax.ncx2 against mpmath closed forms, committed mpmath fixtures and scipy."""

from __future__ import annotations

import functools
import json
import math
import pathlib
import warnings

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy import stats

from glrt_jax import ncx2

mp.mp.dps = 40
REF = pathlib.Path(__file__).parent / "reference" / "ncx2_refs.json"


def _rel(a, b):
    return abs(a - b) / abs(b)


# ---------------------------------------------------------------------------
# Closed forms computed with mpmath in this test (independent of the code).
# ---------------------------------------------------------------------------


def _mp_central_logsf(x, df):
    return mp.log(mp.gammainc(mp.mpf(df) / 2, mp.mpf(x) / 2, mp.inf, regularized=True))


def _mp_central_logcdf(x, df):
    return mp.log(mp.gammainc(mp.mpf(df) / 2, 0, mp.mpf(x) / 2, regularized=True))


def _mp_df1_sf(x, nc):
    # X = (Z + sqrt(nc))^2: sf = Q(sqrt x - sqrt nc) + Q(sqrt x + sqrt nc).
    b, a = mp.sqrt(mp.mpf(x)), mp.sqrt(mp.mpf(nc))
    return mp.erfc((b - a) / mp.sqrt(2)) / 2 + mp.erfc((b + a) / mp.sqrt(2)) / 2


@pytest.mark.parametrize("df", [0.5, 1.0, 3.0, 10.0, 300.0, 1e4])
def test_central_matches_incomplete_gamma(df):
    # x from the deep lower tail to the deep upper tail, both log functions.
    for x in [df * 1e-3, df * 0.5, df, df * 2 + 10, df + 40 * math.sqrt(2 * df) + 60, 4000.0]:
        ls = float(ncx2.logsf(x, df, 0.0))
        lc = float(ncx2.logcdf(x, df, 0.0))
        ref_s = float(_mp_central_logsf(x, df))
        ref_c = float(_mp_central_logcdf(x, df))
        assert abs(ls - ref_s) <= 1e-13 * max(1.0, abs(ref_s)), (x, ls, ref_s)
        assert abs(lc - ref_c) <= 1e-13 * max(1.0, abs(ref_c)), (x, lc, ref_c)


@pytest.mark.parametrize("nc", [1e-4, 0.25, 1.0, 36.0, 1e3])
def test_df1_closed_form_upper_tail(nc):
    for z in [0.0, 1.0, 5.0, 20.0, 37.0]:
        x = (math.sqrt(nc) + z) ** 2 + 0.5
        ref = _mp_df1_sf(x, nc)
        got = float(ncx2.sf(x, 1.0, nc))
        assert _rel(got, float(ref)) <= 1e-12, (x, got, ref)
        assert abs(float(ncx2.logsf(x, 1.0, nc)) - float(mp.log(ref))) <= 1e-13 * max(
            1.0, abs(float(mp.log(ref)))
        )


def test_far_beyond_double_range():
    # Central chi2 with df = 2: sf = e^{-x/2} exactly, so logsf(20000) = -10000.
    assert abs(float(ncx2.logsf(20000.0, 2.0, 0.0)) + 10000.0) <= 1e-13 * 10000
    # Lower tail, df = 2: cdf = 1 - e^{-x/2} ≈ x/2 for tiny x.
    x = 1e-300
    assert _rel(float(ncx2.logcdf(x, 2.0, 0.0)), math.log(x / 2)) <= 1e-14
    # Non-central, true value ~ e^{-5000}: compare with the mpmath closed form (df = 1).
    nc, x = 36.0, (6.0 + 100.0) ** 2
    ref = float(mp.log(_mp_df1_sf(x, nc)))
    assert ref < -5000
    assert abs(float(ncx2.logsf(x, 1.0, nc)) - ref) <= 1e-13 * abs(ref)


# ---------------------------------------------------------------------------
# The committed mpmath grid (tests/reference/make_ncx2_refs.py).
# ---------------------------------------------------------------------------


def _load_refs():
    if not REF.exists():
        pytest.skip("reference fixture missing: run tests/reference/make_ncx2_refs.py")
    return json.loads(REF.read_text())


def _batch(records, kind, key):
    """The records of one kind, and their argument (``key``), df and nc as flat arrays.

    The whole grid goes through one eager call per function, as a user's batch would:
    its points share the size class's compiled program with the other eager calls of
    the tests (sf, cdf and pdf reuse those of their logs; ppf and logppf those of isf
    and logisf).
    """
    rows = [r for r in records if r["kind"] == kind]
    arg, df, nc = (np.array([r[k] for r in rows]) for k in (key, "df", "nc"))
    return rows, arg, df, nc


def test_grid_values():
    refs = _load_refs()
    rows, x, df, nc = _batch(refs, "point", "x")
    assert len({(r["df"], r["nc"]) for r in rows}) == 56  # 8 df x 7 nc
    worst = {}
    names = ("logsf", "logcdf", "logpdf", "sf", "cdf", "pdf")
    for name in names:
        got = np.asarray(getattr(ncx2, name)(x, df, nc))
        assert got.shape == (len(rows),)
        for g, r in zip(got, rows, strict=True):
            where = (name, r["df"], r["nc"], r["x"], r["tail"], g, r[name])
            ref = mp.mpf(r[name])
            if name.startswith("log"):
                # Relative error of the log (absolute where |log| < 1), also far
                # below the double range (true values down to ~1e-2200).
                assert np.isfinite(g), where
                err = abs(g - float(ref)) / max(1.0, abs(float(ref)))
                assert err <= 1e-13, where
            else:
                if ref < mp.mpf("1e-300"):
                    continue
                err = _rel(g, float(ref))
                assert err <= 1e-12, where
                # No silent 0 or 1: exactly 1 only where the true value rounds to 1.
                assert g > 0, where
                if name != "pdf":
                    assert g < 1 or float(ref) == 1.0, where
            worst[name] = max(worst.get(name, 0.0), err)
    print("worst relative errors on the grid:", worst)


def test_mixture_alone_on_the_grid():
    """The log sf and log cdf by the Poisson mixture alone (the composition engine's GLRT
    tails for df up to losses.MIXTURE_MAX_D; one round's lower tails) against the committed
    mpmath grid: within the public
    logsf's tolerance where the engine uses it (nc ≤ 1000, i.e. σ ≥ 0.032), and within
    twice that on the rest of the grid (1.4e-13 at df = nc = 1e5: the mixture's window
    then holds thousands of terms)."""
    from glrt_jax._src.losses import MIXTURE_MAX_D
    from glrt_jax._src.ncx2 import logcdf_mixture, logsf_mixture

    rows, x, df, nc = _batch(_load_refs(), "point", "x")
    engine = (df <= MIXTURE_MAX_D) & (nc <= 1000.0)
    assert engine.sum() > 700
    for fn, key in ((logsf_mixture, "logsf"), (logcdf_mixture, "logcdf")):
        got = np.asarray(fn(x, df, nc))
        ref = np.array([float(mp.mpf(r[key])) for r in rows])
        err = np.abs(got - ref) / np.maximum(1.0, np.abs(ref))
        assert np.all(np.isfinite(got)), key
        for mask, tol in ((engine, 1e-13), (~engine, 2e-13)):
            worst = int(np.argmax(np.where(mask, err, 0.0)))
            assert err[worst] <= tol, (key, rows[worst], got[worst])


def test_mixture_pair_is_two_mixture_calls():
    """``logsf_mixture_pair`` (the GLRT's tails under P and Q at the same points, one
    incomplete gamma for both where the mixture's window starts at its first term) gives
    the two calls' values and derivatives: on the committed mpmath grid (whose points
    take either branch), at one small non-centrality (every window at its first term),
    and at the domain's edges and invalid inputs."""
    from glrt_jax._src.ncx2 import logsf_mixture, logsf_mixture_pair

    _, x, df, nc = _batch(_load_refs(), "point", "x")
    cases = [(x, df, nc), (np.geomspace(1e-3, 300.0, 64), 10.0, 0.8)]
    edges = np.array([0.0, -1.0, np.inf, np.nan, 2.0, 2.0, 2.0])
    cases.append((edges, np.array([3.0, 3.0, 3.0, 3.0, -1.0, 3.0, np.nan]), 0.5))
    cases.append((np.full(3, 2.0), 3.0, np.array([-1.0, np.inf, 0.5])))
    for xs, dfs, ncs in cases:
        got = logsf_mixture_pair(xs, dfs, ncs)
        want = logsf_mixture(xs, dfs, ncs), logsf_mixture(xs, dfs, np.zeros_like(ncs))
        for g, w in zip(got, want, strict=True):
            # (to rounding: the two programs' code may round differently, a few units
            # in the last place of the log tail's intermediates)
            g, w = np.asarray(g), np.asarray(w)
            with np.errstate(invalid="ignore"):  # (inf − inf where both are infinite)
                close = (g == w) | (np.abs(g - w) <= 1e-13 * np.maximum(1.0, np.abs(w)))
            assert np.array_equal(np.isnan(g), np.isnan(w)) and np.all(close | np.isnan(w))

    def total(fn):
        return lambda x_, n_: sum(jnp.sum(v) for v in fn(x_, 10.0, n_))

    def both(x_, df_, n_):
        return logsf_mixture(x_, df_, n_), logsf_mixture(x_, df_, 0.0)

    xs, ncs = jnp.geomspace(0.1, 60.0, 32), jnp.full(32, 0.8)
    for argnum in (0, 1):
        got = jax.grad(total(logsf_mixture_pair), argnum)(xs, ncs)
        want = jax.grad(total(both), argnum)(xs, ncs)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-14, atol=0)


@pytest.mark.parametrize(
    "kind,fn,key",
    [
        ("isf", ncx2.isf, "p"),
        ("ppf", ncx2.ppf, "p"),
        ("logisf", ncx2.logisf, "logp"),
        ("logppf", ncx2.logppf, "logp"),
    ],
)
def test_grid_quantiles(kind, fn, key):
    # isf/ppf: p from 0.5 down to 1e-300 on both tails; logisf/logppf: log p down to -10000.
    refs = _load_refs()
    rows, p, df, nc = _batch(refs, kind, key)
    got = np.asarray(fn(p, df, nc))
    worst = 0.0
    for g, r in zip(got, rows, strict=True):
        ref = float(mp.mpf(r["x"]))
        err = _rel(g, ref)
        assert err <= 1e-12, (kind, r["df"], r["nc"], r[key], g, ref)
        worst = max(worst, err)
    print(f"worst relative error of {kind} on the grid: {worst:.2e}")


# ---------------------------------------------------------------------------
# The saddle-point contour rule (large df + 2 nc): its switches, against mpmath.
# ---------------------------------------------------------------------------


def _mp_reference():
    import importlib.util

    path = pathlib.Path(__file__).parent / "reference" / "mp_ncx2.py"
    spec = importlib.util.spec_from_file_location("mp_ncx2", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# z-scores (x = mean + z sd) on both sides of each switch of the rule: the line
# moved off the saddle near the mean (|z| ~ 1), pole correction or finer step
# (|z| ~ 4), deep tails; (df, nc) from near the κ = 150 boundary to large nc.
_CONTOUR_Z = [-14.0, -11.0, -4.0, -1.1, -0.9, -1e-3, 0.0, 1e-3, 0.9, 1.1, 3.9, 4.1, 12.0, 30.0]


@jax.jit
def _contour_rule(x, k, lam):
    from glrt_jax._src.special import contour as impl

    return impl.contour(x, k, lam, True)


@pytest.mark.parametrize("df,nc", [(400.0, 0.0), (100.0, 500.0), (300.0, 1e3), (3.0, 2e4)])
def test_contour_rule_against_mpmath(df, nc):
    ref = _mp_reference()
    mean, sd = df + nc, math.sqrt(2 * (df + 2 * nc))
    x = np.array([mean + z * sd for z in _CONTOUR_Z])
    x = x[x > 0]
    xj = jnp.asarray(x)
    # The rule through one compiled program for every case (the points padded to
    # len(_CONTOUR_Z) with copies of the first; called eagerly, each of its conditionals
    # would compile at every call).
    pad = np.concatenate([x, np.repeat(x[:1], len(_CONTOUR_Z) - x.size)])
    rule = _contour_rule(pad, np.full_like(pad, df), np.full_like(pad, nc))
    ltail, upper, lpdf, slope, ok = (np.asarray(v)[: x.size] for v in rule)
    # The rule must be usable at most of these points, or this test tests nothing.
    assert int(ok.sum()) >= len(x) // 2, ok
    got = {n: np.asarray(getattr(ncx2, n)(xj, df, nc)) for n in ("logsf", "logcdf", "logpdf")}
    for i, xi in enumerate(x):
        want = ref.evaluate(float(xi), df, nc)
        if ok[i]:
            # The rule itself (the public functions may pick the mixture here).
            for g, n in ((ltail[i], "logsf" if upper[i] else "logcdf"), (lpdf[i], "logpdf")):
                r = float(want[n])
                assert abs(g - r) <= 1e-13 * max(1.0, abs(r)), ("rule", n, df, nc, xi, g, r)
            r = float(want["dpdf"] / want["pdf"])
            tol = _SLOPE_TOL * max(abs(r), 1.0 / sd)
            assert abs(slope[i] - r) <= tol, ("slope", df, nc, xi, slope[i], r)
        for n, g in got.items():
            r = float(want[n])
            assert abs(g[i] - r) <= 1e-13 * max(1.0, abs(r)), (n, df, nc, xi, g[i], r)
        for n in ("sf", "cdf", "pdf"):
            r = want[n]
            if r >= mp.mpf("1e-300"):
                g = float(getattr(ncx2, n)(xi, df, nc))
                assert _rel(g, float(r)) <= 1e-12, (n, df, nc, xi, g, r)


# d log pdf/dx, which the quantile solver's Taylor step uses (its scale near the
# mode is 1/sd, where it crosses zero).
_SLOPE_TOL = 1e-10


@functools.partial(jax.jit, static_argnames="upper")
def _eval_tail(x, k, lam, upper):
    from glrt_jax._src.special import dispatch

    return dispatch.eval_logtail(x, k, lam, upper, True)


def _eval_tail_padded(x, k, lam, upper, size=8):
    """(log tail, log pdf, d log pdf/dx) at up to ``size`` interior points, through one
    compiled program per tail (the points padded with copies of the first)."""
    pad = size - x.size
    out = _eval_tail(*(np.concatenate([v, np.repeat(v[:1], pad)]) for v in (x, k, lam)), upper)
    return tuple(np.asarray(o)[: x.size] for o in out)


@pytest.mark.parametrize(
    "df,nc", [(1.0, 0.0), (1.0, 1.0), (1.0, 400.0), (3.0, 0.25), (10.0, 36.0), (50.0, 1.0)]
)
def test_pdf_slope_against_mpmath(df, nc):
    """d log pdf/dx from the df = 1 closed form and from both mixture recurrences.

    Each tail's evaluation returns the slope where the quantile solver uses it: the
    sf side from the mean up, the cdf side from the mean down.
    """
    ref = _mp_reference()
    mean, sd = df + nc, math.sqrt(2 * (df + 2 * nc))
    for side, zs in (("sf", [0.0, 1.0, 4.0, 12.0, 40.0]), ("cdf", [0.0, -0.5, -1.5, -2.5])):
        x = np.array([mean + z * sd for z in zs] + ([1e-6, 1e-3] if side == "cdf" else []))
        x = x[x > 0]
        k, lam = np.full_like(x, df), np.full_like(x, nc)
        slope = _eval_tail_padded(x, k, lam, side == "sf")[2]
        for xi, g in zip(x, slope, strict=True):
            want = ref.evaluate(float(xi), df, nc)
            r = float(want["dpdf"] / want["pdf"])
            assert abs(g - r) <= _SLOPE_TOL * max(abs(r), 1.0 / sd), (side, df, nc, xi, g, r)


def test_stirlerr_against_mpmath():
    """Loader's stirlerr, both the lgamma path and the whole-number table."""
    from glrt_jax._src import numerics as impl

    n = np.concatenate([np.arange(1.0, 21.0), [0.5, 2.5, 7.25, 14.9, 15.1, 100.5]])
    whole = n == np.floor(n)
    general = np.asarray(impl.stirlerr(jnp.asarray(n)))
    table = np.asarray(impl.stirlerr(jnp.asarray(n[whole]), integer=True))
    for i, v in enumerate(n):
        r = mp.loggamma(v + 1) - (v + mp.mpf(1) / 2) * mp.log(v) + v - mp.log(2 * mp.pi) / 2
        # Absolute: it enters log prefactors additively (lgamma rounding).
        assert abs(general[i] - float(r)) <= 1e-14, (v, general[i], r)
    for v, g in zip(n[whole], table, strict=True):
        r = mp.loggamma(v + 1) - (v + mp.mpf(1) / 2) * mp.log(v) + v - mp.log(2 * mp.pi) / 2
        assert _rel(g, float(r)) <= 1e-15, (v, g, r)
    # One n at every point (the incomplete gamma's prefactor at a window starting at 0)
    # takes the lgamma path once, to the same accuracy.
    for v in n:
        uniform = np.asarray(impl.stirlerr(jnp.full(5, v)))
        r = mp.loggamma(v + 1) - (v + mp.mpf(1) / 2) * mp.log(v) + v - mp.log(2 * mp.pi) / 2
        assert np.all(uniform == uniform[0]) and abs(uniform[0] - float(r)) <= 1e-14, (v, r)


@pytest.mark.parametrize("nc", [0.0, 1e-4, 0.25, 1.0, 36.0, 900.0])
def test_df1_cdf_short_interval_against_mpmath(nc):
    """df = 1 near x = 0, where Q(a − b) − Q(a + b) cancels: the quadrature branch."""
    from glrt_jax._src.special import df1 as impl

    a = math.sqrt(nc)
    bs = np.concatenate([np.logspace(-9, 0, 40), [1.5, 3.0]])
    bs = bs[(bs <= 1.0 / max(a, 1e-300)) | (bs > 1.0)]
    x = bs * bs
    xj = jnp.asarray(x)
    # The closed form serves every one of these points (no mixture fallback).
    assert bool(np.all(np.asarray(impl.logcdf(xj, jnp.full_like(xj, nc))[1])))
    got_log = np.asarray(ncx2.logcdf(xj, 1.0, nc))
    got = np.asarray(ncx2.cdf(xj, 1.0, nc))
    for i, xi in enumerate(x):
        am, bm = mp.sqrt(mp.mpf(nc)), mp.sqrt(mp.mpf(float(xi)))
        r = mp.ncdf(bm - am) - mp.ncdf(-am - bm)
        lr = float(mp.log(r))
        assert abs(got_log[i] - lr) <= 1e-13 * max(1.0, abs(lr)), (nc, xi, got_log[i], lr)
        if r >= mp.mpf("1e-300"):
            assert _rel(got[i], float(r)) <= 1e-12, (nc, xi, got[i], r)


# ---------------------------------------------------------------------------
# Agreement with scipy where scipy is accurate, and quantile round trips.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("df,nc", [(1.0, 1.0), (10.0, 36.0), (300.0, 1e3), (3.0, 0.25)])
def test_matches_scipy_in_the_bulk(df, nc):
    mean, sd = df + nc, math.sqrt(2 * (df + 2 * nc))
    x = np.maximum(mean + sd * np.linspace(-3, 8, 23), 1e-3)
    for name in ("sf", "cdf", "pdf"):
        ours = np.asarray(getattr(ncx2, name)(x, df, nc))
        ref = getattr(stats.ncx2, name)(x, df, nc)
        np.testing.assert_allclose(ours, ref, rtol=1e-11)


@pytest.mark.parametrize("df,nc", [(1.0, 1.0), (2.0, 0.0), (10.0, 36.0), (50.0, 1e-4)])
def test_quantile_round_trip(df, nc):
    p = np.array([1e-300, 1e-100, 1e-12, 1e-3, 0.1, 0.5, 0.9, 0.999])
    x = ncx2.isf(p, df, nc)
    np.testing.assert_allclose(np.asarray(ncx2.sf(x, df, nc)), p, rtol=1e-11)
    # Lower tail: for df = 1 the 1e-300 quantile (~1e-600) is below double range.
    x = ncx2.ppf(p[1:], df, nc)
    np.testing.assert_allclose(np.asarray(ncx2.cdf(x, df, nc)), p[1:], rtol=1e-11)
    lp = np.array([-10000.0, -1000.0, -50.0, -1.0])
    x = ncx2.logisf(lp, df, nc)
    np.testing.assert_allclose(np.asarray(ncx2.logsf(x, df, nc)), lp, rtol=1e-12)


# ---------------------------------------------------------------------------
# Domain conventions (jax.scipy style).
# ---------------------------------------------------------------------------


def test_domain_conventions():
    nan, inf = float("nan"), float("inf")
    x = jnp.asarray([-1.0, 0.0, inf])
    np.testing.assert_array_equal(ncx2.sf(x, 3.0, 2.0), [1.0, 1.0, 0.0])
    np.testing.assert_array_equal(ncx2.cdf(x, 3.0, 2.0), [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(ncx2.pdf(x, 3.0, 2.0), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(ncx2.logsf(x, 3.0, 2.0), [0.0, 0.0, -inf])
    np.testing.assert_array_equal(ncx2.logcdf(x, 3.0, 2.0), [-inf, -inf, 0.0])
    # Invalid parameters or NaN anywhere -> NaN.
    bad_x = jnp.asarray([1.0, 1.0, 1.0, nan, 1.0, 1.0, 1.0])
    bad_df = jnp.asarray([0.0, -1.0, 2.0, 2.0, nan, 2.0, inf])
    bad_nc = jnp.asarray([1.0, 1.0, -0.5, 1.0, 1.0, nan, 1.0])
    for fn in (ncx2.sf, ncx2.cdf, ncx2.pdf, ncx2.logsf, ncx2.logcdf, ncx2.logpdf):
        assert np.all(np.isnan(fn(bad_x, bad_df, bad_nc))), fn.__name__
    p = jnp.asarray([0.0, 1.0, -0.1, 1.1, nan])
    np.testing.assert_array_equal(ncx2.isf(p, 3.0, 2.0), [inf, 0.0, nan, nan, nan])
    np.testing.assert_array_equal(ncx2.ppf(p, 3.0, 2.0), [0.0, inf, nan, nan, nan])
    lp = jnp.asarray([0.5, -inf, 0.0])
    np.testing.assert_array_equal(ncx2.logisf(lp, 3.0, 2.0), [nan, inf, 0.0])
    np.testing.assert_array_equal(ncx2.logppf(lp, 3.0, 2.0), [nan, 0.0, inf])
    assert np.isnan(ncx2.isf(jnp.asarray([0.5]), -3.0, 2.0)[0])


def test_central_is_nc_zero_without_special_case():
    # nc = 0 and a tiny nc are continuous.
    x = jnp.asarray([0.5, 3.0, 30.0])
    np.testing.assert_allclose(ncx2.sf(x, 3.0, 0.0), ncx2.sf(x, 3.0, 1e-12), rtol=1e-11)


def test_broadcasting_jit_vmap():
    x = jnp.linspace(0.1, 40, 12).reshape(3, 4)
    df = jnp.asarray([[1.0], [5.0], [20.0]])
    out = ncx2.sf(x, df, 2.0)
    assert out.shape == (3, 4)
    jitted = jax.jit(ncx2.sf)(x, df, 2.0)
    np.testing.assert_allclose(jitted, out, rtol=1e-14)
    vm = jax.vmap(lambda xi, di: ncx2.sf(xi, di, 2.0))(x, df[:, 0])
    np.testing.assert_allclose(vm, out, rtol=1e-14)
    q = jax.vmap(ncx2.isf, in_axes=(0, None, None))(jnp.asarray([0.1, 0.01]), 4.0, 3.0)
    np.testing.assert_allclose(ncx2.sf(q, 4.0, 3.0), [0.1, 0.01], rtol=1e-12)


def test_float32():
    x = jnp.asarray([0.5, 5.0, 50.0], jnp.float32)
    out = ncx2.sf(x, jnp.float32(4.0), jnp.float32(3.0))
    assert out.dtype == jnp.float32
    ref = stats.ncx2.sf(np.asarray(x, np.float64), 4.0, 3.0)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=2e-5)
    q = ncx2.isf(jnp.asarray([0.1, 1e-6], jnp.float32), jnp.float32(4.0), jnp.float32(3.0))
    np.testing.assert_allclose(np.asarray(q), stats.ncx2.isf([0.1, 1e-6], 4.0, 3.0), rtol=1e-4)
    # A long mixture (nc = 3000) needs the accumulators rescaled within float32's range;
    # no overflow in any constant, and never sf > 1.
    x = jnp.asarray([1.0, 2000.0, 5000.0], jnp.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lsf = np.asarray(ncx2.logsf(x, jnp.float32(100.0), jnp.float32(3000.0)))
    assert np.all(lsf <= 0.0)
    ref = stats.ncx2.logsf(np.asarray(x, np.float64), 100.0, 3000.0)
    np.testing.assert_allclose(lsf, ref, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# Derivatives.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "df,nc,x", [(1.0, 1.0, 2.0), (3.0, 0.25, 0.7), (10.0, 36.0, 80.0), (4.0, 2.0, 40.0)]
)
def test_check_grads_distribution_functions(df, nc, x):
    for fn in (ncx2.sf, ncx2.cdf, ncx2.logsf, ncx2.logcdf, ncx2.pdf, ncx2.logpdf):
        f = lambda x_, nc_, fn=fn: fn(x_, df, nc_)  # noqa: E731
        check_grads(f, (x, nc), order=2, modes=["fwd", "rev"], rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("df,nc,p", [(1.0, 1.0, 0.3), (10.0, 36.0, 1e-2), (4.0, 2.0, 0.9)])
def test_check_grads_quantiles(df, nc, p):
    for fn in (ncx2.isf, ncx2.ppf):
        check_grads(
            lambda p_, nc_, fn=fn: fn(p_, df, nc_),
            (p, nc),
            order=1,
            modes=["fwd", "rev"],
            rtol=1e-5,
            eps=1e-6,
        )
    for fn in (ncx2.logisf, ncx2.logppf):
        check_grads(
            lambda lp, nc_, fn=fn: fn(lp, df, nc_),
            (math.log(p), nc),
            order=1,
            modes=["fwd", "rev"],
            rtol=1e-5,
            eps=1e-6,
        )


def test_gradient_values_against_closed_forms():
    # d sf / d nc = pdf(x; df + 2, nc): compare with mpmath differentiation (df = 1).
    x, nc = 9.0, 4.0
    g = jax.grad(ncx2.sf, argnums=2)(x, 1.0, nc)
    ref = mp.diff(lambda t: _mp_df1_sf(x, t), nc)
    assert _rel(float(g), float(ref)) <= 1e-10
    gx = jax.grad(ncx2.sf)(x, 1.0, nc)
    refx = mp.diff(lambda t: _mp_df1_sf(t, nc), x)
    assert _rel(float(gx), float(refx)) <= 1e-10


def test_df_derivative_raises():
    with pytest.raises(NotImplementedError, match="df"):
        jax.grad(ncx2.sf, argnums=1)(2.0, 3.0, 1.0)
    with pytest.raises(NotImplementedError, match="df"):
        jax.grad(ncx2.isf, argnums=1)(0.2, 3.0, 1.0)


@pytest.mark.parametrize("chunk", [64, 100, 1 << 20])
def test_chunking_matches_one_pass(chunk):
    """The chunked map (any chunk size, padded last chunk) agrees with one pass.

    The chunk size differs per platform (1024 on CPU, 2**22 on accelerators), so the
    padding and reassembly are checked here at sizes this CPU run would not pick.
    """
    from glrt_jax._src.special import batching, dispatch

    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.uniform(0.0, 150.0, 250))
    df = jnp.asarray(rng.choice([1.0, 3.0, 10.0], 250))
    nc = jnp.asarray(rng.choice([0.0, 1.0, 36.0], 250))
    # (jitted: eagerly, every lax.cond of the kernel would compile on each call)
    (whole,) = jax.jit(dispatch.kernel_logsf)(x, df, nc)
    (chunked,) = jax.jit(functools.partial(batching.map_chunks, dispatch.kernel_logsf, chunk))(
        x, df, nc
    )
    assert chunked.shape == whole.shape
    # Not bit-identical: a chunk's loops run until its own slowest point is done, so
    # points may add a few more (negligible) terms in one layout than in the other.
    np.testing.assert_allclose(np.asarray(chunked), np.asarray(whole), rtol=1e-13, atol=1e-14)


def test_lower_tail_start_against_scipy():
    """The small-x expansion that starts the lower-tail quantile solver.

    Where its neglected terms are at most 0.2 (the solver's switch), the guess is
    within 4 % of scipy's ppf, and on this grid it serves most lower-tail points
    for small df, where Sankaran's approximation is off by factors up to e^90.
    """
    from glrt_jax._src.special import quantile as impl

    p = np.logspace(-12, math.log10(0.5), 40)
    used = 0
    start = jax.jit(impl.lower_asymptote)  # one program for every (df, nc)
    for df in (0.5, 1.0, 2.0, 3.0, 10.0):
        for nc in (0.0, 0.25, 1.0, 10.0, 36.0):
            ref = stats.ncx2.ppf(p, df, nc) if nc > 0 else stats.chi2.ppf(p, df)
            log_x, neglected = (np.asarray(v) for v in start(np.log(p), df, nc))
            ok = neglected <= 0.2
            used += int(ok.sum())
            err = np.abs(log_x[ok] - np.log(ref[ok]))
            assert err.size == 0 or err.max() <= 0.04, (df, nc, err.max())
    assert used >= 600, used


@jax.jit
def _initial_guess(logq, upper, k, lam):
    from glrt_jax._src.special import quantile

    return quantile.initial_guess(logq, upper, k, lam)


@pytest.mark.parametrize("df,nc", [(10.0, 36.0), (50.0, 1.0), (300.0, 0.0), (10.0, 100.0)])
def test_lower_tail_start_refined_on_saddle_point(df, nc):
    """Where the expansion does not hold, Newton steps on the Lugannani–Rice
    approximation bring Sankaran's lower-tail start (off by up to e^0.7 at
    (10, 36)) within 1 % of scipy's ppf, where the solver's first step is final."""
    p = np.logspace(-12, math.log10(0.45), 40)
    ref = stats.ncx2.ppf(p, df, nc) if nc > 0 else stats.chi2.ppf(p, df)
    lq = jnp.log(jnp.asarray(p))
    # (jitted, (df, nc) as data: one program for every case)
    u0 = np.asarray(_initial_guess(lq, jnp.zeros(p.shape, bool), df, nc))
    err = np.abs(u0 - np.log(ref))
    assert err.max() <= 1e-2, err.max()


@pytest.mark.parametrize("df,nc", [(1.0, 1.0), (3.0, 0.25), (10.0, 36.0), (2.0, 0.0), (300.0, 1e3)])
def test_taylor_step_against_mpmath(df, nc):
    """The solver's step: Taylor coefficients of the log tail from the Riccati
    recursion, inverted. From mpmath values at x0 (so only the recursion and the
    inversion are under test), the step to x0·e^t must recover t to rounding when
    |t| ≤ 5e-3, and its error bound must cover the true error wherever it claims
    convergence."""
    from glrt_jax._src.special import quantile as impl

    ref = _mp_reference()
    mean, sd = df + nc, math.sqrt(2 * (df + 2 * nc))
    eps = np.finfo(float).eps
    for upper, zs in ((True, [0.5, 2.0, 6.0, 20.0]), (False, [-0.5, -1.5, -2.5])):
        for z in zs:
            x0 = mean + z * sd
            if x0 <= 0:
                continue
            at0 = ref.evaluate(x0, df, nc)
            key = "logsf" if upper else "logcdf"
            for t_true in (-5e-2, -5e-3, -1e-3, 1e-4, 1e-3, 5e-3, 5e-2):
                x1 = x0 * math.exp(t_true)
                c = float(ref.evaluate(x1, df, nc)[key] - at0[key])
                t, err, _ = (
                    float(v)
                    for v in impl.taylor_step(
                        jnp.asarray(c),
                        jnp.asarray(float(at0[key])),
                        jnp.asarray(float(at0["logpdf"])),
                        jnp.asarray(float(at0["dpdf"] / at0["pdf"])),
                        jnp.asarray(x0),
                        jnp.asarray(upper),
                        jnp.asarray(df),
                        jnp.asarray(nc),
                    )
                )
                g0 = abs(float(x0 * at0["pdf"] / mp.exp(at0[key])))
                # Rounding of c (in units of the log tail) and of t itself.
                noise = 8 * eps * (max(1.0, abs(float(at0[key]))) / g0 + 1.0)
                case = (df, nc, upper, z, t_true, t, err)
                if abs(t_true) <= 5e-3:
                    assert abs(t - t_true) <= noise, case
                if abs(t_true) <= 1e-3:  # the solver's claim of convergence
                    assert err <= 4 * eps * max(1.0, abs(float(at0[key]))), case
                assert abs(t - t_true) <= err / g0 + noise, case


def test_one_evaluation_per_quantile(monkeypatch):
    """On the benchmark cases the solver's first step is already final: with a
    single evaluation allowed, quantiles at p in [1e-12, 0.5] (both tails) agree
    with the unrestricted solver and with scipy. (The five (df, nc) cases in one batch:
    one compilation per setting.)"""
    from glrt_jax._src.special import quantile as impl

    cases = [(1.0, 1.0), (10.0, 36.0), (300.0, 1e3), (10.0, 1e5), (3.0, 0.25)]
    p1 = np.exp(np.linspace(math.log(1e-12), math.log(0.5), 61))
    p = np.tile(p1, len(cases))
    df, nc = (np.repeat([c[i] for c in cases], p1.size) for i in (0, 1))
    full = {fn: np.asarray(getattr(ncx2, fn)(p, df, nc)) for fn in ("ppf", "isf")}
    # The iteration limit is read when the program is traced: a fresh jit of the same
    # function traces it again (the library's compiled programs are left alone).
    monkeypatch.setattr(impl, "NEWTON_ITERS", 1)
    monkeypatch.setattr(impl, "_quantile_any", jax.jit(impl._quantile_any.__wrapped__))
    for fn in ("ppf", "isf"):
        one = np.asarray(getattr(ncx2, fn)(p, df, nc))
        np.testing.assert_allclose(one, full[fn], rtol=4e-15, err_msg=fn)
        peer = getattr(stats.ncx2, fn)(p, df, nc)
        np.testing.assert_allclose(one, peer, rtol=1e-11, err_msg=fn)


def test_quantile_traces_each_method_once(monkeypatch):
    """The quantile's program holds one copy of each method of the tails: a batch asking
    for both tails runs the saddle-point rule once and each Poisson-mixture sum where a
    point asks for its tail (it had four copies of the rule and two of each sum, and took
    about 1.5 times as long to compile)."""
    from glrt_jax._src.special import contour, mixture, quantile

    calls = {}
    for module, name in ((contour, "contour"), (mixture, "log_sf_sum"), (mixture, "log_cdf_sum")):
        original = getattr(module, name)

        def counting(*args, _name=name, _original=original, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counting)
    # (the function under the jit, so that no cached trace hides the calls)
    isf = functools.partial(quantile._quantile_any.__wrapped__, log_input=False, lower_tail=False)
    jax.make_jaxpr(isf)(jnp.array([1e-3, 0.9]), df=10.0, nc=36.0)
    assert calls == {"contour": 1, "log_sf_sum": 1, "log_cdf_sum": 1}
