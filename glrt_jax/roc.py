"""ROC and trade-off curves of the Gaussian mechanism against the NPO and GLRT adversaries.

``curve(alpha, mu, d, adversary=..., variant=...)`` is the true-positive rate at
false-positive rate α; ``tradeoff`` is ``1 − curve`` evaluated directly (f-DP's β).
The GLRT variants are Theorem 1's ``R`` (``"direct"``), the hypotheses swapped
(``"swapped"``, ``R'``) and the symmetrised curve (``"symmetrised"``, ``R_s``).
See :mod:`glrt_jax._src.roc` for the mathematics and the numerical method.
"""

from glrt_jax._src.roc import VARIANTS, curve, tradeoff

__all__ = ["VARIANTS", "curve", "tradeoff"]
