"""Noise-multiplier schedules: the σ_k of K phases that spend an (ε, δ) budget best.

:func:`optimize_noise_multipliers` minimises a weighted total noise variance
``Σ_k w_k steps_k σ_k²`` under the certified constraint ε ≤ ε* (NPO or GLRT), by optax on
the constraint surface with exact gradients of the composition engine; see
:mod:`glrt_jax._src.schedule_search`.
"""

from glrt_jax._src.schedule_search import OptimizedSchedule, optimize_noise_multipliers

__all__ = ["OptimizedSchedule", "optimize_noise_multipliers"]
