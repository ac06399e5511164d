"""The non-uniform Fourier sums of the composition engine against an exact-phase reference.

``glrt_jax._src.nufft.sums`` returns ``S(j) = Σ_b v_b e^{i j y_b}`` and a bound on its error
that the engine's certified bounds rely on. The reference reduces ``y_b/(2π)`` to a 96-bit
fixed-point fraction with mpmath, forms ``j·y_b mod 2π`` exactly in integer arithmetic and
sums in long double; it is itself checked against mpmath on a small case. Unit tests of a
numerical kernel, beside it.
"""

import math

import jax
import mpmath
import numpy as np
import pytest
from backends import run_optimised

from glrt_jax._src import nufft

if np.finfo(np.longdouble).nmant < 63:
    pytest.skip("the reference needs an 80-bit long double", allow_module_level=True)

_MASK = np.uint64(0xFFFFFFFF)
_sums = jax.jit(nufft.sums, static_argnums=2)


def _turns(y):
    """``y/(2π) mod 1`` as 96-bit fixed point, three 32-bit limbs (mpmath, 60 digits)."""
    with mpmath.workdps(60):
        out = np.zeros((len(y), 3), np.uint64)
        for i, value in enumerate(np.asarray(y, np.float64)):
            frac = mpmath.mpf(float(value)) / (2 * mpmath.pi)
            fixed = int(mpmath.nint((frac - mpmath.floor(frac)) * mpmath.mpf(2) ** 96)) % (1 << 96)
            out[i] = [(fixed >> 64) & 0xFFFFFFFF, (fixed >> 32) & 0xFFFFFFFF, fixed & 0xFFFFFFFF]
    return out


def _reference(y, v, J, chunk=256):
    """Exact phases, long-double cos/sin and sums: error ≤ (8 + 2B)·2⁻⁶⁴·Σv."""
    limbs = _turns(y)
    with mpmath.workdps(40):
        two_pi = np.longdouble(mpmath.nstr(2 * mpmath.pi, 30))
    scale = np.longdouble(2.0) ** -32
    vl = np.asarray(v, np.float64).astype(np.longdouble)
    out = np.zeros(J, np.complex128)
    for j0 in range(0, J, chunk):
        j = np.arange(j0, min(J, j0 + chunk), dtype=np.uint64)[:, None]
        p0 = j * limbs[:, 2]
        p1 = j * limbs[:, 1] + (p0 >> np.uint64(32))
        p2 = j * limbs[:, 0] + (p1 >> np.uint64(32))

        def limb(p):
            return (p & _MASK).astype(np.longdouble)

        angle = two_pi * (((limb(p0) * scale + limb(p1)) * scale + limb(p2)) * scale)
        re, im = np.sum(np.cos(angle) * vl, axis=1), np.sum(np.sin(angle) * vl, axis=1)
        out[j0 : j0 + chunk] = re.astype(np.float64) + 1j * im.astype(np.float64)
    return out, (8 + 2 * len(y)) * 2.0**-64 * float(np.sum(v)) * 1.01


def _case(kind, B, rng):
    if kind == "random":
        y, v = np.sort(rng.uniform(-3, 3, B)), rng.random(B)
    elif kind == "companded":  # dense in the middle, tilted weights, like the engine's grids
        x = np.sort(np.tanh(rng.normal(size=B)))
        y, v = 3.0 * x, np.exp(-0.5 * (x / 0.3) ** 2 + 4.0 * x)
    elif kind == "clustered":  # every point in one cell
        y, v = 1.2345 + 1e-9 * np.sort(rng.random(B)), rng.random(B)
    elif kind == "wrap":  # many turns
        y, v = np.sort(rng.uniform(-1000, 1000, B)), rng.random(B)
    elif kind == "one_point":
        y, v = np.sort(rng.uniform(-1000, 1000, B)), np.zeros(B)
        v[B // 3] = 1.0
    elif kind == "cell_edges":  # multiples of 2π and of the grid spacing, one ulp off
        n = rng.integers(-150, 150, B)
        y = np.where(n % 2 == 0, n * (2 * np.pi), n * (2 * np.pi / 64))
        y = np.sort(np.nextafter(y, np.where(rng.random(B) < 0.5, -np.inf, np.inf)))
        v = rng.random(B)
    return y, v / v.sum()


def test_reference_against_mpmath():
    rng = np.random.default_rng(3)
    y, v = _case("wrap", 9, rng)
    ref, ref_err = _reference(y, v, 2048)
    with mpmath.workdps(40):
        for j in (0, 1, 7, 1000, 2047):
            exact = sum(mpmath.mpf(float(w)) * mpmath.expj(j * mpmath.mpf(float(t)))
                        for t, w in zip(y, v, strict=True))  # fmt: skip
            assert abs(complex(exact) - ref[j]) <= ref_err + 2.0**-53 * abs(ref[j])


@pytest.mark.parametrize(
    "kind, B, J",
    [
        ("random", 129, 256),
        ("companded", 513, 4096),
        ("clustered", 1025, 1024),
        ("wrap", 513, 1024),
        ("wrap", 65, 8),  # the fewest nodes: the taps of most points wrap around the grid
        ("one_point", 129, 16384),
        ("cell_edges", 257, 2048),
        # More than nufft._SPLIT_FROM points: the multiples of a quantum summed exactly.
        ("clustered", 8193, 512),
        ("companded", 4097, 1024),
        ("wrap", 4097, 256),
    ],
)
def test_error_within_bound(kind, B, J):
    y, v = _case(kind, B, np.random.default_rng(B + J))
    s, bound = _sums(y, v, J)
    s, bound = np.asarray(s), float(bound)
    ref, ref_err = _reference(y, v, J)
    err = np.abs(s - ref) + ref_err + 2.0**-53 * np.abs(ref)
    assert np.all(err <= bound), (np.max(err), bound)
    # Useful: the bound stays near 5e-14 unless every point of a small grid falls into
    # one cell (a large grid's sums do not depend on the points per cell).
    assert bound <= (2e-12 if kind == "clustered" and B <= nufft._SPLIT_FROM else 1e-13)


def test_split_sums_match_plain_sums():
    """Both spreadings of the same terms (sizes on either side of _SPLIT_FROM by padding
    with massless points): values within their bounds, and the split's bound the smaller
    for 8193 points in one cell."""
    rng = np.random.default_rng(7)
    y, v = _case("clustered", 4001, rng)
    pad = nufft._SPLIT_FROM + 1 - len(y)
    y_big, v_big = np.concatenate([y, np.full(pad, y[-1])]), np.concatenate([v, np.zeros(pad)])
    s_small, b_small = _sums(y, v, 1024)
    s_big, b_big = _sums(y_big, v_big, 1024)
    assert float(np.max(np.abs(np.asarray(s_small) - np.asarray(s_big)))) <= float(b_small + b_big)
    assert float(b_big) < 0.1 * float(b_small)


def test_nan_position_poisons_every_output():
    y, v = _case("random", 4097, np.random.default_rng(2))
    for n in (129, 4097):
        yy = y[:n].copy()
        yy[n // 2] = np.nan
        s, _ = _sums(yy, v[:n] / v[:n].sum(), 256)
        assert np.all(np.isnan(np.asarray(s)))


def test_two_part_constant():
    for J in (256, 65536):
        L, _, _, _, c_hi, c_lo = nufft._plan(J)
        with mpmath.workdps(50):
            exact = mpmath.mpf(L) / (2 * mpmath.pi)
            assert abs((exact - c_hi - c_lo) / exact) < 2.0**-100


@pytest.mark.parametrize("B", [65, 4097])
def test_gradient_with_respect_to_weights(B):
    rng = np.random.default_rng(0)
    y, v = _case("companded", B, rng)
    w = rng.normal(size=256) + 1j * rng.normal(size=256)

    def f(vv):
        s, _ = nufft.sums(y, vv, 256)
        return jax.numpy.real(jax.numpy.vdot(w, s))

    g = np.asarray(jax.grad(f)(v))
    exact = np.real(np.conj(w) @ np.exp(1j * np.arange(256)[:, None] * y))
    np.testing.assert_allclose(g, exact, rtol=0, atol=1e-12 * math.sqrt(256))


def _precise(y, v, J):
    """The precise sums compiled with XLA's default optimisation (which contracts
    ``a·b + c`` into fused multiply-adds; the suite's quick options do not)."""
    return run_optimised(lambda yy, vv: nufft.sums(yy, vv, J, precise=True), y, v)


@pytest.mark.parametrize(
    "kind, B, J",
    [
        ("random", 129, 256),
        ("companded", 129, 4096),
        ("clustered", 129, 1024),
        ("one_point", 129, 16384),
        ("cell_edges", 129, 2048),
        ("wrap", 4097, 256),  # (the reference's own error then 0.9u)
    ],
)
def test_precise_sums_within_their_bound(kind, B, J):
    """Double-double sums: within their bound, which is about u·Σv (the final rounding),
    where the float64 sums' is about 400u."""
    y, v = _case(kind, B, np.random.default_rng(B + J))
    s, bound = _precise(y, v, J)
    s, bound = np.asarray(s), float(bound)
    ref, ref_err = _reference(y, v, J)
    err = np.abs(s - ref) - ref_err - 2.0**-53 * np.abs(ref)
    assert np.all(err <= bound), (np.max(err), bound)
    assert bound <= 1.01 * 2.0**-53
    # Useful: the float64 sums are hundreds of times less accurate on the same case.
    assert float(_sums(y, v, J)[1]) > 100 * bound


@pytest.mark.parametrize(
    "kind, B, J",
    [("companded", 33, 64), ("clustered", 17, 32), ("wrap", 9, 128), ("companded", 4097, 256)],
)
def test_double_double_pair_within_its_bound(kind, B, J):
    """sums_double keeps the precise sums' low part: the pair is within the bound of the
    sums before their final rounding, against 40-digit mpmath sums (at 4097 points, a
    few of the outputs); its high part is the float64 result of the precise sums, and its
    derivative theirs. The bound, about 3e-20 of Σv, no longer grows with the points
    (the spreading's remainders split twice: at 4097 points it was 6e-20, at 16384 6e-19)."""
    y, v = _case(kind, B, np.random.default_rng(B + J))
    hi, lo, bound = run_optimised(lambda yy, vv: nufft.sums_double(yy, vv, J), y, v)
    hi, lo, bound = np.asarray(hi), np.asarray(lo), float(bound)
    assert bound < 4e-20
    outputs = range(J) if B < 100 else (0, 1, 17, 128, 255)
    with mpmath.workdps(40):
        for j in outputs:
            exact = mpmath.fsum(mpmath.mpf(float(w)) * mpmath.expj(j * mpmath.mpf(float(t)))
                                for t, w in zip(y, v, strict=True))  # fmt: skip
            pair = mpmath.mpc(hi[j].real, hi[j].imag) + mpmath.mpc(lo[j].real, lo[j].imag)
            assert abs(pair - exact) <= bound, (j, float(abs(pair - exact)), bound)
    s, _ = _precise(y, v, J)
    np.testing.assert_array_equal(np.asarray(s), hi + lo)
    w = np.random.default_rng(1).normal(size=J)

    def f(vv, pair):
        s = nufft.sums_double(y, vv, J)[0] if pair else nufft.sums(y, vv, J, precise=True)[0]
        return jax.numpy.real(jax.numpy.vdot(w, s))

    # (compiled: eagerly, op by op, the two derivatives took 6 s per case)
    grad = jax.jit(jax.grad(f), static_argnums=1)
    np.testing.assert_array_equal(np.asarray(grad(v, True)), np.asarray(grad(v, False)))


def test_fewer_than_eight_nodes_is_a_clear_error():
    # (Below 8 nodes the kernel's taps would wrap around the grid more than once.)
    y, v = _case("random", 33, np.random.default_rng(0))
    for J in (2, 4, 6, 12):
        with pytest.raises(ValueError, match="J must be a power of two >= 8"):
            nufft.sums(y, v, J)


def test_precise_sums_need_sixteen_nodes_and_keep_nan_and_derivatives():
    y, v = _case("companded", 65, np.random.default_rng(0))
    with pytest.raises(ValueError, match="J a power of two >= 16"):
        nufft.sums(y, v, 8, precise=True)
    yy = y.copy()
    yy[20] = np.nan
    assert np.all(np.isnan(np.asarray(_precise(yy, v, 64)[0])))
    w = np.random.default_rng(1).normal(size=64)

    def f(vv, precise):
        s, _ = nufft.sums(y, vv, 64, precise=precise)
        return jax.numpy.real(jax.numpy.vdot(w, s))

    grad = jax.jit(jax.grad(f), static_argnums=1)  # (compiled: eagerly it took 6 s)
    g = np.asarray(grad(v, True))
    np.testing.assert_allclose(g, np.asarray(grad(v, False)), rtol=0, atol=1e-13)
    exact = np.real(w @ np.exp(1j * np.arange(64)[:, None] * y))
    np.testing.assert_allclose(g, exact, rtol=0, atol=1e-12)


@pytest.mark.parametrize("width", [1, 2, 3, 7, 8, 13, 26, 31, 32])
def test_window_sums_match_a_convolution(width):
    """The spreading's count of terms per grid point (n_max, in its bound) sums each
    window of ``width`` cells; against numpy's convolution with a box."""
    v = np.random.default_rng(width).integers(0, 50, 100 + width - 1).astype(np.int32)
    got = np.asarray(jax.jit(nufft._window_sums, static_argnums=1)(v, width))
    np.testing.assert_array_equal(got, np.convolve(v, np.ones(width, np.int32), mode="valid"))
