"""Privacy profiles δ(ε) and ε(δ) of the NPO and GLRT adversaries (exact derivatives).

``delta(epsilon, mu, d, adversary=...)``, ``log_delta`` and ``epsilon(delta, mu, d,
adversary=...)`` for the Gaussian mechanism with μ = Δ/σ; see :mod:`glrt_jax._src.profile`.
"""

from glrt_jax._src.profile import delta, epsilon, log_delta

__all__ = ["delta", "epsilon", "log_delta"]
