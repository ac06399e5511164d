"""Accounting for releases of the Gaussian mechanism: NPO and GLRT side by side."""

from glrt_jax._src.accountant import (
    THREAT_MODEL_SHARED,
    GaussianMechanism,
    PrivacyReport,
    compose,
    delta,
    epsilon,
)

__all__ = [
    "THREAT_MODEL_SHARED",
    "GaussianMechanism",
    "PrivacyReport",
    "compose",
    "delta",
    "epsilon",
]
