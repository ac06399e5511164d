"""Privacy loss distributions on a grid, composed by FFT (jittable, differentiable).

Numerical composition of independent rounds of the (Poisson-subsampled) Gaussian
mechanism against the NPO adversary (classical Gaussian DP) and the per-round GLRT
adversary (sees ``‖y_i‖²`` of each round). Every answer is a
:class:`Bounds` ``(lower, estimate, upper)`` with the truth inside. See
:mod:`glrt_jax._src.pld` for the dominating pairs, the threat model and the proofs.

Example::

    import jax
    jax.config.update("jax_enable_x64", True)
    from glrt_jax import pld

    block = pld.GaussianBlock(sigma=1.0, sampling_rate=0.01, steps=1000)
    pld.epsilon_for_delta(block, 1e-5)         # Bounds(lower≈1.8197, estimate≈1.8282, upper≈1.8282)

    grid = pld.make_grid(block)                # fixed grid: jit, vmap, grad
    eps = lambda s: pld.epsilon_for_delta(
        pld.GaussianBlock(sigma=s, sampling_rate=0.01, steps=1000), 1e-5, grid=grid).upper
    jax.grad(eps)(1.0)
"""

from glrt_jax._src.pld import (
    Bounds,
    GaussianBlock,
    Grid,
    PrivacyLossDistribution,
    compose,
    delta_for_epsilon,
    epsilon_for_delta,
    make_grid,
)

__all__ = [
    "Bounds",
    "GaussianBlock",
    "Grid",
    "PrivacyLossDistribution",
    "compose",
    "delta_for_epsilon",
    "epsilon_for_delta",
    "make_grid",
]
