"""Tests of glrt_jax.schedules: the certified constraint, the q = 1 closed form, bad input."""

import math
import subprocess
import sys
import textwrap

import chex
import numpy as np
import pytest

from glrt_jax import accountant, calibrate, schedules

optax = pytest.importorskip("optax")

TARGET, DELTA = 2.0, 1e-5
STEPS = np.array([50, 50, 50])
WEIGHTS = np.array([1.0, 4.0, 9.0])


@pytest.fixture(scope="module")
def plain():
    """q = 1, NPO, weights 1, 4, 9: the case with a closed form (Gaussian DP)."""
    return schedules.optimize_noise_multipliers(TARGET, DELTA, STEPS, weights=WEIGHTS)


def _certified(sigma, q, steps, **kw):
    return float(accountant.schedule_epsilon(sigma, q, steps, DELTA, **kw).upper)


def test_meets_the_budget_tightly(plain):
    """Re-evaluated independently, both schedules are within [0.99 ε*, ε*]."""
    chex.assert_shape(plain.noise_multiplier, (3,))
    for sigma in (plain.noise_multiplier, np.full(3, plain.baseline_noise_multiplier)):
        eps = _certified(sigma, 1.0, STEPS)
        assert 0.99 * TARGET <= eps <= TARGET
    assert plain.epsilon == _certified(plain.noise_multiplier, 1.0, STEPS)
    assert TARGET * (1 - 1e-4) <= plain.epsilon <= TARGET
    assert plain.converged
    assert plain.history[0] == pytest.approx(plain.baseline_utility, rel=1e-3)
    assert np.all(np.diff(plain.history) <= 0.0)  # feasible descent: U never goes up


def test_closed_form_for_gaussian_dp(plain):
    """q = 1, NPO: ε depends on μ² = Σ n_k/σ_k² only, so σ_k² ∝ w_k^{-1/2} (Lagrange)."""
    mu_star = 1.0 / float(calibrate.noise_multiplier(TARGET, DELTA, steps=1))  # μ* for ε*
    c = np.sum(STEPS * np.sqrt(WEIGHTS)) / mu_star**2
    sigma_star = np.sqrt(c / np.sqrt(WEIGHTS))
    chex.assert_trees_all_close(plain.noise_multiplier, sigma_star, rtol=1e-2)
    sigma_const = math.sqrt(STEPS.sum()) / mu_star
    assert plain.baseline_noise_multiplier == pytest.approx(sigma_const, rel=1e-2)
    gain_star = 1.0 - np.sum(STEPS * np.sqrt(WEIGHTS)) ** 2 / (
        STEPS.sum() * np.sum(WEIGHTS * STEPS)
    )
    assert plain.gain == pytest.approx(gain_star, abs=1e-3)
    assert plain.utility == pytest.approx(np.sum(WEIGHTS * STEPS * sigma_star**2), rel=2e-3)


def test_searches_of_up_to_eight_phases_share_one_program(plain):
    """Phases are padded as the engine pads them: after the three-phase search, one of
    five phases compiles no new program of ε and its gradient."""
    from glrt_jax._src import schedule_search

    before = schedule_search._epsilon_and_grad._cache_size()
    r = schedules.optimize_noise_multipliers(
        TARGET, DELTA, [30] * 5, weights=[1.0, 2.0, 3.0, 4.0, 5.0], max_iter=2
    )
    chex.assert_shape(r.noise_multiplier, (5,))
    assert r.epsilon == _certified(r.noise_multiplier, 1.0, [30] * 5) <= TARGET
    assert schedule_search._epsilon_and_grad._cache_size() == before


def test_uniform_weights_keep_the_constant_schedule():
    """With uniform weights and q = 1 the constant schedule is optimal: no gain."""
    r = schedules.optimize_noise_multipliers(TARGET, DELTA, STEPS)
    chex.assert_trees_all_close(
        r.noise_multiplier, np.full(3, r.baseline_noise_multiplier), rtol=1e-4
    )
    assert abs(r.gain) < 1e-4


def test_subsampled_with_a_callers_optimizer():
    """Heterogeneous q and the caller's optax.adam: certified, feasible descent, a gain."""
    q = np.array([0.05, 0.1, 0.2])
    r = schedules.optimize_noise_multipliers(
        TARGET, DELTA, [100, 100, 100], q, max_iter=8, optimizer=optax.adam(0.05)
    )
    eps = _certified(r.noise_multiplier, q, [100, 100, 100])
    assert TARGET * (1 - 1e-4) <= eps <= TARGET
    assert r.gain > 0.0 and np.all(np.diff(r.history) <= 0.0)
    assert len(r.history) == r.iterations + 1


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(target_epsilon=0.0), "target_epsilon"),
        (dict(delta=1.5), "delta"),
        (dict(steps=[50, 0, 50]), "steps"),
        (dict(steps=[[50, 50]]), "steps"),
        (dict(steps=[50.5, 50, 50]), "steps"),
        (dict(sampling_rate=[0.1, 0.2]), "sampling_rate"),
        (dict(sampling_rate=1.5), "sampling_rate"),
        (dict(weights=[1.0, -1.0, 2.0]), "weights"),
        (dict(weights=[1.0, 2.0]), "weights"),
        (dict(d=0), "d"),
        (dict(adversary="lrt"), "adversary"),
        (dict(neighbouring="swap"), "neighbouring"),
        (dict(tol=0.0), "tol"),
        (dict(rtol=0.5), "rtol"),
        (dict(gtol=-1.0), "gtol"),
        (dict(max_iter=-1), "max_iter"),
        (dict(optimizer="adam"), "optimizer"),
    ],
)
def test_bad_input_names_the_argument(kwargs, name):
    args = dict(target_epsilon=TARGET, delta=DELTA, steps=[50, 50, 50])
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        schedules.optimize_noise_multipliers(**args)


def test_refuses_float32():
    script = textwrap.dedent(
        """
        import jax
        from glrt_jax import schedules
        assert not jax.config.jax_enable_x64
        try:
            schedules.optimize_noise_multipliers(1.0, 1e-5, [10, 10])
        except ValueError as exc:
            assert "64" in str(exc) and "optimize_noise_multipliers" in str(exc), str(exc)
            print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
