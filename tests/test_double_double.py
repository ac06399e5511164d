"""Double-double arithmetic (``glrt_jax._src.double_double``) against mpmath, compiled.

The precise non-uniform Fourier sums rely on each operation's error bound, so every
operation is checked compiled with the options a user's program gets (LLVM's
optimisation on, where XLA on the CPU contracts ``a·b + c`` into fused multiply-adds; the
suite's own quick options leave it off) and eagerly on NumPy arrays, against 50-digit
mpmath, on operands spread over many binades and with low parts. Unit tests of a
numerical kernel, beside it.
"""

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from backends import run_optimised

from glrt_jax._src import double_double as dd

U = 2.0**-53


def _run(fn, mode, *args):
    """``fn(*args)`` eagerly on NumPy arrays or compiled with XLA's default optimisation."""
    if mode == "numpy":
        return fn(*args)
    return run_optimised(fn, *jax.tree_util.tree_map(jnp.asarray, args))


def _mp(a, i):
    return mpmath.mpf(float(a[0][i])) + mpmath.mpf(float(a[1][i]))


def _operands(rng, n, spread=8.0):
    """Double-doubles with random signs, exponents over ±spread binades and low parts."""
    hi = rng.standard_normal(n) * 2.0 ** rng.uniform(-spread, spread, n)
    lo = hi * U * rng.uniform(-1.0, 1.0, n)
    return hi + lo - lo, lo  # (hi rounds lo away: a valid pair)


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(11)


@pytest.mark.parametrize("mode", ["compiled", "numpy"])
@pytest.mark.parametrize(
    "name, fn, exact, bound",
    [
        ("add", dd.add, lambda a, b: a + b, lambda a, b: 3 * U * U * abs(a + b)),
        ("sub", dd.sub, lambda a, b: a - b, lambda a, b: 3 * U * U * abs(a - b)),
        ("mul", dd.mul, lambda a, b: a * b, lambda a, b: 24 * U * U * abs(a * b)),
        ("div", dd.div, lambda a, b: a / b, lambda a, b: 48 * U * U * abs(a / b)),
        # (a square: XLA once recomputed its rounded product in each consumer and
        # contracted some into fused multiply-adds, 1e-16 off with Dekker's product)
        ("square", lambda a, b: dd.mul(a, a), lambda a, b: a * a, lambda a, b: 24 * U * U * a * a),
    ],
)
def test_operations_within_their_bounds(rng, mode, name, fn, exact, bound):
    n = 400
    a, b = _operands(rng, n), _operands(rng, n)
    if name in ("add", "sub"):  # cancellation: b close to ∓a
        near = rng.random(n) < 0.5
        sign = 1.0 if name == "sub" else -1.0
        b = (np.where(near, sign * a[0] * (1 + 2.0**-40), b[0]), np.where(near, 0.0, b[1]))
    out = _run(fn, mode, a, b)
    with mpmath.workdps(50):
        for i in range(n):
            x, y = _mp(a, i), _mp(b, i)
            assert abs(_mp(out, i) - exact(x, y)) <= bound(x, y) + 1e-300, (name, i)


@pytest.mark.parametrize("mode", ["compiled", "numpy"])
def test_product_and_split_survive_contraction(rng, mode):
    """``product`` is within 20u² of ``x·y``; ``split`` is exact with a 26-bit high part."""
    x = rng.standard_normal(2000) * 2.0 ** rng.uniform(-30, 30, 2000)
    y = rng.standard_normal(2000) * 2.0 ** rng.uniform(-30, 30, 2000)
    (p, e), (h, lo) = _run(lambda a, b: (dd.product(a, b), dd.split(a)), mode, x, y)
    p, e, h, lo = map(np.asarray, (p, e, h, lo))
    with mpmath.workdps(50):
        for i in range(0, 2000, 7):
            xy = mpmath.mpf(x[i]) * mpmath.mpf(y[i])
            assert abs(mpmath.mpf(p[i]) + mpmath.mpf(e[i]) - xy) <= 20 * U * U * abs(xy)
            assert mpmath.mpf(h[i]) + mpmath.mpf(lo[i]) == mpmath.mpf(x[i])
            assert h[i] == 0 or np.frexp(abs(h[i]))[0] * 2.0**26 % 1.0 == 0.0  # 26 bits


@pytest.mark.parametrize("mode", ["compiled", "numpy"])
def test_exp_and_expi_against_mpmath(mode):
    x = np.concatenate([np.linspace(-64.0, 64.0, 101), np.linspace(-1.0, 1.0, 51)])
    theta = np.linspace(-np.pi, np.pi, 151)
    args = ((x, x * U * 0.37), (theta, theta * U * -0.21))
    e, (c, s) = _run(lambda a, t: (dd.exp(a), dd.expi(t)), mode, *args)
    with mpmath.workdps(50):
        for i in range(len(x)):
            exact = mpmath.exp(_mp(args[0], i))
            assert abs(_mp(e, i) / exact - 1) <= 5e-27
        for i in range(len(theta)):
            t = _mp(args[1], i)
            assert abs(_mp(c, i) - mpmath.cos(t)) <= 1e-27
            assert abs(_mp(s, i) - mpmath.sin(t)) <= 1e-27


def test_constants_against_mpmath():
    with mpmath.workdps(50):
        assert abs(mpmath.mpf(dd.PI[0]) + mpmath.mpf(dd.PI[1]) - mpmath.pi) < 2.0**-106 * 4
        root = dd.sqrt((np.float64(0.5), np.float64(0.0)))
        assert abs(mpmath.mpf(float(root[0])) + mpmath.mpf(float(root[1])) - mpmath.sqrt(0.5)) < (
            48 * U * U
        )
