"""Central-limit (μ-GDP) approximations of the GLRT ROC curve (Theorem 3).

See :mod:`glrt_jax._src.asymptotics` for the formulas, their accuracy and an erratum.
"""

from glrt_jax._src.asymptotics import clt_mu, clt_roc, clt_roc_swapped

__all__ = ["clt_mu", "clt_roc", "clt_roc_swapped"]
