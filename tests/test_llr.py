"""Tests of the GLRT log-likelihood ratio and its inverse against mpmath and scipy."""

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from glrt_jax._src import llr

mp.mp.dps = 40

# (d, λ, t): small and large x = λt/4, small and large a = d/2, the regimes of the
# profile (t up to ~1e6 for d = 1000) and of the PLD levels.
CASES = [
    (d, lam, t)
    for d in (1.0, 2.0, 5.0, 300.0, 1e4)
    for lam in (1e-4, 0.7, 36.0, 900.0)
    for t in (1e-3, 1.0, 50.0, 3e3, 1.5e6)
]


def _mp_ell(d, lam, t):
    """ℓ(t) = −λ/2 + log ₀F₁(; a; x), with ₀F₁(; a; x) = Γ(a) x^((1−a)/2) I_{a−1}(2√x)."""
    a, x = mp.mpf(d) / 2, mp.mpf(lam) * mp.mpf(t) / 4
    log_f = (
        mp.loggamma(a)
        + (1 - a) / 2 * mp.log(x)
        + mp.log(mp.besseli(a - 1, 2 * mp.sqrt(x), maxterms=10**6))
    )
    return -mp.mpf(lam) / 2 + log_f


def _mp_ell_u(d, lam, t):
    """∂ℓ/∂log t = √x I_a(2√x) / I_{a−1}(2√x)."""
    a, x = mp.mpf(d) / 2, mp.mpf(lam) * mp.mpf(t) / 4
    z = 2 * mp.sqrt(x)
    return mp.sqrt(x) * mp.besseli(a, z, maxterms=10**6) / mp.besseli(a - 1, z, maxterms=10**6)


def test_llr_against_mpmath():
    d, lam, t = (np.asarray(c) for c in zip(*CASES, strict=True))
    ell, ell_u, noise = (np.asarray(v) for v in llr.llr(jnp.asarray(t), lam, d))
    ref = np.asarray([float(_mp_ell(*c)) for c in CASES])
    ref_u = np.asarray([float(_mp_ell_u(*c)) for c in CASES])
    err = np.abs(ell - ref)
    # The returned rounding level is honest, and small.
    assert np.all(err <= 8 * noise + 1e-15 * np.abs(ref)), CASES[int(np.argmax(err - 8 * noise))]
    assert np.max(err / (1.0 + np.abs(ref))) <= 1e-11
    np.testing.assert_allclose(ell_u, ref_u, rtol=1e-12)


@pytest.mark.parametrize("d", [1.0, 5.0, 300.0])
def test_llr_of_one_dimension_at_small_x_sums_from_the_first_term(d):
    """One d at every point and every x = λt/4 below about 5700 (the GLRT levels of a
    round): every sum starts at k = 0, and the log-gamma functions of a later start are
    skipped. The values against mpmath, and equal to those of the same points in a batch
    whose last point starts its sum further up."""
    cases = [(d, lam, t) for lam in (1e-4, 0.7, 36.0) for t in (1e-3, 1.0, 50.0, 300.0)]
    _, lam, t = (np.asarray(c) for c in zip(*cases, strict=True))
    assert np.max(lam * t / 4) < 5700
    ell, ell_u, noise = (np.asarray(v) for v in llr.llr(jnp.asarray(t), jnp.asarray(lam), d))
    ref = np.asarray([float(_mp_ell(*c)) for c in cases])
    ref_u = np.asarray([float(_mp_ell_u(*c)) for c in cases])
    assert np.all(np.abs(ell - ref) <= 8 * noise + 1e-15 * np.abs(ref))
    np.testing.assert_allclose(ell_u, ref_u, rtol=1e-12)
    mixed = llr.llr(jnp.append(t, 1.5e6), jnp.append(lam, 900.0), d)
    for single, together in zip((ell, ell_u, noise), mixed, strict=True):
        np.testing.assert_array_equal(single, np.asarray(together)[:-1])


def test_llr_limits():
    ell, _, _ = llr.llr(jnp.asarray([0.0, jnp.inf]), 0.7, 5.0)
    np.testing.assert_array_equal(np.asarray(ell), [-0.35, np.inf])


@pytest.mark.parametrize("d", [1.0, 5.0, 1000.0])
def test_threshold_root_and_implicit_derivatives(d):
    levels = jnp.array([-0.3, 0.0, 0.5, 2.0, 8.0, 40.0])
    lam = 0.7

    def with_jacobian(fn):
        return jax.jit(lambda *a: (fn(*a), jax.jacfwd(fn, argnums=(0, 1))(*a)))

    thr = with_jacobian(lambda bb, lm: llr.threshold(bb, lm, d))
    t, (dt_db, dt_dlam) = thr(levels, lam)
    t = np.asarray(t)
    # ℓ(t) = level, checked with mpmath; and with scipy's densities where they are finite.
    loss = np.asarray([float(_mp_ell(d, lam, ti)) for ti in t])
    np.testing.assert_allclose(loss, np.asarray(levels), atol=1e-9)
    ok = stats.chi2.pdf(t, d) > 1e-250
    sp = np.log(stats.ncx2.pdf(t[ok], d, lam) / stats.chi2.pdf(t[ok], d))
    np.testing.assert_allclose(sp, np.asarray(levels)[ok], atol=1e-9)
    e = 1e-6
    fd_b = (np.asarray(thr(levels + e, lam)[0]) - np.asarray(thr(levels - e, lam)[0])) / (2 * e)
    fd_lam = (np.asarray(thr(levels, lam + e)[0]) - np.asarray(thr(levels, lam - e)[0])) / (2 * e)
    np.testing.assert_allclose(np.diag(np.asarray(dt_db)), fd_b, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(dt_dlam), fd_lam, rtol=1e-5)


def test_threshold_near_the_bottom_and_far_out():
    # target → −λ/2 (c → 0, where ℓ is nearly linear in t) and very large targets.
    lam, d = 8.887, 5.0
    targets = np.asarray([-0.5 * lam + 1e-4, -0.5 * lam + 0.5, 200.0, 5000.0])
    c = np.asarray(llr.threshold(jnp.asarray(targets), lam, d))
    for tg, ci in zip(targets, c, strict=True):
        ref = mp.findroot(lambda x, tg=tg: _mp_ell(d, lam, x) - mp.mpf(float(tg)), float(ci))
        assert abs(ci - float(ref)) <= 1e-9 * float(ref), (tg, ci, ref)
