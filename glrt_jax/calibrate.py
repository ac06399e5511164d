"""Noise calibration σ ↔ ε for NPO and GLRT: bracketed Newton, jittable, differentiable."""

from glrt_jax._src.calibrate import (
    Calibration,
    calibrate,
    for_delta,
    max_sampling_rate,
    max_steps,
    noise_multiplier,
)
from glrt_jax._src.risk import noise_multiplier_for_advantage, noise_multiplier_for_tpr

__all__ = [
    "Calibration",
    "calibrate",
    "for_delta",
    "max_sampling_rate",
    "max_steps",
    "noise_multiplier",
    "noise_multiplier_for_advantage",
    "noise_multiplier_for_tpr",
]
