"""User-facing accounting: releases of the Gaussian mechanism in, (ε, δ) for NPO and GLRT out.

Threat model of this module: **composition with a shared direction** (paper, Theorem 2).
The N releases y_i = f_i(D) + N(0, σ_i² I_d) all move along the same unknown unit vector u
when D becomes D'. The GLRT adversary combines them with the weights Δ_i/σ_i² and thresholds
‖Σ_i (Δ_i/σ_i²) y_i‖², which under H0 is σ_eff² χ²_d and under H1 non-central with

    λ = Σ_i Δ_i² / σ_i²

(the weighted sum is Gaussian with covariance λ I_d in units where its mean shift has norm λ;
dividing by √λ gives a unit-variance statistic whose mean shift has squared norm λ). For N
identical releases λ = N Δ²/σ². The NPO adversary knows u and its log-likelihood ratio is
Gaussian with μ² = λ, the usual Gaussian-DP composition. Releases of different dimension do
not share a direction: compose them per round (numerically) instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from glrt_jax._src import profile
from glrt_jax._src.validation import check_range

THREAT_MODEL_SHARED = "shared direction (Theorem 2): lambda = sum Delta_i^2/sigma_i^2"


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class GaussianMechanism:
    """One release of ``f(D) + N(0, σ² I_d)`` with ℓ2-sensitivity ``Δ``.

    Attributes:
      sensitivity: Δ ≥ 0. sigma: σ > 0 (pytree leaves: may be traced).
      dim: query dimension d (static, positive integer).
    """

    sensitivity: float
    sigma: float
    dim: int = dataclasses.field(default=1, metadata=dict(static=True))

    def __post_init__(self):
        check_range("sensitivity", self.sensitivity, lo=0.0)
        check_range("sigma", self.sigma, lo=0.0, lo_open=True)
        check_range("dim", self.dim, lo=1.0, integer=True)

    @property
    def noncentrality(self):
        """λ = Δ²/σ² of one release."""
        return (jnp.asarray(self.sensitivity) / self.sigma) ** 2


def compose(mechanisms: Sequence[GaussianMechanism]) -> tuple[jax.Array, int]:
    """Compose releases that share a direction (Theorem 2).

    Returns:
      ``(mu, d)`` with ``mu = √(Σ Δ_i²/σ_i²)``.

    Raises:
      ValueError: empty sequence, or releases of different dimension (those do not
        share a direction; use per-round numeric composition).
    """
    if len(mechanisms) == 0:
        raise ValueError("mechanisms must contain at least one GaussianMechanism")
    dims = {m.dim for m in mechanisms}
    if len(dims) != 1:
        raise ValueError(
            f"releases of different query dimension {sorted(dims)} cannot share a direction, so "
            "Theorem 2 (lambda = sum Delta_i^2/sigma_i^2) does not apply; compose them per round "
            "with the numeric privacy-loss engine (glrt_jax.pld) instead"
        )
    lam = sum(m.noncentrality for m in mechanisms)
    return jnp.sqrt(lam), dims.pop()


@dataclasses.dataclass(frozen=True)
class PrivacyReport:
    """NPO and GLRT guarantees side by side for one setting."""

    mu: float
    dim: int
    delta_npo: float
    delta_glrt: float
    epsilon_npo: float
    epsilon_glrt: float
    threat_model: str = THREAT_MODEL_SHARED

    def table(self) -> str:
        """Markdown table of the two adversaries."""
        rows = [
            "| adversary | epsilon | delta |",
            "|---|---|---|",
            f"| NPO (Gaussian DP) | {self.epsilon_npo:.6g} | {self.delta_npo:.6g} |",
            f"| GLRT (d = {self.dim}) | {self.epsilon_glrt:.6g} | {self.delta_glrt:.6g} |",
        ]
        return "\n".join(rows)


def _mu_dim(sensitivity, sigma, steps, dim):
    check_range("steps", steps, lo=1.0, integer=True)
    mech = GaussianMechanism(sensitivity, sigma, dim)
    return math.sqrt(int(steps)) * jnp.sqrt(mech.noncentrality), dim


def epsilon(
    delta: float, *, sensitivity: float, sigma: float, steps: int = 1, dim: int = 1
) -> PrivacyReport:
    """ε at δ for ``steps`` identical releases sharing a direction, both adversaries.

    Args:
      delta: δ in (0, 1). sensitivity: Δ ≥ 0. sigma: σ > 0. steps: N ≥ 1.
      dim: query dimension d ≥ 1.

    Returns:
      A :class:`PrivacyReport` with ε for NPO and GLRT at the same δ.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> r = accountant.epsilon(1e-2, sensitivity=1.0, sigma=6.0, steps=70, dim=1)
      >>> f"{r.epsilon_npo:.4f} {r.epsilon_glrt:.4f}"
      '3.6367 2.9437'
    """
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    mu, d = _mu_dim(sensitivity, sigma, steps, dim)
    return PrivacyReport(
        mu=float(mu),
        dim=d,
        delta_npo=float(delta),
        delta_glrt=float(delta),
        epsilon_npo=float(profile.npo_epsilon(delta, mu)),
        epsilon_glrt=float(profile.glrt_epsilon(delta, mu, d)),
    )


def delta(
    epsilon: float, *, sensitivity: float, sigma: float, steps: int = 1, dim: int = 1
) -> PrivacyReport:
    """δ at ε for ``steps`` identical releases sharing a direction, both adversaries.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> r = accountant.delta(1.0, sensitivity=1.0, sigma=1.0)
      >>> r.delta_glrt < r.delta_npo
      True
    """
    check_range("epsilon", epsilon, lo=0.0)
    mu, d = _mu_dim(sensitivity, sigma, steps, dim)
    return PrivacyReport(
        mu=float(mu),
        dim=d,
        delta_npo=float(profile.npo_delta(epsilon, mu)),
        delta_glrt=float(profile.glrt_delta(epsilon, mu, d)),
        epsilon_npo=float(epsilon),
        epsilon_glrt=float(epsilon),
    )
