"""Privacy profiles δ(ε) and ε(δ) of the NPO and GLRT adversaries (exact derivatives)."""

from glrt_jax._src.profile import (
    glrt_delta,
    glrt_epsilon,
    glrt_log_delta,
    npo_delta,
    npo_epsilon,
    npo_log_delta,
)

__all__ = [
    "glrt_delta",
    "glrt_epsilon",
    "glrt_log_delta",
    "npo_delta",
    "npo_epsilon",
    "npo_log_delta",
]
