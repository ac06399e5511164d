"""Tests of glrt_jax.calibrate: references from mpmath, the closed forms and dp_accounting."""

import json
import math
import pathlib
from fractions import Fraction

import jax
import jax.numpy as jnp
import pytest
from jax.test_util import check_grads
from printed import table_cells
from scipy import stats

from glrt_jax import accountant, calibrate, cli, profile
from glrt_jax._src import calibration_solve, composition, solvers

REFS = json.loads(
    (pathlib.Path(__file__).parent / "reference" / "calibrate_refs.json").read_text()
)["cases"]

# The DP-SGD case of the issue: q = 0.01, N = 1000, δ = 1e-5, add/remove.
Q, N, DELTA = 0.01, 1000, 1e-5


def _closed_epsilon(adversary, sigma, delta, steps, d):
    mu = math.sqrt(steps) / sigma
    if adversary == "npo":
        return float(profile.epsilon(delta, mu))
    return float(profile.epsilon(delta, mu, d, adversary="glrt"))


def _kw(case):
    threat_model = "shared" if case["adversary"] == "glrt" else "per_round"
    return dict(
        steps=case["steps"],
        d=case["d"] or 1,
        adversary=case["adversary"],
        threat_model=threat_model,
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
        dl = float(profile.delta(case["eps"], mu))
    else:
        dl = float(profile.delta(case["eps"], mu, case["d"], adversary="glrt"))
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


def _engine_epsilon(sigma, q=Q, steps=N, adversary="npo", sizes=None):
    """The engine's certified ε at the sizes the calibration certified with (no re-plans)."""
    if sizes is None:
        sizes = composition.choose_sizes(
            jnp.asarray([1.0 / sigma]),
            jnp.asarray([q]),
            jnp.asarray([steps]),
            jnp.asarray(DELTA),
            jnp.asarray(1e-3),
            adversary=adversary,
            d=1,
            neighbouring="add_remove",
            query="epsilon",
        )
    b, j = sizes
    out = accountant.schedule_epsilon(
        sigma, q, steps, DELTA, adversary=adversary, points=b, nodes=j
    )
    return float(out.upper)


@pytest.mark.parametrize("adversary", ["npo", "glrt"])
def test_dpsgd_case_safe_and_tight(adversary):
    s = float(calibrate.noise_multiplier(1.0, DELTA, steps=N, sampling_rate=Q, adversary=adversary))
    # At the sizes it was certified with: within the solver's gap below the target, or at a
    # jump of the certified bound (then a σ 1e-9 smaller is already unsafe).
    e = _engine_epsilon(s, adversary=adversary)
    assert e <= 1.0
    assert e >= 1.0 - 1e-6 or _engine_epsilon(s * (1 - 1e-9), adversary=adversary) > 1.0
    # The public accountant (which may re-plan to a tighter bound) never says more.
    public = float(accountant.schedule_epsilon(s, Q, N, DELTA, adversary=adversary).upper)
    assert 1.0 - 2e-3 <= public <= e
    if adversary == "npo":
        # dp_accounting (run here) brackets its own root within 1e-3 of ours.
        assert _dp_accounting_epsilon(s - 1e-3) > 1.0 > _dp_accounting_epsilon(s + 1e-3)


def test_calibrate_both_adversaries_side_by_side():
    res = calibrate.calibrate(1.0, DELTA, steps=N, sampling_rate=Q, d=1)
    assert abs(res.noise_multiplier_npo - 1.4146) < 2e-3  # dp_accounting's σ, to its accuracy
    assert res.noise_multiplier_glrt < res.noise_multiplier_npo
    for adv, s, e in (
        ("npo", res.noise_multiplier_npo, res.epsilon_npo),
        ("glrt", res.noise_multiplier_glrt, res.epsilon_glrt),
    ):
        assert float(accountant.schedule_epsilon(s, Q, N, DELTA, adversary=adv).upper) == e
        assert 1.0 - 2e-3 <= e <= 1.0
    table = res.table()
    assert "NPO" in table and "GLRT (d = 1)" in table
    # Printed on the safe side: σ rounded up (six decimals) still meets the target, and
    # the printed ε is at or above the certified one.
    answers = [
        (res.noise_multiplier_npo, res.epsilon_npo),
        (res.noise_multiplier_glrt, res.epsilon_glrt),
    ]
    for row, (s, e) in zip(table_cells(table), answers, strict=True):
        assert Fraction(row[1]) >= Fraction(s) and len(row[1].partition(".")[2]) == 6, row
        assert Fraction(row[2]) >= Fraction(e), row
        adv = "npo" if row[0].startswith("NPO") else "glrt"
        at_printed = accountant.schedule_epsilon(float(row[1]), Q, N, DELTA, adversary=adv)
        assert float(at_printed.upper) <= 1.0, row


def test_max_sampling_rate():
    q = float(calibrate.max_sampling_rate(1.0, DELTA, noise_multiplier=1.0, steps=100))
    assert 0.0 < q < 1.0
    assert _engine_epsilon(1.0, q=q, steps=100) <= 1.0
    assert float(accountant.schedule_epsilon(1.0, q * 1.01, 100, DELTA).upper) > 1.0
    # q = 1 already meets a loose target: 1 exactly.
    assert float(calibrate.max_sampling_rate(50.0, DELTA, noise_multiplier=1.0, steps=10)) == 1.0
    # Under jit: tests/test_calibrate_jit.py.


def test_max_steps_numeric():
    n = calibrate.max_steps(1.0, DELTA, 1.0, 0.01)
    assert float(accountant.schedule_epsilon(1.0, 0.01, n, DELTA).upper) <= 1.0
    assert float(accountant.schedule_epsilon(1.0, 0.01, n + 1, DELTA).upper) > 1.0


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
        (dict(target_epsilon=1.0, delta=1e-5, sampling_rate=0.1, threat_model="shared"), "shared"),
        (
            dict(target_epsilon=1.0, delta=1e-5, sampling_rate=0.1, sigma_bounds=(0.1, 0.2)),
            "unreachable target",
        ),
        (dict(target_epsilon=1.0, delta=1e-5, sampling_rate=0.1, tol=1.0), "tol"),
        (dict(target_epsilon=1.0, delta=1e-5, sigma_bounds=(1.0, 2.0)), "unreachable target"),
        (dict(target_epsilon=1.0, delta=1e-5, sigma_bounds=(10.0, 20.0)), "outside the search"),
    ],
)
def test_bad_input_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        calibrate.noise_multiplier(**kwargs)


def test_float32_refused():
    with jax.enable_x64(False), pytest.raises(ValueError, match="64-bit"):
        calibrate.noise_multiplier(1.0, 1e-5)


def test_cli(capsys):
    argv = "calibrate --epsilon 1 --delta 1e-5 --steps 10 --d 5 --threat-model shared"
    assert cli.main(argv.split()) == 0
    out = capsys.readouterr().out
    ref = next(c for c in REFS if c["adversary"] == "glrt" and c["d"] == 5)
    assert f"{float(ref['sigma']):.6f}" in out and "NPO" in out
    # A bad value: one line naming the argument, its value and range, exit status 2.
    assert cli.main(["calibrate", "--epsilon", "-1", "--delta", "1e-5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "target_epsilon" in err and "-1" in err


def test_eager_solve_settles_a_cycle_of_sizes_on_the_larger(monkeypatch):
    """The engine's sizes are chosen at each root: where the root with one size class lies
    where the plan asks for another, and back (σ for ε* = 0.1693 at δ = 2.06e-11,
    q = 1.75e-5, N = 125089: (2048, 4096) gave σ = 0.7922, where the plan asks for
    (8192, 16384), whose root σ = 0.7694 asks for (2048, 4096)), the eager driver ran out
    of moves ("no root found"). It now answers the root of the larger sizes, certified
    at them. The solve and the sizes are stand-ins for the engine's here."""
    cs = calibration_solve
    coarse, fine = (2048, 4096), (8192, 16384)
    root_with = {coarse: math.log(0.7922), fine: math.log(0.7694)}

    def sizes_at(problem, theta, u, tol):  # fine sizes asked above σ = 0.78, coarse below
        return fine if u > math.log(0.78) else coarse

    def solve_eager(problem, theta, lower, upper, u0):
        u = root_with[(problem.points, problem.nodes)]
        assert float(lower) <= u <= float(upper)
        return solvers.Root(x=jnp.float64(u), status=jnp.int32(solvers.OK), iterations=jnp.int32(5))

    monkeypatch.setattr(cs, "_sizes_at", sizes_at)
    monkeypatch.setattr(cs, "_solve_eager", solve_eager)
    problem = cs.Problem("sigma_for_epsilon", "npo", 1, "add_remove", False, 0, 0, 100)
    theta = cs.make_theta(0.1693, 2.06e-11, 1.75e-5, 125089, 1, 1e-3, 1e-6)
    u, solved = cs._eager(problem, theta, None, math.log(0.6), 1e-3, True)
    assert u == root_with[fine] and (solved.points, solved.nodes) == fine


def test_noise_multiplier_meets_the_accountants_answer_where_the_fixed_pass_is_loose():
    """Few sampled rounds at a tiny δ (Nq ≈ 0.009): the solve's pass at fixed sizes gives
    ε ≤ ε* at σ = 0.9500, where the accountant's answer (with its re-plans) is 0.03064,
    3.6 % below ε*. The σ returned now meets the promise against the accountant itself:
    ε*(1 − tol) ≤ ε(σ) ≤ ε*."""
    target, delta, steps, q = 0.0318, 1.5e-11, 192, 4.9e-5
    sigma = float(calibrate.noise_multiplier(target, delta, steps, q))
    got = accountant.schedule_epsilon([sigma], [q], [steps], delta)
    assert target * (1.0 - 1e-3) <= float(got.upper) <= target
    # (and more noise than this is not needed: 1 % less breaks the target)
    assert float(accountant.schedule_epsilon([0.99 * sigma], [q], [steps], delta).lower) > target


@pytest.mark.parametrize("quantity", ["sigma_for_epsilon", "sigma_for_delta", "q_for_epsilon"])
def test_polish_searches_the_accountants_answer_where_it_differs_from_the_fixed_pass(
    monkeypatch, quantity
):
    """The polish's control flow, on stand-ins of the two residuals (the accountant's
    answer: a decreasing line in u with its root at ``truth``; the fixed sizes' pass: the
    same line moved so that its root is ``u``): ``u`` where the answer there lies within
    tol below the target, else the answer's root, from below (an answer above the
    target) or from above (an answer far below it), within the caller's interval and,
    for the sampling rate, at q ≤ 1 (u = −log q ≥ 0); and for an answer that jumps across
    the target, the safe point nearest it after a bounded number of queries."""
    cs = calibration_solve
    target = math.exp(-25.0) if quantity == "sigma_for_delta" else 0.5
    problem = cs.Problem(quantity, "npo", 1, "add_remove", False, 2048, 4096, 100)
    theta = cs.make_theta(target, 1e-5, 0.01, 100, 1, 1e-3, 1e-6)
    calls = []

    def run(u, truth, interval=(-math.inf, math.inf)):
        def value(prob, x, th):
            calls.append(prob.points)
            return -0.3 * (x - (truth if prob.points == 0 else u))

        monkeypatch.setattr(cs, "_eager_value", value)
        calls.clear()
        return cs._polished(problem, theta, u, 1e-3, interval)

    # The answer within tol below the target: u itself, after one query of the answer.
    assert run(1.0, 1.0 - 1e-5) == 1.0 and calls == [0]
    for truth in (0.9, 1.1):  # far below the target; above it
        got = run(1.0, truth)
        assert truth <= got <= truth + 1e-5, (truth, got)  # on the safe side, within ftol
    # The caller's interval: never outside it (where the root lies outside, its end where
    # the answer is safe, or u where none is).
    assert run(1.0, 0.9, interval=(0.95, 2.0)) == 0.95
    assert run(1.0, 1.1, interval=(0.0, 1.05)) == 1.0
    if quantity == "q_for_epsilon":  # q = 1 when the answer's root is below u = 0
        assert run(0.3, -0.5) == 0.0

    # An answer that jumps across the target (from above it to far below, at u = 0.95):
    # no root within ftol; after _POLISH_QUERIES queries, the safe point seen nearest the
    # jump (the least noise certified by the answer), not u.
    def jumping(prob, x, th):
        calls.append(prob.points)
        if prob.points:  # the fixed pass, its root at u = 1
            return -0.3 * (x - 1.0)
        return 0.01 if x < 0.95 else -0.02

    monkeypatch.setattr(cs, "_eager_value", jumping)
    calls.clear()
    got = cs._polished(problem, theta, 1.0, 1e-3)
    assert 0.95 <= got < 0.951 and calls.count(0) == cs._POLISH_QUERIES + 1
