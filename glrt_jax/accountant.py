"""Accounting for releases of the Gaussian mechanism: NPO and GLRT side by side.

Two threat models, each function says which it assumes:

* shared direction (paper, Theorem 2; :func:`epsilon`, :func:`delta`, :func:`compose`):
  every release moves along the same unknown direction and the GLRT adversary pools them,
  λ = Σ Δ_i²/σ_i² — closed form;
* per round (:func:`dpsgd_epsilon`, :func:`dpsgd_delta`, :class:`PLDAccountant`): rounds
  are independent (e.g. Poisson-subsampled DP-SGD steps) and the GLRT adversary
  re-estimates the direction every round — numeric composition with certified bounds;
  schedules of K phases (arrays of σ, q, steps) in one compiled program
  (:func:`schedule_epsilon`, :func:`schedule_delta`: jit, vmap, grad).
"""

from glrt_jax._src.accountant import (
    THREAT_MODEL_PER_ROUND,
    THREAT_MODEL_SHARED,
    CompositionReport,
    GaussianMechanism,
    PLDAccountant,
    PrivacyReport,
    SubsampledGaussianEvent,
    compose,
    delta,
    dpsgd_delta,
    dpsgd_epsilon,
    epsilon,
    schedule_delta,
    schedule_epsilon,
)
from glrt_jax._src.composition import JIT_SIZES, NODES, POINTS, Bounds

__all__ = [
    "JIT_SIZES",
    "NODES",
    "POINTS",
    "Bounds",
    "THREAT_MODEL_PER_ROUND",
    "THREAT_MODEL_SHARED",
    "CompositionReport",
    "GaussianMechanism",
    "PLDAccountant",
    "PrivacyReport",
    "SubsampledGaussianEvent",
    "compose",
    "delta",
    "dpsgd_delta",
    "dpsgd_epsilon",
    "epsilon",
    "schedule_delta",
    "schedule_epsilon",
]
