"""Closed-form references shared by the tests (not a test module)."""

import math

from scipy import optimize, stats


def gaussian_epsilon(delta, mu):
    """Closed-form ε(δ) of μ-GDP (NPO, q = 1, any number of rounds: μ² = Σ 1/σ_k²)."""

    def gap(e):  # log-space second term: e^ε Φ(·) without overflow
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e + stats.norm.logcdf(-e / mu - mu / 2))

    return optimize.brentq(lambda e: gap(e) - delta, 0.0, 1e4, xtol=1e-13, rtol=1e-14)
