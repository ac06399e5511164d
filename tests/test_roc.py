"""Tests of glrt_jax.roc against mpmath references, closed forms and geometric properties.

Compile time dominates: every GLRT call below has between 257 and 512 points, so all of
them share one compiled executable of the GLRT core (inputs are padded to a power of two).
Property tests (hypothesis) live in tests/test_properties.py.
"""

from __future__ import annotations

import functools
import json
import math
import pathlib

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from jax.test_util import check_grads

from glrt_jax import roc
from glrt_jax._src import roc as roc_src

REF = pathlib.Path(__file__).parent / "reference" / "profile_refs.json"
N_PTS = 400  # every GLRT evaluation uses a size in (256, 512]: one compilation


@pytest.fixture(scope="module")
def refs():
    if not REF.exists():
        pytest.skip(f"{REF.name} is missing: generate it with tests/reference/make_profile_refs.py")
    return json.loads(REF.read_text())


def _rel_err(got, want):
    got, want = np.asarray(got, float), np.asarray(want, float)
    return np.abs(got - want) / np.where(want == 0, 1.0, np.abs(want))


def _alpha_grid(n=N_PTS):
    """Deep lower tail, body and upper tail of [0, 1]."""
    k = n // 4
    return np.concatenate(
        [
            np.logspace(-300, -3, k),
            np.linspace(1e-3, 1 - 1e-3, n - 2 * k),
            1 - np.logspace(-3, -15, k),
        ]
    )


# ---------------------------------------------------------------------------
# mpmath references (tests/reference/profile_refs.json)
# ---------------------------------------------------------------------------


def test_npo_matches_mpmath(refs):
    rec = refs["roc_npo"]
    a = np.array([r["alpha"] for r in rec])
    m = np.array([r["mu"] for r in rec])
    assert _rel_err(roc.curve(a, m), [float(r["R"]) for r in rec]).max() <= 1e-12
    omr = [float(r["one_minus_R"]) for r in rec]
    assert _rel_err(roc.tradeoff(a, m), omr).max() <= 1e-12


def test_glrt_curves_match_mpmath(refs):
    rec = refs["roc_glrt"]
    assert 256 < len(rec) <= 512
    a = np.array([r["alpha"] for r in rec])
    m = np.array([r["mu"] for r in rec])
    d = np.array([r["d"] for r in rec])
    cases = [
        (functools.partial(roc.curve, adversary="glrt"), "R"),
        (functools.partial(roc.tradeoff, adversary="glrt"), "one_minus_R"),
        (functools.partial(roc.curve, adversary="glrt", variant="swapped"), "R_prime"),
        (functools.partial(roc.tradeoff, adversary="glrt", variant="swapped"), "one_minus_R_prime"),
    ]
    for fn, key in cases:
        err = _rel_err(fn(a, m, d), [float(r[key]) for r in rec])
        worst = int(np.argmax(err))
        assert err[worst] <= 1e-12, (fn.__name__, rec[worst], err[worst])


def test_d1_closed_form_equals_general_formula(refs):
    """Corollary 1 against Theorem 1 at d = 1 (and both against mpmath)."""
    a = np.repeat(np.array([1e-300, 1e-100, 1e-10, 1e-3, 0.05, 0.3, 0.7, 0.99]), 50)
    m = np.tile(np.geomspace(1e-3, 30.0, 50), 8)
    closed = roc_src._run_core(a, m, 1, closed_form=True)["R"]
    general = roc_src._run_core(a, m, 1, closed_form=False)["R"]
    for k in (0, 1):  # R and 1 - R
        assert _rel_err(general[k], closed[k]).max() <= 1e-12
    # The general formula at d = 1 also matches the references directly.
    rec = [r for r in refs["roc_glrt"] if r["d"] == 1]
    ra = np.array([r["alpha"] for r in rec] * 6)
    rm = np.array([r["mu"] for r in rec] * 6)
    gen = roc_src._run_core(ra, rm, 1, closed_form=False)["R"][0]
    assert _rel_err(gen, [float(r["R"]) for r in rec] * 6).max() <= 1e-12


def test_d1_closed_form_against_mpmath_formula():
    # Independent evaluation of Corollary 1 with mpmath on the shared grid.
    a = _alpha_grid()[::4]
    mus = [0.1, 1.0, 4.0, 20.0]
    aa = np.repeat(a, len(mus))
    mm = np.tile(mus, len(a))
    got = np.asarray(roc.curve(aa, mm, 1, adversary="glrt"))
    got_lo = np.asarray(roc.tradeoff(aa, mm, 1, adversary="glrt"))
    mp.mp.dps = 40
    zs = {}
    for x in a:
        with mp.workdps(40 - int(math.log10(x))):  # x - 1 must not round to -1
            zs[x] = -mp.sqrt(2) * mp.erfinv(mp.mpf(x) - 1)  # Q^{-1}(x/2)
    for x, mu, g, glo in zip(aa, mm, got, got_lo, strict=True):
        z = zs[x]
        q = lambda v: mp.erfc(v / mp.sqrt(2)) / 2  # noqa: E731
        want = q(z - mu) + q(z + mu)
        want_lo = q(mu - z) - q(z + mu)  # Φ(z − μ) − Φ(−z − μ), no cancellation
        if want > 1e-300:
            assert abs(g - want) <= 1e-12 * want, (x, mu)
        if want_lo > 1e-300:
            assert abs(glo - want_lo) <= 1e-11 * want_lo, (x, mu)


# ---------------------------------------------------------------------------
# Symmetrisation
# ---------------------------------------------------------------------------

SYM_CASES = [(0.3, 1), (1.0, 1), (3.0, 1), (1.0, 3), (2.0, 10), (0.5, 50), (4.0, 2), (1.0, 300)]


def _upper_hull(x, y):
    """Upper concave hull of a point cloud (monotone chain)."""
    order = np.lexsort((y, x))
    hull = []
    for p in zip(x[order], y[order], strict=True):
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) >= 0:
                hull.pop()
            else:
                break
        hull.append(p)
    h = np.array(hull)
    return h[:, 0], h[:, 1]


@pytest.mark.parametrize("mu,d", SYM_CASES[:4])
def test_symmetrised_is_the_concave_majorant(mu, d):
    # Independent construction: the upper hull of densely sampled R and R' points.
    grid = np.concatenate([np.linspace(0, 1, 4 * N_PTS), np.logspace(-8, -2, 2 * N_PTS)])
    grid = np.unique(grid)
    chunks = np.array_split(grid, math.ceil(len(grid) / N_PTS))
    r = np.concatenate([roc.curve(c, mu, d, adversary="glrt") for c in chunks])
    rp = np.concatenate([roc.curve(c, mu, d, adversary="glrt", variant="swapped") for c in chunks])
    rs = np.concatenate(
        [roc.curve(c, mu, d, adversary="glrt", variant="symmetrised") for c in chunks]
    )
    hx, hy = _upper_hull(np.concatenate([grid, grid]), np.concatenate([r, rp]))
    hull = np.interp(grid, hx, hy)
    assert np.all(rs >= np.maximum(r, rp) - 1e-15)
    # The hull of samples lies below the true majorant, and close to it.
    assert np.all(rs >= hull - 1e-12)
    assert np.max(rs - hull) <= 2e-5


@pytest.mark.parametrize("mu,d", SYM_CASES)
def test_symmetrised_concave_symmetric_and_above_both(mu, d):
    a = np.linspace(0.0, 1.0, N_PTS)
    r, rp, rs = (
        np.asarray(f(a, mu, d))
        for f in (
            functools.partial(roc.curve, adversary="glrt"),
            functools.partial(roc.curve, adversary="glrt", variant="swapped"),
            functools.partial(roc.curve, adversary="glrt", variant="symmetrised"),
        )
    )
    assert np.all(rs >= np.maximum(r, rp) - 1e-15)
    assert np.all(np.diff(rs, 2) <= 1e-12)  # concave on a uniform grid
    # Symmetric trade-off: f(f(α)) = α, i.e. R_s is its own anti-diagonal reflection.
    b = np.asarray(roc.tradeoff(a, mu, d, adversary="glrt", variant="symmetrised"))
    assert np.allclose(b, 1 - rs, atol=1e-15)
    back = np.asarray(roc.tradeoff(b, mu, d, adversary="glrt", variant="symmetrised"))
    assert np.max(np.abs(back - a)) <= 1e-9


def test_symmetrised_segment_is_total_variation_d1():
    # d = 1: the densities cross at c1 = arccosh(e^{λ/2})^2 / λ; TV in closed form (mpmath).
    mp.mp.dps = 40
    mus = [0.3, 1.0, 3.0, 6.0]
    alphas, wants, mm = [], [], []
    for mu in mus:
        lam = mp.mpf(mu) ** 2
        s = mp.acosh(mp.exp(lam / 2)) / mp.sqrt(lam)
        q = lambda v: mp.erfc(v / mp.sqrt(2)) / 2  # noqa: E731
        x1, x1p = 2 * q(s), 1 - q(s - mu) - q(s + mu)
        tau = q(s - mu) + q(s + mu) - 2 * q(s)
        for w in np.linspace(0, 1, 75):
            x = x1 + mp.mpf(w) * (x1p - x1)
            alphas.append(float(x))
            wants.append(float(x + tau))
            mm.append(mu)
    got = np.asarray(
        roc.curve(np.array(alphas), np.array(mm), 1, adversary="glrt", variant="symmetrised")
    )
    assert _rel_err(got, wants).max() <= 1e-12


# ---------------------------------------------------------------------------
# Derivatives
# ---------------------------------------------------------------------------


def test_npo_grads():
    a = jnp.linspace(0.02, 0.98, 7)
    m = jnp.linspace(0.1, 3.0, 7)
    check_grads(roc.curve, (a, m), order=1, modes=("fwd", "rev"))
    check_grads(roc.tradeoff, (a, m), order=1, modes=("fwd", "rev"))


@pytest.mark.parametrize(
    "fn",
    [
        functools.partial(roc.curve, adversary="glrt"),
        functools.partial(roc.tradeoff, adversary="glrt"),
        functools.partial(roc.curve, adversary="glrt", variant="swapped"),
        functools.partial(roc.curve, adversary="glrt", variant="symmetrised"),
    ],
)
def test_glrt_grads(fn):
    rng = np.random.default_rng(1)
    a = jnp.asarray(rng.uniform(0.05, 0.95, N_PTS))
    m = jnp.asarray(rng.uniform(0.2, 3.0, N_PTS))
    d = jnp.asarray(rng.choice([1, 2, 5, 30], N_PTS))
    check_grads(lambda x, y: fn(x, y, d), (a, m), order=1, modes=("fwd", "rev"), eps=1e-5)


def test_glrt_grad_values():
    # Exact slopes: dR/dα is the likelihood ratio at the threshold (d = 1 closed form).
    a = np.linspace(0.05, 0.95, N_PTS)
    mu = 1.3
    _, slope = jax.jvp(
        lambda x: roc.curve(x, mu, 1, adversary="glrt"), (jnp.asarray(a),), (jnp.ones(N_PTS),)
    )
    z = -np.asarray(jax.scipy.special.ndtri(a / 2))
    want = np.exp(-(mu**2) / 2) * np.cosh(mu * z)
    assert _rel_err(slope, want).max() <= 1e-12


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan"), [0.2, 2.0]])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        roc.curve(alpha, 1.0)
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        roc.curve(alpha, 1.0, 3, adversary="glrt", variant="symmetrised")


@pytest.mark.parametrize("mu", [-1.0, float("nan"), float("inf")])
def test_bad_mu(mu):
    with pytest.raises(ValueError, match=r"mu must be in \[0, inf\)"):
        roc.tradeoff(0.5, mu)
    with pytest.raises(ValueError, match=r"mu must be in \[0, inf\)"):
        roc.curve(0.5, mu, 3, adversary="glrt")


@pytest.mark.parametrize("d", [0, -2, 2.5, float("nan")])
def test_bad_d(d):
    for f in (
        functools.partial(roc.curve, adversary="glrt"),
        functools.partial(roc.tradeoff, adversary="glrt"),
        functools.partial(roc.curve, adversary="glrt", variant="swapped"),
        functools.partial(roc.curve, adversary="glrt", variant="symmetrised"),
    ):
        with pytest.raises(ValueError, match=r"d must be an integer in \[1, inf\)"):
            f(0.5, 1.0, d)


def test_glrt_traces_under_jit():
    # Tracing only (a full jit compile of the core costs ~15 s; values under jit are the
    # same code path as the eager core, whose NaN mapping is tested below).
    a, m, d = jnp.ones(3) * 0.5, jnp.ones(3), jnp.array([1, 2, 3])
    for f in (
        functools.partial(roc.curve, adversary="glrt"),
        functools.partial(roc.tradeoff, adversary="glrt", variant="swapped"),
        functools.partial(roc.curve, adversary="glrt", variant="symmetrised"),
    ):
        jaxpr = jax.make_jaxpr(f)(a, m, d)
        assert jaxpr.out_avals[0].shape == (3,)


def test_out_of_domain_gives_nan_when_traced():
    f = jax.jit(roc.curve)
    out = np.asarray(f(jnp.array([0.5, -0.1, 0.5, 0.5]), jnp.array([1.0, 1.0, -1.0, jnp.nan])))
    assert np.isfinite(out[0]) and np.all(np.isnan(out[1:]))
    # The GLRT core maps invalid values to NaN the same way (this is what runs under jit).
    a = np.full(N_PTS, 0.5)
    m = np.ones(N_PTS)
    d = np.full(N_PTS, 3.0)
    a[1], m[2], d[3], d[4], a[5] = 1.5, -1.0, 0.0, 2.5, np.nan
    out = roc_src._run_core(a, m, d)
    for vals in out.values():
        for v in vals:
            v = np.asarray(v)
            assert np.all(np.isfinite(v[[0, 6]])) and np.all(np.isnan(v[1:6]))
