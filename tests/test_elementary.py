"""The accuracy of XLA's elementary functions that the engine's error terms assume.

The certified bounds count on a few functions being accurate to a stated number of units
in the last place (u = 2⁻⁵³): the non-uniform FFT on ``exp`` of its Gaussian kernel within
4u relative and on its modulation ``e^{iθ}`` within 16u (:mod:`glrt_jax._src.nufft`), and
the per-node log of each round's transform within 4u(|log| + 1)
(:func:`glrt_jax._src.transform.log_transform`), and near 1 (the double-double path)
within 8u|v| + 4u|log| of ``log(1 + v)`` (:func:`glrt_jax._src.transform.log_near_one`).
These are properties of XLA's code, not
of this package: measured here against extended precision (80-bit long double), with
XLA's default options and with those the engine's programs are compiled with
(``programs.SMALL_PROGRAMS``, ``programs.QUICK_COMPILE``), each required to hold with a
quarter to spare, so that an XLA whose functions are less accurate fails here rather than
voiding the bounds silently.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from glrt_jax._src import nufft, programs, transform

U = 2.0**-53
EXTENDED = np.finfo(np.longdouble).eps < 1e-18
pytestmark = pytest.mark.skipif(not EXTENDED, reason="needs an extended-precision long double")
OPTIONS = {"default": None, "small": programs.SMALL_PROGRAMS, "quick": programs.QUICK_COMPILE}
SPARE = 0.75  # measured errors must stay below this fraction of what the bounds assume


def _compiled(fn, options):
    if options is not None and programs._checked(tuple(sorted(options.items()))) is None:
        pytest.skip("this backend does not take these options")
    return jax.jit(fn, compiler_options=options)


def _unit_disc(n, rng):
    """Points w of the unit disc: |w| log-uniform on [1e-12, 1], more densely in
    [0.7, 0.85] (where |w|² − 1 ≈ −0.41) and just below 1 (low frequencies), at any
    angle; and just below 1 at angles log-uniform in [1e-16, 1] of either sign (the low
    frequencies of a round centred at its tilted mean, where |log w| is tiny)."""
    r = np.concatenate(
        [
            np.exp(rng.uniform(np.log(1e-12), 0.0, n)),
            rng.uniform(0.7, 0.85, n),
            1.0 - np.exp(rng.uniform(np.log(1e-16), 0.0, n)),
        ]
    )
    near = 1.0 - np.exp(rng.uniform(np.log(1e-16), np.log(1e-2), n))
    small = np.exp(rng.uniform(np.log(1e-16), 0.0, n)) * rng.choice([-1.0, 1.0], n)
    return np.concatenate(
        [r * np.exp(1j * rng.uniform(-np.pi, np.pi, r.size)), near * np.exp(1j * small)]
    )


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
def test_log_of_a_transform_within_the_bound_the_nodes_assume(options):
    w = _unit_disc(100_000, np.random.default_rng(0))
    got = np.asarray(_compiled(transform.log_transform, options)(w))
    exact = np.log(w.astype(np.clongdouble))
    err = np.abs(got.astype(np.clongdouble) - exact).astype(np.float64)
    scale = U * (np.abs(exact).astype(np.float64) + 1.0)
    # transform.node_terms charges 4u(|log| + 1) (measured: within about 2u(|log| + 1));
    # XLA's complex log1p (and log) reach about 19u(|log| + π) at |w| ≈ 0.77 (its real
    # log1p is about 240 ulp off near −0.41).
    assert np.max(err / scale) <= SPARE * 4.0


def _near_one(n, rng):
    """Points v = w − 1 with ||w|² − 1| ≤ transform.NEAR_ONE: |v| log-uniform on
    [1e-18, 0.09] at any angle; w = ρe^{iφ} with ρ² uniform in 1 ± NEAR_ONE and any φ;
    and w = e^{iφ} (modulus 1, where Re v ≈ −φ²/2 cancels in 2 Re v + |v|²), φ
    log-uniform on [1e-9, π] of either sign."""
    r = np.exp(rng.uniform(np.log(1e-18), np.log(0.09), n))
    v = r * np.exp(1j * rng.uniform(-np.pi, np.pi, n))
    rho = np.sqrt(1.0 + rng.uniform(-transform.NEAR_ONE, transform.NEAR_ONE, n))
    ring = rho * np.exp(1j * rng.uniform(-np.pi, np.pi, n)) - 1.0
    phi = np.exp(rng.uniform(np.log(1e-9), np.log(np.pi), n))
    unit = np.expm1(1j * phi * rng.choice([-1.0, 1.0], n))
    return np.concatenate([v, ring, unit])


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
def test_log_near_one_within_its_charge(options):
    """transform.log_near_one (the precise path's log of a transform near 1) against
    ``½ log1p(2 Re v + |v|²) + i atan2(Im v, 1 + Re v)`` in long double: within its charge
    ``u|v|(10 + 7|v|) + 4u|log|`` with a quarter to spare, and far within the float
    path's ``4u(|log| + 1)`` where |v| is small."""
    v = _near_one(50_000, np.random.default_rng(2))
    got, charge = _compiled(transform.log_near_one, options)(v)
    got, charge = np.asarray(got), np.asarray(charge)
    re, im = v.real.astype(np.longdouble), v.imag.astype(np.longdouble)
    exact_re = 0.5 * np.log1p(2 * re + (re * re + im * im))
    exact_im = np.arctan2(im, 1 + re)
    err = np.hypot(
        (got.real - exact_re).astype(np.float64), (got.imag - exact_im).astype(np.float64)
    )
    assert np.max(err / charge) <= SPARE, np.max(err / charge)
    small = np.abs(v) < 1e-3
    assert np.max(charge[small] / (np.abs(v[small]) * U)) <= 14.1


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
def test_exp_and_modulation_within_what_the_nufft_assumes(options):
    rng = np.random.default_rng(1)
    x = -rng.uniform(0.0, 60.0, 100_000)  # the kernel's arguments −a(t − δ)², ≤ 0
    got = np.asarray(_compiled(jnp.exp, options)(x)).astype(np.longdouble)
    exact = np.exp(x.astype(np.longdouble))
    assert float(np.max(np.abs(got - exact) / exact)) <= SPARE * nufft._EPS_EXP
    theta = rng.uniform(0.0, np.pi, 100_000)  # the modulation's phases π(m + δ)/σ, mod 2π
    got = np.asarray(_compiled(lambda t: jnp.exp(1j * t), options)(theta))
    t = theta.astype(np.longdouble)
    err = np.abs(got.real - np.cos(t)) + np.abs(got.imag - np.sin(t))
    assert float(np.max(err)) <= SPARE * nufft._EPS_PHI
