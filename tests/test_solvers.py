"""Tests of the root finder in glrt_jax._src.solvers: closed-form roots and derivatives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from glrt_jax._src import solvers


def _cube(x, c):
    return c - x**3  # decreasing in x; root c^{1/3}


@pytest.mark.parametrize("x0", [0.01, 1.0, 3.9])
def test_root_safe_and_tight_from_any_start(x0):
    r = solvers.find_root(_cube, 2.0, 0.0, 4.0, x0, ftol=1e-12)
    assert int(r.status) == solvers.OK
    g = float(_cube(r.x, 2.0))
    assert -1e-12 <= g <= 0.0  # safe side, within ftol
    assert abs(float(r.x) - 2.0 ** (1 / 3)) < 1e-12
    assert int(r.iterations) <= 12


def test_implicit_derivatives_match_closed_form():
    def root(c):
        return solvers.find_root(_cube, c, 0.0, 4.0, 1.0, ftol=1e-14).x

    c = 3.0
    expected = c ** (-2 / 3) / 3  # d c^{1/3} / dc
    assert abs(float(jax.grad(root)(c)) - expected) < 1e-10
    check_grads(root, (c,), order=1, modes=("fwd", "rev"), eps=1e-4, rtol=1e-6)
    # Under jit and vmap, and with a pytree of parameters.
    cs = jnp.array([1.0, 8.0, 27.0])
    np.testing.assert_allclose(jax.jit(jax.vmap(root))(cs), [1.0, 2.0, 3.0], rtol=1e-12)

    def root2(p):
        return solvers.find_root(
            lambda x, t: t["a"] * t["c"] - x**3, p, 0.0, 4.0, 1.0, ftol=1e-14
        ).x

    g = jax.grad(root2)({"a": 2.0, "c": 1.5})
    assert abs(float(g["a"]) - 1.5 * 3.0 ** (-2 / 3) / 3) < 1e-10


def test_jump_returns_safe_end():
    # g jumps from +1 to −1 at x = 1: no tight point exists; the safe end of a bracket
    # narrower than xtol is returned.
    r = solvers.find_root(
        lambda x, c: jnp.where(x < 1.0, 1.0, -1.0) + 0 * c, 0.0, 0.0, 4.0, 3.0, ftol=1e-9
    )
    assert int(r.status) == solvers.OK
    assert 1.0 <= float(r.x) <= 1.0 + 1e-12


@pytest.mark.parametrize(
    "c, status",
    [(100.0, solvers.NO_SAFE), (-1.0, solvers.ROOT_BELOW), (jnp.nan, solvers.NOT_FINITE)],
)
def test_failures_give_status_and_nan(c, status):
    r = solvers.find_root(_cube, c, 0.0, 4.0, 1.0, ftol=1e-12)
    assert int(r.status) == status
    assert np.isnan(float(r.x))
    with pytest.raises(ValueError, match="root"):
        solvers.raise_for_status(r.status, what="root")


def test_max_iter_and_infinite_residual():
    r = solvers.find_root(_cube, 2.0, 0.0, 4.0, 0.01, ftol=1e-14, max_iter=2)
    assert int(r.status) == solvers.MAX_ITER and np.isnan(float(r.x))
    # +inf is "unsafe" (e.g. an accountant's infinite ε), not a failure.
    r = solvers.find_root(
        lambda x, c: jnp.where(x < 0.5, jnp.inf, c - x**3), 2.0, 0.0, 4.0, 0.1, ftol=1e-12
    )
    assert int(r.status) == solvers.OK and abs(float(r.x) - 2.0 ** (1 / 3)) < 1e-12
