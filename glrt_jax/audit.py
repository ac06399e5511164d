"""Monte Carlo membership-inference games: empirical ROC curves and ε lower bounds."""

from glrt_jax._src.audit import (
    GameResult,
    RocEstimate,
    clopper_pearson,
    empirical_epsilon_lower_bound,
    empirical_roc,
    run_game,
)

__all__ = [
    "GameResult",
    "RocEstimate",
    "clopper_pearson",
    "empirical_epsilon_lower_bound",
    "empirical_roc",
    "run_game",
]
