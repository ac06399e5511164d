"""Tests of the accountant API: Accountant, Phase, PrivacyReport, epsilon/delta shortcuts.

References: dp_accounting's PLD accountant (run here), closed-form Gaussian-DP profiles
(NPO without subsampling composes to μ² = Σ N_i/σ_i², by scipy root finding here) and
the reference numbers of docs/design.md §3.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys

import pytest
from backends import assert_same_query
from printed import assert_table_brackets
from scipy import optimize, stats

from glrt_jax import accountant, cli, reproduce

dp_accounting = pytest.importorskip("dp_accounting")

DELTA = 1e-5
SUBSAMPLING_REF = reproduce.SUBSAMPLING_REFERENCE


def _npo_epsilon_closed_form(delta, mu):
    """ε(δ) of μ-GDP from δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), by scipy root finding."""

    def gap(e):
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2)

    return optimize.brentq(lambda e: gap(e) - delta, 0.0, 50.0, xtol=1e-14)


def test_per_round_npo_matches_dp_accounting():
    rep = accountant.epsilon(DELTA, noise_multiplier=1.0, sampling_rate=0.01, steps=1000)
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
    assert (rep.quantity, rep.delta, rep.epsilon, rep.d) == ("epsilon", DELTA, None, 1)
    assert (rep.threat_model, rep.steps, rep.phases, rep.mu) == ("per_round", 1000, 1, None)
    assert "| GLRT (d = 1) |" in rep.table() and "per round" in rep.describe()
    assert_table_brackets(rep)
    exported = json.loads(json.dumps(rep.to_dict()))
    assert exported["npo"]["upper"] == rep.npo.upper and exported["threat_model"] == "per_round"


def test_dp_events_and_phases_agree_and_match_design():
    inner = dp_accounting.PoissonSampledDpEvent(0.2, dp_accounting.GaussianDpEvent(6.0))
    a = accountant.Accountant(d=1)
    # 40 + 60 rounds, through SelfComposed/Composed/NoOp: merged into one phase of 100.
    a.compose(
        dp_accounting.ComposedDpEvent(
            [dp_accounting.SelfComposedDpEvent(inner, 40), dp_accounting.NoOpDpEvent()]
        )
    ).compose(dp_accounting.SelfComposedDpEvent(inner, 60))
    assert a.phases == (accountant.Phase(6.0, 0.2, 100),)
    b = accountant.Accountant(d=1).compose(accountant.Phase(6.0, 0.2, steps=100))
    ra, rb = a.epsilon(DELTA), b.epsilon(DELTA)
    # The same query, so the same report (bit for bit on a CPU; tests/backends.py).
    assert dataclasses.replace(ra, npo=None, glrt=None) == dataclasses.replace(
        rb, npo=None, glrt=None
    )
    assert_same_query([*ra.npo, *ra.glrt], [*rb.npo, *rb.glrt])
    # docs/design.md §2 (the package's data file): NPO ε ≈ 1.312, GLRT (d = 1, per round)
    # ε ≈ 0.143, to three decimals.
    ref_npo, ref_glrt = (float(SUBSAMPLING_REF[k]) for k in ("npo", "glrt"))
    assert ra.npo.lower <= ref_npo + 2e-4 and abs(ra.npo.estimate - ref_npo) < 1e-3
    assert abs(ra.glrt.estimate - ref_glrt) < 1e-3
    # δ at the certified ε is δ to the accuracy of the two queries, and NPO is certified
    # above δ there.
    rd = a.delta(ra.glrt.upper)
    assert rd.quantity == "delta" and rd.epsilon == ra.glrt.upper
    assert rd.glrt.lower <= DELTA
    assert rd.glrt.upper <= DELTA * (1 + 2e-3) and rd.npo.lower > DELTA


def test_heterogeneous_rounds_without_subsampling_match_closed_form():
    # NPO, q = 1: 3 rounds at σ = 4 and 5 rounds at σ = 6 compose to μ² = 3/16 + 5/36.
    a = accountant.Accountant()
    a.compose(accountant.Phase(4.0, 1.0, 3))
    a.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(6.0), 5))
    assert len(a.phases) == 2
    rep = a.epsilon(1e-3)
    ref = _npo_epsilon_closed_form(1e-3, math.sqrt(3 / 16 + 5 / 36))
    assert rep.npo.lower <= ref <= rep.npo.upper
    assert abs(rep.npo.estimate - ref) < 2e-3
    assert rep.glrt.upper <= rep.npo.upper
    # The array shortcut composes the same phases.
    short = accountant.epsilon(1e-3, [4.0, 6.0], 1.0, [3, 5])
    assert short == rep


def test_shared_direction_matches_design_and_closed_form():
    # docs/design.md §3 (the package's data file): σ/Δ = 6, N = 70, δ = 1e-2 → NPO 3.6367,
    # GLRT (d = 1) 2.9437.
    npo_row, glrt_row = reproduce.number("scalar_npo"), reproduce.number("scalar_glrt")
    assert (npo_row.delta, npo_row.steps, npo_row.sigma2) == (1e-2, 70, 36.0)
    r = accountant.epsilon(1e-2, 6.0, steps=70, threat_model="shared")
    assert f"{r.npo.upper:.4f}" == npo_row.exact and f"{r.glrt.upper:.4f}" == glrt_row.exact
    assert r.npo.lower == r.npo.upper and math.isclose(r.mu, math.sqrt(70) / 6, rel_tol=1e-14)
    # Heterogeneous phases sharing one direction: λ = Σ steps_k / σ_k².
    acc = accountant.Accountant(d=3, threat_model="shared")
    for s, n in ((2.0, 1), (2.0, 3), (0.5, 2)):
        acc.compose(accountant.Phase(s, 1.0, n))
    rep = acc.epsilon(1e-4)
    assert math.isclose(rep.mu**2, 1 / 4 + 3 / 4 + 2 / 0.25, rel_tol=1e-14)
    assert math.isclose(rep.npo.upper, _npo_epsilon_closed_form(1e-4, rep.mu), rel_tol=1e-8)
    assert math.isclose(accountant.mu([2.0, 0.5], [4, 2]), rep.mu, rel_tol=1e-14)
    d = accountant.delta(rep.npo.upper, [2.0, 0.5], 1.0, [4, 2], d=3, threat_model="shared")
    assert math.isclose(d.npo.upper, 1e-4, rel_tol=1e-8) and d.glrt.upper < d.npo.upper


def test_report_cli(capsys):
    code = cli.main(
        "report --noise-multiplier 6 --steps 100 --sampling-rate 0.2 --delta 1e-5".split()
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "per round" in out
    row = next(line for line in out.splitlines() if line.startswith("| GLRT"))
    assert abs(float(row.split("|")[2]) - float(SUBSAMPLING_REF["glrt"])) < 1e-3  # as above
    code = cli.main(
        "report --noise-multiplier 6 --steps 70 --delta 1e-2 --threat-model shared".split()
    )
    out = capsys.readouterr().out
    assert (
        code == 0 and "| NPO (Gaussian DP) | 3.63674 | 3.63673 |" in out and "mu = 1.39443" in out
    )
    code = cli.main(
        "report --noise-multiplier 6 --sampling-rate 0.5 --delta 1e-2 --threat-model shared".split()
    )
    assert code == 2 and "sampling_rate must be 1" in capsys.readouterr().err


def test_cli_quiet_when_the_reader_stops_early(monkeypatch, capsys):
    class ClosedPipe:  # what `glrt-jax report ... | head -1` leaves once head has exited
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    code = cli.main(
        "report --noise-multiplier 6 --steps 70 --delta 1e-2 --threat-model shared".split()
    )
    assert code == 0 and capsys.readouterr().err == ""


def test_cli_errors_one_line_and_debug(capsys):
    # A bad value: one line naming the argument, the value and the valid range, status 2.
    argv = "report --noise-multiplier 1 --sampling-rate 0.5 0.5 --delta 1e-5".split()
    with pytest.raises(SystemExit):  # argparse's own usage error (one value per flag)
        cli.main(argv)
    capsys.readouterr()
    code = cli.main("report --noise-multiplier -0.5 --delta 1e-5".split())
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("glrt-jax report: error: noise_multiplier must be in (0, inf)")
    assert "-0.5" in err and "Traceback" not in err
    code = cli.main("report --noise-multiplier 1 --delta 2".split())
    err = capsys.readouterr().err
    assert code == 2 and "delta must be in (0, 1); got 2.0" in err
    # --debug shows the exception itself.
    with pytest.raises(ValueError, match=r"noise_multiplier must be in \(0, inf\)"):
        cli.main("--debug report --noise-multiplier -0.5 --delta 1e-5".split())


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: accountant.epsilon(1e-5, 0.0, 0.01, 10), "noise_multiplier"),
        (lambda: accountant.epsilon(1e-5, 1.0, 1.5, 10), "sampling_rate"),
        (lambda: accountant.epsilon(1e-5, 1.0, 0.0, 10), "sampling_rate"),
        (lambda: accountant.epsilon(1e-5, 1.0, 0.01, 0), "steps"),
        (lambda: accountant.epsilon(1e-5, 1.0, 0.01, 2.5), "steps"),
        (lambda: accountant.epsilon(1e-5, [1.0, 2.0], 0.01, [1, 2, 3]), "one length"),
        (lambda: accountant.epsilon(1.0, 1.0, 0.01, 10), "delta"),
        (lambda: accountant.epsilon(float("nan"), 1.0, 0.01, 10), "delta"),
        (lambda: accountant.delta(-1.0, 1.0, 0.01, 10), "epsilon"),
        (lambda: accountant.epsilon(1e-5, 1.0, 0.01, 10, d=0), "d"),
        (lambda: accountant.epsilon(1e-5, 1.0, 0.01, 10, tol=0.0), "tol"),
        (lambda: accountant.epsilon(1e-5, 1.0, 0.01, 10, neighbouring="x"), "neighbouring"),
        (lambda: accountant.epsilon(1e-5, 1.0, 0.01, 10, threat_model="x"), "threat_model"),
        (
            lambda: accountant.Accountant(threat_model="shared", neighbouring="replace_one"),
            "shared",
        ),
        (lambda: accountant.Accountant().compose(dp_accounting.LaplaceDpEvent(1.0)), "Laplace"),
        (lambda: accountant.Accountant().compose("gaussian"), "event"),
        (lambda: accountant.Accountant().epsilon(1e-5), "compose"),
        (lambda: accountant.mu(0.0), "noise_multiplier"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
