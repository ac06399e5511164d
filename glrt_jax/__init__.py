"""glrt-jax: DP accounting of the Gaussian mechanism against NPO and GLRT adversaries."""

from glrt_jax import accountant, audit, calibrate, ncx2, profile, roc, sweep
from glrt_jax._src.programs import enable_cache

__all__ = ["accountant", "audit", "calibrate", "enable_cache", "ncx2", "profile", "roc", "sweep"]
__version__ = "0.1.0"
