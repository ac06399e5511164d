"""Sharded evaluation of large sweeps (grids of σ, q, N, d, or many games) across local devices.

See :mod:`glrt_jax._src.sweep`.
"""

from glrt_jax._src.sweep import cartesian, local_mesh, sweep

__all__ = ["cartesian", "local_mesh", "sweep"]
