"""Tests of glrt_jax.audit: Monte Carlo membership-inference games.

Theory curves come from SciPy (a peer library, accurate at these moderate values),
never from glrt_jax; the paper's settings and exact values (docs/design.md §3) come from
the package's data file (glrt_jax.reproduce, checked against the mpmath references
in tests/test_reproduce.py). All keys are fixed, so every test is deterministic; game
counts are chosen so that a wrong theory is rejected by a wide margin.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize, stats

from glrt_jax import audit, reproduce


def _setting(name):
    s = reproduce.EXPERIMENTS[name]
    return (s["sensitivity"], s["sigma"] ** 2, s["steps"], s["d"])


# The paper's two experiments: (Δ, σ², N, d).
PAPER_SCALAR = _setting("scalar")
PAPER_HIGH_DIM = _setting("high_dim")
GAMES = 200_000
CONFIDENCE = 0.999
N_THRESHOLDS = 40
KEY = jax.random.key(0)
BASE = dict(sigma=1.0, sensitivity=1.0, games=10)


# ---------------------------------------------------------------------------
# Theory (SciPy)
# ---------------------------------------------------------------------------


def npo_roc(alpha, mu):
    """NPO ROC: Q(Q^-1(α) − μ)."""
    return stats.norm.sf(stats.norm.isf(alpha) - mu)


def glrt_roc(alpha, d, lam):
    """GLRT ROC: Ψ_λ(Ψ_0^-1(α)), Ψ the sf of ncx2(d, λ)."""
    return stats.ncx2.sf(stats.chi2.isf(alpha, d), d, lam)


def npo_delta(eps, mu):
    return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


def npo_epsilon(delta, mu):
    return optimize.brentq(lambda e: npo_delta(e, mu) - delta, 0.0, 100.0, xtol=1e-12)


def glrt_epsilon_grid(delta, d, lam):
    """GLRT ε(δ) from the hockey-stick divergence sup_c over a dense threshold grid.

    δ(ε) = max(sup_c [Ψ_λ(c) − e^ε Ψ_0(c)], sup_c [Φ_0(c) − e^ε Φ_λ(c)]). A grid
    under-estimates the sup, hence ε: a test ε_lb ≤ this value is only stricter.
    """
    c = np.concatenate([np.geomspace(1e-12, 1.0, 2000), np.linspace(1.0, 400.0, 40000)])
    log_sf1, log_sf0 = stats.ncx2.logsf(c, d, lam), stats.chi2.logsf(c, d)
    log_cdf1, log_cdf0 = stats.ncx2.logcdf(c, d, lam), stats.chi2.logcdf(c, d)

    def delta_of(eps):
        a = np.exp(log_sf1) - np.exp(eps + log_sf0)
        b = np.exp(log_cdf0) - np.exp(eps + log_cdf1)
        return max(a.max(), b.max(), 0.0)

    return optimize.brentq(lambda e: delta_of(e) - delta, 0.0, 50.0, xtol=1e-10)


# ---------------------------------------------------------------------------
# Band checks
# ---------------------------------------------------------------------------


def curve_through_boxes(roc, curve):
    """True if an increasing ROC curve passes through every confidence box.

    The box at threshold t is [fpr_lower, fpr_upper] × [tpr_lower, tpr_upper]; an
    increasing curve R meets it iff R(fpr_lower) ≤ tpr_upper and
    R(fpr_upper) ≥ tpr_lower.
    """
    lo = curve(np.asarray(roc.fpr_lower))
    hi = curve(np.asarray(roc.fpr_upper))
    return bool(np.all(lo <= np.asarray(roc.tpr_upper)) and np.all(hi >= np.asarray(roc.tpr_lower)))


def rates_in_bands(roc, fpr_true, tpr_true):
    """True if the exact rates at each threshold lie inside their intervals."""
    f, t = np.asarray(fpr_true), np.asarray(tpr_true)
    return bool(
        np.all((roc.fpr_lower <= f) & (f <= roc.fpr_upper))
        and np.all((roc.tpr_lower <= t) & (t <= roc.tpr_upper))
    )


def quantile_thresholds(s0, s1, num=N_THRESHOLDS):
    pooled = np.concatenate([np.asarray(s0), np.asarray(s1)])
    return jnp.asarray(np.quantile(pooled, np.linspace(0.02, 0.98, num)))


@pytest.fixture(scope="module")
def paper_games():
    """Sufficient-statistic games for both paper settings (exact sampler)."""
    out = {}
    for i, (delta_, var, n, d) in enumerate((PAPER_SCALAR, PAPER_HIGH_DIM)):
        res = audit.run_game(
            jax.random.key(100 + i),
            sigma=math.sqrt(var),
            sensitivity=delta_,
            d=d,
            steps=n,
            games=GAMES,
        )
        out[d] = (res, n * delta_**2 / var)
    return out


# ---------------------------------------------------------------------------
# Empirical ROC versus theory, in the paper's settings
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 50])
def test_npo_roc_within_band(paper_games, d):
    res, lam = paper_games[d]
    mu = math.sqrt(lam)
    np.testing.assert_allclose(float(res.noncentrality), lam, rtol=1e-14)
    s0, s1 = res.split("npo")
    roc = audit.empirical_roc(
        s0, s1, quantile_thresholds(s0, s1), confidence=CONFIDENCE, simultaneous=True
    )
    assert curve_through_boxes(roc, lambda a: npo_roc(a, mu))
    t = np.asarray(roc.thresholds)
    assert rates_in_bands(roc, stats.norm.sf(t), stats.norm.sf(t - mu))
    # The check can fail: a 10 % error in μ is rejected.
    assert not curve_through_boxes(roc, lambda a: npo_roc(a, 0.9 * mu))
    assert not curve_through_boxes(roc, lambda a: npo_roc(a, 1.1 * mu))


@pytest.mark.parametrize("d", [1, 50])
def test_glrt_roc_within_band(paper_games, d):
    res, lam = paper_games[d]
    s0, s1 = res.split("glrt")
    roc = audit.empirical_roc(
        s0, s1, quantile_thresholds(s0, s1), confidence=CONFIDENCE, simultaneous=True
    )
    assert curve_through_boxes(roc, lambda a: glrt_roc(a, d, lam))
    t = np.asarray(roc.thresholds)
    assert rates_in_bands(roc, stats.chi2.sf(t, d), stats.ncx2.sf(t, d, lam))
    # The swapped test (the paper's R') matches R'(x) = Φ_0(Φ_λ^-1(x)).
    swapped = roc.swap()
    r_prime = lambda a: stats.chi2.cdf(stats.ncx2.ppf(a, d, lam), d)  # noqa: E731
    assert curve_through_boxes(swapped, r_prime)
    # Mis-specified theories are rejected: wrong dimension, wrong λ, and NPO.
    wrong_d = 2 if d == 1 else 25
    assert not curve_through_boxes(roc, lambda a: glrt_roc(a, wrong_d, lam))
    assert not curve_through_boxes(roc, lambda a: glrt_roc(a, d, 0.75 * lam))
    assert not curve_through_boxes(roc, lambda a: glrt_roc(a, d, 1.3 * lam))
    assert not curve_through_boxes(roc, lambda a: npo_roc(a, math.sqrt(lam)))


def test_orthogonal_part_is_chi2(paper_games):
    """T − S² is the χ²_{d−1} of the part of V orthogonal to u (Gamma path for d = 50)."""
    for d in (1, 50):
        res, _ = paper_games[d]
        rest = np.asarray(res.glrt - res.npo**2)
        if d == 1:
            np.testing.assert_allclose(rest, 0.0, atol=1e-12)
        else:
            assert stats.kstest(rest[:20_000], stats.chi2(d - 1).cdf).pvalue > 1e-3


def test_glrt_is_weaker_than_npo(paper_games):
    """In the high-dimensional setting the GLRT adversary is much weaker."""
    res, _ = paper_games[50]
    t_npo = jnp.asarray([0.0])
    roc_npo = audit.empirical_roc(*res.split("npo"), t_npo)
    s0, s1 = res.split("glrt")
    t_glrt = jnp.asarray([float(np.median(np.asarray(s0)))])
    roc_glrt = audit.empirical_roc(s0, s1, t_glrt)
    # At FPR = 1/2: NPO TPR = Q(-μ) ≈ 0.98, GLRT TPR ≈ 0.66.
    assert float(roc_npo.tpr_lower[0]) > 0.97
    assert float(roc_glrt.tpr_upper[0]) < 0.7


# ---------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------

HETERO_SIGMA = np.array([1.0, 2.0, 0.5, 3.0, 1.5, 2.5, 0.8, 1.2, 4.0, 2.0])
HETERO_DELTA = 3 * np.array([0.1, 0.5, 0.05, 1.0, 0.0, 0.3, 0.2, 0.25, 0.6, 0.15])


def test_direct_and_sufficient_agree_in_distribution():
    """Two-sample KS tests between the two samplers, for both statistics and classes."""
    kw = dict(sigma=HETERO_SIGMA, sensitivity=HETERO_DELTA, d=3, games=20_000)
    direct = audit.run_game(jax.random.key(1), method="direct", **kw)
    suff = audit.run_game(jax.random.key(2), method="sufficient", **kw)
    np.testing.assert_allclose(float(direct.noncentrality), float(suff.noncentrality))
    for adversary in ("npo", "glrt"):
        for a, b in zip(direct.split(adversary), suff.split(adversary), strict=True):
            assert stats.ks_2samp(np.asarray(a), np.asarray(b)).pvalue > 1e-3
    # The joint law too: T − S² is χ²_{d−1}, independent of the coin.
    for res in (direct, suff):
        rest = np.asarray(res.glrt - res.npo**2)
        assert stats.kstest(rest, stats.chi2(2).cdf).pvalue > 1e-3
        # The coin is fair.
        assert stats.binomtest(int(res.member.sum()), res.member.size).pvalue > 1e-3


def test_theorem2_heterogeneous_noncentrality():
    """Direct simulation: λ = Σ Δ_i²/σ_i² for heterogeneous rounds (Theorem 2)."""
    d = 4
    lam = float(np.sum(HETERO_DELTA**2 / HETERO_SIGMA**2))
    res = audit.run_game(
        jax.random.key(3),
        sigma=HETERO_SIGMA,
        sensitivity=HETERO_DELTA,
        d=d,
        games=20_000,
        method="direct",
        direction=jnp.array([0.3, -1.0, 2.0, 0.5]),
    )
    np.testing.assert_allclose(float(res.noncentrality), lam, rtol=1e-14)
    g0, g1 = (np.asarray(s) for s in res.split("glrt"))
    n0, n1 = (np.asarray(s) for s in res.split("npo"))
    assert stats.kstest(g0, stats.chi2(d).cdf).pvalue > 1e-3
    assert stats.kstest(g1, stats.ncx2(d, lam).cdf).pvalue > 1e-3
    assert stats.kstest(n0, stats.norm.cdf).pvalue > 1e-3
    assert stats.kstest(n1, stats.norm(math.sqrt(lam)).cdf).pvalue > 1e-3
    # A naive homogeneous λ (N mean(Δ)² / mean(σ²)) is rejected.
    naive = len(HETERO_SIGMA) * HETERO_DELTA.mean() ** 2 / np.mean(HETERO_SIGMA**2)
    assert abs(naive / lam - 1) > 0.3
    assert stats.kstest(g1, stats.ncx2(d, naive).cdf).pvalue < 1e-6


# Small direct-sampler configuration shared by several tests (one compilation).
SMALL_DIRECT = dict(d=3, steps=4, games=101, method="direct")


def test_homogeneous_arrays_equal_scalars():
    a = audit.run_game(jax.random.key(4), sigma=2.0, sensitivity=0.5, **SMALL_DIRECT)
    b = audit.run_game(
        jax.random.key(4), sigma=np.full(4, 2.0), sensitivity=np.full(4, 0.5), **SMALL_DIRECT
    )
    np.testing.assert_array_equal(a.member, b.member)
    np.testing.assert_allclose(a.glrt, b.glrt, rtol=1e-14)
    np.testing.assert_allclose(float(a.noncentrality), 4 * 0.25 / 4)


def test_chunking_does_not_change_results():
    """Game j always uses fold_in(key, j): results do not depend on chunk_size."""
    ref = audit.run_game(jax.random.key(5), sigma=1.0, sensitivity=0.7, **SMALL_DIRECT)
    chunked = audit.run_game(
        jax.random.key(5), sigma=1.0, sensitivity=0.7, chunk_size=7, **SMALL_DIRECT
    )
    np.testing.assert_array_equal(ref.member, chunked.member)
    # Batched matrix products may round differently.
    np.testing.assert_allclose(ref.npo, chunked.npo, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ref.glrt, chunked.glrt, rtol=1e-12)

    kw = dict(sigma=HETERO_SIGMA, sensitivity=HETERO_DELTA, d=3, games=20_000)
    ref = audit.run_game(jax.random.key(2), **kw)
    chunked = audit.run_game(jax.random.key(2), chunk_size=4096, **kw)
    np.testing.assert_array_equal(ref.member, chunked.member)
    np.testing.assert_array_equal(ref.npo, chunked.npo)
    np.testing.assert_array_equal(ref.glrt, chunked.glrt)


def test_balanced_and_zero_signal():
    res = audit.run_game(
        jax.random.key(6), sigma=1.0, sensitivity=0.0, d=2, games=4000, balanced=True
    )
    s0, s1 = res.split("glrt")
    assert s0.shape == s1.shape == (2000,)
    assert float(res.noncentrality) == 0.0
    assert np.all(np.isfinite(np.asarray(res.glrt)))
    roc = audit.empirical_roc(s0, s1, quantile_thresholds(s0, s1), simultaneous=True)
    assert float(audit.empirical_epsilon_lower_bound(roc, 1e-3)) == 0.0


def test_jit_and_vmap_and_traced_bad_input():
    """Works under jit/vmap; there the value checks are skipped and bad input gives NaN."""

    def game_npo(key, sigma):
        return audit.run_game(key, sigma=sigma, sensitivity=1.0, games=10).npo

    batched = jax.jit(jax.vmap(game_npo, in_axes=(0, None)))
    keys = jax.random.split(jax.random.key(7), 3)
    single = np.stack([audit.run_game(k, **BASE).npo for k in keys])
    np.testing.assert_allclose(batched(keys, 1.0), single, rtol=1e-12)
    assert np.all(np.isnan(np.asarray(batched(keys, -1.0))))

    roc_jit = jax.jit(audit.empirical_roc)
    args = (jnp.arange(5.0), jnp.arange(5.0) + 2, jnp.array([1.5, 3.5]))
    roc = roc_jit(*args, confidence=0.95)
    np.testing.assert_allclose(roc.fpr, [0.6, 0.2])
    np.testing.assert_allclose(roc.tpr, [1.0, 0.6])
    assert np.all(np.isnan(np.asarray(roc_jit(*args, confidence=1.5).fpr_upper)))
    eps_jit = jax.jit(audit.empirical_epsilon_lower_bound)
    assert float(eps_jit(roc, 0.1)) >= 0.0
    assert np.isnan(float(eps_jit(roc, 1.5)))


def test_float32_without_x64():
    with jax.enable_x64(False):
        res = audit.run_game(jax.random.key(8), sigma=1.0, sensitivity=1.0, d=2, games=1000)
        assert res.npo.dtype == jnp.float32
        roc = audit.empirical_roc(*res.split("npo"), jnp.linspace(-1.0, 2.0, 4))
        assert roc.fpr_upper.dtype == jnp.float32
        assert np.all(np.asarray(roc.fpr_lower) <= np.asarray(roc.fpr_upper))


# ---------------------------------------------------------------------------
# Clopper–Pearson and ε lower bound
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("confidence", [0.9, 0.999, 1 - 1e-7])
def test_clopper_pearson_matches_scipy(confidence):
    k = np.array([0, 1, 2, 5, 50, 500, 4999, 5000, 0, 1, 123_456, 999_999, 1_000_000])
    n = np.array([5000] * 8 + [10**6] * 5)
    lo, hi = audit.clopper_pearson(k, n, confidence)
    a = 1 - confidence
    ref_lo = np.where(k == 0, 0.0, stats.beta.ppf(a / 2, np.maximum(k, 1), n - k + 1))
    ref_hi = np.where(k == n, 1.0, stats.beta.isf(a / 2, k + 1, np.maximum(n - k, 1)))
    np.testing.assert_allclose(lo, ref_lo, rtol=1e-8)
    np.testing.assert_allclose(hi, ref_hi, rtol=1e-8)
    assert np.all(np.asarray(lo) <= k / n) and np.all(k / n <= np.asarray(hi))
    # Closed forms at the edges.
    np.testing.assert_allclose(hi[0], 1 - (a / 2) ** (1 / 5000), rtol=1e-10)
    np.testing.assert_allclose(lo[7], (a / 2) ** (1 / 5000), rtol=1e-10)


def test_epsilon_lower_bound_below_true_npo(paper_games):
    res, lam = paper_games[1]
    mu = math.sqrt(lam)
    eps_true = npo_epsilon(1e-2, mu)
    exact = float(reproduce.number("scalar_npo").exact)  # docs/design.md reference
    np.testing.assert_allclose(eps_true, exact, atol=1e-4)
    s0, s1 = res.split("npo")
    roc = audit.empirical_roc(
        s0, s1, quantile_thresholds(s0, s1), confidence=0.95, simultaneous=True
    )
    eps_lb = float(audit.empirical_epsilon_lower_bound(roc, 1e-2))
    assert 0.5 < eps_lb < eps_true


def test_epsilon_lower_bound_below_true_glrt(paper_games):
    res, lam = paper_games[1]
    eps_true = glrt_epsilon_grid(1e-2, 1, lam)
    exact = float(reproduce.number("scalar_glrt").exact)  # docs/design.md reference
    np.testing.assert_allclose(eps_true, exact, atol=2e-3)
    s0, s1 = res.split("glrt")
    roc = audit.empirical_roc(
        s0, s1, quantile_thresholds(s0, s1), confidence=0.95, simultaneous=True
    )
    eps_lb = float(audit.empirical_epsilon_lower_bound(roc, 1e-2))
    assert 0.3 < eps_lb < eps_true


def test_epsilon_lower_bound_strong_signal():
    mu = 3.0
    res = audit.run_game(jax.random.key(9), sigma=1.0, sensitivity=mu, games=GAMES)
    s0, s1 = res.split("npo")
    roc = audit.empirical_roc(
        s0, s1, jnp.linspace(0.0, 6.0, 25), confidence=0.95, simultaneous=True
    )
    for delta in (1e-5, 1e-2):
        eps_lb = float(audit.empirical_epsilon_lower_bound(roc, delta))
        assert 2.0 < eps_lb < npo_epsilon(delta, mu)


def test_swap_and_directions():
    roc = audit.empirical_roc(
        jnp.array([0.0, 1.0, 2.0]), jnp.array([2.5, 3.0, 4.0]), jnp.array([0.5, 2.2])
    )
    np.testing.assert_allclose(roc.fpr, [2 / 3, 0.0])
    np.testing.assert_allclose(roc.tpr, [1.0, 1.0])
    sw = roc.swap()
    np.testing.assert_allclose(sw.fpr, 1 - roc.tpr)
    np.testing.assert_allclose(sw.tpr_lower, 1 - roc.fpr_upper)
    np.testing.assert_allclose(sw.swap().fpr_upper, roc.fpr_upper)
    assert int(sw.n0) == 3 and int(sw.n1) == 3


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "name"),
    [
        (dict(sigma=0.0), "sigma"),
        (dict(sigma=-1.0), "sigma"),
        (dict(sigma=float("nan")), "sigma"),
        (dict(sigma=np.array([1.0, np.inf])), "sigma"),
        (dict(sensitivity=-0.1), "sensitivity"),
        (dict(sensitivity=float("nan")), "sensitivity"),
        (dict(d=0), "^d must"),
        (dict(d=2.0), "^d must"),
        (dict(d=True), "^d must"),
        (dict(steps=0), "^steps must"),
        (dict(steps=3, sigma=np.ones(2)), "^steps must"),
        (dict(sigma=np.ones(2), sensitivity=np.ones(3)), "sigma and sensitivity"),
        (dict(sigma=np.ones((2, 2))), "sigma"),
        (dict(games=0), "games"),
        (dict(games=10.0), "games"),
        (dict(chunk_size=0), "chunk_size"),
        (dict(method="exact"), "method"),
        (dict(direction=np.zeros(1)), "direction"),
        (dict(direction=np.ones(2)), "direction"),
    ],
)
def test_run_game_rejects_bad_input(override, name):
    with pytest.raises(ValueError, match=name):
        audit.run_game(KEY, **{**BASE, **override})


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5, float("nan")])
def test_confidence_out_of_range(confidence):
    with pytest.raises(ValueError, match="confidence"):
        audit.empirical_roc(jnp.ones(3), jnp.ones(3), jnp.ones(2), confidence=confidence)
    with pytest.raises(ValueError, match="confidence"):
        audit.clopper_pearson(1, 3, confidence)


def test_roc_and_epsilon_reject_bad_input():
    with pytest.raises(ValueError, match="stats0"):
        audit.empirical_roc(jnp.array([1.0, jnp.nan]), jnp.ones(3), jnp.ones(2))
    with pytest.raises(ValueError, match="stats1"):
        audit.empirical_roc(jnp.ones(3), jnp.ones(0), jnp.ones(2))
    with pytest.raises(ValueError, match="thresholds"):
        audit.empirical_roc(jnp.ones(3), jnp.ones(3), jnp.array([jnp.nan]))
    with pytest.raises(ValueError, match="successes"):
        audit.clopper_pearson(4, 3)
    with pytest.raises(ValueError, match="trials"):
        audit.clopper_pearson(0, 0)
    roc = audit.empirical_roc(jnp.ones(3), jnp.ones(3), jnp.ones(2))
    for delta in (-0.1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="delta"):
            audit.empirical_epsilon_lower_bound(roc, delta)
    with pytest.raises(ValueError, match="adversary"):
        audit.run_game(KEY, **BASE).split("oracle")


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(sensitivity=1.0, sigma=-1.0, steps=2), "sigma"),
        (dict(sensitivity=1.0, sigma=1.0, steps=2, games=1), "games"),
    ],
)
def test_run_experiment_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        audit.run_experiment(KEY, **kwargs)
