"""Attack-risk answers (tpr at fpr, advantage, ROC) and calibration to them.

References: closed forms of Gaussian DP (scipy's normal distribution), dp_accounting's
privacy loss distributions and riskcal's trade-off of a PLD (the NPO anchor with
subsampling), never the code under test.
"""

import json
import math

import numpy as np
import pytest
from printed import assert_table_brackets
from scipy.stats import norm

from glrt_jax import accountant, calibrate
from glrt_jax._src import risk

FPRS = (1e-3, 1e-2, 1e-1)


def gdp_tpr(alpha, mu):
    return norm.cdf(norm.ppf(alpha) + mu)


def gdp_delta(eps, mu):
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def inside(b, truth, rel=1e-12):
    return b.lower <= truth * (1 + rel) and truth * (1 - rel) <= b.upper


# ---------------------------------------------------------------------------
# The bounds from a profile (no engine): exact and perturbed Gaussian-DP profiles
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("mu", [0.2, 1.0, 4.0])
@pytest.mark.parametrize("noise", [0.0, 1e-3, 3e-2])
def test_profile_bounds_contain_gdp(mu, noise):
    prof = risk.Profile(
        lambda e: (
            gdp_delta(e, mu) * (1 - noise),
            gdp_delta(e, mu),
            min(1.0, gdp_delta(e, mu) * (1 + noise)),
        )
    )
    for alpha in (1e-7, 1e-3, 1e-2, 0.1, 0.5, 0.95):
        lo, est, up = risk.tpr(prof, alpha)
        truth = gdp_tpr(alpha, mu)
        assert lo <= est <= up
        assert lo <= truth * (1 + 1e-12) and truth * (1 - 1e-12) <= up
        if noise <= 1e-3:
            assert up - lo <= 5e-3 * up
    lo, _, up = risk.advantage(prof)
    truth = 2 * norm.cdf(mu / 2) - 1
    assert lo <= truth <= up
    if noise == 0:
        assert up - lo <= risk.RTOL * up


def test_profile_loose_near_zero_is_skipped():
    # An engine whose bounds are useless below ε = 0.1 (as near ε = 0 in practice).
    mu = 0.5

    def fn(e):
        d = gdp_delta(e, mu)
        return (0.0, d, 1.0) if e < 0.1 else (d, d, d)

    prof = risk.Profile(fn)
    lo, _, up = risk.tpr(prof, 1e-2)
    truth = gdp_tpr(1e-2, mu)
    assert lo <= truth <= up and up - lo <= 5e-3 * up
    lo, _, up = risk.advantage(prof)
    assert lo <= 2 * norm.cdf(mu / 2) - 1 <= up


def test_coarse_samples_serve_where_they_are_narrow_enough():
    # A stand-in engine: exact GDP bounds from delta_fn, and coarse ones (±2e-7) for free.
    mu, w = 1.0, 2e-7
    full = []

    def fn(e):
        full.append(e)
        d = gdp_delta(e, mu)
        return d, d, d

    def coarse(e):
        d = gdp_delta(e, mu)
        return max(0.0, d - w), d, d + w

    prof = risk.Profile(fn, coarse)
    lo, _, up = risk.tpr(prof, 0.1)  # tpr ≈ 0.39: a width of 4e-7 is enough everywhere
    assert lo <= gdp_tpr(0.1, mu) <= up and up - lo <= risk.RTOL * up
    assert full == [1.0] and 0.0 in prof.evaluated  # only the seed asked the engine
    n = len(prof.evaluated)
    # tpr(1e-6) ≈ 8.7e-5: its new samples far out need more than the coarse width.
    lo, _, up = risk.tpr(prof, 1e-6)
    assert lo <= gdp_tpr(1e-6, mu) <= up and up - lo <= risk.RTOL * up
    new = len(prof.evaluated) - n
    assert 0 < len(full) - 1 < new  # the engine asked again, but not for every new sample
    # The advantage asks for δ(0) at the engine's accuracy: the coarse sample is re-taken.
    lo, _, up = risk.advantage(prof)
    assert full[-1] == 0.0 and lo <= 2 * norm.cdf(mu / 2) - 1 <= up and up - lo < 1e-12


def test_tiny_delta_is_sampled_at_the_sizes_already_used(monkeypatch):
    """A sample that asks for larger sizes than any used is first taken at the largest
    used: a δ far below what risk sees (at most ``_TINY``) is certified there, with no new
    compilation (GLRT, d = 10, σ = 1, q = 0.01, N = 1000: δ(1) ≈ 10⁻²⁶ asked for 2¹⁸
    nodes); a larger δ still gets the sizes it asks for. (A stand-in engine.)"""
    from glrt_jax._src import composition

    calls = []

    def choose_sizes(mu, q, n, eps, tol, **_):
        return (512, 4096) if float(eps) < 1.0 else (16384, 262144)

    def schedule_delta(sig, q, n, eps, *, tol, points=None, nodes=None, **_):
        calls.append((eps, points, nodes))
        d = 1e-20 if eps == 1.0 else 1e-3
        return composition.Bounds(0.9 * d, d, d)

    monkeypatch.setattr(composition, "choose_sizes", choose_sizes)
    monkeypatch.setattr(composition, "schedule_delta", schedule_delta)
    prof = risk.engine_profile(
        1.0, 0.01, 1000, d=10, adversary="glrt", neighbouring="add_remove", tol=1e-3
    )
    for eps in (0.5, 1.0, 1.5):
        prof.evaluate(eps)
    # ε = 0.5 at its own sizes (the first); ε = 1 tiny at them; ε = 1.5 tried there, then
    # at the sizes it asks for.
    assert calls == [(0.5, None, None), (1.0, 512, 4096), (1.5, 512, 4096), (1.5, None, None)]


# ---------------------------------------------------------------------------
# threat_model="shared": closed forms
# ---------------------------------------------------------------------------


def test_shared_closed_forms():
    acc = accountant.Accountant(d=3, threat_model="shared")
    acc.compose(accountant.Phase(2.0, steps=9))  # μ = 3/2
    r = acc.tpr(np.array(FPRS))
    np.testing.assert_allclose(r.npo.upper, gdp_tpr(np.array(FPRS), 1.5), rtol=1e-12)
    assert np.all(r.glrt.upper <= r.npo.upper) and np.all(r.glrt.upper >= np.array(FPRS))
    a = acc.advantage()
    assert a.npo.upper == pytest.approx(2 * norm.cdf(0.75) - 1, rel=1e-12)
    assert 0 < a.glrt.upper < a.npo.upper
    # The GLRT's advantage is the largest gap of its (symmetrised) ROC curve: located on
    # a coarse grid, then on a fine one around it (grids of the tpr call's size class).
    grid = np.linspace(1e-4, 1 - 1e-4, 255)
    best = grid[np.argmax(acc.roc(grid).glrt.upper - grid)]
    grid = np.linspace(best - 4e-3, best + 4e-3, 255)
    gaps = acc.roc(grid).glrt.upper - grid
    assert a.glrt.upper == pytest.approx(gaps.max(), rel=1e-5)


# ---------------------------------------------------------------------------
# threat_model="per_round": the engine against closed forms and riskcal
# ---------------------------------------------------------------------------


def test_per_round_q1_matches_gaussian_dp():
    sigma, steps = 4.0, 16  # μ = √N/σ = 1
    acc = accountant.Accountant(d=1).compose(accountant.Phase(sigma, 1.0, steps))
    r = acc.tpr(np.array(FPRS))
    for i, alpha in enumerate(FPRS):
        b = accountant.Bounds(r.npo.lower[i], r.npo.estimate[i], r.npo.upper[i])
        assert inside(b, gdp_tpr(alpha, 1.0)), (alpha, b)
        assert b.upper - b.lower <= 5e-3 * b.upper
        # GLRT ≤ NPO (a restricted adversary), up to the certified gaps.
        assert r.glrt.lower[i] <= b.upper
    a = acc.advantage()
    assert inside(a.npo, 2 * norm.cdf(0.5) - 1)
    assert a.npo.upper - a.npo.lower <= 5e-3 * a.npo.upper
    assert a.glrt.lower <= a.npo.upper
    d = r.to_dict()
    json.dumps(d)
    assert d["quantity"] == "tpr" and d["fpr"] == list(FPRS) and len(d["npo"]["upper"]) == 3
    assert r.table().count("fpr = ") == 6
    assert_table_brackets(r)


def test_per_round_glrt_single_release_matches_symmetrised_curve():
    # One round, q = 1: the per-round engine against the closed-form R_s of roc.py.
    per_round = accountant.tpr(0.05, 1.0, d=2)
    shared = accountant.tpr(0.05, 1.0, d=2, threat_model="shared")
    assert inside(per_round.glrt, shared.glrt.upper, rel=1e-9)
    assert inside(per_round.npo, gdp_tpr(0.05, 1.0), rel=1e-9)


@pytest.fixture(scope="module")
def subsampled():
    from dp_accounting.pld import privacy_loss_distribution as pldm

    sigma, q, steps = 1.0, 0.01, 1000
    acc = accountant.Accountant(d=1).compose(accountant.Phase(sigma, q, steps))
    plds = {
        pess: pldm.from_gaussian_mechanism(
            sigma,
            sensitivity=1.0,
            sampling_prob=q,
            value_discretization_interval=1e-4,
            pessimistic_estimate=pess,
            use_connect_dots=pess,
        ).self_compose(steps)
        for pess in (True, False)
    }
    return acc, plds


def test_subsampled_npo_against_dp_accounting_and_riskcal(subsampled):
    riskcal = pytest.importorskip("riskcal.analysis")
    acc, plds = subsampled
    alphas = np.array(FPRS)
    r = acc.tpr(alphas)
    # Samples far out cost no new compilation: one size serves every sample (the plan
    # takes a δ query's damping at the queried ε), or they were taken coarse, at sizes
    # already compiled (risk.engine_profile); every bound below holds with them.
    (used,) = acc._sizes_used.values()
    assert len(used) == 1 or acc._profile("npo")._coarse
    eps = np.linspace(0.0, 3.0, 601)
    # (dp_accounting evaluates a sequence of ε in one pass over its grid)
    d_pess = np.asarray(plds[True].get_delta_for_epsilon(eps))
    d_opt = np.asarray(plds[False].get_delta_for_epsilon(eps))
    rc = 1.0 - riskcal.get_beta_from_pld(plds[True], alpha=alphas)
    for i, alpha in enumerate(FPRS):
        lo, up = r.npo.lower[i], r.npo.upper[i]
        assert up - lo <= 5e-3 * up
        # dp_accounting's pessimistic profile: inf over a grid is above the truth.
        assert lo <= np.min(d_pess + np.exp(eps) * alpha)
        # Its optimistic profile, monotone lower bound between grid points: below the truth.
        assert up >= np.min(d_opt[1:] + np.exp(eps[:-1]) * alpha)
        # riskcal's trade-off of the same PLD (the anchor): agreement to 1.5 %.
        assert abs(up - rc[i]) <= 1.5e-2 * rc[i], (alpha, up, rc[i])
        assert r.glrt.lower[i] <= up
    a = acc.advantage()
    adv_rc = riskcal.get_advantage_from_pld(plds[True])
    assert a.npo.lower <= adv_rc and a.npo.upper >= plds[False].get_delta_for_epsilon(0.0)
    assert a.npo.lower <= plds[True].get_delta_for_epsilon(0.0)
    assert a.npo.lower <= a.npo.estimate <= a.npo.upper
    # δ(0) is sampled directly: as tight as the engine at ε = 0.
    assert a.npo.upper - a.npo.lower <= 5e-3 * a.npo.upper
    assert a.glrt.lower <= a.npo.upper


def test_subsampled_gdp_clt_limit(subsampled):
    # CLT: the subsampled Gaussian composes to μ-GDP with μ = q √(N (e^{1/σ²} − 1)).
    acc, _ = subsampled
    mu = 0.01 * math.sqrt(1000 * math.expm1(1.0))
    r = acc.tpr(0.1)
    assert r.npo.upper == pytest.approx(gdp_tpr(0.1, mu), rel=0.05)


# ---------------------------------------------------------------------------
# Calibration
# ---------------------------------------------------------------------------


def test_calibrate_tpr_shared_closed_form():
    s = calibrate.noise_multiplier_for_tpr(0.2, 0.01, steps=25, threat_model="shared")
    exact = 5.0 / (norm.ppf(0.2) - norm.ppf(0.01))
    assert exact * (1 - 1e-9) <= s <= exact * (1 + 1e-3)
    g = calibrate.noise_multiplier_for_tpr(
        0.2, 0.01, steps=25, d=4, adversary="glrt", threat_model="shared"
    )
    assert g < s
    r = accountant.tpr(0.01, g, steps=25, d=4, threat_model="shared")
    assert r.glrt.upper <= 0.2


def test_calibrate_advantage_shared_closed_form():
    s = calibrate.noise_multiplier_for_advantage(0.05, steps=4, threat_model="shared")
    exact = 2.0 / (2.0 * norm.ppf(0.525))
    assert exact * (1 - 1e-9) <= s <= exact * (1 + 1e-3)


def test_calibrate_tpr_per_round_q1():
    s = calibrate.noise_multiplier_for_tpr(0.1, 0.01, steps=16, rtol=1e-2)
    exact = 4.0 / (norm.ppf(0.1) - norm.ppf(0.01))
    assert exact * (1 - 1e-9) <= s <= exact * 1.03
    assert accountant.tpr(0.01, s, steps=16).npo.upper <= 0.1


def test_bad_arguments():
    acc = accountant.Accountant(threat_model="shared").compose(accountant.Phase(1.0))
    with pytest.raises(ValueError, match="fpr"):
        acc.tpr(0.0)
    with pytest.raises(ValueError, match="fpr"):
        acc.tpr([0.5, 1.5])
    with pytest.raises(ValueError, match="target_tpr"):
        calibrate.noise_multiplier_for_tpr(0.01, 0.05)
    with pytest.raises(ValueError, match="target_advantage"):
        calibrate.noise_multiplier_for_advantage(1.0)


def test_cli_report_prints_attack_risk(tmp_path, capsys):
    from glrt_jax import cli

    png = tmp_path / "roc.png"
    argv = ["report", "--noise-multiplier", "2", "--steps", "4", "--threat-model", "shared"]
    assert cli.main([*argv, "--delta", "1e-5", "--fpr", "0.01", "0.1", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert out.count("fpr = 0.01 |") == 2 and out.count("max over fpr") == 2
    row = next(line for line in out.splitlines() if line.startswith("| NPO") and "0.01 |" in line)
    assert float(row.split("|")[2]) == pytest.approx(gdp_tpr(0.01, 1.0), rel=1e-5)
    assert png.stat().st_size > 0


def test_per_round_roc_figure(tmp_path):
    pytest.importorskip("matplotlib")
    acc = accountant.Accountant(d=1).compose(accountant.Phase(4.0, 1.0, 16))
    rep = acc.roc([1e-3, 1e-2, 0.1, 0.5])
    assert np.all(np.diff(rep.npo.upper) > 0) and np.all(rep.glrt.lower <= rep.npo.upper)
    fig = risk.roc_figure(rep, path=tmp_path / "roc.png")
    assert len(fig.axes) == 2 and (tmp_path / "roc.png").stat().st_size > 0
