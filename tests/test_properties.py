"""Property tests (hypothesis) of the ROC curves and privacy profiles.

Properties (issue "GLRT and NPO privacy curves"): ROC curves lie in [α, 1] and increase;
R_s ≥ max(R, R') and is concave; δ decreases in ε; ε decreases in σ and increases in N;
GLRT ε ≤ NPO ε; GLRT ε decreases in d; the d = 1 closed form equals the general formula.

Every example evaluates arrays of one fixed length per function (ROC: N_ROC points, which
share the compiled core of tests/test_roc.py; profiles: at most 16 points, the smallest
padded size of glrt_jax.profile), so nothing recompiles from one example to the next.
"""

from __future__ import annotations

import functools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from glrt_jax import profile, roc
from glrt_jax._src import roc as roc_src

N_ROC = 400
N_PROF = 16
SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)

mus = st.floats(0.0, 6.0)
small_mus = st.floats(0.05, 4.0)
dims = st.sampled_from([1, 2, 3, 10, 50, 300])
seeds = st.integers(0, 2**32 - 1)
deltas = st.sampled_from([1e-2, 1e-5, 1e-10, 1e-30, 1e-100])


def _alphas(seed, lo=0.0, hi=1.0):
    a = np.sort(np.random.default_rng(seed).uniform(lo, hi, N_ROC))
    if lo == 0.0 and hi == 1.0:
        a[0], a[-1] = 0.0, 1.0
    return a


# ---------------------------------------------------------------------------
# ROC curves
# ---------------------------------------------------------------------------


@SETTINGS
@given(mu=mus, d=dims, seed=seeds)
def test_roc_within_unit_square_and_increasing(mu, d, seed):
    a = _alphas(seed)
    for f in (
        functools.partial(roc.curve, adversary="glrt"),
        functools.partial(roc.curve, adversary="glrt", variant="swapped"),
        functools.partial(roc.curve, adversary="glrt", variant="symmetrised"),
    ):
        r = np.asarray(f(a, mu, d))
        assert np.all(r >= a) and np.all(r <= 1), f.__name__
        assert np.all(np.diff(r) >= -1e-15 * r[1:]), f.__name__
    r = np.asarray(roc.curve(a, mu))
    assert np.all(r >= a) and np.all(r <= 1) and np.all(np.diff(r) >= 0)


@SETTINGS
@given(mu=mus, d=dims)
def test_symmetrised_above_both_and_concave(mu, d):
    a = np.linspace(0.0, 1.0, N_ROC)
    r, rp, rs = (
        np.asarray(f(a, mu, d))
        for f in (
            functools.partial(roc.curve, adversary="glrt"),
            functools.partial(roc.curve, adversary="glrt", variant="swapped"),
            functools.partial(roc.curve, adversary="glrt", variant="symmetrised"),
        )
    )
    # Relative tolerance: R and R' carry ~1e-14 relative rounding (target 1e-12), which at
    # μ → 0 (all curves ≈ α) exceeds the true gap R_s − max(R, R').
    top = np.maximum(r, rp)
    assert np.all(rs >= top * (1 - 1e-13))
    assert np.all(np.diff(rs, 2) <= 1e-12)  # concave on a uniform grid


@SETTINGS
@given(mu=mus, d=dims, seed=seeds)
def test_glrt_never_beats_npo(mu, d, seed):
    a = _alphas(seed)
    npo = np.asarray(roc.curve(a, mu))
    for f in (
        functools.partial(roc.curve, adversary="glrt"),
        functools.partial(roc.curve, adversary="glrt", variant="swapped"),
        functools.partial(roc.curve, adversary="glrt", variant="symmetrised"),
    ):
        assert np.all(np.asarray(f(a, mu, d)) <= npo * (1 + 1e-13)), f.__name__


@SETTINGS
@given(mu=mus, d=dims, seed=seeds)
def test_swapped_is_reflection_of_glrt(mu, d, seed):
    # R'(α) = 1 − R⁻¹(1 − α)  <=>  1 − R(1 − R'(α)) = α, written with trade-offs.
    a = _alphas(seed, 0.01, 0.99)
    b = roc.tradeoff(a, mu, d, adversary="glrt", variant="swapped")
    back = np.asarray(roc.tradeoff(b, mu, d, adversary="glrt"))
    assert np.max(np.abs(back - a)) <= 1e-9


@SETTINGS
@given(mu=st.floats(1e-3, 30.0), seed=seeds)
def test_d1_closed_form_equals_general_formula(mu, seed):
    a = 10.0 ** np.random.default_rng(seed).uniform(-300, 0, N_ROC)
    closed = roc_src._run_core(a, mu, 1, closed_form=True)["R"]
    general = roc_src._run_core(a, mu, 1, closed_form=False)["R"]
    for c, g in zip(closed, general[:2], strict=False):  # R and 1 − R
        c, g = np.asarray(c), np.asarray(g)
        keep = c > 1e-300
        assert np.all(np.abs(g - c)[keep] <= 1e-12 * c[keep])


# ---------------------------------------------------------------------------
# Privacy profiles
# ---------------------------------------------------------------------------


@SETTINGS
@given(mu=small_mus, d=dims, eps=st.lists(st.floats(0.0, 30.0), min_size=N_PROF, max_size=N_PROF))
def test_delta_decreases_in_epsilon_and_glrt_below_npo(mu, d, eps):
    eps = np.sort(np.asarray(eps))
    g = np.asarray(profile.log_delta(eps, mu, d, adversary="glrt"))
    n = np.asarray(profile.log_delta(eps, mu))
    assert np.all(np.diff(g) <= 1e-13 * np.abs(g[1:]))
    assert np.all(np.diff(n) <= 1e-13 * np.abs(n[1:]))
    assert np.all(g <= n + 1e-12)


@SETTINGS
@given(delta=deltas, sens=st.floats(0.1, 2.0), d=dims, steps=st.integers(1, 50))
def test_epsilon_monotone_in_sigma_steps_and_dim(delta, sens, d, steps):
    # 16 points in one call each: σ sweep (4), N sweep (4), d sweep (8).
    sigmas = np.array([0.5, 1.0, 2.0, 4.0])
    ns = steps * np.array([1, 2, 4, 8])
    ds = np.array([1, 2, 3, 10, 30, 100, 300, 1000])
    mu = np.concatenate(
        [np.sqrt(steps) * sens / sigmas, np.sqrt(ns) * sens, np.full(8, sens * np.sqrt(steps))]
    )
    dim = np.concatenate([np.full(8, d), ds])
    e_g = np.asarray(profile.epsilon(delta, mu, dim, adversary="glrt"))
    e_n = np.asarray(profile.epsilon(delta, mu))
    tol = 1e-12
    assert np.all(e_g <= e_n * (1 + tol) + tol)  # GLRT ε ≤ NPO ε
    s, n, dd = e_g[:4], e_g[4:8], e_g[8:]
    assert np.all(np.diff(s) <= tol * s[:-1])  # decreases in σ
    assert np.all(np.diff(n) >= -tol * n[1:])  # increases in N
    assert np.all(np.diff(dd) <= tol * dd[:-1])  # decreases in d
    assert np.all(np.diff(e_n[:4]) <= tol * e_n[:3]) and np.all(np.diff(e_n[4:8]) >= 0)
