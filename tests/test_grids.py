"""The per-round grids' planning helpers against plain references: NumPy's sort for the
planning points, 50-digit mpmath sums for the planner's log-MGFs."""

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from jax.scipy.special import logsumexp

from glrt_jax._src import grids, planning

# Ranges as the planner meets them (around 0, tiny on one side as for the add direction
# at small q, wide) and ranges that do not contain 0 (the points around 0 are clipped).
RANGES = [(-3.0, 5.0), (-1e-4, 30.0), (-41.0, 1e-6), (0.5, 2.0), (-7.0, -1.0), (-1e-9, 1e-9)]


@pytest.mark.parametrize("thin", [1, 2])
@pytest.mark.parametrize(("lo", "hi"), RANGES)
def test_planning_points_are_the_sorted_points(lo, hi, thin):
    x = np.asarray(jax.jit(grids.planning_points, static_argnums=2)(lo, hi, thin))
    # The same points, sorted by NumPy: the uniform and end-geometric ones at lo + w·v,
    # the geometric ones around 0 clipped to the range.
    w = hi - lo
    g = np.geomspace(1e-13, 1.0, grids._N_GEOM // thin)
    v = np.concatenate([np.linspace(0.0, 1.0, grids._N_UNIFORM // thin), g, 1.0 - g])
    around = np.clip(np.concatenate([g, -g]) * max(abs(lo), abs(hi)), lo, hi)
    expected = np.sort(np.concatenate([lo + w * v, around]))
    assert x.shape == (grids.n_planning(thin),)
    assert np.all(np.diff(x) >= 0)
    # (XLA may fuse lo + w·v into one multiply-add: an ulp of the range's scale apart)
    np.testing.assert_allclose(
        x, expected, rtol=0, atol=4 * np.finfo(float).eps * max(abs(lo), abs(hi))
    )


def test_bitonic_merge_sorts_and_refuses_other_lengths():
    rng = np.random.default_rng(0)
    for n in (2, 8, 512):
        for cut in (0, 1, n // 3, n - 1, n):
            a, b = np.sort(rng.normal(size=cut)), np.sort(rng.normal(size=n - cut))
            merged = grids._bitonic_merge(jnp.asarray(np.concatenate([a, b[::-1]])))
            np.testing.assert_array_equal(np.asarray(merged), np.sort(np.concatenate([a, b])))
    with pytest.raises(ValueError, match="power-of-two"):
        grids._bitonic_merge(jnp.zeros(12))


def _mp_log_mgf(x, p, t):
    with mpmath.workdps(50):
        terms = (
            mpmath.mpf(pj) * mpmath.exp(t * mpmath.mpf(xj)) for xj, pj in zip(x, p, strict=True)
        )
        total = mpmath.fsum(terms)
        return float(mpmath.log(total)) if total > 0 else -np.inf


def test_pmf_log_mgf_against_mpmath():
    rng = np.random.default_rng(1)
    ts = np.asarray(planning._T_POS)
    cases = []
    # A pmf with its mass spread, one whose masses fall to 1e-300 (the largest point's:
    # the shift's interval is then 690 wide), and one with zero masses at both ends.
    # (No subnormal masses: XLA's CPU code flushes them to 0.)
    x = np.sort(rng.normal(size=64) * 5.0)
    cases.append((x, rng.dirichlet(np.ones(64))))
    p = rng.dirichlet(np.ones(64)) * np.exp(-np.linspace(0.0, 700.0, 64))
    p[-1] = 1e-300
    cases.append((x, p))
    p = rng.dirichlet(np.ones(64))
    p[:5] = p[-7:] = 0.0
    cases.append((np.sort(rng.uniform(-40.0, 40.0, 64)), p))
    for x, p in cases:
        got = np.asarray(grids.pmf_log_mgf(jnp.asarray(x), jnp.asarray(p), jnp.asarray(ts)))
        want = np.array([_mp_log_mgf(x, p, t) for t in ts])
        # The planner charges 1e-9 + 1e-10 (|log M| + t max|x|) per round for rounding.
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-12)


def test_pmf_log_mgf_without_mass_and_its_gradient():
    ts = jnp.asarray(planning._T_POS[:5])
    x = jnp.asarray([-2.0, 0.0, 3.0])
    assert np.all(np.asarray(grids.pmf_log_mgf(x, jnp.zeros(3), ts)) == -np.inf)
    p = jnp.asarray([0.2, 0.5, 0.3])

    def total(f):
        return jax.grad(lambda pv: jnp.sum(f(x, pv, ts)))(p)

    def plain(xx, pv, tt):
        return logsumexp(tt[:, None] * xx + jnp.log(pv), axis=-1)

    np.testing.assert_allclose(total(grids.pmf_log_mgf), total(plain), rtol=1e-13)


@pytest.mark.parametrize("apart", [False, True])
def test_split_and_companding_against_numpy(apart):
    """The split pmf and the companding shares, fused or with their per-point values
    computed once (``apart``, programs of many phases), against NumPy: the same values up
    to rounding (the split's ``π − up`` cancels, hence the relative 1e-9)."""
    rng = np.random.default_rng(3)
    x = np.sort(rng.uniform(-4.0, 6.0, 257))
    pi = rng.uniform(0.0, 1.0, 256)
    pi /= pi.sum()
    # Q-masses of a likelihood ratio within each bin: κ = π e^{−m}, m inside [x_i, x_i+1].
    m = x[:-1] + rng.uniform(0.0, 1.0, 256) * np.diff(x)
    kappa = pi * np.exp(-m)
    p, up = jax.jit(grids.split, static_argnums=3)(pi, kappa, x, apart)
    up_ref = np.clip((pi - np.exp(x[:-1]) * kappa) / -np.expm1(-np.diff(x)), 0.0, pi)
    p_ref = np.concatenate([pi - up_ref, [0.0]]) + np.concatenate([[0.0], up_ref])
    np.testing.assert_allclose(np.asarray(up), up_ref, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(np.asarray(p), p_ref, rtol=1e-9, atol=1e-18)
    assert abs(float(np.sum(p)) - 1.0) < 1e-12
    t = 1.7
    count, width = jax.jit(grids.compand_counts, static_argnums=3)(x, p_ref, t, apart)
    w = p_ref * np.exp(t * x)
    w /= w.sum()
    w0 = p_ref / p_ref.sum()
    wb = 0.5 * (w[:-1] + w[1:]) + 0.5 * (w0[:-1] + w0[1:])
    ref = np.cbrt(wb / np.diff(x)) * np.diff(x)
    np.testing.assert_allclose(np.asarray(count), ref, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(width), np.diff(x), rtol=0)
    assert planning.many_phases(64) and not planning.many_phases(32)


@pytest.mark.parametrize("apart", [False, True])
def test_companding_counts_rounding_negative_masses_as_zero(apart):
    """A split pmf can hold masses a rounding below zero (its ``π − up`` and ``up``'s
    clip read ``π`` by two code paths); the companding shares treat them as zero. Such a
    mass in a bin of untilted-only weight was the log of a negative number before: NaN
    shares, NaN grid points and an infinite upper bound (1000 phases at σ ∈ [2, 5],
    q ∈ [1e-4, 1e-3])."""
    x = np.array([-1.0, 0.0, 0.5, 1.0, 3.0])
    p = np.array([0.5, -5.6e-17, 0.0, -6e-33, 0.5])
    t = 1.3
    count, width = jax.jit(grids.compand_counts, static_argnums=3)(x, p, t, apart)
    assert np.all(np.isfinite(np.asarray(count)))
    ref, _ = jax.jit(grids.compand_counts, static_argnums=3)(x, np.maximum(p, 0.0), t, apart)
    np.testing.assert_array_equal(np.asarray(count), np.asarray(ref))
    grid = jax.jit(grids.companded_grid, static_argnums=(3, 4))(x, p, t, 16, apart)
    assert np.all(np.isfinite(np.asarray(grid))) and np.all(np.diff(np.asarray(grid)) >= 0)
