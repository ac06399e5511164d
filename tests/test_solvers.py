"""Tests of the root finder in glrt_jax._src.solvers: closed-form roots and derivatives."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
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


def _no_jvp(fun):
    """``fun`` whose forward-mode derivative raises: a residual the loop must not
    differentiate."""

    @jax.custom_jvp
    def g(x, c):
        return fun(x, c)

    @g.defjvp
    def _(primals, tangents):
        raise AssertionError("the loop differentiated the residual")

    return g


@pytest.mark.parametrize("x0", [0.01, 1.0, 3.9])
def test_secant_slopes_keep_the_derivative_out_of_the_loop(x0):
    # With secant slopes the compiled loop holds g's value alone (a residual whose jvp
    # raises still solves under jit), lands on the safe side within ftol like Newton, and
    # the derivative of the root is still the implicit one (jvp at the root only).
    secant = solvers.SECANT
    f = jax.jit(lambda c: solvers.find_root(_no_jvp(_cube), c, 0.0, 4.0, x0, ftol=1e-12,
                                            secant=secant))  # fmt: skip
    r = f(2.0)
    assert int(r.status) == solvers.OK
    assert -1e-12 <= float(_cube(r.x, 2.0)) <= 0.0
    assert int(r.iterations) <= 16
    with pytest.raises(AssertionError, match="differentiated"):
        solvers.find_root(_no_jvp(_cube), 2.0, 0.0, 4.0, x0, ftol=1e-12)

    def root(c):
        return solvers.find_root(_cube, c, 0.0, 4.0, x0, ftol=1e-14, secant=secant).x

    assert abs(float(jax.jit(jax.grad(root))(3.0)) - 3.0 ** (-2 / 3) / 3) < 1e-10
    with pytest.raises(ValueError, match="secant"):
        solvers.find_root(lambda x, c: solvers.Residual(c - x, -1.0), 1.0, 0.0, 2.0, 1.0,
                          ftol=1e-9, residual=True, secant=secant)  # fmt: skip


def test_eager_loop_reuses_the_programs_compiled_outside_it():
    # The eager loop's residual calls eager jitted programs (the engine's stages, in
    # calibration) that other calls compiled outside the loop: it must find them in jit's
    # cache, not trace and compile them again under the solver's own context.
    h = jax.jit(lambda x: 2.0 - x**3)
    h(jnp.float64(1.0))  # compiled outside the loop

    def host(x, theta):
        return solvers.Residual(h(jnp.float64(float(x))), jnp.asarray(-3.0 * float(x) ** 2))

    r = solvers.find_root(host, (), 0.0, 4.0, 1.0, ftol=1e-12, residual=True, eager=True)
    assert int(r.status) == solvers.OK
    assert h._cache_size() == 1


def test_jump_returns_safe_end():
    # g jumps from +1 to −1 at x = 1: no tight point exists; the safe end of a bracket
    # narrower than xtol is returned.
    r = solvers.find_root(
        lambda x, c: jnp.where(x < 1.0, 1.0, -1.0) + 0 * c, 0.0, 0.0, 4.0, 3.0, ftol=1e-9
    )
    assert int(r.status) == solvers.OK
    assert 1.0 <= float(r.x) <= 1.0 + 1e-12


@pytest.mark.parametrize("c", [2.0, 100.0, -1.0])
def test_eager_iteration_is_the_compiled_one(c):
    # eager=True drives the same iteration from the host: the residual gets concrete
    # arrays (here plain Python arithmetic on them, with its own slope) and is never traced.
    seen = []

    def host(x, theta):
        v = float(x)  # fails on a tracer
        seen.append(v)
        return solvers.Residual(jnp.asarray(c - v**3), jnp.asarray(-3.0 * v * v))

    r = solvers.find_root(host, (), 0.0, 4.0, 1.0, ftol=1e-12, residual=True, eager=True)
    traced = solvers.find_root(_cube, c, 0.0, 4.0, 1.0, ftol=1e-12)
    assert int(r.status) == int(traced.status) and int(r.iterations) == len(seen)
    if c == 2.0:  # the cube root, on the safe side (c − x³ ≤ 0) within the tolerance
        assert int(r.status) == solvers.OK
        assert 0.0 <= float(r.x) - 2.0 ** (1 / 3) <= 1e-12
    else:
        assert int(r.status) in (solvers.NO_SAFE, solvers.ROOT_BELOW) and np.isnan(float(r.x))


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


# ---------------------------------------------------------------------------
# side="any" (ordinary roots), increasing residuals, residuals with their own steps
# ---------------------------------------------------------------------------


def _log_minus(x, c):
    return jnp.log(x) - c  # increasing in x; root e^c


@pytest.mark.parametrize("x0", [1e-3, 0.5, 3.0, 50.0])
def test_any_side_closed_form_roots_from_any_start(x0):
    c = jnp.array([-2.0, 0.0, 1.0, 3.5])
    r = solvers.find_root(
        _log_minus, c, 1e-4, 100.0, jnp.full(4, x0), ftol=0.0, side="any", increasing=True
    )
    np.testing.assert_array_equal(np.asarray(r.status), solvers.OK)
    np.testing.assert_allclose(np.asarray(r.x), np.exp([-2.0, 0.0, 1.0, 3.5]), rtol=1e-13)
    # Decreasing residual, same mode: the real cube root of c.
    r = solvers.find_root(
        _cube, jnp.array([0.5, 2.0, 27.0]), 0.0, 4.0, jnp.full(3, x0 % 4), ftol=0.0, side="any"
    )
    np.testing.assert_allclose(np.asarray(r.x), np.cbrt([0.5, 2.0, 27.0]), rtol=1e-13)


def test_mixed_directions_in_one_batch():
    # g = s (x − c) with s = ±1 per element: increasing where s > 0.
    s = jnp.array([1.0, -1.0, 1.0, -1.0])
    c = jnp.array([0.3, 0.3, -1.7, 2.2])
    r = solvers.find_root(
        lambda x, t: t[0] * (x - t[1]) ** 3,
        (s, c),
        -4.0,
        4.0,
        jnp.zeros(4),
        ftol=0.0,
        side="any",
        increasing=s > 0,
    )
    np.testing.assert_array_equal(np.asarray(r.status), solvers.OK)
    np.testing.assert_allclose(np.asarray(r.x), np.asarray(c), atol=1e-10)


def test_safe_side_of_an_increasing_residual_is_below_the_root():
    # g = x³ − c increases: its safe side g ≤ 0 is x ≤ c^{1/3}.
    for x0 in (0.01, 1.0, 3.9):
        r = solvers.find_root(lambda x, c: x**3 - c, 2.0, 0.0, 4.0, x0, ftol=1e-12, increasing=True)
        assert int(r.status) == solvers.OK
        g = float(r.x) ** 3 - 2.0
        assert -1e-12 <= g <= 0.0
        assert 0.0 <= 2.0 ** (1 / 3) - float(r.x) < 1e-12


def test_safe_side_stops_on_a_noisy_residual():
    # Deterministic "rounding" noise of 1e-9 around c − x (invisible to autodiff, like
    # real rounding): never tight at ftol = 1e-15, but the step towards the band falls
    # below xtol; the answer is a point evaluated safe.
    def noisy(x, c):
        return c - x + 1e-9 * jax.lax.stop_gradient(jnp.sin(1e12 * x))

    r = solvers.find_root(noisy, 0.7, 0.0, 2.0, 1.5, ftol=1e-15, xtol=1e-8)
    assert int(r.status) == solvers.OK
    assert float(noisy(r.x, 0.7)) <= 0.0
    assert abs(float(r.x) - 0.7) <= 2e-8
    assert int(r.iterations) < 20


def _halley_residual(x, c):
    """g = x³ − c with its slope, a zero noise level and Halley's step."""
    g, d1, d2 = x**3 - c, 3.0 * x**2, 6.0 * x
    return solvers.Residual(g, d1, noise=jnp.zeros_like(g), step=-2 * g * d1 / (2 * d1**2 - g * d2))


def test_residual_with_own_slope_and_step():
    c = jnp.array([0.2, 2.0, 30.0])
    kw = dict(ftol=1e-14, side="any", increasing=True, max_step=10.0)
    newton = solvers.find_root(lambda x, c: x**3 - c, c, 0.0, 10.0, jnp.full(3, 5.0), **kw)
    halley = solvers.find_root(
        _halley_residual, c, 0.0, 10.0, jnp.full(3, 5.0), residual=True, **kw
    )
    for r in (newton, halley):
        np.testing.assert_array_equal(np.asarray(r.status), solvers.OK)
        np.testing.assert_allclose(np.asarray(r.x), np.cbrt(np.asarray(c)), rtol=1e-14)
    # Cubic convergence needs fewer evaluations than Newton's quadratic one.
    assert int(halley.iterations.max()) < int(newton.iterations.max())


def test_certified_step_ends_without_evaluating_it():
    # For g = log x − c the step c − log x is exact: its bound 0 certifies it at the
    # first evaluation, which the returned x never saw.
    def exact(x, c):
        g = jnp.log(x) - c
        return solvers.Residual(g, 1.0 / x, step=x * jnp.expm1(-g), step_bound=jnp.zeros_like(g))

    c = jnp.array([-1.0, 0.5, 2.0])

    def one_step(fun):
        return solvers.find_root(
            fun,
            c,
            1e-3,
            20.0,
            jnp.ones(3),
            ftol=0.0,
            side="any",
            increasing=True,
            residual=True,
            max_iter=1,
            max_step=20.0,
        )

    r = one_step(exact)
    np.testing.assert_array_equal(np.asarray(r.status), solvers.OK)
    np.testing.assert_array_equal(np.asarray(r.iterations), 1)
    np.testing.assert_allclose(np.asarray(r.x), np.exp([-1.0, 0.5, 2.0]), rtol=1e-14)

    # Without the bound the same budget is not enough (no confirming evaluation).
    def unbounded(x, c):
        return exact(x, c)._replace(step_bound=None)

    r = one_step(unbounded)
    np.testing.assert_array_equal(np.asarray(r.status), solvers.MAX_ITER)
    assert np.all(np.isnan(np.asarray(r.x)))


def test_noise_level_counts_as_converged():
    # The residual says it is only known to 1e-3: a point within that is a root.
    def coarse(x, c):
        g = c - x
        return solvers.Residual(g, -jnp.ones_like(g), noise=jnp.full_like(g, 1e-3))

    r = solvers.find_root(coarse, 1.0, 0.0, 2.0, 1.0005, ftol=0.0, side="any", residual=True)
    assert int(r.status) == solvers.OK and int(r.iterations) == 1


def test_any_side_implicit_derivatives_fwd_rev_jit_vmap():
    def root(c, p):
        # x with x^p = c, i.e. p log x − log c = 0 (increasing in x for p > 0).
        return solvers.find_root(
            lambda x, t: t[1] * jnp.log(x) - jnp.log(t[0]),
            (c, p),
            1e-6,
            1e6,
            jnp.ones_like(c),
            ftol=0.0,
            side="any",
            increasing=True,
        ).x

    c, p = 5.0, 2.5
    x = c ** (1 / p)
    gc, gp = jax.grad(root, argnums=(0, 1))(c, p)
    assert abs(float(gc) - x / (p * c)) < 1e-12  # d c^{1/p}/dc
    assert abs(float(gp) + x * math.log(c) / p**2) < 1e-12  # d c^{1/p}/dp
    check_grads(root, (c, p), order=1, modes=("fwd", "rev"), eps=1e-5, rtol=1e-6)
    cs = jnp.array([2.0, 9.0, 100.0])
    got = jax.jit(jax.vmap(root, in_axes=(0, None)))(cs, 2.0)
    np.testing.assert_allclose(got, np.sqrt([2.0, 9.0, 100.0]), rtol=1e-13)
    jac = jax.jit(jax.vmap(jax.grad(root), in_axes=(0, None)))(cs, 2.0)
    np.testing.assert_allclose(jac, 0.5 / np.sqrt([2.0, 9.0, 100.0]), rtol=1e-12)


def test_implicit_derivatives_with_an_own_slope_and_a_bool_parameter():
    # The slope comes from the Residual; θ carries a bool array (no tangent).
    def root(c):
        flip = jnp.array([False, True])

        def fun(x, t):
            c, f = t
            g = jnp.where(f, c - x**3, x**3 - c)
            return solvers.Residual(g, jnp.where(f, -3.0 * x**2, 3.0 * x**2))

        return solvers.find_root(
            fun,
            (c, flip),
            0.0,
            5.0,
            jnp.ones(2),
            ftol=0.0,
            side="any",
            increasing=~flip,
            residual=True,
        ).x

    c = jnp.array([2.0, 7.0])
    np.testing.assert_allclose(root(c), np.cbrt([2.0, 7.0]), rtol=1e-13)
    check_grads(root, (c,), order=1, modes=("fwd", "rev"), eps=1e-5, rtol=1e-6)


@pytest.mark.parametrize("increasing", [False, True])
def test_any_side_failures_name_the_side_in_x(increasing):
    sign = 1.0 if increasing else -1.0

    def g(x, c):
        return sign * (x - c)

    kw = dict(ftol=0.0, side="any", increasing=increasing)
    above = solvers.find_root(g, 7.0, 0.0, 4.0, 1.0, **kw)
    below = solvers.find_root(g, -3.0, 0.0, 4.0, 1.0, **kw)
    assert int(above.status) == solvers.ROOT_ABOVE and np.isnan(float(above.x))
    assert int(below.status) == solvers.ROOT_BELOW and np.isnan(float(below.x))
    nan = solvers.find_root(lambda x, c: jnp.sqrt(c) - x, -1.0, 0.0, 4.0, 1.0, **kw)
    assert int(nan.status) == solvers.NOT_FINITE
    stuck = solvers.find_root(g, 3.3, 0.0, 4.0, 1.0, max_iter=1, **kw)
    assert int(stuck.status) == solvers.MAX_ITER
    with pytest.raises(ValueError, match="root: .*outside the search range"):
        solvers.raise_for_status(jnp.array([0, int(below.status)]), what="root")


def test_zero_cotangent_at_a_failed_element_stays_finite():
    # The caller maps ROOT_BELOW to 0 (as ε(δ) = 0 does): its gradient there is 0, not NaN.
    def clipped(c):
        r = solvers.find_root(
            lambda x, c: c - x, c, 0.0, 4.0, jnp.full_like(c, 2.0), ftol=0.0, side="any"
        )
        return jnp.sum(jnp.where(r.status == solvers.ROOT_BELOW, 0.0, r.x))

    g = jax.grad(clipped)(jnp.array([-1.0, 1.5]))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 1.0])


def test_bad_side_is_refused():
    with pytest.raises(ValueError, match="side"):
        solvers.find_root(_cube, 2.0, 0.0, 4.0, 1.0, ftol=1e-12, side="both")


def test_reverse_mode_with_scalar_parameters_does_not_transpose_the_residual():
    """With scalar parameters the implicit derivative takes ∂g/∂θ as values (forward
    mode), so reverse mode works through a residual whose dependence on θ is not
    transposable: here θ enters through a ``while_loop`` (c^{1/3} by Newton's iteration
    inside g; forward mode goes through the loop, reverse mode cannot). The former rule
    (one ``jvp`` in θ, transposed) could not take ``jax.grad`` of it."""

    def cbrt_by_loop(c):
        def body(s):
            y, it = s
            return y - (y**3 - c) / (3.0 * y**2), it + 1

        def more(s):
            y, it = s
            return (it < 100) & (jnp.abs(y**3 - c) > 1e-14 * c)

        return lax.while_loop(more, body, (c + 1.0, 0))[0]

    def root(c, k):
        # x = k·c^{1/3}: g = k·cbrt(c) − x, decreasing in x.
        return solvers.find_root(
            lambda x, t: t[1] * cbrt_by_loop(t[0]) - x, (c, k), 0.0, 100.0, 1.0, ftol=1e-14
        ).x

    c, k = 8.0, 1.5
    gc, gk = jax.grad(root, argnums=(0, 1))(c, k)
    assert abs(float(gc) - k * c ** (-2 / 3) / 3) < 1e-9  # d(k c^{1/3})/dc
    assert abs(float(gk) - 2.0) < 1e-12  # d(k c^{1/3})/dk = c^{1/3}
    # Only the parameter asked for is differentiated (the other's tangent is a symbolic
    # zero), under jit and vmap too.
    cs = jnp.array([1.0, 27.0, 64.0])
    got = jax.jit(jax.vmap(jax.grad(root), in_axes=(0, None)))(cs, k)
    np.testing.assert_allclose(got, k * np.asarray(cs) ** (-2 / 3) / 3, rtol=1e-9)
    # With the residual's own slope (∂g/∂x from the jvp's primal output, not a column).

    def root_own_slope(c):
        def fun(x, t):
            return solvers.Residual(cbrt_by_loop(t) ** 3 - x**3, -3.0 * x**2)

        return solvers.find_root(fun, c, 0.0, 100.0, 1.0, ftol=0.0, side="any", residual=True).x

    got = jax.jit(jax.vmap(jax.grad(root_own_slope)))(cs)
    np.testing.assert_allclose(got, np.asarray(cs) ** (-2 / 3) / 3, rtol=1e-9)
