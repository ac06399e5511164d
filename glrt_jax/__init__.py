"""glrt-jax: DP accounting of the Gaussian mechanism against NPO and GLRT adversaries."""

from glrt_jax import audit, ncx2, pld

__all__ = ["audit", "ncx2", "pld"]
__version__ = "0.1.0"
