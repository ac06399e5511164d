"""One round answered from its own tails (glrt_jax._src.one_round), against 50-digit
references: the add/remove profile, the replace-one profile by its own root finder, the
Gaussian closed form at q = 1; GLRT against a 30-digit Poisson-mixture reference and the
privacy profile at q = 1."""

import math

import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from closed_forms import (
    gaussian_delta,
    gaussian_epsilon,
    glrt_one_round_delta,
    one_round_delta,
    one_round_epsilon,
    one_round_replace_delta,
)

from glrt_jax import accountant
from glrt_jax._src import composition, losses, one_round

# Far below every case's tolerance, far above the tails' allowance (1e-10 each, amplified
# by the cancellation between the terms).
EXACT = 1e-7


def _rel_width(b):
    lo, up = float(b.lower), float(b.upper)
    return 0.0 if up == 0.0 else (up - lo) / up


def _random_cases(seed, k):
    rng = np.random.default_rng(seed)
    sig = np.exp(rng.uniform(math.log(0.3), math.log(20.0), k))
    q = np.exp(rng.uniform(math.log(1e-6), 0.0, k))
    delta = np.exp(rng.uniform(math.log(1e-15), math.log(1e-1), k))
    return list(zip(sig, q, delta, strict=True))


def test_normal_tails_within_a_hundredth_of_the_allowance():
    """The one-round bounds take each normal tail within TAIL_REL of its computed value:
    measured against mpmath over the whole range where Φ(−x) is a normal double."""
    x = np.concatenate([np.linspace(-38.0, 38.0, 1521), np.geomspace(1e-12, 38.0, 300)])
    x = np.concatenate([x, -x[-300:]])
    got = np.asarray(losses._normal_tails(jnp.asarray(x))[0])
    with mp.workdps(40):
        ref = [mp.ncdf(-mp.mpf(float(v))) for v in x]
    rel = [abs(g - r) / r for g, r in zip(got, ref, strict=True) if r > 2.3e-308]
    assert max(float(e) for e in rel) <= one_round.TAIL_REL / 100


@pytest.mark.parametrize("sigma, q, delta", _random_cases(3, 12))
def test_epsilon_brackets_the_profile_to_the_last_digits(sigma, q, delta):
    b = accountant.schedule_epsilon(sigma, q, 1, delta)
    truth = one_round_epsilon(sigma, q, delta)
    assert float(b.lower) <= truth <= float(b.upper), (b, truth)
    assert _rel_width(b) <= EXACT, b
    assert float(b.lower) <= float(b.estimate) <= float(b.upper)


@pytest.mark.parametrize("sigma, q, delta", _random_cases(4, 8))
def test_delta_brackets_the_profile_at_and_around_its_epsilon(sigma, q, delta):
    eps = one_round_epsilon(sigma, q, delta)
    for e in (0.5 * eps, eps, 2.0 * eps):
        b = accountant.schedule_delta(sigma, q, 1, e)
        truth = one_round_delta(sigma, q, e)
        assert float(b.lower) <= truth <= float(b.upper), (e, b, truth)
        assert _rel_width(b) <= EXACT, (e, b)


@pytest.mark.parametrize(
    "sigma, q, eps",
    [
        (1.0, 0.01, 0.2),
        (0.9, 1e-6, 1e-4),
        (0.5912, 1.45e-6, 0.1),
        (5.0, 0.3, 0.05),
        (0.3, 1.0, 60.0),
    ],
)
def test_replace_one_against_its_own_root_finder(sigma, q, eps):
    b = accountant.schedule_delta(sigma, q, 1, eps, neighbouring="replace_one")
    truth = one_round_replace_delta(sigma, q, eps)
    assert float(b.lower) <= truth <= float(b.upper), (b, truth)
    assert _rel_width(b) <= EXACT, b


@pytest.mark.parametrize("sigma, delta", [(0.3, 1e-15), (1.0, 1e-5), (20.0, 1e-10)])
def test_q1_is_the_gaussian_closed_form_in_both_relations(sigma, delta):
    """q = 1: add/remove is μ-GDP and replace-one 2μ-GDP (the two contributions antipodal)."""
    for neighbouring, mu in (("add_remove", 1.0 / sigma), ("replace_one", 2.0 / sigma)):
        b = accountant.schedule_epsilon(sigma, 1.0, 1, delta, neighbouring=neighbouring)
        truth = gaussian_epsilon(delta, mu)
        assert float(b.lower) <= truth * (1 + 1e-12) and truth <= float(b.upper) * (1 + 1e-12)
        assert _rel_width(b) <= EXACT, (neighbouring, b)
        d = accountant.schedule_delta(sigma, 1.0, 1, truth, neighbouring=neighbouring)
        assert float(d.lower) <= gaussian_delta(truth, mu) * (1 + 1e-9)
        assert gaussian_delta(truth, mu) <= float(d.upper) * (1 + 1e-9)


def test_tails_below_the_smallest_normal_double_are_allowed_for():
    """σ = 0.31, q = 1, δ = 1e-300 (far below the promised range, yet no bracket may miss):
    at ε ≈ 124.5 the second term e^ε Q[L > b] is about 1e-300 while Q[L > b], below 1e-353,
    underflows; taken as exact, the lower bound was 124.71. The tails' bracket, about 7%
    wide, is the answer at tol = 0.1 (at the default tol the engine also runs, 30 s at
    δ = 1e-300, and the answer is the two brackets' intersection)."""
    b = accountant.schedule_epsilon(0.31, 1.0, 1, 1e-300, tol=0.1)
    truth = one_round_epsilon(0.31, 1.0, 1e-300)
    assert float(b.lower) <= truth <= float(b.upper), (b, truth)


def test_epsilon_zero_where_delta_at_zero_is_already_small():
    """σ = 20, q = 1e-6: δ(0) ≈ 2e-8 lies below δ = 1e-3, so ε = 0 exactly; δ(0) itself is
    bracketed too."""
    b = accountant.schedule_epsilon(20.0, 1e-6, 1, 1e-3)
    assert (float(b.lower), float(b.upper)) == (0.0, 0.0)
    d = accountant.schedule_delta(20.0, 1e-6, 1, 0.0)
    truth = one_round_delta(20.0, 1e-6, 0.0)
    assert float(d.lower) <= truth <= float(d.upper) and 0.0 < truth < 1e-3


def test_one_round_among_empty_phases_and_against_the_engine(monkeypatch):
    """A schedule whose steps add up to one is that round, wherever it sits; the engine's
    own bracket (the exact path turned off) contains the exact one (both are certified)."""
    sig, q, steps = [1.5, 0.9, 2.0], [0.02, 1e-4, 0.5], [0, 1, 0]
    b = accountant.schedule_epsilon(sig, q, steps, 1e-12)
    truth = one_round_epsilon(0.9, 1e-4, 1e-12)
    assert float(b.lower) <= truth <= float(b.upper) and _rel_width(b) <= EXACT
    monkeypatch.setattr(composition, "EXACT_ONE_ROUND", False)
    engine = accountant.schedule_epsilon(sig, q, steps, 1e-12)
    assert float(engine.lower) <= float(b.lower) and float(b.upper) <= float(engine.upper)
    assert _rel_width(engine) > 10 * EXACT  # (the engine's bracket: the tolerance's scale)


def test_sized_queries_keep_the_engine():
    """Explicit sizes ask for the engine at those sizes (as under ``jit``): its bracket,
    the tolerance's scale, holds the tails' one."""
    exact = accountant.schedule_epsilon(1.0, 0.01, 1, 1e-5)
    sized = accountant.schedule_epsilon(1.0, 0.01, 1, 1e-5, points=512, nodes=4096)
    assert _rel_width(exact) <= EXACT < _rel_width(sized)
    assert float(sized.lower) <= float(exact.lower) and float(exact.upper) <= float(sized.upper)


@pytest.mark.parametrize(
    "sigma, q, delta, d",
    [
        (1.0, 0.01, 1e-5, 1),
        (0.5, 1e-4, 1e-12, 1),
        (0.7, 1e-3, 1e-10, 10),
        (2.0, 0.3, 1e-6, 100),
        (0.4, 1e-5, 1e-15, 3),
    ],
)
def test_glrt_epsilon_against_the_mixture_reference(sigma, q, delta, d):
    """GLRT: the 30-digit reference δ at the bracket's ends (δ(ε) decreases: the root lies
    between them), and the δ query at the upper end holds the reference; never above NPO."""
    b = accountant.schedule_epsilon(sigma, q, 1, delta, adversary="glrt", d=d)
    assert glrt_one_round_delta(sigma, q, float(b.upper), d) <= delta
    assert glrt_one_round_delta(sigma, q, float(b.lower), d) >= delta
    assert _rel_width(b) <= 1e-6, b  # (the non-central χ² tails' wider allowance)
    e = float(b.upper)
    dq = accountant.schedule_delta(sigma, q, 1, e, adversary="glrt", d=d)
    assert float(dq.lower) <= glrt_one_round_delta(sigma, q, e, d) <= float(dq.upper)
    assert float(b.upper) <= float(accountant.schedule_epsilon(sigma, q, 1, delta).lower)


@pytest.mark.parametrize("d", [1, 10])
def test_glrt_at_q1_is_the_privacy_profile(d):
    """q = 1: one GLRT round is the release of ``glrt_jax.profile`` (conjugation of the
    symmetrised ROC, another code path), and the reference agrees with it too."""
    from glrt_jax import profile

    for delta in (1e-3, 1e-9, 1e-14):
        b = accountant.schedule_epsilon(1.0, 1.0, 1, delta, adversary="glrt", d=d)
        eps = float(profile.epsilon(delta, 1.0, d, adversary="glrt"))
        assert float(b.lower) * (1 - 1e-9) <= eps <= float(b.upper) * (1 + 1e-9), (delta, b, eps)
    e = 0.5
    ref = glrt_one_round_delta(1.0, 1.0, e, d)
    assert abs(float(profile.delta(e, 1.0, d, adversary="glrt")) - ref) <= 1e-11 * ref
