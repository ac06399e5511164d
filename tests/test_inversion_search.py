"""The bracketed searches behind ε(δ) (inversion.first_below / last_above): only points
found on the safe side are returned, full precision on smooth profiles, and a valid
answer on profiles that are not smooth."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

from glrt_jax._src import inversion


def _gauss_tail(x):  # δ-like profile: a Gaussian tail, log-concave, log δ far from linear
    return 0.5 * jax.scipy.special.erfc((x - 1.0) / math.sqrt(2.0))


def _exp_tail(x):
    return jnp.exp(-3.0 * x)


def _step(x):  # not continuous: 1 below 2.5, 1e-9 above
    return jnp.where(x < 2.5, 1.0, 1e-9)


def _kinked(x):  # continuous, a kink at the root's side, and a flat zero tail
    return jnp.where(x < 10.0, jnp.minimum(jnp.exp(-x), 5.0 * jnp.exp(-2.0 * x)), 0.0)


ROOTS = {  # the level-crossing of each profile at level 1e-6, in closed form
    _gauss_tail: 1.0 + math.sqrt(2.0) * special.erfcinv(2e-6),
    _exp_tail: math.log(1e6) / 3.0,
    _step: 2.5,
    _kinked: math.log(5e6) / 2.0,
}


@pytest.mark.parametrize("fn", list(ROOTS), ids=lambda f: f.__name__)
def test_first_below_returns_a_passing_point_at_the_root(fn):
    level, root = 1e-6, ROOTS[fn]
    x = float(jax.jit(lambda lv: inversion.first_below(fn, lv, 0.0, 30.0))(level))
    assert float(fn(x)) <= level  # the point was found on the safe side
    assert root <= x <= root * (1 + 1e-12)


@pytest.mark.parametrize("fn", list(ROOTS), ids=lambda f: f.__name__)
def test_last_above_returns_a_passing_point_at_the_root(fn):
    level, root = 1e-6, ROOTS[fn]
    start = root * 1.003  # as from the upper bound: a little above the answer
    x = float(jax.jit(lambda lv: inversion.last_above(fn, lv, start))(level))
    assert float(fn(x)) >= level
    assert root * (1 - 1e-12) <= x <= root


def test_ends_and_empty_brackets():
    f = jax.jit(inversion.first_below, static_argnums=0)
    assert float(f(_exp_tail, 1.5, 0.0, 10.0)) == 0.0  # passes at lo already
    assert float(f(_exp_tail, 1e-30, 0.0, 10.0)) == np.inf  # fails at hi
    g = jax.jit(inversion.last_above, static_argnums=0)
    assert float(g(_exp_tail, 1e-6, 1.0)) == 1.0  # the start passes
    assert float(g(_exp_tail, 2.0, 1.0)) == 0.0  # nothing passes, 0 included


def test_searches_vectorise_over_levels():
    levels = jnp.array([1e-3, 1e-6, 1e-9])
    xs = jax.vmap(lambda lv: inversion.first_below(_exp_tail, lv, 0.0, 30.0))(levels)
    np.testing.assert_allclose(xs, -np.log(np.asarray(levels)) / 3.0, rtol=1e-12)
