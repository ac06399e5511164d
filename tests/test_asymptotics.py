"""Tests of glrt_jax.asymptotics (Theorem 3) against mpmath references and the exact curve."""

from __future__ import annotations

import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from glrt_jax import asymptotics, roc

REF = pathlib.Path(__file__).parent / "reference" / "profile_refs.json"
SIGMA, D = 10.0, 300  # the paper's Figure "clt": Δ = 1, σ² = 100, d = 300


@pytest.fixture(scope="module")
def refs():
    if not REF.exists():
        pytest.skip(f"{REF.name} is missing: generate it with tests/reference/make_profile_refs.py")
    return json.loads(REF.read_text())


def _rel_err(got, want):
    got, want = np.asarray(got, float), np.asarray(want, float)
    return np.abs(got - want) / np.abs(want)


def test_formulas_match_mpmath(refs):
    rec = refs["clt"]
    a = np.array([r["alpha"] for r in rec])
    n = np.array([r["N"] for r in rec])
    cases = [
        (asymptotics.clt_roc(a, 1.0, SIGMA, n, D), "refined_R"),
        (asymptotics.clt_roc_swapped(a, 1.0, SIGMA, n, D), "refined_R_prime"),
        (asymptotics.clt_roc(a, 1.0, SIGMA, n, D, refined=False), "gdp"),
        (asymptotics.clt_roc_swapped(a, 1.0, SIGMA, n, D, refined=False), "gdp"),
        (asymptotics.clt_mu(1.0, SIGMA, n, D), "mu_gdp"),
    ]
    for got, key in cases:
        assert _rel_err(got, [float(r[key]) for r in rec]).max() <= 1e-12, key


def test_clt_mu_closed_form_and_grads():
    assert float(asymptotics.clt_mu(1.0, 10.0, 1000, 300)) == pytest.approx(
        10 / math.sqrt(600), rel=1e-15
    )
    # Composition with a shared direction: μ_GLRT is linear in N (NPO's μ grows like √N).
    mus = np.asarray(asymptotics.clt_mu(0.5, 2.0, np.array([1, 4, 16]), 50))
    assert np.allclose(mus / mus[0], [1, 4, 16], rtol=1e-14)
    check_grads(
        lambda s, g: asymptotics.clt_mu(s, g, 7, 20), (0.7, 1.9), order=1, modes=("fwd", "rev")
    )
    check_grads(
        lambda x, g: asymptotics.clt_roc(x, 1.0, g, 100, 30),
        (jnp.array([0.05, 0.4, 0.9]), 3.0),
        order=1,
        modes=("fwd", "rev"),
    )


def test_refined_clt_against_exact_curve_at_fixed_d(refs):
    """Paper's Figure "clt": Δ = 1, σ² = 100, d = 300, N ∈ {10, 100, 1000}."""
    ns = np.array([10, 100, 1000])
    a = np.concatenate([np.logspace(-10, -1, 40), np.linspace(0.1, 0.999, 130)])
    aa = np.tile(a, 3)  # 510 points: shares the compiled core of tests/test_roc.py
    nn = np.repeat(ns, a.size)
    exact = np.asarray(roc.curve(aa, np.sqrt(nn) / SIGMA, D, adversary="glrt")).reshape(3, -1)
    approx = np.asarray(asymptotics.clt_roc(a[None], 1.0, SIGMA, ns[:, None], D))
    sup_err = np.max(np.abs(exact - approx), axis=1)
    reach = np.max(exact - a[None], axis=1)  # distance of the curve from the diagonal
    # At N = 1000 the approximation is visually exact (the paper's figure).
    assert sup_err[2] < 0.01
    # Relative to how far the curve is from the diagonal, the error stays a few percent.
    assert np.all(sup_err / reach < 0.05)
    # At fixed d the error does NOT shrink with N: it grows with λ = N Δ²/σ² (the
    # normal approximation of χ²_d is fixed). Convergence is in d, tested below.
    assert sup_err[0] < sup_err[1] < sup_err[2]
    # The exact curve at these settings also matches mpmath.
    rec = refs["clt"]
    ra = np.array([r["alpha"] for r in rec] * 17)
    rm = np.sqrt(np.array([r["N"] for r in rec] * 17)) / SIGMA
    got_r = roc.curve(ra, rm, D, adversary="glrt")
    got_rp = roc.curve(ra, rm, D, adversary="glrt", variant="swapped")
    assert _rel_err(got_r, [float(r["R"]) for r in rec] * 17).max() <= 1e-12
    assert _rel_err(got_rp, [float(r["R_prime"]) for r in rec] * 17).max() <= 1e-12


def test_clt_converges_as_d_grows(refs):
    """At fixed μ_GLRT = 10/√600, the refined and GDP errors decay like 1/√d."""
    rec = refs["clt_d"]
    ds = sorted({r["d"] for r in rec})
    errs, gdp_errs = [], []
    for d in ds:
        sub = [r for r in rec if r["d"] == d]
        a = np.array([r["alpha"] for r in sub])
        lam = float(sub[0]["lam"])
        exact = np.array([float(r["R"]) for r in sub])
        refined = asymptotics.clt_roc(a, math.sqrt(lam), 1.0, 1, d)
        gdp = asymptotics.clt_roc(a, math.sqrt(lam), 1.0, 1, d, refined=False)
        assert _rel_err(refined, [float(r["refined_R"]) for r in sub]).max() <= 1e-12
        errs.append(np.max(np.abs(exact - np.asarray(refined))))
        gdp_errs.append(np.max(np.abs(exact - np.asarray(gdp))))
    for e in (np.array(errs), np.array(gdp_errs)):
        ratios = e[1:] / e[:-1]  # d grows tenfold: expect about 1/√10 ≈ 0.32
        assert np.all(ratios < 0.5) and np.all(ratios > 0.2), ratios
    assert errs[-1] < 1e-3


@pytest.mark.parametrize("alpha", [-0.5, 1.01, float("nan")])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        asymptotics.clt_roc(alpha, 1.0, 1.0, 10, 5)


@pytest.mark.parametrize("sensitivity", [-1.0, float("nan"), float("inf")])
def test_bad_sensitivity(sensitivity):
    with pytest.raises(ValueError, match=r"sensitivity must be in \[0, inf\)"):
        asymptotics.clt_mu(sensitivity, 1.0, 10, 5)


@pytest.mark.parametrize("sigma", [0.0, -2.0, float("nan")])
def test_bad_sigma(sigma):
    with pytest.raises(ValueError, match=r"sigma must be in \(0, inf\)"):
        asymptotics.clt_roc(0.5, 1.0, sigma, 10, 5)


@pytest.mark.parametrize("steps", [0, 2.5, -3])
def test_bad_steps(steps):
    with pytest.raises(ValueError, match=r"steps must be an integer in \[1, inf\)"):
        asymptotics.clt_roc_swapped(0.5, 1.0, 1.0, steps, 5)


@pytest.mark.parametrize("d", [0, 1.5, float("nan")])
def test_bad_d(d):
    with pytest.raises(ValueError, match=r"d must be an integer in \[1, inf\)"):
        asymptotics.clt_mu(1.0, 1.0, 10, d)


def test_out_of_domain_gives_nan_when_traced():
    f = jax.jit(asymptotics.clt_roc)
    sig = jnp.array([1.0, -1.0, 1.0, 1.0])
    steps = jnp.array([10.0, 10.0, 2.5, 10.0])
    alpha = jnp.array([0.5, 0.5, 0.5, 1.5])
    out = np.asarray(f(alpha, 1.0, sig, steps, 5))
    assert np.isfinite(out[0]) and np.all(np.isnan(out[1:]))
    assert np.isnan(jax.jit(asymptotics.clt_mu)(1.0, 1.0, 10, 0))
