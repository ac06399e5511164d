"""Tests of glrt_jax.calibrate under jit, vmap and autodiff (traced inputs).

The eager front-ends are tested in test_calibrate.py; the traced solve compiles one
program per test here, kept apart so that the two files can run side by side.
"""

import jax
import jax.numpy as jnp
import numpy as np

from glrt_jax import accountant, calibrate, profile
from glrt_jax._src import planning

# The DP-SGD case of the issue: q = 0.01, N = 1000, δ = 1e-5, add/remove.
Q, N, DELTA = 0.01, 1000, 1e-5


def _jit_sizes_epsilon(sigma, q=Q, steps=N):
    """The engine's certified ε at :data:`accountant.JIT_SIZES`, the sizes under jit."""
    b, j = accountant.JIT_SIZES
    return float(accountant.schedule_epsilon(sigma, q, steps, DELTA, points=b, nodes=j).upper)


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
    eps = np.asarray(profile.epsilon(1e-5, jnp.sqrt(100.0) / sig))
    assert np.all((eps <= t) & (eps >= t * (1 - 1e-9)))
    eager = float(calibrate.noise_multiplier(float(t[5]), 1e-5, steps=100))
    assert abs(sig[5] - eager) <= 1e-9 * eager  # both inside the gap band


def test_jit_vmap_and_implicit_grads(monkeypatch):
    # Each of the engine's stages is traced once in this program, though the root finder
    # evaluates the residual in its loop and again in its derivative rule
    # (solvers._same_trace_context; twice before: JAX's tracing cache missed).
    traced = []
    plan = planning.plan
    monkeypatch.setattr(planning, "plan", lambda *a, **k: traced.append(1) or plan(*a, **k))

    def sigma(e, dl, q):
        return calibrate.noise_multiplier(e, dl, N, q, sigma_bounds=(1.0, 2.5))

    # One compiled program for every check: σ and its reverse-mode gradient in (ε*, δ, q)
    # over a batch of three targets, the end points of the finite differences below, and a
    # target whose σ lies outside sigma_bounds.
    h = 0.05
    e = jnp.array([0.9, 1.0, 1.1, 1.0 + h, 1.0 - h, 1.0, 1.0, 30.0])
    q = Q * jnp.exp(jnp.array([0.0, 0.0, 0.0, 0.0, 0.0, h, -h, 0.0]))
    f = jax.jit(jax.vmap(jax.value_and_grad(sigma, argnums=(0, 1, 2)), in_axes=(0, None, 0)))
    sig, g_eps, g_delta, g_q = (np.asarray(v) for v in jax.tree.leaves(f(e, DELTA, q)))
    assert len(traced) <= 1
    targets = np.asarray(e[:3])
    eps = np.array([_jit_sizes_epsilon(float(v)) for v in sig[:3]])
    assert np.all(eps <= targets)
    assert np.all(eps >= targets * (1 - 1e-3))
    assert np.all(np.diff(sig[:3]) < 0)
    # Traced inputs, σ outside sigma_bounds: NaN, never an unsafe number.
    assert np.isnan(sig[7])
    # dσ/dε* through the implicit derivative, against a central difference wide enough
    # to average over the certified bound's small jumps (at most tol = 1e-3 of ε).
    fd = (sig[3] - sig[4]) / (2 * h)
    assert g_eps[1] < 0 and abs(g_eps[1] - fd) <= 0.02 * abs(fd)
    # dσ/dq and dσ/dδ: signs, and the same finite-difference check on log scales.
    gq, fq = Q * g_q[1], (sig[5] - sig[6]) / (2 * h)
    assert gq > 0 and abs(gq - fq) <= 0.02 * abs(fq)
    assert DELTA * g_delta[1] < 0


def test_max_sampling_rate_under_jit():
    # As eagerly (test_calibrate.py): q = 1 when it already meets the target; a safe rate
    # for a small target; NaN (never an unsafe rate) when no rate in rate_bounds meets it.
    f = jax.jit(lambda e: calibrate.max_sampling_rate(e, DELTA, noise_multiplier=1.0, steps=10))
    assert float(f(50.0)) == 1.0
    assert _jit_sizes_epsilon(1.0, q=float(f(1e-3)), steps=10) <= 1e-3
    g = jax.jit(
        lambda e: calibrate.max_sampling_rate(
            e, DELTA, noise_multiplier=1.0, steps=10, rate_bounds=(0.1, 0.5)
        )
    )
    assert np.isnan(float(g(1e-3)))


def test_glrt_default_interval_holds_the_root_at_large_d():
    # Under jit the search interval is a factor e⁴ either side of a guess. The GLRT
    # adversary needs far less noise than NPO at large d (here σ = 3.98 where NPO's guess
    # is 313, the GLRT's 4.70): NPO's guess put the root outside the interval and jit
    # answered NaN. σ must meet the target by the closed form (shared direction, Theorem
    # 2) and equal the eager answer, whose interval moves until it holds the root.
    d, steps, eps_target = 10**5, 1000, 0.5
    kw = dict(d=d, adversary="glrt", threat_model="shared")
    sigma = jax.jit(lambda e: calibrate.noise_multiplier(e, DELTA, steps, 1.0, **kw))(eps_target)
    eager = calibrate.noise_multiplier(eps_target, DELTA, steps, 1.0, **kw)
    assert np.isfinite(float(sigma))
    assert abs(float(sigma) - float(eager)) <= 1e-8 * float(eager)
    eps = float(profile.epsilon(DELTA, np.sqrt(steps) / float(sigma), d, adversary="glrt"))
    assert eps_target * (1 - 1e-8) <= eps <= eps_target
