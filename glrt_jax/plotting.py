"""Figures of the paper (matplotlib, Agg canvas): ROC curves, privacy profiles, games.

See :mod:`glrt_jax._src.plotting` for the list of figures and conventions. The games
behind the empirical figures are played by :func:`glrt_jax.audit.run_experiment`.
"""

from glrt_jax._src.plotting import (
    PAPER_DIMS,
    clt_figure,
    dimension_roc_figure,
    empirical_roc_figure,
    epsilon_dimension_figure,
    privacy_profile_figure,
    roc_figure,
    subsampling_figure,
    teaser_figure,
)

__all__ = [
    "PAPER_DIMS",
    "clt_figure",
    "dimension_roc_figure",
    "empirical_roc_figure",
    "epsilon_dimension_figure",
    "privacy_profile_figure",
    "roc_figure",
    "subsampling_figure",
    "teaser_figure",
]
