"""ROC and trade-off curves of the Gaussian mechanism: NPO, GLRT ``R`` and ``R'``, symmetrised.

See :mod:`glrt_jax._src.roc` for the mathematics and the numerical method.
"""

from glrt_jax._src.roc import (
    glrt,
    glrt_swapped,
    glrt_swapped_tradeoff,
    glrt_symmetrised,
    glrt_symmetrised_tradeoff,
    glrt_tradeoff,
    npo,
    npo_tradeoff,
)

__all__ = [
    "glrt",
    "glrt_swapped",
    "glrt_swapped_tradeoff",
    "glrt_symmetrised",
    "glrt_symmetrised_tradeoff",
    "glrt_tradeoff",
    "npo",
    "npo_tradeoff",
]
