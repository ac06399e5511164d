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

import jax.numpy as jnp
import numpy as np
from jax import lax

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


def _constants(L: int, J: int, a: float) -> dict:
    h = 2.0 * math.pi / L
    tau = h * h / (4.0 * a)
    s = tau * L * L
    r = math.exp(-tau * L * (L - J))
    tail = math.exp(-a * _M * _M) / (1.0 - math.exp(-a * (2 * _M + 1)))
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
    if J < 2 or J & (J - 1):
        raise ValueError(f"J must be a power of two >= 2; got {J}")
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


def two_product(x, y):
    """Dekker's exact product ``x·y = p + e`` (no fused multiply-add needed)."""
    p = x * y
    split = 134217729.0  # 2^27 + 1
    cx = split * x
    xh = cx - (cx - x)
    xl = x - xh
    cy = split * y
    yh = cy - (cy - y)
    yl = y - yh
    e = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl
    return p, e


def two_sum(x, y):
    """Knuth's exact sum ``x + y = s + e`` (no branch)."""
    s = x + y
    yy = s - x
    e = (x - (s - yy)) + (y - yy)
    return s, e


def _cells(y, y_lo, L, c_hi, c_lo):
    """Cell index (mod L) and offset in [0, 1] of ``(y + y_lo)·L/(2π)``, within 4u of exact."""
    p_hi, p_lo = two_product(y, jnp.full_like(y, c_hi))
    m = jnp.floor(p_hi)
    f = ((p_hi - m) + p_lo) + (y * c_lo + y_lo * c_hi)
    m2 = jnp.floor(f)
    delta = f - m2
    cell = (m.astype(jnp.int64) + m2.astype(jnp.int64)) % L
    return cell, delta


# Spreading: a loop over the taps keeps the per-point values (the reduction, cos and sin)
# an array of their own, which XLA would otherwise recompute for each of the 2M taps of a
# fused (points × taps) product. Each returns the grid and g_n, its sums' rounding
# relative to the kernel mass V̄·G_s (per component, as ``√2·g_n·V̄·G_s`` in ℓ¹).


def _term(w, delta, a, t):
    """Every point's term at tap ``t`` (grid point ``cell + t``)."""
    dist = t.astype(jnp.float64) - delta
    return w * jnp.exp(-(a * (dist * dist)))


def _spread(w, cell, delta, a, L, v_bar):
    """Floating-point sums: a grid point's n terms round like γ_n. n_max, the most terms
    landing on one grid point, is counted exactly: points per cell, summed over each
    window of 2M cells (circularly)."""

    def tap(t, grid):
        return grid.at[(cell + t) % L].add(_term(w, delta, a, t))

    grid = lax.fori_loop(-_M + 1, _M + 1, tap, jnp.zeros(L, jnp.complex128))
    count = jnp.zeros(L, jnp.int32).at[cell].add(1)
    cum = jnp.cumsum(jnp.concatenate([jnp.zeros(1, jnp.int32), count, count[: 2 * _M - 1]]))
    n_max = jnp.max(cum[2 * _M :] - cum[:L]).astype(jnp.float64) + 1.0
    return grid, n_max * U / (1.0 - n_max * U)


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


def sums(y, v, J: int, y_lo=None):
    """``S(j) = Σ_b v_b e^{i j y_b}`` for ``j < J`` and a bound on its error at every ``j``.

    Args:
      y: (B,) float64 positions, any real with ``|y|·2J < 2^40``.
      v: (B,) float64 non-negative weights.
      J: the number of outputs, a power of two (static).
      y_lo: optional (B,) low parts: the positions are then ``y + y_lo`` (double-double,
        ``|y_lo| ≤ u|y|``), for callers whose positions are not floats.

    Returns:
      ``(S, err)``: complex128 (J,) and a float64 bound on ``max_j |S(j) − exact|``.
    """
    L, a, table, c, c_hi, c_lo = _plan(J)
    y = jnp.asarray(y, jnp.float64)
    v = jnp.asarray(v, jnp.float64)
    n_points = y.shape[0]
    y_lo = jnp.zeros_like(y) if y_lo is None else jnp.asarray(y_lo, jnp.float64)
    cell, delta = _cells(y, y_lo, L, c_hi, c_lo)
    # Modulation e^{iπ(m + δ)/σ} = (table entry for m mod 2σ) · e^{iπδ/σ}.
    turn = jnp.asarray(np.exp(1j * np.pi * np.arange(2 * _SIGMA) / _SIGMA))
    w = v * turn[cell % (2 * _SIGMA)] * jnp.exp(1j * ((np.pi / _SIGMA) * delta))

    v_bar = jnp.sum(v) / (1.0 - _gamma(n_points))
    spread = _spread_split if n_points > _SPLIT_FROM else _spread
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
