"""Numerical helpers shared across the library: dtypes, log-space arithmetic, Poisson logs.

Everything here is elementwise, jittable and free of library state; any module may import
these names (none of them starts with an underscore).

* dtypes: :func:`float_dtype`, the one rule by which arguments are promoted to a
  common inexact dtype, :func:`promote` (that rule plus broadcasting) and
  :func:`machine_eps`.
* log space: :func:`log1mexp`, ``log(1 − e^t)`` without cancellation.
* Poisson and gamma prefactors in log space: Loader's saddle-point formulas
  (:func:`stirlerr`, :func:`bd0`) and :func:`log_poisson`, which keep full relative
  accuracy for large arguments.
* series: :func:`tail_converged`, the stopping rule of a sum whose terms are
  log-concave and falling.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

__all__ = [
    "bd0",
    "float_dtype",
    "log1mexp",
    "log_poisson",
    "machine_eps",
    "once_if_uniform",
    "promote",
    "stirlerr",
    "tail_converged",
]

_LOG_2PI = math.log(2.0 * math.pi)
_HALF_LOG_2PI = 0.5 * _LOG_2PI
_LN2 = math.log(2.0)


# ---------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------


def float_dtype(*args):
    """The common inexact dtype of ``args``; integers and booleans give the default float.

    ``jnp.result_type`` of the arguments, except that a non-inexact result (integer or
    boolean inputs, Python ints) becomes ``jnp.result_type(float)``: float64 with
    ``jax_enable_x64``, else float32. Complex inputs keep their complex dtype (the
    real-valued functions of the library then reject them).
    """
    dtype = jnp.result_type(*args)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    return dtype


def promote(*args):
    """``args`` as arrays of their :func:`float_dtype`, broadcast to a common shape (a list)."""
    dtype = float_dtype(*args)
    args = [jnp.asarray(a, dtype) for a in args]
    return jnp.broadcast_arrays(*args)


def machine_eps(dtype) -> float:
    """Machine epsilon of ``dtype`` as a Python float (a trace-time constant)."""
    return float(jnp.finfo(dtype).eps)


# ---------------------------------------------------------------------------
# log space
# ---------------------------------------------------------------------------


def log1mexp(t):
    """log(1 − e^t) for t ≤ 0.

    ``log(−expm1(t))`` near 0 and ``log1p(−e^t)`` below −log 2 (Mächler's switch), so
    the result keeps full relative accuracy on both sides.
    """
    return jnp.where(t > -_LN2, jnp.log(-jnp.expm1(t)), jnp.log1p(-jnp.exp(t)))


# ---------------------------------------------------------------------------
# Loader's saddle-point helpers
# ---------------------------------------------------------------------------

# Stirling series coefficients: stirlerr(n) ~ sum_k _STIRLING[k] / n^(2k+1).
_STIRLING = (
    1.0 / 12.0,
    -1.0 / 360.0,
    1.0 / 1260.0,
    -1.0 / 1680.0,
    1.0 / 1188.0,
    -691.0 / 360360.0,
    1.0 / 156.0,
)


# stirlerr(n) for n = 1..15 (mpmath, 40 digits); index 0 is unused.
_STIRLERR_INT = (
    0.0,
    0.08106146679532725822,
    0.041340695955409294094,
    0.027677925684998339149,
    0.020790672103765093112,
    0.016644691189821192163,
    0.013876128823070747999,
    0.011896709945891770095,
    0.010411265261972096497,
    0.0092554621827127329177,
    0.0083305634333628712565,
    0.007573675487951840795,
    0.0069428401072095298657,
    0.0064089941880042070684,
    0.0059513701127588477356,
    0.005554733551962801371,
)


def computed_once(v, apart=True):
    """``v`` (``apart``: computed in a program step of its own, else as it comes).

    XLA's CPU backend fuses elementwise work into its consumers and evaluates it once
    per use: where a consumer reads ``v`` at two shifts (both ends of a bin), the
    exponentials behind ``v`` run twice per point, in a loop that is not vectorised. As
    a sum over a new axis of ``v`` and zeros (exact), ``v`` is the output of a reduction,
    which the backend computes apart and stores (an optimisation barrier does not keep
    ``v`` out of the fusion). The values may then differ from the fused ones in their
    last bits (another code path for the same exponentials). K = 10⁴ distinct phases,
    NPO, the plan's per-phase program over half of them, run alone: its split pmf
    279 → 104 ms (:mod:`glrt_jax._src.grids`); the non-uniform FFTs' per-point weights
    and offsets before their (points × taps) tables (:mod:`glrt_jax._src.nufft`).
    """
    if not apart:
        return v
    return jnp.sum(jnp.stack([v, jnp.zeros_like(v)]), axis=0)


def once_if_uniform(fn: Callable[[jax.Array], jax.Array], v: jax.Array) -> jax.Array:
    """``fn(v)`` elementwise, evaluated once when ``v`` is the same at every point (a
    parameter broadcast over a batch of points, the usual case: the non-central χ² tails
    at a round's grid points share the degrees of freedom).

    A ``lax.cond``: under ``vmap`` with ``v`` batched it computes both branches.
    """
    if v.size == 0:
        return fn(v)
    first = jnp.ravel(v)[:1]
    return lax.cond(
        jnp.all(v == first),
        lambda v: jnp.broadcast_to(fn(first).reshape(()), v.shape),
        fn,
        v,
    )


def stirlerr(n, integer=False):
    """log Γ(n+1) − [(n + 1/2) log n − n + log √(2π)] for real n > 0.

    With ``integer=True`` the caller promises whole n, and n ≤ 15 is a table
    lookup instead of ``lgamma`` (the costliest piece of the function); otherwise an n
    that is the same at every point (the prefactor of an incomplete gamma at a window
    that starts at 0 for every point) takes it once.
    """
    big = n > 15.0
    nb = jnp.where(big, n, 16.0)
    inv2 = 1.0 / (nb * nb)
    series = _STIRLING[-1]
    for c in reversed(_STIRLING[:-1]):
        series = c + inv2 * series
    series = series / nb
    if integer:
        idx = jnp.clip(n, 0.0, 15.0).astype(jnp.int32)
        direct = jnp.asarray(_STIRLERR_INT, n.dtype)[idx]
    else:
        ns = jnp.where(big, 1.0, n)
        direct = once_if_uniform(
            lambda m: lax.lgamma(m + 1.0) - (m + 0.5) * jnp.log(m) + m - _HALF_LOG_2PI, ns
        )
    return jnp.where(big, series, direct)


# bd0 series in v = (x - M)/(x + M):  sum_{k>=1} v^(2k) / (2k + 1), |v| < 1/2.
_BD0_TERMS = 28


def bd0(x, M):
    """x log(x/M) + M − x, without cancellation (Loader 2000). x ≥ 0, M > 0."""
    d = x - M
    s = x + M
    v = d / jnp.where(s > 0, s, 1.0)
    small = jnp.abs(v) < 0.5
    vs = jnp.where(small, v, 0.0)
    v2 = vs * vs
    poly = 1.0 / (2 * _BD0_TERMS + 1)
    for k in range(_BD0_TERMS - 1, 0, -1):
        poly = 1.0 / (2 * k + 1) + v2 * poly
    series = d * vs + 2.0 * x * vs * v2 * poly
    xs = jnp.where(x > 0, x, 1.0)
    direct = jnp.where(x > 0, xs * jnp.log(xs / M), 0.0) + M - x
    return jnp.where(small, series, direct)


def log_poisson(n, mean, integer=False):
    """log( mean^n e^{-mean} / Γ(n+1) ) for real n ≥ 0 (whole n if ``integer``), mean ≥ 0.

    Also the log of the gamma prefactor ``g(b, y) = y^b e^{−y} / Γ(b + 1)`` at
    ``(n, mean) = (b, y)``. Loader's form ``−stirlerr(n) − bd0(n, mean) − log √(2π n)``
    keeps full relative accuracy when both arguments are large.
    """
    n_pos = n > 0
    ns = jnp.where(n_pos, n, 1.0)
    mean_pos = mean > 0
    ms = jnp.where(mean_pos, mean, 1.0)
    val = -stirlerr(ns, integer) - bd0(ns, ms) - 0.5 * (_LOG_2PI + jnp.log(ns))
    val = jnp.where(mean_pos, val, -jnp.inf)
    return jnp.where(n_pos, val, -mean)


# ---------------------------------------------------------------------------
# series
# ---------------------------------------------------------------------------


def tail_converged(t, prev, tot, eps):
    """Whether a sum of log-concave terms, past their peak, has converged to relative ``eps``.

    ``t`` is a term, ``prev`` the one before it and ``tot`` the running sum. Log-concave
    tail bound: remaining ≤ t r / (1 − r) with r = t / prev; true where t = 0, or where
    the terms fall (t < prev) and that bound is at most ``eps · tot``.
    """
    r = t / jnp.where(prev > 0, prev, 1.0)
    return (t == 0) | ((t < prev) & (t * r <= eps * tot * (1.0 - r)))
