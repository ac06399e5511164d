"""Tests of glrt_jax.calibrate: references from mpmath, the closed forms and dp_accounting."""

import argparse
import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy import stats

from glrt_jax import calibrate, pld, profile
from glrt_jax._src import calibrate_cli

REFS = json.loads(
    (pathlib.Path(__file__).parent / "reference" / "calibrate_refs.json").read_text()
)["cases"]

# The DP-SGD case of the issue: q = 0.01, N = 1000, δ = 1e-5, add/remove.
Q, N, DELTA = 0.01, 1000, 1e-5


def _closed_epsilon(adversary, sigma, delta, steps, d):
    mu = math.sqrt(steps) / sigma
    if adversary == "npo":
        return float(profile.npo_epsilon(delta, mu))
    return float(profile.glrt_epsilon(delta, mu, d))


def _kw(case):
    composition = "shared" if case["adversary"] == "glrt" else "rounds"
    return dict(
        steps=case["steps"], d=case["d"] or 1, adversary=case["adversary"], composition=composition
    )


# ---------------------------------------------------------------------------
# Closed forms (no subsampling) against mpmath
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", REFS, ids=lambda c: f"{c['adversary']}-d{c['d']}-N{c['steps']}")
def test_noise_multiplier_matches_mpmath(case):
    ref = float(case["sigma"])
    s = float(calibrate.noise_multiplier(case["eps"], case["delta"], **_kw(case)))
    assert abs(s - ref) <= 1e-9 * ref
    # Safe side, checked with the profile's own ε(δ) (a different solver).
    e = _closed_epsilon(case["adversary"], s, case["delta"], case["steps"], case["d"] or 1)
    assert case["eps"] * (1 - 1e-9) <= e <= case["eps"]


@pytest.mark.parametrize("case", REFS[1:2] + REFS[5:6], ids=lambda c: f"{c['adversary']}-{c['d']}")
def test_for_delta_matches_mpmath(case):
    ref = float(case["sigma"])
    s = float(calibrate.for_delta(case["delta"], case["eps"], **_kw(case)))
    assert abs(s - ref) <= 1e-9 * ref
    mu = math.sqrt(case["steps"]) / s
    if case["adversary"] == "npo":
        dl = float(profile.npo_delta(case["eps"], mu))
    else:
        dl = float(profile.glrt_delta(case["eps"], mu, case["d"]))
    assert case["delta"] * (1 - 1e-8) <= dl <= case["delta"]


def test_closed_form_grads():
    # dσ/dε* and dσ/dδ by the implicit function theorem, against finite differences.
    def f(e, log_dl):
        return calibrate.noise_multiplier(e, jnp.exp(log_dl), steps=50, rtol=1e-13)

    check_grads(f, (1.3, math.log(1e-4)), order=1, modes=("fwd",), eps=1e-5, rtol=1e-5)
    # And against the closed form: σ = √N/μ with ε(δ, μ) = ε*  ⇒  dσ/dε* = −σ/(μ ∂ε/∂μ),
    # where, from δ = Φ(a) − e^ε Φ(b) (a = −ε/μ + μ/2, b = a − μ) and φ(a) = e^ε φ(b),
    # ∂δ/∂μ = φ(a) and ∂δ/∂ε = −e^ε Φ(b), so ∂ε/∂μ = φ(a) / (e^ε Φ(b)).
    s, ds = jax.jvp(f, (1.3, math.log(1e-4)), (1.0, 0.0))
    mu = math.sqrt(50) / float(s)
    a = -1.3 / mu + mu / 2
    de_dmu = stats.norm.pdf(a) / (math.exp(1.3) * stats.norm.cdf(a - mu))
    expected = -float(s) / (mu * de_dmu)
    assert abs(float(ds) - expected) <= 1e-8 * abs(expected)


def test_jit_vmap_batch_and_failures():
    # One jitted call for the batch; the last target needs σ < 1, outside sigma_bounds: NaN
    # (never an unsafe number).
    targets = jnp.concatenate([jnp.linspace(0.2, 5.0, 63), jnp.array([1000.0])])
    f = jax.jit(
        jax.vmap(lambda e: calibrate.noise_multiplier(e, 1e-5, steps=100, sigma_bounds=(1.0, 1e4)))
    )
    sig = np.asarray(f(targets))
    assert np.isnan(sig[-1])
    sig, t = sig[:-1], np.asarray(targets[:-1])
    assert np.all(np.diff(sig) < 0)  # σ decreasing in the target
    eps = np.asarray(profile.npo_epsilon(1e-5, jnp.sqrt(100.0) / sig))
    assert np.all((eps <= t) & (eps >= t * (1 - 1e-9)))
    eager = float(calibrate.noise_multiplier(float(t[5]), 1e-5, steps=100))
    assert abs(sig[5] - eager) <= 1e-9 * eager  # both inside the gap band


def test_max_steps_closed_form():
    sigma, target = 20.0, 1.0
    n = calibrate.max_steps(target, 1e-5, sigma)
    assert _closed_epsilon("npo", sigma, 1e-5, n, 1) <= target
    assert _closed_epsilon("npo", sigma, 1e-5, n + 1, 1) > target
    with pytest.raises(ValueError, match="unreachable target"):
        calibrate.max_steps(0.01, 1e-5, 0.5)


# ---------------------------------------------------------------------------
# Subsampled rounds (numeric accountant)
# ---------------------------------------------------------------------------


def _dp_accounting_epsilon(sigma):
    dp_event = pytest.importorskip("dp_accounting.dp_event")
    dpld = pytest.importorskip("dp_accounting.pld")
    event = dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(sigma)), N
    )
    return dpld.PLDAccountant().compose(event).get_epsilon(DELTA)


def test_dpsgd_case_npo_against_dp_accounting():
    s = float(calibrate.noise_multiplier(1.0, DELTA, steps=N, sampling_rate=Q))
    # The certified ε at σ, from the default accountant, is at most the target.
    block = pld.GaussianBlock(sigma=s, sampling_rate=Q, steps=N)
    e = pld.epsilon_for_delta(block, DELTA)
    assert 1.0 - 1e-8 <= float(e.upper) <= 1.0
    # dp_accounting (run here) brackets its own root within 1e-3 of ours.
    assert _dp_accounting_epsilon(s - 1e-3) > 1.0 > _dp_accounting_epsilon(s + 1e-3)


def test_pld_jit_vmap_and_implicit_grads():
    lo, hi = 1.2, 1.8
    grid = pld.make_grid(
        pld.GaussianBlock(sigma=np.array([lo, hi]), sampling_rate=np.array([0.008, 0.012]), steps=N)
    )

    def sigma(e, dl, q):
        return calibrate.noise_multiplier(e, dl, N, q, grid=grid, sigma_bounds=(lo, hi), rtol=1e-8)

    targets = jnp.array([0.9, 1.0, 1.1])
    sig = np.asarray(jax.jit(jax.vmap(sigma, (0, None, None)))(targets, DELTA, Q))
    eps = jax.vmap(
        lambda s: (
            pld.epsilon_for_delta(
                pld.GaussianBlock(sigma=s, sampling_rate=Q, steps=N), DELTA, grid=grid
            ).upper
        )
    )(sig)
    assert np.all(np.asarray(eps) <= np.asarray(targets))
    assert np.all(np.asarray(eps) >= np.asarray(targets) * (1 - 1e-8))
    assert np.all(np.diff(sig) < 0)
    # dσ/dε*, dσ/dδ, dσ/dq through the custom JVP, against finite differences (δ and q on
    # a log scale; the step is large against the solver's gap, 2.5e-9 in ε).
    f = jax.jit(lambda e, log_dl, log_q: sigma(e, jnp.exp(log_dl), jnp.exp(log_q)))
    check_grads(
        f, (1.0, math.log(DELTA), math.log(Q)), order=1, modes=("fwd", "rev"), eps=1e-3, rtol=1e-3
    )


def test_calibrate_both_adversaries_side_by_side():
    res = calibrate.calibrate(1.0, DELTA, steps=N, sampling_rate=Q, d=1)
    assert abs(res.sigma_npo - 1.41463) < 1e-3
    assert res.sigma_glrt < res.sigma_npo
    for adv, s, e in (
        ("npo", res.sigma_npo, res.epsilon_npo),
        ("glrt", res.sigma_glrt, res.epsilon_glrt),
    ):
        block = pld.GaussianBlock(sigma=s, sampling_rate=Q, steps=N, adversary=adv)
        assert float(pld.epsilon_for_delta(block, DELTA).upper) == e
        assert 1.0 - 1e-8 <= e <= 1.0
        # A 1e-6 smaller σ already exceeds the target: the σ is tight.
        block = pld.GaussianBlock(sigma=s * (1 - 1e-6), sampling_rate=Q, steps=N, adversary=adv)
        assert float(pld.epsilon_for_delta(block, DELTA).upper) > 1.0
    table = res.table()
    assert "NPO" in table and "GLRT (d = 1)" in table


def test_max_sampling_rate():
    q = float(calibrate.max_sampling_rate(1.0, DELTA, noise_multiplier=1.0, steps=100))

    def e(r):
        block = pld.GaussianBlock(sigma=1.0, sampling_rate=r, steps=100)
        return float(pld.epsilon_for_delta(block, DELTA).upper)

    assert 1.0 - 1e-8 <= e(q) <= 1.0
    assert 0.0 < q < 1.0


# ---------------------------------------------------------------------------
# Errors and the command line
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(target_epsilon=0.0, delta=1e-5), "target_epsilon"),
        (dict(target_epsilon=-1.0, delta=1e-5), "target_epsilon"),
        (dict(target_epsilon=1.0, delta=0.0), "delta"),
        (dict(target_epsilon=1.0, delta=1.0), "delta"),
        (dict(target_epsilon=1.0, delta=1e-5, sampling_rate=1.5), "sampling_rate"),
        (dict(target_epsilon=1.0, delta=1e-5, steps=0), "steps"),
        (dict(target_epsilon=1.0, delta=1e-5, adversary="x"), "adversary"),
        (dict(target_epsilon=1.0, delta=1e-5, sampling_rate=0.1, composition="shared"), "shared"),
        (dict(target_epsilon=1.0, delta=1e-16, sampling_rate=0.1), "unreachable target"),
        (dict(target_epsilon=1.0, delta=1e-5, sigma_bounds=(1.0, 2.0)), "unreachable target"),
        (dict(target_epsilon=1.0, delta=1e-5, sigma_bounds=(10.0, 20.0)), "outside the search"),
    ],
)
def test_bad_input_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        calibrate.noise_multiplier(**kwargs)


def test_traced_numeric_needs_grid_and_float32_refused():
    f = jax.jit(lambda e: calibrate.noise_multiplier(e, 1e-5, steps=10, sampling_rate=0.1))
    with pytest.raises(ValueError, match="grid"):
        f(1.0)
    with jax.enable_x64(False), pytest.raises(ValueError, match="64-bit"):
        calibrate.noise_multiplier(1.0, 1e-5)


def test_cli(capsys):
    parser = argparse.ArgumentParser()
    calibrate_cli.add_subparser(parser.add_subparsers())
    args = parser.parse_args(
        [
            "calibrate",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--steps",
            "10",
            "--dim",
            "5",
            "--composition",
            "shared",
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    ref = next(c for c in REFS if c["adversary"] == "glrt" and c["d"] == 5)
    assert f"{float(ref['sigma']):.6f}" in out and "NPO" in out
    args = parser.parse_args(["calibrate", "--epsilon", "-1", "--delta", "1e-5"])
    assert args.func(args) == 2
    assert "target_epsilon" in capsys.readouterr().err
