"""Central-limit (μ-GDP) approximations of the GLRT ROC curve (Theorem 3).

Setting (docs/design.md §2, "Asymptotics"): ``N`` releases of a ``d``-dimensional query
with sensitivity ``Δ`` and Gaussian noise ``σ``, composed with a shared direction
(Theorem 2), so the GLRT statistic is ``χ²_d`` under ``H0`` and ``ncx2(d, λ)`` under
``H1`` with ``λ = NΔ²/σ²``. Replacing both laws by normals with the same means and
variances, ``N(d, 2d)`` and ``N(d + λ, 2d + 4λ)``, gives the *refined* curve

    R(α) ≈ Q((Q⁻¹(α) − λ/√(2d)) / √(1 + 2λ/d)),

and dropping the ``O(λ/d)`` terms the μ-GDP limit

    R(α) ≈ Q(Q⁻¹(α) − μ_GLRT),    μ_GLRT = λ/√(2d) = (NΔ²/σ²) √(1/(2d)).

The same normal approximation of the swapped curve ``R'`` (hypotheses exchanged)
is ``R'(α) ≈ Q((√(2d + 4λ) Q⁻¹(α) − λ)/√(2d))``.

Accuracy. The approximation is a statement about ``d → ∞`` with ``μ_GLRT`` held
fixed: its error then decays like ``1/√d`` (the skewness of ``χ²_d``). At fixed
``d`` it does *not* improve as ``N`` grows — the error grows with ``λ``, roughly in
proportion to the distance of the curve from the diagonal. Use
:func:`glrt_jax.roc.curve` (``adversary="glrt"``) for exact values.

Erratum. The paper's separated form of the refined curve (its Eq. ``clt_1``) writes
the shift as ``√2 λ/(2d)``; the derivation (its Eq. 42) gives ``λ/√(2d)``, which is
what we implement and what reduces to the paper's μ-GDP limit.

Validation follows :mod:`glrt_jax.roc`: concrete out-of-domain arguments raise
``ValueError`` naming the parameter and range; under ``jit`` they give NaN.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import ndtr, ndtri
from jax.typing import ArrayLike

from glrt_jax._src.numerics import float_dtype
from glrt_jax._src.validation import check_alpha, check_d, check_range

__all__ = ["clt_mu", "clt_roc", "clt_roc_swapped"]


def _check_mechanism(sensitivity, sigma, steps, d) -> None:
    check_range("sensitivity", sensitivity, lo=0.0)
    check_range("sigma", sigma, lo=0.0, lo_open=True)
    check_range("steps", steps, lo=1.0, integer=True)
    check_d(d)


def _prepare(*args):
    dtype = float_dtype(*args)
    return [lax.convert_element_type(jnp.asarray(a), dtype) for a in args]


def _lam_and_bad(sensitivity, sigma, steps, d):
    lam = steps * (sensitivity / sigma) ** 2
    bad = ~(sensitivity >= 0) | jnp.isinf(sensitivity) | ~(sigma > 0) | jnp.isinf(sigma)
    bad = bad | ~(steps >= 1) | jnp.isinf(steps) | (steps != jnp.floor(steps))
    bad = bad | ~(d >= 1) | jnp.isinf(d) | (d != jnp.floor(d))
    return lam, bad


@jax.jit
def _clt_mu_impl(sensitivity, sigma, steps, d):
    lam, bad = _lam_and_bad(sensitivity, sigma, steps, d)
    return jnp.where(bad, jnp.nan, lam / jnp.sqrt(2.0 * d))


@partial(jax.jit, static_argnames=("refined", "swapped"))
def _clt_roc_impl(alpha, sensitivity, sigma, steps, d, refined, swapped):
    lam, bad = _lam_and_bad(sensitivity, sigma, steps, d)
    bad = bad | ~((alpha >= 0) & (alpha <= 1))
    z = -ndtri(alpha)
    mu = lam / jnp.sqrt(2.0 * d)
    if not refined:
        arg = z - mu
    elif swapped:
        arg = jnp.sqrt(1.0 + 2.0 * lam / d) * z - mu
    else:
        arg = (z - mu) / jnp.sqrt(1.0 + 2.0 * lam / d)
    # Q(arg) = Φ(−arg); Q(±inf) handled by ndtr.
    out = ndtr(-arg)
    return jnp.where(bad, jnp.nan, out)


def clt_mu(sensitivity: ArrayLike, sigma: ArrayLike, steps: ArrayLike, d: ArrayLike) -> jax.Array:
    """μ of the Gaussian-DP limit of the GLRT adversary (Theorem 3).

    ``μ_GLRT = N Δ²/σ² · √(1/(2d))`` for ``N`` compositions with a shared
    direction. Compare with the NPO adversary's ``μ_NPO = √N Δ/σ``: the GLRT
    value is quadratic in the signal-to-noise ratio and shrinks like ``1/√d``.

    Args:
      sensitivity: ℓ2-sensitivity ``Δ ≥ 0``.
      sigma: noise standard deviation ``σ > 0``.
      steps: number of releases ``N``, a positive integer.
      d: query dimension, a positive integer.

    Returns:
      ``μ_GLRT`` (broadcast over the arguments). Differentiable in
      ``sensitivity`` and ``sigma``.

    Raises:
      ValueError: for concrete out-of-domain or non-finite arguments (NaN under
        ``jit``).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import asymptotics
      >>> f"{float(asymptotics.clt_mu(1.0, 10.0, 1000, 300)):.6f}"  # 10/√600
      '0.408248'
    """
    _check_mechanism(sensitivity, sigma, steps, d)
    return _clt_mu_impl(*_prepare(sensitivity, sigma, steps, d))


def clt_roc(
    alpha: ArrayLike,
    sensitivity: ArrayLike,
    sigma: ArrayLike,
    steps: ArrayLike,
    d: ArrayLike,
    refined: bool = True,
) -> jax.Array:
    """CLT approximation of the GLRT ROC curve ``R`` after ``N`` releases (Theorem 3).

    With ``λ = NΔ²/σ²`` and ``z = Q⁻¹(α)``:

    * ``refined=True``: ``Q((z − λ/√(2d)) / √(1 + 2λ/d))`` — normal approximations
      ``N(d, 2d)`` and ``N(d + λ, 2d + 4λ)`` of the two laws of the statistic;
    * ``refined=False``: the μ-GDP limit ``Q(z − μ_GLRT)``, ``μ_GLRT = λ/√(2d)``.

    Args:
      alpha: false-positive rate(s) in ``[0, 1]``.
      sensitivity: ``Δ ≥ 0``.
      sigma: ``σ > 0``.
      steps: ``N``, a positive integer.
      d: query dimension, a positive integer.
      refined: choose the refined normal approximation (default) or the μ-GDP limit.

    Returns:
      The approximate true-positive rate, broadcast over the arguments.
      Differentiable in ``alpha``, ``sensitivity`` and ``sigma``.

    Raises:
      ValueError: for concrete out-of-domain arguments (NaN under ``jit``).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import asymptotics, roc
      >>> approx = asymptotics.clt_roc(0.1, 1.0, 10.0, 1000, 300)
      >>> exact = roc.curve(0.1, (1000 / 100) ** 0.5, 300, adversary="glrt")
      >>> bool(abs(approx - exact) < 0.01)
      True
    """
    check_alpha(alpha)
    _check_mechanism(sensitivity, sigma, steps, d)
    args = _prepare(alpha, sensitivity, sigma, steps, d)
    return _clt_roc_impl(*args, refined=bool(refined), swapped=False)


def clt_roc_swapped(
    alpha: ArrayLike,
    sensitivity: ArrayLike,
    sigma: ArrayLike,
    steps: ArrayLike,
    d: ArrayLike,
    refined: bool = True,
) -> jax.Array:
    """CLT approximation of the swapped GLRT curve ``R'`` (hypotheses exchanged).

    ``refined=True``: ``Q((√(2d + 4λ) z − λ)/√(2d)) = Q(√(1 + 2λ/d) z − λ/√(2d))``;
    ``refined=False``: the same μ-GDP limit as :func:`clt_roc` (a GDP curve is
    symmetric).

    Args:
      alpha: false-positive rate(s) in ``[0, 1]``.
      sensitivity: ``Δ ≥ 0``.
      sigma: ``σ > 0``.
      steps: ``N``, a positive integer.
      d: query dimension, a positive integer.
      refined: refined normal approximation (default) or the μ-GDP limit.

    Returns:
      The approximate ``R'(α)``.

    Raises:
      ValueError: for concrete out-of-domain arguments (NaN under ``jit``).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import asymptotics
      >>> r = asymptotics.clt_roc(0.1, 1.0, 10.0, 1000, 300)
      >>> rp = asymptotics.clt_roc_swapped(0.1, 1.0, 10.0, 1000, 300)
      >>> bool(0.1 < rp < r)
      True
    """
    check_alpha(alpha)
    _check_mechanism(sensitivity, sigma, steps, d)
    args = _prepare(alpha, sensitivity, sigma, steps, d)
    return _clt_roc_impl(*args, refined=bool(refined), swapped=True)
