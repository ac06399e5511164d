"""Per-round losses and the composition engine on the neighbouring relations and GLRT cases.

References are computed here, independently of the code under test: dp_accounting's
connect-the-dots composition of single-round GLRT privacy profiles computed with scipy,
dp_accounting on finely binned statistics, scipy quadrature of the hockey-stick
divergence (GLRT, d > 1) and the closed-form Gaussian profile.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, optimize, stats

from glrt_jax import accountant, reproduce
from glrt_jax._src import losses

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting.pld import pld_pmf  # noqa: E402
from dp_accounting.pld import privacy_loss_distribution as dp_pld  # noqa: E402

DELTA = 1e-5


def _gdp_delta(eps, mu):
    """Closed-form privacy profile of μ-GDP."""
    eps = np.asarray(eps, float)
    return stats.norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


def _gdp_epsilon(delta, mu):
    return optimize.brentq(lambda e: _gdp_delta(e, mu) - delta, 0.0, 50.0, xtol=1e-14)


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


def test_glrt_per_round_matches_independent_references():
    b = accountant.schedule_epsilon(6.0, 0.2, 100, DELTA, adversary="glrt")
    lower, estimate, upper = (float(v) for v in b)
    ref = _glrt1_reference_ctd(6.0, 0.2, 100, DELTA)
    assert abs(ref - float(reproduce.SUBSAMPLING_REFERENCE["glrt"])) < 1e-3  # design.md §2
    # Connect-the-dots is pessimistic (≥ the truth, and falling like h²): the fine grid's
    # value bounds the truth from above, and Richardson's extrapolation of two grids
    # estimates it (to ~1e-9 here: 1e-4, 3e-5, 1e-5 give 0.1434355, 0.1434301, 0.1434297).
    fine, coarse = (_glrt1_reference_ctd(6.0, 0.2, 100, DELTA, h=h) for h in (1e-5, 3e-5))
    assert fine <= coarse <= ref
    truth = fine - (coarse - fine) / 8.0
    assert lower <= truth * (1 + 1e-7) and truth * (1 - 1e-7) <= upper <= fine * (1 + 2e-3)
    # dp_accounting on the binned statistic: binning is post-processing, so its
    # optimistic value is a lower bound on the truth.
    ref_opt = _glrt1_reference_binned(6.0, 0.2, 100, DELTA, pessimistic=False)
    ref_pess = _glrt1_reference_binned(6.0, 0.2, 100, DELTA, pessimistic=True)
    assert ref_opt <= upper and lower <= ref_pess


def test_replace_one():
    # q = 1: the replace pair (N(μ), N(−μ)) is μ-GDP with 2μ; 50 rounds compose to 2μ√50.
    e = accountant.schedule_epsilon(4.0, 1.0, 50, DELTA, neighbouring="replace_one")
    ref = _gdp_epsilon(DELTA, 2 * 0.25 * math.sqrt(50))
    assert float(e.lower) <= ref <= float(e.upper) <= ref * (1 + 2e-3)
    # q < 1: dp_accounting on the pair binned finely on the real line (its optimistic and
    # pessimistic roundings bracket the binned pair's ε, a lower bound on the truth).
    q, mu = 0.1, 0.25
    e = accountant.schedule_epsilon(4.0, q, 50, DELTA, neighbouring="replace_one")
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
    assert float(e.upper) <= ref_pess * (1 + 3e-3)


def test_glrt_higher_dimension_single_round():
    # d = 5 goes through glrt_jax.ncx2; compare with scipy quadrature of the hockey stick.
    p, q = stats.ncx2(5, 1.0), stats.chi2(5)

    def hockey(e, a, b):
        f = lambda t: max(a.pdf(t) - math.exp(e) * b.pdf(t), 0.0)  # noqa: E731
        return integrate.quad(
            f, 0, 200, limit=500, points=[1, 5, 10, 20], epsabs=1e-14, epsrel=1e-12
        )[0]

    for eps in (0.2, 0.5, 1.0):
        ref = max(hockey(eps, p, q), hockey(eps, q, p))
        b = accountant.schedule_delta(1.0, 1.0, 1, eps, adversary="glrt", d=5)
        assert float(b.lower) <= ref <= float(b.upper) <= ref * (1 + 1e-2) + 1e-12


def test_glrt_large_dimension_single_round():
    # Above losses.MIXTURE_MAX_D the tails come from the dispatcher ("glrt_large_d"
    # programs); scipy quadrature of the hockey stick as above, around the mean.
    d, sigma = 20_000, 0.3
    lam = 1.0 / sigma**2
    assert losses.program_key("glrt", d, "add_remove", 1)[0] == "glrt_large_d"
    p, q = stats.ncx2(d, lam), stats.chi2(d)
    sd = math.sqrt(2.0 * (d + 2.0 * lam))
    lo, hi = d - 14 * sd, d + lam + 14 * sd

    def hockey(e, a, b):
        f = lambda t: max(a.pdf(t) - math.exp(e) * b.pdf(t), 0.0)  # noqa: E731
        pts = list(d + lam + sd * np.arange(-6.0, 7.0))
        # (1e-14/1e-12 as above meets scipy's roundoff warning at this d; the values agree
        # to 1e-13 with these.)
        return integrate.quad(f, lo, hi, limit=500, points=pts, epsabs=1e-13, epsrel=1e-10)[0]

    for eps in (0.02, 0.1):
        ref = max(hockey(eps, p, q), hockey(eps, q, p))
        b = accountant.schedule_delta(sigma, 1.0, 1, eps, adversary="glrt", d=d)
        assert float(b.lower) <= ref <= float(b.upper) <= ref * (1 + 1e-2) + 1e-12


@functools.partial(jax.jit, static_argnums=0)
def _glrt_base_tails(kind, d, mu, b):
    return jnp.stack(losses._base_tails(kind, d, mu, b))


def test_glrt_tails_by_the_mixture_match_the_dispatcher():
    """GLRT's programs take the non-central chi-squared tails from the Poisson mixture
    alone up to losses.MIXTURE_MAX_D, from the full dispatcher above: the same tails (two
    methods; their derivatives share one rule), from the deep lower to the deep upper
    tail. The survival functions agree relatively; the cdfs, complements of the log-sf,
    absolutely (as the engine uses them: see grids.bins)."""
    b = jnp.concatenate([jnp.linspace(-0.45, 40.0, 60), jnp.array([-jnp.inf, jnp.inf])])
    for d, mu in ((2.0, 1.0), (10.0, 0.3), (10.0, 3.0), (300.0, 1.0), (1e4, 2.0)):
        got = np.asarray(_glrt_base_tails("glrt", d, mu, b))
        want = np.asarray(_glrt_base_tails("glrt_large_d", d, mu, b))
        np.testing.assert_allclose(got[0::2], want[0::2], rtol=1e-12, atol=0, err_msg=str(d))
        np.testing.assert_allclose(got[1::2], want[1::2], rtol=1e-12, atol=1e-15, err_msg=str(d))
    keys = [losses.program_key("glrt", d, "add_remove", 2)[0] for d in (5, 10_000, 10_001)]
    assert keys == ["glrt", "glrt", "glrt_large_d"]
    assert losses.program_key("npo", [5, 20_000], "add_remove", 2)[0] == "glrt_large_d"


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


def test_glrt1_tail_derivatives():
    # The d = 1 closed-form tails against central differences (ℓ⁻¹ for d > 1 is tested
    # in test_llr.py).
    def with_jacobian(fn, argnums=0):
        return jax.jit(lambda *a: (fn(*a), jax.jacfwd(fn, argnums=argnums)(*a)))

    b = jnp.linspace(-0.004, 2.0, 64)
    tails = with_jacobian(lambda mu: jnp.stack(losses._base_tails("glrt", 1, mu, b)))
    jac = np.asarray(tails(0.2)[1])
    fd = (np.asarray(tails(0.2 + 1e-6)[0]) - np.asarray(tails(0.2 - 1e-6)[0])) / 2e-6
    np.testing.assert_allclose(jac, fd, rtol=1e-5, atol=1e-7)


def test_segment_tails_match_scipy():
    # Remove direction, q = 0.3, NPO and GLRT d = 1: the mixture's tails at loss levels x.
    mu, q = 0.8, 0.3
    x = jnp.array([0.05, 0.3, 1.0, 2.0])
    is_add = jnp.zeros(4, bool)
    for adversary in ("npo", "glrt"):
        sp, fp, sq, fq = (
            np.asarray(t) for t in losses.segment_tails(adversary, 1, mu, q, x, is_add)
        )
        b = np.log((np.expm1(np.asarray(x)) + q) / q)  # base level: log(1 − q + q e^b) = x
        if adversary == "npo":  # L = μx − μ²/2 > b  ⇔  x > (b + μ²/2)/μ
            p_sf = stats.norm.sf((b + mu * mu / 2) / mu - mu)
            q_sf = stats.norm.sf((b + mu * mu / 2) / mu)
        else:  # L = −λ/2 + log cosh(μ√t) > b
            t = (np.arccosh(np.exp(b + mu * mu / 2)) / mu) ** 2
            p_sf = stats.norm.sf(np.sqrt(t) - mu) + stats.norm.sf(np.sqrt(t) + mu)
            q_sf = 2 * stats.norm.sf(np.sqrt(t))
        np.testing.assert_allclose(sp, q * p_sf + (1 - q) * q_sf, rtol=1e-12)
        np.testing.assert_allclose(sq, q_sf, rtol=1e-12)
        np.testing.assert_allclose(fp + sp, 1.0, rtol=1e-14)
        np.testing.assert_allclose(fq + sq, 1.0, rtol=1e-14)


def test_closed_loss_selects_either_closed_form():
    """The "closed" program key (NPO and GLRT d = 1 in one program) gives each closed form,
    values and derivatives, whichever the per-phase choice."""
    b = jnp.concatenate([jnp.linspace(-3.0, 8.0, 101), jnp.array([-jnp.inf, jnp.inf])])

    def tails(kind, d):
        fn = lambda mu: jnp.stack(losses._base_tails(kind, d, mu, b))  # noqa: E731
        return jax.jit(lambda mu: (fn(mu), jax.jacfwd(fn)(mu)))(0.7)

    for code, kind in ((0.0, "npo"), (1.0, "glrt")):
        got, want = tails("closed", jnp.asarray(code)), tails(kind, 1)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-14, atol=1e-300)
            assert np.all(np.isfinite(np.asarray(g)))
