r"""Non-uniform discrete Fourier sums with a rigorous error bound (Gaussian gridding).

For weights ``v_b ≥ 0`` at arbitrary real positions ``y_b`` this module computes

    S(j) = Σ_b v_b e^{i j y_b},   j = 0, …, J − 1   (J a power of two),

in ``O(B·2M + L log L)`` operations (``L = σJ``) instead of ``B·J``, together with a bound
on ``|Ŝ(j) − S(j)|`` that holds at every ``j`` and includes floating-point rounding. The
composition engine (:mod:`glrt_jax._src.transform`) uses it for each round's moment
generating function at the Fourier nodes, where the bound enters the certified bounds.

Method (Dutt & Rokhlin 1993; Greengard & Lee 2004)
-------------------------------------------------
Oversampling ``σ = 4``, fine grid ``L = σJ`` points ``x_m = mh``, ``h = 2π/L``. The
periodic Gaussian ``g_τ(x) = Σ_l e^{−(x − 2πl)²/(4τ)}`` has Fourier coefficients
``ĝ(n) = √(τ/π) e^{−τn²}``. In grid units the weight of a point at ``y = h·g`` on grid
point ``n`` is ``e^{−a(n − g)²}`` with ``a = h²/(4τ)``; ``a`` is fixed and ``τ`` *defined*
by it. Outputs are centred, ``k = j − J/2``, with ``w_b = v_b e^{i(J/2)y_b}``.

With ``f(x) = Σ_b w_b g_τ(x − y_b)`` and ``T(k) = (1/L) Σ_m f(x_m) e^{ikx_m}`` (one
inverse FFT), ``T(k) = Σ_p ĝ(k + pL) S_w(k + pL)``, so ``S_w(k) = T(k)/ĝ(k)`` minus the
terms ``p ≠ 0``. Error terms, each proved in a line (``V = Σ v_b``, ``u = 2^{−53}``,
``γ_n = nu/(1 − nu)``, ``Q = √(π/s) e^{τ(J/2)²}`` with ``s = τL²`` the amplification of
an ℓ¹ error of the grid by the deconvolution):

1. *Aliasing.* ``|S_w(n)| ≤ V`` and ``(k + pL)² − k² ≥ |p|L(L − J)`` for ``|k| ≤ J/2``:
   at most ``V·2r/(1 − r)``, ``r = e^{−τL(L−J)}``.
2. *Truncation.* Each point is spread to the ``2M`` nearest grid points; the omitted
   ones lie at distances ``≥ M, M + 1, …`` on each side, so the omitted kernel mass is at
   most ``2e^{−aM²}/(1 − e^{−a(2M+1)})``, amplified by ``Q``.
3. *Reduction.* ``g = y·L/(2π)`` is formed in double-double (Dekker's exact product
   with a two-part constant; ``y`` itself may be given as a double-double), so the offset
   ``δ`` of ``g`` in its cell is within ``4u`` (grid units) of the exact one; the sum is
   then computed for positions moved by at most ``4uh``, which moves ``e^{ijy}`` by at
   most ``J·h·4u = 2π·4u/σ``.
4. *Weights.* The modulation ``e^{iπ(m + δ)/σ}`` (a table entry times one complex
   exponential) is within ``16u``, the kernel values (``exp`` within ``4u`` of an
   argument with relative error ``γ_4``) within ``G(4u + γ_4 x e^{γ_4 x})``; with
   ``Σ_t G ≤ G_s = 1 + √(π/a)`` and ``Σ_t x e^{−x} ≤ G_s/2 + 1`` this costs
   ``Q·V·[(22u)G_s + γ_4(G_s/2 + 1)]``.
5. *Scatter sums.* A grid point receives at most ``n_max`` terms (counted exactly in
   the program from a histogram of the cells): ``‖Δf‖₁ ≤ √2 γ_{n_max} V G_s (1 + ε_w)``.
   A narrow atom of mass can put thousands of points in a few cells; grids of more than
   ``_SPLIT_FROM`` points therefore sum each term's multiple of a quantum exactly and
   only its remainder in floating point (:func:`_spread_split`): ``γ_{n_max}`` becomes
   about ``u``, at the cost of a second scatter.
6. *FFT.* In a Cooley–Tukey FFT each input reaches each output along one path of
   ``log₂ L`` butterfly levels, each adding a relative error of at most ``4.9u``; we
   take ``8u`` per level: ``|ΔT| ≤ γ_F ‖f̂‖₁/L``, ``γ_F = (1 + 8u)^{log₂ L} − 1``.
7. *Deconvolution.* The table ``√(π/τ)e^{τk²}`` is computed in float64 (relative error
   at most ``(8 + 4τk²)u``), one product adds ``u``.

So ``|Ŝ(j) − S(j)| ≤ V̄(E_1 + … + E_6) + E_7`` with ``V̄ = V̂/(1 − γ_B)``; for σ = 4 and
``M = 13`` this is about ``5·10⁻¹⁴ V`` (rounding dominates; the truncation and aliasing
terms are below ``10⁻¹⁵``). The constants are evaluated in float64 and inflated by
``10⁻⁹`` relative, far more than their own rounding.

Assumptions not proved here: the accuracy of XLA's ``exp``, ``cos`` and ``sin`` (used
with the margins above; measured within ``2.1u`` and ``1u``, and checked by
``tests/test_elementary.py``) and the one-path structure of the FFT library's butterflies.

Precise sums (``sums(..., precise=True)``)
------------------------------------------
The same method in double-double arithmetic (:mod:`glrt_jax._src.double_double`; its own
inverse FFT, kernel values from Taylor series, a kernel wide enough for aliasing and
truncation terms of about ``10⁻²⁰``): the bound is the final rounding to float64, about
``1.0·u·Σv`` instead of about ``400u·Σv``, at about 15 times the cost (J = 16384, 4096
points: 1.4 ms in float64, 20 ms in double-double, one core). :func:`sums_double` returns
the double-double result itself, within about ``3·10⁻²⁰ Σv``. The composition engine
uses them where the float64 transforms' rounding decides a bracket's width (small q,
tiny δ: :func:`glrt_jax._src.composition._refine`). No assumption on XLA's elementary
functions is left, and none on fused multiply-adds (the products are formed so that a
contraction changes nothing).

Example:
  >>> import jax, numpy as np
  >>> with jax.enable_x64(True):
  ...     y = np.array([0.3, 2.0, -5.0]); v = np.array([0.2, 0.5, 0.3])
  ...     s, err = sums(y, v, 256)
  ...     direct = np.exp(1j * np.arange(256)[:, None] * y) @ v
  ...     bool(np.max(np.abs(np.asarray(s) - direct)) <= float(err) < 1e-13)
  True
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from glrt_jax._src import double_double as dd
from glrt_jax._src.double_double import two_product
from glrt_jax._src.numerics import computed_once

U = 2.0**-53
_SIGMA = 4  # oversampling
_M = 13  # spreading half-width (grid points on each side)
_EPS_PHI = 16 * U  # modulation factor
_EPS_EXP = 4 * U  # XLA's exp (relative)
_ETA_G = 4 * U  # position within its cell (grid units)
_FFT_PER_LEVEL = 8 * U
_SAFETY = 1.0 + 1e-9
_TINY = float(np.finfo(np.float64).tiny)
# Grids of more points than this spread with exactly summed multiples (_spread_split).
_SPLIT_FROM = 4096


def _gamma(n: float) -> float:
    return n * U / (1.0 - n * U)


def _constants(L: int, J: int, a: float, M: int = _M) -> dict:
    h = 2.0 * math.pi / L
    tau = h * h / (4.0 * a)
    s = tau * L * L
    r = math.exp(-tau * L * (L - J))
    tail = math.exp(-a * M * M) / (1.0 - math.exp(-a * (2 * M + 1)))
    q = math.sqrt(math.pi / s) * math.exp(tau * (J / 2) ** 2)
    gs = 1.0 + math.sqrt(math.pi / a)
    e_w = q * ((2 * U + _EPS_PHI + _EPS_EXP) * gs + _gamma(4) * (gs / 2 + 1))
    gamma_f = math.expm1((L.bit_length() - 1) * math.log1p(_FFT_PER_LEVEL))
    return dict(
        tau=tau,
        e_alias=2.0 * r / (1.0 - r),
        e_trunc=2.0 * tail * q,
        e_red=2.0 * math.pi * _ETA_G / _SIGMA,
        e_w=e_w,
        q=q,
        gs=gs,
        gamma_f=gamma_f,
        log_q=tau * (J / 2) ** 2,
    )


@functools.cache
def _plan(J: int):
    """Kernel width (minimising the bound), error constants and the deconvolution table."""
    # (At least 8: the kernel's 2M taps then wrap around the grid of L = 4J points at
    # most once, which the spreading and its count of terms per grid point assume.)
    if J < 8 or J & (J - 1):
        raise ValueError(f"J must be a power of two >= 8; got {J}")
    L = _SIGMA * J

    def total(a):
        c = _constants(L, J, a)
        rounding = c["q"] * c["gs"] * (1.5 * _gamma(2) + c["gamma_f"])
        return c["e_alias"] + c["e_trunc"] + c["e_w"] + rounding

    # s = τL² = π²/a around the balanced choice πM/(1 − 1/(2σ)).
    s0 = math.pi * _M / (1.0 - 1.0 / (2 * _SIGMA))
    a = min((math.pi**2 / (s0 * (0.6 + 0.01 * i)) for i in range(81)), key=total)
    c = _constants(L, J, a)
    k = np.arange(J, dtype=np.float64) - J // 2
    table = np.sqrt(np.pi / c["tau"]) * np.exp(c["tau"] * k * k)
    const = {name: value * _SAFETY for name, value in c.items() if name != "tau"}
    # Two-part constant L/(2π) = c_hi + c_lo (to about 2^-104 relative) for the exact
    # reduction: 2π = 2π_hi + 2π_lo to 107 bits, and the residual L − c_hi·2π_hi formed
    # exactly with Dekker's product.
    two_pi_hi, two_pi_lo = 6.283185307179586, 2.4492935982947064e-16
    c_hi = L / two_pi_hi
    p, e = two_product(np.float64(c_hi), np.float64(two_pi_hi))
    c_lo = float(((L - p) - e - c_hi * two_pi_lo) / two_pi_hi)
    return L, a, table, const, c_hi, c_lo


def _cells(y, y_lo, L, c_hi, c_lo):
    """Cell index (mod L) and offset in [0, 1] of ``(y + y_lo)·L/(2π)``, within 4u of exact."""
    p_hi, p_lo = two_product(y, jnp.full_like(y, c_hi))
    m = jnp.floor(p_hi)
    f = ((p_hi - m) + p_lo) + (y * c_lo + y_lo * c_hi)
    m2 = jnp.floor(f)
    delta = f - m2
    cell = (m.astype(jnp.int64) + m2.astype(jnp.int64)) % L
    return cell, delta


# Spreading: each point's 2M terms form a row of a (points × taps) table, and one
# scatter-add adds each row to the 2M consecutive grid points from its cell on (the
# scatter's update window), on a grid extended by 2M − 1 points that is then folded onto
# the circle. Each returns the grid and g_n, its sums' rounding relative to the kernel
# mass V̄·G_s (per component, as ``√2·g_n·V̄·G_s`` in ℓ¹). A grid point's value is a sum
# of the terms that land on it, in some order, whatever the order: the bound counts the
# terms, not the order.


def _term(w, delta, a, t):
    """Every point's term at tap ``t`` (grid point ``cell + t``)."""
    dist = t.astype(jnp.float64) - delta
    return w * jnp.exp(-(a * (dist * dist)))


def _taps(w, delta, a):
    """Every point's terms at its 2M taps ``t = −M + 1 … M`` (grid points ``cell + t``),
    shape (points, 2M)."""
    return _term(w[:, None], delta[:, None], a, jnp.arange(-_M + 1, _M + 1))


_WINDOWS = lax.ScatterDimensionNumbers(
    update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,)
)
# Points per scatter of :func:`_spread_windows`: the (points × taps) tables of a vmapped
# batch of transforms stay within a CPU's caches (128 transforms of 385 points in one
# piece: 20 MB of terms, twice as long as in pieces of 256).
_PIECE = 256


def _spread_windows(w, cell, delta, a, L):
    """The grid (L,): each point's 2M terms (:func:`_taps`) added to the 2M consecutive
    grid points from its cell on, as one scatter-add window per point on a grid extended
    by 2M − 1 points (its point ``j`` is position ``j − M + 1``), folded onto the circle.

    ``w`` and ``delta`` are computed apart first
    (:func:`~glrt_jax._src.numerics.computed_once`): fused into the tables, XLA's CPU
    backend would compute each point's reduction, cos and sin once per tap.
    """
    w, delta = computed_once(w), computed_once(delta)
    ext = jnp.zeros(L + 2 * _M - 1, jnp.complex128)
    for i in range(0, cell.shape[0], _PIECE):
        piece = slice(i, i + _PIECE)
        ext = lax.scatter_add(
            ext,
            cell[piece, None].astype(jnp.int32),
            _taps(w[piece], delta[piece], a),
            _WINDOWS,
            mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS,
        )
    grid = ext[_M - 1 : _M - 1 + L]
    grid = grid.at[L - _M + 1 :].add(ext[: _M - 1])  # positions −M + 1 … −1
    return grid.at[:_M].add(ext[_M - 1 + L :])  # positions L … L + M − 1


def _spread(w, cell, delta, a, L, v_bar):
    """Floating-point sums: a grid point's n terms round like γ_n. n_max, the most terms
    landing on one grid point, is counted exactly: points per cell, summed over each
    window of 2M cells (circularly)."""
    grid = _spread_windows(w, cell, delta, a, L)
    count = jnp.zeros(L, jnp.int32).at[cell].add(1)
    windows = _window_sums(jnp.concatenate([count, count[: 2 * _M - 1]]), 2 * _M)
    n_max = jnp.max(windows).astype(jnp.float64) + 1.0
    return grid, n_max * U / (1.0 - n_max * U)


def _window_sums(v, width: int):
    """``Σ_{j<width} v[i + j]`` for each ``i`` up to ``len(v) − width`` (exact for integers).

    From sums over windows of 1, 2, 4, … (each from two of the level below), one slice of
    each level that ``width``'s binary digits name: about ``2 log₂ width`` additions per
    point. XLA's CPU backend computes a cumulative sum as windowed reductions whose cost
    grows with their window; here it was about a twentieth of the phase sums of many
    phases (the counts of a 2048-point grid's 26-wide windows, 64 rows: 0.50–0.72 ms by
    ``cumsum``, 0.21–0.23 ms so, the histogram 0.07 ms of both).
    """
    n = v.shape[-1] - width + 1
    out, offset, level, size = None, 0, v, 1
    while size <= width:
        if width & size:
            part = level[offset : offset + n]
            out = part if out is None else out + part
            offset += size
        level = level[:-size] + level[size:]
        size *= 2
    return out


def _spread_split(w, cell, delta, a, L, v_bar):
    """Sums exact but for the remainders below a quantum, whatever the points per cell.

    A companded grid can put thousands of points in the few cells of a narrow atom of
    mass (one round at σ = 0.9, q = 1e-4, N = 10⁴: 10⁴ terms at one grid point, where
    floating-point sums bound the error by 4e-12 rather than 5e-14). Each term is split
    exactly into a multiple of the quantum 2^−e (its components truncated toward zero; the
    differences are exact by Sterbenz's lemma) and a remainder below it. The multiples add
    up exactly: every partial sum at a grid point is at most 5V̄ ≤ 5·2^{50−e} (5: the 2M
    taps of a point may wrap around a grid of as few as 8 points), a multiple of 2^−e
    below 2^53·2^−e. The remainders, each below 2^−e ≤ 2V̄·2^−50 per component (and
    rounded by at most u of itself, should their subtraction be fused), add up to within
    γ_{n+1}·n·√2·2V̄·2^−50 for the n = 2M·B terms (at most that relative to V̄·G_s, as
    G_s ≥ 1); the sum of the two grids rounds each grid value by u per component.

    Its terms are spread one tap at a time (a loop of scatters): :func:`_spread`'s windows,
    with both tables (quanta and remainders) per piece, were faster alone but 20–40 %
    slower in the engine's programs at 16384 points (P1 at tol 1e-6, N = 10 at 1e-5).

    The second scatter costs about a third more time for the spreading (2049 points, 4096
    nodes: 250 → 350 µs per transform), which is why grids of at most ``_SPLIT_FROM``
    points (so at most that many terms per grid point) keep :func:`_spread`.
    """
    e = 50.0 - jnp.ceil(jnp.log2(jnp.maximum(v_bar, _TINY)))
    scale = jnp.ldexp(1.0, jnp.clip(e, -900.0, 900.0).astype(jnp.int32))  # exactly 2^e

    def tap(t, grids):
        whole, rest = grids
        term = _term(w, delta, a, t)
        on_grid = lax.complex(jnp.trunc(term.real * scale), jnp.trunc(term.imag * scale)) / scale
        at = (cell + t) % L
        return whole.at[at].add(on_grid), rest.at[at].add(term - on_grid)

    zero = jnp.zeros(L, jnp.complex128)
    whole, rest = lax.fori_loop(-_M + 1, _M + 1, tap, (zero, zero))
    # A NaN position (cast to an integer cell) makes every output NaN, as it would in a
    # floating-point sum.
    grid = whole + rest + 0.0 * jnp.sum(delta)
    n_terms = 2 * _M * cell.shape[0]
    return grid, U * (1.0 + 2.0 * U) + _gamma(n_terms + 1) * n_terms * 2.0**-49


def sums(y, v, J: int, y_lo=None, *, precise: bool = False):
    """``S(j) = Σ_b v_b e^{i j y_b}`` for ``j < J`` and a bound on its error at every ``j``.

    Args:
      y: (B,) float64 positions, any real with ``|y|·2J < 2^40``.
      v: (B,) float64 non-negative weights.
      J: the number of outputs, a power of two, at least 8 (static).
      y_lo: optional (B,) low parts: the positions are then ``y + y_lo`` (double-double,
        ``|y_lo| ≤ u|y|``), for callers whose positions are not floats.
      precise: (static) compute in double-double (:func:`_sums_precise`): the bound
        about ``1.1·10⁻¹⁶ Σv`` instead of ``5·10⁻¹⁴ Σv``, at 10–20 times the cost;
        ``J ≥ 16``. Its derivative (in ``v`` only: the positions are held fixed) is
        that of the float64 sums.

    Returns:
      ``(S, err)``: complex128 (J,) and a float64 bound on ``max_j |S(j) − exact|``.
    """
    y, v, y_lo = _inputs(y, v, y_lo)
    if precise:
        s, _, _, _, err = _sums_precise(y, v, J, y_lo)
        return s, err
    return _sums(y, v, J, y_lo, y.shape[0] > _SPLIT_FROM)


def sums_double(y, v, J: int, y_lo=None):
    """The precise sums (:func:`sums` with ``precise=True``) as complex double-doubles.

    The double-double result is not rounded to float64: ``S_hi + S_lo`` (an exact sum of
    the two, ``|S_lo| ≤ u|S_hi|`` per part) lies within the bound of the sums before
    their final rounding, about ``10⁻²⁰ Σv`` instead of ``u Σv``. For callers that take
    the logarithm of an ``S`` near 1 relative to its distance from 1
    (:func:`glrt_jax._src.transform.node_terms`). Its derivative (in ``v``, through
    ``S_hi``) is :func:`sums`'s.

    Args:
      y, v, J, y_lo: as for :func:`sums` (``J ≥ 16``).

    Returns:
      ``(S_hi, S_lo, err)``: complex128 (J,) each, and a float64 bound on
      ``max_j |S_hi(j) + S_lo(j) − exact|``.

    Example:
      >>> import jax, numpy as np
      >>> with jax.enable_x64(True):
      ...     y = np.array([0.3, 2.0, -5.0]); v = np.array([0.2, 0.5, 0.3])
      ...     hi, lo, err = sums_double(y, v, 64)
      ...     direct = np.exp(1j * np.arange(64)[:, None] * y) @ v
      ...     bool(np.max(np.abs(np.asarray(hi) - direct)) < 1e-15 and float(err) < 1e-18)
      True
    """
    y, v, y_lo = _inputs(y, v, y_lo)
    _, s_hi, s_lo, err, _ = _sums_precise(y, v, J, y_lo)
    return s_hi, s_lo, err


def _inputs(y, v, y_lo):
    """``(y, v, y_lo)`` of :func:`sums` as float64 arrays (``y_lo`` zeros when None)."""
    y = jnp.asarray(y, jnp.float64)
    v = jnp.asarray(v, jnp.float64)
    return y, v, jnp.zeros_like(y) if y_lo is None else jnp.asarray(y_lo, jnp.float64)


def _sums(y, v, J, y_lo, split):
    """The float64 sums (module docstring); ``split``: spread with :func:`_spread_split`."""
    L, a, table, c, c_hi, c_lo = _plan(J)
    n_points = y.shape[0]
    cell, delta = _cells(y, y_lo, L, c_hi, c_lo)
    # Modulation e^{iπ(m + δ)/σ} = (table entry for m mod 2σ) · e^{iπδ/σ}.
    turn = jnp.asarray(np.exp(1j * np.pi * np.arange(2 * _SIGMA) / _SIGMA))
    w = v * turn[cell % (2 * _SIGMA)] * jnp.exp(1j * ((np.pi / _SIGMA) * delta))

    v_bar = jnp.sum(v) / (1.0 - _gamma(n_points))
    spread = _spread_split if split else _spread
    grid, g_n = spread(w, cell, delta, a, L, v_bar)
    tk = jnp.fft.ifft(grid)
    centred = jnp.concatenate([tk[L - J // 2 :], tk[: J // 2]])  # k = −J/2 … J/2 − 1
    s = centred * jnp.asarray(table)
    # Error bound (g_n: the spreading's sums, relative to V̄·G_s, as a complex sum's).
    eps_w = 2 * U + _EPS_PHI + _EPS_EXP + 10 * _gamma(4)
    e_s = c["q"] * math.sqrt(2.0) * g_n * c["gs"] * (1.0 + eps_w)
    e_f = c["q"] * c["gamma_f"] * c["gs"] * (1.0 + eps_w + math.sqrt(2.0) * g_n)
    before = v_bar * (c["e_alias"] + c["e_trunc"] + c["e_red"] + c["e_w"] + e_s + e_f)
    e_d = (10.0 + 4.0 * c["log_q"]) * U * (v_bar + before)
    return s, (before + e_d) * _SAFETY


# The precise sums (sums(..., precise=True)): a wider kernel that brings the aliasing and
# truncation terms to about 10⁻²⁰ (a = 0.16: e^{−0.75π²/a} = e^{−46}; M = 17:
# e^{−aM²} = e^{−46}), and every step in double-double.
_M_PRECISE = 17
_A_PRECISE = 0.16
# A bound on each term's relative error before the final rounding (see _sums_precise).
_E_DD = 1e-25
# The precise spreading's middle level: multiples of 2^−(e + 30), below 2^31 of them per
# term, so that the sums of up to 2^22 terms per grid point stay exact (a grid point gets
# at most 2M·B of them: 34·(2^14 + 1) at the engine's most points).
_MID_BITS = 30
# √2/2 as a double-double: one Newton step from float64's, in exact rationals.
_HALF_SQRT2 = dd.constant(
    Fraction(0.7071067811865476)
    + (Fraction(1, 2) - Fraction(0.7071067811865476) ** 2) / (2 * Fraction(0.7071067811865476))
)


@functools.cache
def _precise_constants(J: int) -> tuple[int, dict]:
    L = _SIGMA * J
    c = _constants(L, J, _A_PRECISE, _M_PRECISE)
    return L, {name: value * _SAFETY for name, value in c.items() if name != "tau"}


def _cells_precise(y, y_lo, L):
    """Cell index (mod L) and double-double offset in [0, 1] of ``g = (y + y_lo)·L/(2π)``,
    and a bound on the offset's error in grid units.

    ``y·c_hi`` is within ``3u²|g|`` (:func:`~glrt_jax._src.double_double.product`); the
    cross terms ``y·c_lo + y_lo·c_hi`` (each at most ``u|g|``) round within ``4u²|g|``,
    the omitted ``y_lo·c_lo`` and the constant's own error (2⁻¹⁰⁴) add ``1.3u²|g|``, the
    caller's rounding of ``y_lo`` at most ``3u²|g|`` and the double-double sums ``3u²``
    each of values below 2: ``16u²(1 + |g|)``.
    """
    _, _, _, _, c_hi, c_lo = _plan(L // _SIGMA)
    p_hi, p_lo = dd.product(y, jnp.full_like(y, c_hi))
    m = jnp.floor(p_hi)
    cross = y * c_lo + y_lo * c_hi
    f = dd.add(dd.two_sum(p_hi, -m), dd.two_sum(p_lo, cross))
    m2 = jnp.floor(f[0])
    delta = dd.add(f, (-m2, jnp.zeros_like(m2)))
    cell = (m.astype(jnp.int64) + m2.astype(jnp.int64)) % L
    eta = 16.0 * U * U * (1.0 + jnp.max(jnp.abs(p_hi)))
    return cell, delta, eta


@functools.cache
def _twiddles_precise(L: int):
    """``e^{2πik/L}`` for ``k < L/2`` as complex double-doubles (NumPy, computed once per
    L), each within 10⁻²⁷: the products of two tables of about √L entries
    (``k = k₁R + k₀``), each entry from :func:`glrt_jax._src.double_double.expi` (angles
    at most π)."""
    half = L // 2
    R = 1 << ((half.bit_length() - 1 + 1) // 2)
    two_pi = (2.0 * dd.PI[0], 2.0 * dd.PI[1])

    def table(k):
        return dd.expi(dd.mul_d(two_pi, k / L))

    t0 = table(np.arange(R, dtype=np.float64))
    t1 = table(np.arange(half // R, dtype=np.float64) * R)
    prod = dd.cmul(
        jax.tree_util.tree_map(lambda v: v[:, None], t1),
        jax.tree_util.tree_map(lambda v: v[None, :], t0),
    )
    return jax.tree_util.tree_map(lambda v: np.asarray(v).reshape(half), prod)


def _ifft_precise(x, L: int, J: int):
    """The ``J`` centred outputs (``k = −J/2 … J/2 − 1``, of ``k mod L``) of
    ``(1/L)·Σ_m x_m e^{2πikm/L}``, ``x`` a complex double-double of length ``L``: radix-2
    decimation in frequency in Pease's constant geometry, every butterfly in double-double.

    Each of the ``log₂L`` stages pairs the array's two halves, ``a`` and ``b``, and writes
    ``a + b`` and ``(a − b)·w`` interleaved (a static reshape), the twiddle of position
    ``p`` at stage s being ``e^{2πi·((p >> s) << s)/L}``; the transform then lies in
    bit-reversed order, from which the centred outputs are gathered once. (Three times
    faster than an autosorting Stockham loop, whose reordering is a gather at every
    stage: 12 against 36 ms at L = 65536.)
    """
    tw = jax.tree_util.tree_map(jnp.asarray, _twiddles_precise(L))
    half = L // 2
    p = jnp.arange(half)
    tree = jax.tree_util.tree_map

    def stage(s, x):
        a, b = tree(lambda v: v[:half], x), tree(lambda v: v[half:], x)
        w = tree(lambda v: v[jnp.left_shift(jnp.right_shift(p, s), s)], tw)
        u, v = dd.cadd(a, b), dd.cmul(dd.csub(a, b), w)
        return tree(lambda uu, vv: jnp.stack([uu, vv], axis=1).reshape(L), u, v)

    bits = L.bit_length() - 1
    out = lax.fori_loop(0, bits, stage, x)
    k = (np.arange(J) - J // 2) % L
    rev = np.zeros_like(k)
    for bit in range(bits):
        rev |= ((k >> bit) & 1) << (bits - 1 - bit)
    return tree(lambda v: v[jnp.asarray(rev)] * (1.0 / L), out)


@functools.cache
def _deconvolution_precise(J: int, L: int):
    """``√(π/τ) e^{τk²}`` for ``k = −J/2 … J/2 − 1``, ``τ = π²/(aL²)``, as double-doubles
    (NumPy, computed once per J)."""
    al2 = _A_PRECISE * float(L) * float(L)  # (exact: L is a power of two)
    tau = dd.div_d(dd.mul(dd.PI, dd.PI), al2)
    k = np.arange(J, dtype=np.float64) - J // 2
    grow = dd.exp(dd.mul_d(tau, k * k))
    coef = dd.sqrt(dd.div((al2, 0.0), dd.PI))
    return dd.mul((np.full(J, coef[0]), np.full(J, coef[1])), grow)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _sums_precise(y, v, J, y_lo):
    """:func:`sums` in double-double.

    The method is the float64 one (module docstring) with ``a = 0.16``, ``M = 17``, and
    every step in double-double: the cell offsets ``δ`` (:func:`_cells_precise`); the
    modulation ``e^{iπ(m + δ)/σ}`` (a table of ``e^{iπk/4}`` times
    :func:`~glrt_jax._src.double_double.expi`); the kernel values
    ``e^{−a(t − δ)²} = e^{−at²}·(e^{2aδ})^t·e^{−aδ²}`` (:func:`~glrt_jax._src.double_double.exp`
    of the three factors, the powers by repeated products); the spreading's sums, whose
    multiples of a quantum add up exactly and the remainders (with the low parts) in
    float64, as :func:`_spread_split`'s; the inverse FFT (:func:`_ifft_precise`) and the
    deconvolution table (:func:`_deconvolution_precise`).

    Error: (1) aliasing and (2) truncation as in the module docstring, with the wider
    kernel about 10⁻²⁰ each; (3) the offsets' error η (grid units) moves each
    ``e^{ijy}`` by at most ``2πη/σ``; (5) the spreading's sums: each term, a
    double-double, is split into a multiple of ``2^−e`` (``2^−e ≤ 2V̄·2^−50``), one of
    ``2^−(e+30)`` and a rest; the multiples add up exactly (fewer than ``2^53`` quanta
    in any sum) and only the rests in floating point, relative to ``V̄·G_s``:
    ``2γ_{n+1}·n·2^−79(1 + 2^−20)`` for the ``n = 2MB`` terms (each rest is below
    ``2^−(e+30)`` plus ``u`` of the term's low part, and rounds by u of itself once);
    with one level of multiples (``2^−e``) it was ``2γ_{n+1}·n·2^−49``, which a
    composition of 10⁶ rounds (its error n_k·e relative to the Chernoff scale of a
    bimodal round, far above δ) made the largest term at 8192 points: about
    ``3·10⁻¹⁹`` of ``Σv``; (8) every other operation: each of a term's factors is a product or
    sum of double-doubles within 64u² of its operands
    (:mod:`~glrt_jax._src.double_double`), or a Taylor series within 5·10⁻²⁷; a term
    passes through at most 3 + 3M + 3 + 2·log₂L + 4 of them (the grid's sum of its three
    parts among them; with ``log₂L ≤ 30``: 121 operations, 7800u² = 9.6·10⁻²⁹; five
    series, 2.5·10⁻²⁶; a twiddle per stage and a
    deconvolution entry, 3.5·10⁻²⁶), so the computed value is the exact value of terms
    each perturbed by at most 10⁻²⁵
    relative: at most ``√2·Q·G_s·V̄·10⁻²⁵``, as the output is at most ``Q·G_s`` times
    the terms' sizes summed; (9) the final rounding to float64, ``u`` of the output, at
    most ``u(V̄ + the rest)`` (not made for :func:`sums_double`, which returns the pair).
    """
    if J < 16 or J & (J - 1):
        raise ValueError(f"precise sums need J a power of two >= 16; got {J}")
    L, c = _precise_constants(J)
    a = _A_PRECISE
    n_points = y.shape[0]
    cell, delta, eta = _cells_precise(y, y_lo, L)

    # Weights v·e^{iπ(m + δ)/σ}: the table of e^{iπk/4} (exact but for √2/2) times e^{iπδ/4}.
    r2 = _HALF_SQRT2
    cos_hi = np.array([1.0, r2[0], 0.0, -r2[0], -1.0, -r2[0], 0.0, r2[0]])
    cos_lo = np.array([0.0, r2[1], 0.0, -r2[1], 0.0, -r2[1], 0.0, r2[1]])
    sin_hi, sin_lo = np.roll(cos_hi, 2), np.roll(cos_lo, 2)  # sin(πk/4) = cos(π(k − 2)/4)
    k8 = cell % (2 * _SIGMA)
    turn = (
        (jnp.asarray(cos_hi)[k8], jnp.asarray(cos_lo)[k8]),
        (jnp.asarray(sin_hi)[k8], jnp.asarray(sin_lo)[k8]),
    )
    theta = dd.mul(dd.PI, delta)
    theta = (theta[0] * (1.0 / _SIGMA), theta[1] * (1.0 / _SIGMA))
    w = dd.cmul(turn, dd.expi(theta))
    w = (dd.mul_d(w[0], v), dd.mul_d(w[1], v))

    # Kernel factors e^{2aδ}, e^{−2aδ}, e^{−aδ²} (one call), and e^{−at²} per tap.
    two_a_delta = dd.mul_d(delta, 2.0 * a)
    a_delta2 = dd.mul_d(dd.mul(delta, delta), a)
    args = (
        jnp.stack([two_a_delta[0], -two_a_delta[0], -a_delta2[0]]),
        jnp.stack([two_a_delta[1], -two_a_delta[1], -a_delta2[1]]),
    )
    e3 = dd.exp(args)
    up, down, gauss = ((e3[0][i], e3[1][i]) for i in range(3))
    taps = np.arange(-_M_PRECISE + 1, _M_PRECISE + 1, dtype=np.float64)
    t_hi, t_lo = dd.product(jnp.full(taps.shape, -a), jnp.asarray(taps * taps))
    tap_factor = dd.exp((t_hi, t_lo))
    weight = dd.cmul_r(w, gauss)
    power = dd.power(down, _M_PRECISE - 1)  # e^{2aδ·t} at the first tap, t = 1 − M

    v_bar = jnp.sum(v) / (1.0 - _gamma(n_points))
    e = jnp.clip(50.0 - jnp.ceil(jnp.log2(jnp.maximum(v_bar, _TINY))), -900.0, 900.0)
    scale = jnp.ldexp(1.0, e.astype(jnp.int32))  # exactly 2^e
    scale_mid = jnp.ldexp(1.0, (e + _MID_BITS).astype(jnp.int32))

    def levels(hi, lo):
        """A term ``hi + lo`` as a multiple of ``2^−e``, one of ``2^−(e + 30)`` and the
        rest (below ``2^−(e + 30)`` and ``u`` of the term's low part)."""
        on = jnp.trunc(hi * scale) / scale
        r_hi, r_lo = dd.two_sum(hi - on, lo)  # (hi − on exact)
        mid = jnp.trunc(r_hi * scale_mid) / scale_mid
        return on, mid, (r_hi - mid) + r_lo

    def tap(i, carry):
        whole, middle, rest, power = carry
        k = dd.mul((tap_factor[0][i], tap_factor[1][i]), power)
        re, im = dd.cmul_r(weight, k)
        (on_re, mid_re, rest_re), (on_im, mid_im, rest_im) = levels(*re), levels(*im)
        at = (cell + (i - _M_PRECISE + 1)) % L
        whole = whole.at[at].add(lax.complex(on_re, on_im))
        middle = middle.at[at].add(lax.complex(mid_re, mid_im))
        rest = rest.at[at].add(lax.complex(rest_re, rest_im))
        return whole, middle, rest, dd.mul(power, up)

    zero = jnp.zeros(L, jnp.complex128)
    whole, middle, rest, _ = lax.fori_loop(0, 2 * _M_PRECISE, tap, (zero, zero, zero, power))

    def part(f):  # whole + middle exactly, then the rest (a double-double sum: 3u²)
        return dd.add(dd.two_sum(f(whole), f(middle)), (f(rest), jnp.zeros(L)))

    grid = (part(jnp.real), part(jnp.imag))
    centred = _ifft_precise(grid, L, J)  # k = −J/2 … J/2 − 1
    out = dd.cmul_r(centred, tuple(map(jnp.asarray, _deconvolution_precise(J, L))))
    # A NaN position (cast to an integer cell) makes every output NaN, as it would in a
    # floating-point sum.
    poison = 0.0 * jnp.sum(delta[0])
    s = lax.complex(dd.to_float(out[0]), dd.to_float(out[1])) + poison
    # (the pair itself: s_hi + s_lo is the double-double exactly, for sums_double)
    s_hi = lax.complex(out[0][0], out[1][0]) + poison
    s_lo = lax.complex(out[0][1], out[1][1])

    n_terms = 2 * _M_PRECISE * n_points
    g_n = 2.0 * _gamma(n_terms + 1) * n_terms * 2.0 ** -(49 + _MID_BITS) * (1.0 + 2.0**-20)
    paths = c["q"] * math.sqrt(2.0) * c["gs"] * (g_n + _E_DD)
    e_red = 2.0 * math.pi * eta / _SIGMA
    before = v_bar * (c["e_alias"] + c["e_trunc"] + paths) + v_bar * e_red
    # (the bound of the pair, and of its rounding to float64)
    return s, s_hi, s_lo, before * _SAFETY, (before + U * (v_bar + before)) * _SAFETY


@_sums_precise.defjvp
def _sums_precise_jvp(J, primals, tangents):
    """The derivative in ``v`` from the float64 sums (``S`` is linear in ``v``); the
    positions' tangents are not followed (the engine holds its positions fixed)."""
    y, v, y_lo = primals
    _, dv, _ = tangents
    out = _sums_precise(y, v, J, y_lo)
    ds, _ = _sums(y, dv, J, y_lo, False)
    zero = jnp.zeros_like(out[3])
    return out, (ds, ds, jnp.zeros_like(out[2]), zero, zero)
