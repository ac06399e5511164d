"""The numbers behind the figures: curves and ε/δ values at fixed array shapes (no matplotlib).

This module computes; :mod:`glrt_jax._src.plotting` draws and
:mod:`glrt_jax._src.reproduce` tabulates. It owns

* the false-positive-rate grid of every ROC panel (:func:`alpha_grid`) and the ROC
  curves on it (:func:`glrt_curves`, :func:`npo_curve`, :func:`symmetrised_curve`, from
  :mod:`glrt_jax.roc`; :func:`gdp_limit_curve`, from :mod:`glrt_jax.asymptotics`);
* batched ε(δ) and δ(ε) of either adversary (:func:`epsilons`, :func:`deltas`, from
  :mod:`glrt_jax.profile`) on inputs padded to a multiple of :data:`BATCH`;
* the Poisson-subsampled, composed privacy profiles of the subsampling figure
  (:func:`subsampled_profiles`, from the composition engine of
  :mod:`glrt_jax.accountant`).

Compilation: every evaluation goes through a few fixed array shapes
(:data:`CURVE_POINTS` per ROC curve, :data:`BATCH` per batch of ε or δ values), so a
session compiles each kernel once, whatever figures it draws. The functions are eager
and take validated arguments (the figure functions validate them).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from glrt_jax._src import asymptotics, composition, profile, roc

__all__ = [
    "BATCH",
    "CURVE_POINTS",
    "SUBSAMPLING_POINTS",
    "alpha_grid",
    "deltas",
    "epsilons",
    "gdp_limit_curve",
    "glrt_curves",
    "npo_curve",
    "subsampled_profiles",
    "symmetrised_curve",
]

#: Points of every ROC curve.
CURVE_POINTS = 512
#: Batch length of the ε and δ evaluations (inputs are padded to a multiple of it).
BATCH = 256
#: Points of the composed δ(ε) curves of the subsampling figure.
SUBSAMPLING_POINTS = 48


def alpha_grid(alpha_min: float) -> np.ndarray:
    """:data:`CURVE_POINTS` false-positive rates: log-spaced from ``alpha_min`` and linear.

    Example:
      >>> from glrt_jax._src import figure_data
      >>> a = figure_data.alpha_grid(1e-6)
      >>> a.shape, float(a.min()), float(a.max())
      ((512,), 0.0, 1.0)
    """
    half = CURVE_POINTS // 2
    logs = np.geomspace(alpha_min, 1.0, half, endpoint=False)
    lin = np.linspace(0.0, 1.0, CURVE_POINTS - half)
    return np.sort(np.concatenate([logs, lin]))


def glrt_curves(alpha: np.ndarray, mu: float, d: int) -> dict[str, np.ndarray]:
    """The GLRT curves ``R``, ``R'``, ``R_s`` and the NPO curve on ``alpha`` (NumPy).

    Returns:
      ``{"npo": …, "R": …, "R_prime": …, "R_s": …}``.
    """
    return {
        "npo": np.asarray(roc.npo(alpha, mu)),
        "R": np.asarray(roc.glrt(alpha, mu, d)),
        "R_prime": np.asarray(roc.glrt_swapped(alpha, mu, d)),
        "R_s": np.asarray(roc.glrt_symmetrised(alpha, mu, d)),
    }


def npo_curve(alpha: np.ndarray, mu: float) -> np.ndarray:
    """The NPO ROC curve ``Q(Q⁻¹(α) − μ)`` on ``alpha`` (NumPy)."""
    return np.asarray(roc.npo(alpha, mu))


def symmetrised_curve(alpha: np.ndarray, mu: float, d: int) -> np.ndarray:
    """The symmetrised GLRT ROC curve ``R_s`` on ``alpha`` (NumPy)."""
    return np.asarray(roc.glrt_symmetrised(alpha, mu, d))


def gdp_limit_curve(alpha: np.ndarray, sensitivity, sigma, steps: int, d: int) -> np.ndarray:
    """The μ-GDP limit of ``R`` and ``R'`` (Theorem 3, unrefined) on ``alpha`` (NumPy)."""
    return np.asarray(asymptotics.clt_roc(alpha, sensitivity, sigma, steps, d, refined=False))


def _padded_call(fn, *columns) -> np.ndarray:
    """Evaluate an elementwise ``fn`` on 1-D columns padded to a multiple of ``BATCH``."""
    cols = [np.atleast_1d(np.asarray(c, dtype=np.float64)) for c in columns]
    cols = np.broadcast_arrays(*cols)
    n = cols[0].size
    size = BATCH * max(1, -(-n // BATCH))
    padded = [np.concatenate([c.ravel(), np.full(size - n, c.ravel()[0])]) for c in cols]
    return np.asarray(fn(*padded))[:n].reshape(cols[0].shape)


def epsilons(delta, mu, d=None) -> np.ndarray:
    """ε(δ) of the NPO adversary (``d=None``) or of the GLRT adversary, batched.

    A thin wrapper over the profile's ε(δ) (:func:`glrt_jax.profile.epsilon`) that
    pads its inputs to a fixed length, so that many calls share one compilation.

    Args:
      delta, mu, d: broadcastable values (``d=None``: the NPO adversary).

    Returns:
      A NumPy array of the broadcast shape (at least 1-D).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax._src import figure_data
      >>> [f"{e:.4f}" for e in figure_data.epsilons(1e-4, 0.3)]
      ['0.9501']
    """
    if d is None:
        return _padded_call(profile.npo_epsilon, delta, mu)
    return _padded_call(profile.glrt_epsilon, delta, mu, d)


def deltas(eps, mu, d=None) -> np.ndarray:
    """δ(ε) of the NPO (``d=None``) or GLRT adversary, batched (see :func:`epsilons`)."""
    if d is None:
        return _padded_call(profile.npo_delta, eps, mu)
    return _padded_call(profile.glrt_delta, eps, mu, d)


@functools.partial(jax.jit, static_argnames=("adversary", "d"))
def _delta_curve(noise_multiplier, sampling_rate, steps, eps, *, adversary, d):
    """Certified upper bounds on δ at every ε of ``eps``: the engine query, mapped."""

    def one(e):
        b = composition.schedule_delta(
            noise_multiplier, sampling_rate, steps, e, d=d, adversary=adversary
        )
        return b.upper

    return jax.lax.map(one, eps)  # one query's program, looped: cheap to compile


def subsampled_profiles(sensitivity, sigma, sampling_rate, steps, d, *, delta, epsilon_max, tol):
    """Upper bounds on δ(ε) on a grid and on ε(δ), NPO and per-round GLRT.

    From the composition engine (:func:`glrt_jax.accountant.schedule_delta` /
    ``schedule_epsilon``); every number is a certified upper bound. The δ(ε) curve is
    one compiled ``lax.map`` over ε ∈ (0, ``epsilon_max``] at the engine's jit sizes;
    the ε at ``delta`` (the legend) is an eager query at the sizes ``tol`` asks for.
    Requires float64.

    Args:
      sensitivity: ``Δ > 0``. sigma: ``σ > 0``. sampling_rate: ``q ∈ (0, 1]``.
      steps: ``N ≥ 1``. d: ``d ≥ 1``. delta: δ of the ε values.
      epsilon_max: right end of the ε grid. tol: relative accuracy of the ε values.

    Returns:
      ``{"eps": grid, "npo": {"delta": δ on grid, "epsilon": ε at delta},
      "glrt": {...}}``.
    """
    eps = np.linspace(0.0, float(epsilon_max), SUBSAMPLING_POINTS + 1)[1:]
    nm = float(np.asarray(sigma)) / float(np.asarray(sensitivity))
    q = float(np.asarray(sampling_rate))
    out = {"eps": eps}
    for adversary in ("npo", "glrt"):
        curve = _delta_curve(nm, q, steps, jnp.asarray(eps), adversary=adversary, d=d)
        e_up = composition.schedule_epsilon(nm, q, steps, delta, d=d, adversary=adversary, tol=tol)
        out[adversary] = {"delta": np.asarray(curve), "epsilon": float(e_up.upper)}
    return out
