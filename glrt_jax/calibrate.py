"""Noise calibration σ ↔ ε for NPO and GLRT: bracketed Newton, jittable, differentiable."""

from glrt_jax._src.calibrate import (
    Calibration,
    calibrate,
    for_delta,
    max_sampling_rate,
    max_steps,
    noise_multiplier,
)

__all__ = [
    "Calibration",
    "calibrate",
    "for_delta",
    "max_sampling_rate",
    "max_steps",
    "noise_multiplier",
]
