"""The trapezoid sum of the inversion (glrt_jax._src.inversion.query_bounds) as compiled:
two complex dot products (rows of R nodes, then J/R rows), or, in passes with
double-double transforms, two sums by halving (inversion.trapezoid_sum). Their rounding
bounds, 2(R + J/R + 8)u and 2(log₂J + 8)u of the terms' sizes, assume that a compiled
dot product of length n rounds within γ_n of its terms' sizes, in whatever order it sums,
and that each term of a sum by halving passes through log₂n additions: checked here
against an 80-bit long double evaluation of the same sum, on node values whose sizes span
many decades (a smoothed transform's, decaying in ω) and on values of equal size."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from glrt_jax._src import inversion, transform
from glrt_jax._src.transform import UNIT_ROUNDOFF

if np.finfo(np.longdouble).nmant < 63:
    pytest.skip("the reference needs an 80-bit long double", allow_module_level=True)


@jax.jit
def _two_level(base, p0, p1):
    return jnp.real(p0 @ (base @ p1))


_halving = jax.jit(inversion.trapezoid_sum)


@pytest.mark.parametrize("halving", [False, True])
@pytest.mark.parametrize("J", [4096, 65536, 262144])
@pytest.mark.parametrize("decay", [True, False])
def test_trapezoid_sum_rounds_within_its_bound(J, decay, halving):
    rng = np.random.default_rng(J)
    R = transform.row_length(J)
    k = np.arange(J)
    size = np.exp(-0.5 * (k / (0.2 * J)) ** 2) / (1.0 + k) ** 2 if decay else np.ones(J)
    terms = size * np.exp(2j * np.pi * rng.random(J))
    eps, dw = rng.uniform(-3.0, 3.0), 2.0 * np.pi / rng.uniform(1.0, 50.0)
    p1 = np.exp(-1j * dw * eps * np.arange(R))
    p0 = np.exp(-1j * (R * dw) * eps * np.arange(J // R))
    fn = _halving if halving else _two_level
    got = float(fn(jnp.asarray(terms.reshape(J // R, R)), jnp.asarray(p0), jnp.asarray(p1)))
    # The same products in long double (its own error is about J·2⁻⁶⁴ of the sizes).
    ld = np.longdouble
    t_re, t_im = terms.real.astype(ld), terms.imag.astype(ld)
    b_re, b_im = p1.real.astype(ld)[None, :], p1.imag.astype(ld)[None, :]
    rows_re = np.sum((t_re.reshape(J // R, R) * b_re - t_im.reshape(J // R, R) * b_im), axis=1)
    rows_im = np.sum((t_re.reshape(J // R, R) * b_im + t_im.reshape(J // R, R) * b_re), axis=1)
    exact = np.sum(p0.real.astype(ld) * rows_re - p0.imag.astype(ld) * rows_im)
    count = J.bit_length() - 1 if halving else R + J // R
    bound = 2.0 * (count + 8) * UNIT_ROUNDOFF * float(np.sum(size))
    # (the reference's own error: numpy's pairwise sums, about log₂J·2⁻⁶⁴ of the sizes)
    assert abs(got - float(exact)) <= bound - 20 * 2.0**-64 * float(np.sum(size))
