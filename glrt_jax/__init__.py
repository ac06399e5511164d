"""glrt-jax: DP accounting of the Gaussian mechanism against NPO and GLRT adversaries."""

from glrt_jax import audit, ncx2

__all__ = ["audit", "ncx2"]
__version__ = "0.1.0"
