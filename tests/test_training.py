"""DP-SGD aggregation and the privacy ledger, against closed forms, optax and the accountant.

Marked ``float32``: ``.ci/run`` also runs this file with 64-bit floats off (JAX's default
in training programs), where the ledger's dtype is float32 and its answers must still be
the offline float64 accountant's, rounded up.
"""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from glrt_jax import training

pytestmark = pytest.mark.float32

DELTA = 1e-5


def _offline_epsilon(sig, q, n, delta=DELTA, **kw):
    """The offline accountant on the same history, in float64."""
    with jax.enable_x64(True):
        from glrt_jax import accountant

        b = accountant.schedule_epsilon(
            np.asarray(sig, np.float64), np.asarray(q, np.float64), np.asarray(n), delta, **kw
        )
        return float(b.upper)


def _per_example(batch=6, seed=0):
    k1, k2 = jax.random.split(jax.random.key(seed))
    return {
        "w": 3.0 * jax.random.normal(k1, (batch, 4, 3)),
        "b": jax.random.normal(k2, (batch, 3)),
    }


def _clipped_mean(grads, clip, divisor, mask=None):
    """Closed form: Σ_i g_i min(1, C/‖g_i‖) / divisor (global norm over the pytree)."""
    leaves = [np.asarray(v, np.float64) for v in jax.tree_util.tree_leaves(grads)]
    batch = leaves[0].shape[0]
    norms = np.sqrt(sum(np.sum(v.reshape(batch, -1) ** 2, axis=1) for v in leaves))
    scale = np.minimum(1.0, clip / norms)
    if mask is not None:
        scale = scale * np.asarray(mask)
    return [
        np.sum(v * scale.reshape((batch,) + (1,) * (v.ndim - 1)), axis=0) / divisor for v in leaves
    ]


def test_dp_aggregate_without_noise_is_the_clipped_mean_and_matches_optax():
    grads = _per_example()
    tx = training.dp_aggregate(1.5, 0.0, key=jax.random.key(1))
    out, state = tx.update(grads, tx.init(None))
    ref = _clipped_mean(grads, 1.5, 6)
    for got, want in zip(jax.tree_util.tree_leaves(out), ref, strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-7)
    # optax's DP aggregation (fixed σ = 0, realised batch size) gives the same mean.
    peer = optax.contrib.differentially_private_aggregate(1.5, 0.0, key=jax.random.key(1))
    out_peer, _ = peer.update(grads, peer.init(None))
    chex.assert_trees_all_close(out, out_peer, rtol=1e-6, atol=1e-7)
    assert int(state.count) == 1


def test_dp_aggregate_mask_expected_batch_and_noise_scale():
    grads = _per_example(batch=8)
    mask = jnp.array([1, 1, 0, 1, 0, 1, 1, 0])
    tx = training.dp_aggregate(1.0, 0.0, key=jax.random.key(2), expected_batch_size=4.0)
    out, _ = tx.update(grads, tx.init(None), mask=mask)
    ref = _clipped_mean(grads, 1.0, 4.0, mask=np.asarray(mask))
    for got, want in zip(jax.tree_util.tree_leaves(out), ref, strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-7)
    # Noise: zero gradients, σ from update(); the update is N(0, (Cσ/B)²) per coordinate.
    zeros = {"w": jnp.zeros((10, 20000))}
    tx = training.dp_aggregate(2.0, key=jax.random.key(3))
    out, _ = tx.update(zeros, tx.init(None), noise_multiplier=0.7)
    sd = float(np.std(np.asarray(out["w"], np.float64)))
    assert abs(sd / (2.0 * 0.7 / 10) - 1.0) < 0.03  # 20000 draws: sd's error ~0.5 %
    # A schedule of the step count: σ = 0 at step 0, then noise.
    tx = training.dp_aggregate(2.0, lambda c: jnp.where(c == 0, 0.0, 1.0), key=jax.random.key(4))
    s = tx.init(None)
    out0, s = tx.update(zeros, s)
    out1, s = tx.update(zeros, s)
    assert float(jnp.max(jnp.abs(out0["w"]))) == 0.0 and float(jnp.std(out1["w"])) > 0.1


def test_dp_aggregate_in_a_jitted_training_step():
    def loss(p, x, y):
        return jnp.mean((x @ p["w"] - y) ** 2)

    tx = optax.chain(training.dp_aggregate(1.0, 0.5, key=jax.random.key(0)), optax.adam(1e-2))
    params = {"w": jnp.zeros(3)}
    state = tx.init(params)
    x = jax.random.normal(jax.random.key(5), (32, 3))
    y = x @ jnp.array([1.0, -2.0, 0.5])

    @jax.jit
    def step(params, state):
        g = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(params, x[:, None], y[:, None])
        upd, state = tx.update(g, state, params)
        return optax.apply_updates(params, upd), state

    for _ in range(3):
        params, state = step(params, state)
    chex.assert_shape(params["w"], (3,))
    assert bool(jnp.all(jnp.isfinite(params["w"])))


def test_ledger_records_phases_and_overflows_pessimistically():
    led = training.init_ledger(2)
    for sig, q in ((1.0, 0.01), (1.0, 0.01), (0.8, 0.01), (0.8, 0.01)):
        led = training.record(led, sig, q)
    assert int(led.phases) == 2 and led.steps.tolist() == [2, 2]
    led = training.record(led, 0.8, 0.01, 0)  # nothing recorded
    assert led.steps.tolist() == [2, 2] and not bool(led.overflow)
    led = training.record(led, 2.0, 0.01)  # a third phase does not fit
    assert bool(led.overflow) and math.isinf(float(training.epsilon_spent(led, DELTA)))
    assert float(training.epsilon_spent(training.init_ledger(), DELTA)) == 0.0
    with pytest.raises(ValueError, match="delta"):
        training.epsilon_spent(training.init_ledger(), 2.0)
    with pytest.raises(ValueError, match="adversary"):
        training.epsilon_spent(training.init_ledger(), DELTA, adversary="x")


def test_ledger_epsilon_matches_offline_accountant_inside_scan():
    sigmas = jnp.array([1.0] * 300 + [0.8] * 200)
    rates = jnp.array([0.01] * 300 + [0.02] * 200)

    @jax.jit
    def run(led):
        def body(led, x):
            led = training.record(led, x[0], x[1])
            return led, None

        led, _ = jax.lax.scan(body, led, jnp.stack([sigmas, rates], axis=1))
        return (
            led,
            training.epsilon_spent(led, DELTA),
            training.epsilon_spent(led, DELTA, adversary="glrt", d=10),
        )

    led, e_npo, e_glrt = run(training.init_ledger(8))
    assert led.steps[:2].tolist() == [300, 200]
    sig, q = np.asarray(led.noise_multiplier[:2]), np.asarray(led.sampling_rate[:2])
    ref_npo = _offline_epsilon(sig, q, [300, 200])
    ref_glrt = _offline_epsilon(sig, q, [300, 200], adversary="glrt", d=10)
    for got, ref in ((e_npo, ref_npo), (e_glrt, ref_glrt)):
        assert float(got) >= ref  # rounded up to the ledger's dtype, never below
        assert float(got) <= ref * (1 + 1e-6)
    assert float(e_glrt) < float(e_npo)


def test_training_stops_exactly_at_the_last_step_within_budget():
    led = training.record(training.init_ledger(4), 1.0, 0.02, 200)
    # The history alone is at ε ≈ 1.85: a budget of 1.5 is spent, 3 leaves room.
    assert int(training.steps_within_budget(led, 1.5, DELTA, 1.1, 0.02)) == 0
    budget, sig, q = 3.0, 1.1, 0.02
    n = training.steps_within_budget(led, budget, DELTA, sig, q, max_steps=100_000)
    n = int(n)
    base = np.asarray(led.noise_multiplier[:1])
    hist = lambda m: ([base[0], sig], [0.02, q], [200, m])  # noqa: E731
    assert _offline_epsilon(*hist(n)) <= budget < _offline_epsilon(*hist(n + 1))

    # The loop pattern: a while_loop that runs exactly the steps that fit.
    @jax.jit
    def train(led):
        limit = training.steps_within_budget(led, budget, DELTA, sig, q, max_steps=100_000)

        def cond(c):
            return c[1] < limit

        def body(c):
            return training.record(c[0], sig, q), c[1] + 1

        led, _ = jax.lax.while_loop(cond, body, (led, jnp.zeros((), jnp.int32)))
        return led, training.epsilon_spent(led, DELTA)

    led_end, eps_end = train(led)
    assert led_end.steps[:2].tolist() == [200, n] and float(eps_end) <= budget


def test_recalibration_fits_the_budget_and_is_tight():
    led = training.record(training.init_ledger(4), 1.0, 0.01, 500)
    sigma = float(training.noise_multiplier_for_budget(led, 2.0, DELTA, 0.02, 400, rtol=1e-4))
    base = float(led.noise_multiplier[0])
    fits = _offline_epsilon([base, sigma], [0.01, 0.02], [500, 400])
    assert fits <= 2.0
    # 1 % less noise no longer fits (σ is the smallest to about rtol, and ε moves ≫ 1e-3).
    assert _offline_epsilon([base, sigma * 0.99], [0.01, 0.02], [500, 400]) > 2.0
    # A budget the history alone exceeds: inf.
    assert math.isinf(float(training.noise_multiplier_for_budget(led, 0.5, DELTA, 0.02, 10)))


def test_dp_aggregate_for_budget_uses_the_calibrated_noise():
    tx, sigma = training.dp_aggregate_for_budget(
        1.0, DELTA, steps=1000, sampling_rate=0.01, l2_norm_clip=2.0, key=jax.random.key(0)
    )
    # The calibrated σ meets the target on the offline accountant, tightly.
    assert 0.999 <= _offline_epsilon([sigma], [0.01], [1000]) <= 1.0
    # …and is the σ of the noise: zero gradients give N(0, (Cσ/B)²) per coordinate.
    out, _ = tx.update({"w": jnp.zeros((10, 20000))}, tx.init(None))
    assert abs(float(np.std(np.asarray(out["w"], np.float64))) / (2.0 * sigma / 10) - 1) < 0.03
