"""Tests of glrt_jax.sweep: sharded evaluation equals plain vmap, on one and on two devices.

Two devices are simulated on the CPU in a subprocess
(``XLA_FLAGS=--xla_force_host_platform_device_count=2``); the reference is the same
function evaluated point by point (SciPy for the NPO curve).
"""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from glrt_jax import roc, sweep

TWO_DEVICES = textwrap.dedent(
    """
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    from scipy import stats
    from glrt_jax import audit, roc, sweep

    assert len(jax.devices()) == 2, jax.devices()
    points, shape = sweep.cartesian(mu=np.linspace(0.1, 3.0, 7), alpha=[1e-6, 0.01, 0.3])
    ref = stats.norm.sf(stats.norm.isf(points["alpha"]) - points["mu"])
    for chunk in (None, 2):
        out = sweep.sweep(roc.curve, points["alpha"], points["mu"], chunk_size=chunk)
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-10)
        assert out.shape == (21,)

    # An even batch stays sharded: one half on each device.
    out = sweep.sweep(roc.curve, points["alpha"][:20], points["mu"][:20])
    assert out.sharding.spec == jax.sharding.PartitionSpec("batch"), out.sharding
    assert {s.device.id for s in out.addressable_shards} == {0, 1}
    assert all(s.data.shape == (10,) for s in out.addressable_shards)

    # Many games: one batch of games per key, the same as playing them one by one.
    keys = jax.random.split(jax.random.key(0), 3)
    play = lambda k: audit.run_game(k, sigma=6.0, sensitivity=1.0, steps=70, games=500).glrt
    got = np.asarray(sweep.sweep(play, keys))
    want = np.stack([np.asarray(play(k)) for k in keys])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    print("OK")
    """
)


def test_two_devices_in_subprocess():
    # Two host devices, compiled as the suite's other programs (its XLA_FLAGS kept).
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
    env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, "-c", TWO_DEVICES], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("OK")


def test_one_device_matches_vmap_with_unmapped_and_pytree_args():
    mu = jnp.linspace(0.1, 2.0, 5)

    def fn(m, a):
        return {"tpr": roc.curve(a["alpha"], m), "m": m}

    out = sweep.sweep(fn, mu, {"alpha": jnp.asarray(0.05)}, in_axes=(0, None), chunk_size=2)
    ref = stats.norm.sf(stats.norm.isf(0.05) - np.asarray(mu))
    np.testing.assert_allclose(np.asarray(out["tpr"]), ref, rtol=1e-10)
    np.testing.assert_array_equal(np.asarray(out["m"]), np.asarray(mu))


def test_cartesian():
    points, shape = sweep.cartesian(sigma=[1.0, 2.0], q=[0.1, 0.2, 0.3])
    assert shape == (2, 3)
    np.testing.assert_array_equal(points["sigma"].reshape(shape)[:, 0], [1.0, 2.0])
    np.testing.assert_array_equal(points["q"].reshape(shape)[0], [0.1, 0.2, 0.3])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sweep.sweep(roc.curve, jnp.ones(3), jnp.ones(4)), "batch size"),
        (lambda: sweep.sweep(roc.curve, 0.5, 1.0, in_axes=None), "mapped argument"),
        (lambda: sweep.sweep(roc.curve, jnp.ones(3), 1.0, in_axes=(0,)), "in_axes"),
        (lambda: sweep.sweep(roc.curve, jnp.ones(3), 1.0, in_axes=(1, None)), "in_axes"),
        (lambda: sweep.sweep(roc.curve, jnp.ones(3), jnp.ones(3), chunk_size=0), "chunk_size"),
        (lambda: sweep.cartesian(), "axes"),
        (lambda: sweep.cartesian(sigma=[]), "sigma"),
        (lambda: sweep.local_mesh([]), "devices"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_default_mesh_uses_all_local_devices():
    assert sweep.local_mesh().devices.size == len(jax.local_devices())


def test_repeated_sweeps_reuse_the_compiled_program():
    a = jnp.linspace(0.01, 0.5, 8)
    m = jnp.linspace(0.5, 2.0, 8)
    a_rev = a[::-1]
    first = sweep.sweep(roc.curve, a, m)
    events = []

    def listener(event, duration, **kwargs):
        events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        second = sweep.sweep(roc.curve, a_rev, m)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    # Neither traced nor compiled again (JAX reports both as /jax/core/compile/... events).
    assert not [e for e in events if e.startswith("/jax/core/compile/")], events
    np.testing.assert_array_equal(np.asarray(second), np.asarray(roc.curve(a_rev, m)))
    assert first.shape == (8,)
