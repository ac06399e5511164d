"""Non-central χ² distribution as jittable, differentiable JAX functions.

scipy-style names and argument order; everything broadcasts over all arguments.
See :mod:`glrt_jax._src.ncx2` for the numerical method.
"""

from glrt_jax._src.ncx2 import (
    cdf,
    isf,
    logcdf,
    logisf,
    logpdf,
    logppf,
    logsf,
    pdf,
    ppf,
    sf,
)

__all__ = ["cdf", "isf", "logcdf", "logisf", "logpdf", "logppf", "logsf", "pdf", "ppf", "sf"]
