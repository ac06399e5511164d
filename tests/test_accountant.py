"""Tests of the per-round accountant API (glrt_jax.accountant on top of glrt_jax.pld).

References: dp_accounting's PLD accountant (run here), closed-form Gaussian-DP profiles
(NPO without subsampling composes to μ² = Σ N_i/σ_i²), and the reference numbers of
DESIGN.md. The settings reuse those of tests/test_pld.py so the compiled programs are
shared within one pytest process.
"""

from __future__ import annotations

import math

import pytest
from scipy import optimize, stats

from glrt_jax import accountant, cli

dp_accounting = pytest.importorskip("dp_accounting")

DELTA = 1e-5


def _npo_epsilon_closed_form(delta, mu):
    """ε(δ) of μ-GDP from δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), by scipy root finding."""

    def gap(e):
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2)

    return optimize.brentq(lambda e: gap(e) - delta, 0.0, 50.0, xtol=1e-14)


def test_dpsgd_epsilon_npo_matches_dp_accounting():
    rep = accountant.dpsgd_epsilon(1.0, 0.01, 1000, DELTA)
    acc = dp_accounting.pld.PLDAccountant()
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0)), 1000
        )
    )
    ref = acc.get_epsilon(DELTA)  # pessimistic: an upper bound on the truth
    assert abs(ref - 1.82824) < 1e-3
    assert abs(rep.npo.estimate - ref) < 2e-3
    # Certified bracket around the truth, upper within 1e-3 (relative) of dp_accounting's.
    assert rep.npo.lower <= ref and abs(rep.npo.upper / ref - 1.0) <= 1e-3
    assert rep.glrt.upper < rep.npo.lower  # the GLRT adversary is weaker
    assert rep.quantity == "epsilon" and rep.delta == DELTA and rep.dims == (1,)
    assert "per-round" in rep.threat_model and "| GLRT (d = 1) |" in rep.table()


def test_dp_events_and_own_events_agree_and_match_design():
    inner = dp_accounting.PoissonSampledDpEvent(0.2, dp_accounting.GaussianDpEvent(6.0))
    a = accountant.PLDAccountant(dim=1)
    # 40 + 60 rounds, through SelfComposed/Composed/NoOp: merged into one block of 100.
    a.compose(
        dp_accounting.ComposedDpEvent(
            [dp_accounting.SelfComposedDpEvent(inner, 40), dp_accounting.NoOpDpEvent()]
        )
    ).compose(inner, count=60)
    assert a.events == (accountant.SubsampledGaussianEvent(6.0, 0.2, 100, 1),)
    b = accountant.PLDAccountant(dim=1).compose(accountant.SubsampledGaussianEvent(6.0, 0.2, 100))
    ra, rb = a.epsilon(DELTA), b.epsilon(DELTA)
    assert ra == rb
    # DESIGN.md §2: NPO ε ≈ 1.312, GLRT (d = 1, per round) ε ≈ 0.143.
    assert ra.npo.lower <= 1.3122 and abs(ra.npo.estimate - 1.312) < 1e-3
    assert abs(ra.glrt.estimate - 0.143) < 1e-3
    # δ at the certified ε is δ to the accuracy of the two queries' own lattices (each
    # query chooses its lattice and tilt), and NPO is certified above δ there.
    rd = a.delta(ra.glrt.upper)
    assert rd.glrt.lower <= DELTA
    assert rd.glrt.upper <= DELTA * (1 + 2e-3) and rd.npo.lower > DELTA


def test_heterogeneous_rounds_without_subsampling_match_closed_form():
    # NPO, q = 1: 3 rounds at σ = 4 and 5 rounds at σ = 6 compose to μ² = 3/16 + 5/36.
    a = accountant.PLDAccountant()
    a.compose(accountant.SubsampledGaussianEvent(4.0, 1.0, 3))
    a.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(6.0), 5))
    assert len(a.events) == 2
    rep = a.epsilon(1e-3)
    ref = _npo_epsilon_closed_form(1e-3, math.sqrt(3 / 16 + 5 / 36))
    assert rep.npo.lower <= ref <= rep.npo.upper
    assert abs(rep.npo.estimate - ref) < 2e-3
    assert rep.glrt.upper <= rep.npo.upper


def test_report_cli_with_sampling_rate(capsys):
    code = cli.main(
        "report --sensitivity 2 --sigma 12 --steps 100 --sampling-rate 0.2 --delta 1e-5".split()
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "per-round composition" in out
    row = next(line for line in out.splitlines() if line.startswith("| GLRT"))
    assert abs(float(row.split("|")[2]) - 0.1435) < 1e-3  # σ/Δ = 6, as above


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: accountant.dpsgd_epsilon(0.0, 0.01, 10, 1e-5), "noise_multiplier"),
        (lambda: accountant.dpsgd_epsilon(1.0, 1.5, 10, 1e-5), "sampling_rate"),
        (lambda: accountant.dpsgd_epsilon(1.0, 0.0, 10, 1e-5), "sampling_rate"),
        (lambda: accountant.dpsgd_epsilon(1.0, 0.01, 0, 1e-5), "count"),
        (lambda: accountant.dpsgd_epsilon(1.0, 0.01, 2.5, 1e-5), "count"),
        (lambda: accountant.dpsgd_epsilon(1.0, 0.01, 10, 1.0), "delta"),
        (lambda: accountant.dpsgd_epsilon(1.0, 0.01, 10, float("nan")), "delta"),
        (lambda: accountant.dpsgd_delta(1.0, 0.01, 10, -1.0), "epsilon"),
        (lambda: accountant.dpsgd_epsilon(1.0, 0.01, 10, 1e-5, d=0), "dim"),
        (lambda: accountant.dpsgd_epsilon(1.0, 0.01, 10, 1e-5, tol=0.0), "tol"),
        (lambda: accountant.dpsgd_epsilon(1.0, 0.01, 10, 1e-5, neighbouring="x"), "neighbouring"),
        (lambda: accountant.PLDAccountant().compose(dp_accounting.LaplaceDpEvent(1.0)), "Laplace"),
        (lambda: accountant.PLDAccountant().compose("gaussian"), "event"),
        (lambda: accountant.PLDAccountant().epsilon(1e-5), "compose"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
