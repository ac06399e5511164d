"""Tests of glrt_jax.pld against dp_accounting, scipy and closed forms.

References are computed here, independently of the code under test: dp_accounting's
PLD accountant (NPO), dp_accounting's connect-the-dots composition of single-round
privacy profiles computed with scipy (GLRT), dp_accounting on a finely binned
statistic, scipy quadrature (GLRT, d > 1) and the closed-form Gaussian profile.

Compilation dominates the run time, so the tests share a few fixed grids and jitted
functions (a grid's shapes fix the compiled program; its values are traced).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, stats

from glrt_jax import pld

try:
    import dp_accounting
    from dp_accounting.pld import pld_pmf, pld_privacy_accountant
    from dp_accounting.pld import privacy_loss_distribution as dp_pld
except ImportError:  # pragma: no cover - optional test dependency
    dp_accounting = None

needs_dp = pytest.mark.skipif(dp_accounting is None, reason="dp_accounting is not installed")

DELTA = 1e-5


# ---------------------------------------------------------------------------
# Independent references
# ---------------------------------------------------------------------------


def _gdp_delta(eps, mu):
    """Closed-form privacy profile of μ-GDP."""
    eps = np.asarray(eps, float)
    return stats.norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


def _gdp_epsilon(delta, mu):
    return optimize.brentq(lambda e: _gdp_delta(e, mu) - delta, 0.0, 50.0, xtol=1e-14)


def _dp_accounting_epsilon(events, delta, interval):
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    for event in events:
        acc.compose(event)
    return acc.get_epsilon(delta)


def _glrt1_profile(eps, mu, q, direction):
    """Single-round δ(ε) of the Poisson-subsampled GLRT (d = 1) pair, with scipy.

    Remove pair (qP + (1−q)Q, Q), add pair (Q, qP + (1−q)Q); P, Q the laws of Y² with
    Y ~ N(μ, 1), N(0, 1). The loss of the base pair is −μ²/2 + log cosh(μ|y|).
    """
    eps = np.asarray(eps, float)
    lam = mu * mu

    def threshold(b):  # T threshold of the base loss level b > −λ/2
        v = np.clip(b + lam / 2, 1e-300, 700.0)
        return (np.arccosh(np.exp(v)) / mu) ** 2

    def sf_p(t):
        r = np.sqrt(t)
        return stats.norm.sf(r - mu) + stats.norm.sf(r + mu)

    def sf_q(t):
        return 2 * stats.norm.sf(np.sqrt(t))

    def base_level(x):  # log(1 − q + q e^b) = x
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log((np.expm1(x) + q) / q)

    if direction == "remove":
        b = base_level(eps)
        inside = (eps > np.log1p(-q)) & (b > -lam / 2)
        t = threshold(np.where(inside, b, 0.0))
        s_upper = np.where(inside, q * sf_p(t) + (1 - q) * sf_q(t), 1.0)
        s_lower = np.where(inside, sf_q(t), 1.0)
        return np.clip(s_upper - np.exp(eps) * s_lower, 0.0, 1.0)
    b = base_level(-eps)
    inside = (-eps > np.log1p(-q)) & (b > -lam / 2)
    t = threshold(np.where(inside, b, 0.0))
    c_upper = np.where(inside, 1 - sf_q(t), 0.0)
    c_lower = np.where(inside, 1 - (q * sf_p(t) + (1 - q) * sf_q(t)), 0.0)
    return np.clip(c_upper - np.exp(eps) * c_lower, 0.0, 1.0)


def _glrt1_reference_ctd(sigma, q, steps, delta, h=1e-4):
    """ε from dp_accounting's connect-the-dots composition of the scipy profiles."""
    mu = 1.0 / sigma
    out = []
    for direction, lo, hi in [
        ("remove", math.log1p(-q) - h, 3.0),
        ("add", -3.0, -math.log1p(-q) + h),
    ]:
        k = np.arange(math.floor(lo / h), math.ceil(hi / h) + 1)
        pmf = pld_pmf.create_pmf_pessimistic_connect_dots(
            h, k, _glrt1_profile(k * h, mu, q, direction)
        )
        out.append(pmf.self_compose(steps).get_epsilon_for_delta(delta))
    return max(out)


def _glrt1_reference_binned(sigma, q, steps, delta, pessimistic, n=20000, h=1e-4):
    """ε from dp_accounting on the magnitude statistic binned into n cells of |y|."""
    mu = 1.0 / sigma
    edges = np.linspace(0.0, mu + 10.0, n + 1)
    s_p = stats.norm.sf(edges - mu) + stats.norm.sf(edges + mu)
    s_q = 2 * stats.norm.sf(edges)
    p = np.append(-np.diff(s_p), s_p[-1])
    q0 = np.append(-np.diff(s_q), s_q[-1])
    mix = q * p + (1 - q) * q0
    out = []
    for upper, lower in [(mix, q0), (q0, mix)]:
        log_u = {i: math.log(v) for i, v in enumerate(upper) if v > 0}
        log_l = {i: math.log(v) for i, v in enumerate(lower) if v > 0}
        dist = dp_pld.from_two_probability_mass_functions(
            log_l, log_u, pessimistic_estimate=pessimistic, value_discretization_interval=h
        )
        out.append(dist.self_compose(steps).get_epsilon_for_delta(delta))
    return max(out)


# ---------------------------------------------------------------------------
# Shared grids and jitted functions
# ---------------------------------------------------------------------------


def _eps_bounds_raw(sigma, q, grid):
    block = pld.GaussianBlock(
        sigma=sigma,
        sampling_rate=q,
        steps=grid.steps[0],
        adversary=grid.adversary,
        dim=grid.dims[0],
    )
    return jnp.stack(pld.epsilon_for_delta(block, DELTA, grid=grid))


eps_bounds = jax.jit(_eps_bounds_raw)
eps_jacobian = jax.jit(jax.jacrev(_eps_bounds_raw, argnums=(0, 1)))  # reverse mode, as grad


@pytest.fixture(scope="module")
def grids():
    """Grids for 100 rounds around σ = 6, q = 0.2 (both adversaries, d = 1)."""
    out = {}
    for adversary in ("npo", "glrt"):
        block = pld.GaussianBlock(
            sigma=np.array([5.0, 8.0]),
            sampling_rate=np.array([0.1, 0.3]),
            steps=100,
            adversary=adversary,
        )
        out[adversary] = pld.make_grid(block)
    return out


@pytest.fixture(scope="module")
def dpsgd():
    block = pld.GaussianBlock(sigma=1.0, sampling_rate=0.01, steps=1000)
    return pld.compose(block)


@pytest.fixture(scope="module")
def dpsgd_reference():
    """dp_accounting's PLD accountant for the DP-SGD case at a fine discretisation."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=5e-5)
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0)), 1000
        )
    )
    return acc


# ---------------------------------------------------------------------------
# Accuracy against references
# ---------------------------------------------------------------------------


@needs_dp
def test_dpsgd_epsilon_matches_dp_accounting(dpsgd, dpsgd_reference):
    ref = dpsgd_reference.get_epsilon(DELTA)
    assert abs(ref - 1.82824) < 1e-4
    lower, estimate, upper = (float(v) for v in dpsgd.epsilon(DELTA))
    assert abs(estimate - ref) < 2e-3
    assert lower <= ref <= upper
    assert upper - lower <= 1e-2


@needs_dp
def test_dpsgd_delta_profile(dpsgd, dpsgd_reference):
    eps = jnp.linspace(0.25, 4.0, 16)
    lower, estimate, upper = (np.asarray(v) for v in dpsgd.delta(eps))
    assert np.all(lower <= estimate) and np.all(estimate <= upper)
    assert np.all(np.diff(upper) < 0) and np.all(np.diff(lower) <= 0)
    # dp_accounting's δ at a fine discretisation lies inside.
    for i in (0, 5, 10):
        ref = dpsgd_reference.get_delta(float(eps[i]))
        assert lower[i] <= ref <= upper[i] * (1 + 1e-6)
    # The two queries are inverse to each other.
    e = dpsgd.epsilon(DELTA)
    assert float(dpsgd.delta(e.upper).upper) <= DELTA * (1 + 1e-9)
    assert float(dpsgd.delta(e.estimate).estimate) == pytest.approx(DELTA, rel=1e-8)


def test_single_round_matches_closed_form():
    # q = 1, N = 1: the NPO profile δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).
    sigmas = np.array([1 / 3.0, 1 / 1.3, 2.0])
    grid = pld.make_grid(pld.GaussianBlock(sigma=sigmas))
    eps = jnp.array([0.0, 0.1, 0.5, 1.0, 2.0, 4.0])
    for sigma in sigmas:
        dist = pld.compose(pld.GaussianBlock(sigma=float(sigma)), grid=grid)
        ref = _gdp_delta(np.asarray(eps), 1 / sigma)
        lower, estimate, upper = (np.asarray(v) for v in dist.delta(eps))
        np.testing.assert_allclose(estimate, ref, atol=1e-6, rtol=0)
        assert np.all(lower <= ref) and np.all(ref <= upper)
        for delta in (1e-3, 1e-6):
            e = dist.epsilon(delta)
            ref_eps = _gdp_epsilon(delta, 1 / sigma)
            assert float(e.lower) <= ref_eps <= float(e.upper)
            assert abs(float(e.estimate) - ref_eps) < 1e-4


@needs_dp
def test_replace_one():
    # q = 1: the replace pair (N(μ), N(−μ)) is μ-GDP with 2μ; 50 rounds compose to 2μ√50.
    # q < 1: compare with dp_accounting on the pair binned finely on the real line
    # (its optimistic/pessimistic roundings bracket the binned pair's ε).
    grid = pld.make_grid(
        pld.GaussianBlock(sigma=4.0, sampling_rate=np.array([0.1, 1.0]), steps=50),
        neighbouring="replace_one",
    )
    assert grid.directions == ("replace",)
    block = pld.GaussianBlock(sigma=4.0, steps=50)
    e = pld.epsilon_for_delta(block, DELTA, neighbouring="replace_one", grid=grid)
    ref = _gdp_epsilon(DELTA, 2 * 0.25 * math.sqrt(50))
    assert float(e.lower) <= ref <= float(e.upper)
    assert abs(float(e.estimate) - ref) < 1e-3

    q, mu = 0.1, 0.25
    e = pld.epsilon_for_delta(
        pld.GaussianBlock(sigma=4.0, sampling_rate=q, steps=50),
        DELTA,
        neighbouring="replace_one",
        grid=grid,
    )
    edges = np.linspace(-10.0, 10.0, 16001)
    cdf = lambda m: stats.norm.cdf(edges - m)  # noqa: E731
    upper = q * np.diff(cdf(mu)) + (1 - q) * np.diff(cdf(0.0))
    lower = q * np.diff(cdf(-mu)) + (1 - q) * np.diff(cdf(0.0))
    refs = []
    for pessimistic in (True, False):
        dist = dp_pld.from_two_probability_mass_functions(
            {i: math.log(v) for i, v in enumerate(lower) if v > 0},
            {i: math.log(v) for i, v in enumerate(upper) if v > 0},
            pessimistic_estimate=pessimistic,
            value_discretization_interval=1e-4,
        )
        refs.append(dist.self_compose(50).get_epsilon_for_delta(DELTA))
    ref_pess, ref_opt = refs
    assert ref_opt <= float(e.upper) and float(e.lower) <= ref_pess
    assert abs(float(e.estimate) - 0.5 * (ref_pess + ref_opt)) < 2e-3


@needs_dp
def test_glrt_per_round_reference(grids):
    lower, estimate, upper = (float(v) for v in eps_bounds(6.0, 0.2, grids["glrt"]))
    ref = _glrt1_reference_ctd(6.0, 0.2, 100, DELTA)
    assert abs(ref - 0.143) < 1e-3
    assert lower <= ref <= upper
    assert abs(estimate - ref) < 2e-3
    # The lead's cross-check: dp_accounting on the binned statistic. Binning is
    # post-processing, so its optimistic value is a lower bound on the truth.
    ref_opt = _glrt1_reference_binned(6.0, 0.2, 100, DELTA, pessimistic=False)
    ref_pess = _glrt1_reference_binned(6.0, 0.2, 100, DELTA, pessimistic=True)
    assert ref_opt <= upper and lower <= ref_pess
    assert abs(estimate - 0.5 * (ref_opt + ref_pess)) < 2e-3


@needs_dp
def test_npo_same_setting_as_glrt(grids):
    lower, estimate, upper = (float(v) for v in eps_bounds(6.0, 0.2, grids["npo"]))
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.2, dp_accounting.GaussianDpEvent(6.0)), 100
    )
    ref = _dp_accounting_epsilon([event], DELTA, interval=1e-4)
    assert abs(ref - 1.312) < 1e-3
    assert lower <= ref <= upper and abs(estimate - ref) < 2e-3
    glrt = eps_bounds(6.0, 0.2, grids["glrt"])
    assert float(glrt[2]) < lower  # the GLRT adversary is much weaker here


@needs_dp
def test_heterogeneous_blocks():
    blocks = [
        pld.GaussianBlock(sigma=1.0, sampling_rate=0.01, steps=300),
        pld.GaussianBlock(sigma=2.0, sensitivity=1.5, sampling_rate=0.05, steps=200),
    ]
    lower, estimate, upper = (float(v) for v in pld.epsilon_for_delta(blocks, DELTA))
    events = [
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0)), 300
        ),
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(2.0 / 1.5)), 200
        ),
    ]
    ref = _dp_accounting_epsilon(events, DELTA, interval=1e-4)
    assert lower <= ref <= upper and abs(estimate - ref) < 2e-3


def test_glrt_higher_dimension_single_round():
    # d = 5 goes through glrt_jax.ncx2; compare with scipy quadrature of the hockey stick.
    block = pld.GaussianBlock(sigma=1.0, adversary="glrt", dim=5)
    eps = jnp.array([0.0, 0.2, 0.5, 1.0])
    lower, estimate, upper = (np.asarray(v) for v in pld.delta_for_epsilon(block, eps))
    p, q = stats.ncx2(5, 1.0), stats.chi2(5)

    def hockey(e, a, b):
        f = lambda t: max(a.pdf(t) - math.exp(e) * b.pdf(t), 0.0)  # noqa: E731
        return integrate.quad(
            f, 0, 200, limit=500, points=[1, 5, 10, 20], epsabs=1e-14, epsrel=1e-12
        )[0]

    ref = np.array([max(hockey(e, p, q), hockey(e, q, p)) for e in np.asarray(eps)])
    assert np.all(lower <= ref + 1e-12) and np.all(ref <= upper + 1e-12)
    np.testing.assert_allclose(estimate, ref, rtol=1e-5)


def test_glrt_replace_one_extreme_pair_dominates():
    # The documented GLRT replace-one pair: for d = 1 and contributions of norms a ≥ b in
    # [0, μ], the pair of magnitude laws is dominated by (remove pair, add pair) at μ.
    r = np.linspace(0.0, 12.0, 48001)

    def dens(a, q):
        return q * (stats.norm.pdf(r - a) + stats.norm.pdf(r + a)) + (1 - q) * 2 * stats.norm.pdf(r)

    def hockey(pa, pb, alpha):
        return np.trapezoid(np.maximum(pa - alpha * pb, 0.0), r)

    for mu, q in [(0.5, 0.2), (2.0, 0.5)]:
        far, null = dens(mu, q), dens(0.0, q)
        for eps in (0.0, 0.3, 1.0):
            alpha = math.exp(eps)
            remove, add = hockey(far, null, alpha), hockey(null, far, alpha)
            for a in np.linspace(0.0, mu, 4):
                for b in np.linspace(0.0, a, 3):
                    assert hockey(dens(a, q), dens(b, q), alpha) <= remove + 1e-9
                    assert hockey(dens(b, q), dens(a, q), alpha) <= add + 1e-9


# ---------------------------------------------------------------------------
# Gradients, jit, vmap
# ---------------------------------------------------------------------------


def test_gradients_match_finite_differences():
    # dε/dσ and dε/dq of all three numbers, by reverse mode through the whole engine, in
    # the DP-SGD case (same grid shapes as the fixture, so the forward is compiled once).
    grid = pld.make_grid(pld.GaussianBlock(sigma=1.0, sampling_rate=0.01, steps=1000))

    def bounds(sigma, q):
        block = pld.GaussianBlock(sigma=sigma, sampling_rate=q, steps=1000)
        return np.asarray(jnp.stack(pld.epsilon_for_delta(block, DELTA, grid=grid)))

    d_sigma, d_q = (np.asarray(j) for j in eps_jacobian(1.0, 0.01, grid))
    # The losses live on a grid, so ∂δ̃/∂ε jumps by c_j at each grid point and dε/dσ
    # wiggles by O(h · hazard) ≈ 5e-4 (relative) from cell to cell; the differences span
    # a few cells (ε moves by ~4e-4 per 1e-4 in σ) and see the average slope.
    hs, hq = 1e-4, 2e-6
    fd_sigma = (bounds(1.0 + hs, 0.01) - bounds(1.0 - hs, 0.01)) / (2 * hs)
    fd_q = (bounds(1.0, 0.01 + hq) - bounds(1.0, 0.01 - hq)) / (2 * hq)
    np.testing.assert_allclose(d_sigma, fd_sigma, rtol=2e-3)
    np.testing.assert_allclose(d_q, fd_q, rtol=2e-3)
    assert np.all(d_sigma < 0) and np.all(d_q > 0)


def test_glrt_tail_derivatives():
    # The d = 1 closed-form tails against central differences (ℓ⁻¹ for d > 1 is tested
    # in test_llr.py).
    from glrt_jax._src import pld as impl

    def with_jacobian(fn, argnums=0):
        return jax.jit(lambda *a: (fn(*a), jax.jacfwd(fn, argnums=argnums)(*a)))

    b = jnp.linspace(-0.004, 2.0, 64)
    tails = with_jacobian(lambda mu: jnp.stack(impl._glrt1_base_tails(mu, b)))
    jac = np.asarray(tails(0.2)[1])
    fd = (np.asarray(tails(0.2 + 1e-6)[0]) - np.asarray(tails(0.2 - 1e-6)[0])) / 2e-6
    np.testing.assert_allclose(jac, fd, rtol=1e-5, atol=1e-7)


def test_grid_from_primal_under_grad():
    # Without jit, a JVP tracer's primal value is concrete: the grid is chosen from it.
    def spacing_times_sigma(sigma):
        grid = pld.make_grid(pld.GaussianBlock(sigma=sigma, sampling_rate=0.2, steps=100))
        return grid.spacing * sigma

    grid = pld.make_grid(pld.GaussianBlock(sigma=6.0, sampling_rate=0.2, steps=100))
    assert float(jax.grad(spacing_times_sigma)(6.0)) == float(grid.spacing)


def test_vmap_and_jit(grids):
    grid = grids["npo"]
    sigmas = jnp.array([5.0, 5.5, 6.0, 7.0, 8.0])
    qs = jnp.array([0.3, 0.25, 0.2, 0.15, 0.1])
    batched = jax.jit(jax.vmap(_eps_bounds_raw, in_axes=(0, 0, None)))(sigmas, qs, grid)
    single = np.stack([np.asarray(eps_bounds(s, q, grid)) for s, q in zip(sigmas, qs, strict=True)])
    np.testing.assert_allclose(np.asarray(batched), single, rtol=1e-8)
    assert np.all(np.diff(single[:, 2]) < 0)  # larger σ and smaller q: smaller ε


@settings(max_examples=15, deadline=None)
@given(st.floats(5.0, 8.0), st.floats(5.0, 8.0), st.floats(0.1, 0.3))
def test_epsilon_decreasing_in_sigma(grids, s1, s2, q):
    lo, hi = min(s1, s2), max(s1, s2)
    e_lo = np.asarray(eps_bounds(lo, q, grids["glrt"]))
    e_hi = np.asarray(eps_bounds(hi, q, grids["glrt"]))
    assert e_lo[2] >= e_hi[2] - 1e-9
    assert e_lo[0] <= e_lo[1] <= e_lo[2]


def test_invalid_values_inside_jit_give_nan(grids):
    out = np.asarray(eps_bounds(-1.0, 0.2, grids["npo"]))
    assert np.all(np.isnan(out))
    out = np.asarray(eps_bounds(6.0, 1.5, grids["npo"]))
    assert np.all(np.isnan(out))


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"sigma": 0.0}, "sigma"),
        ({"sigma": -1.0}, "sigma"),
        ({"sigma": 1.0, "sampling_rate": 0.0}, "sampling_rate"),
        ({"sigma": 1.0, "sampling_rate": 1.5}, "sampling_rate"),
        ({"sigma": 1.0, "sensitivity": 0.0}, "sensitivity"),
    ],
)
def test_bad_parameters_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        pld.epsilon_for_delta(pld.GaussianBlock(**kwargs), DELTA)


def test_bad_static_and_options_raise():
    block = pld.GaussianBlock(sigma=1.0)
    with pytest.raises(ValueError, match="steps"):
        pld.GaussianBlock(sigma=1.0, steps=0)
    with pytest.raises(ValueError, match="steps"):
        pld.GaussianBlock(sigma=1.0, steps=2.5)
    with pytest.raises(ValueError, match="dim"):
        pld.GaussianBlock(sigma=1.0, dim=0)
    with pytest.raises(ValueError, match="adversary"):
        pld.GaussianBlock(sigma=1.0, adversary="oracle")
    with pytest.raises(ValueError, match="eps_tol"):
        pld.epsilon_for_delta(block, DELTA, eps_tol=0.0)
    with pytest.raises(ValueError, match="tail_mass"):
        pld.epsilon_for_delta(block, DELTA, tail_mass=-1.0)
    with pytest.raises(ValueError, match="neighbouring"):
        pld.epsilon_for_delta(block, DELTA, neighbouring="swap")
    for delta in (0.0, 1.0, -1e-3):
        with pytest.raises(ValueError, match="delta"):
            pld.epsilon_for_delta(block, delta)
    with pytest.raises(ValueError, match="epsilon"):
        pld.delta_for_epsilon(block, float("nan"))
    with pytest.raises(ValueError, match="adversary"):
        pld.compose([block, pld.GaussianBlock(sigma=1.0, adversary="glrt")])
    with pytest.raises(ValueError, match="grid"):
        pld.compose(pld.GaussianBlock(sigma=1.0, steps=2), grid=pld.make_grid(block))


def test_traced_parameters_need_a_grid():
    def upper(sigma):
        return pld.epsilon_for_delta(pld.GaussianBlock(sigma=sigma), DELTA).upper

    with pytest.raises(ValueError, match="make_grid"):
        jax.jit(upper)(1.0)
    with pytest.raises(ValueError, match="make_grid"):
        jax.vmap(upper)(jnp.array([1.0, 2.0]))


def test_float64_is_required():
    with pytest.raises(ValueError, match="float64"):
        pld.epsilon_for_delta(pld.GaussianBlock(sigma=jnp.float32(1.0)), DELTA)
    with jax.enable_x64(False):
        with pytest.raises(ValueError, match="x64"):
            pld.epsilon_for_delta(pld.GaussianBlock(sigma=1.0), DELTA)
