"""Monte Carlo membership-inference games: empirical ROC, ε lower bounds, the paper's experiment."""

from glrt_jax._src.audit import (
    EmpiricalExperiment,
    GameResult,
    RocEstimate,
    clopper_pearson,
    empirical_epsilon_lower_bound,
    empirical_roc,
    run_experiment,
    run_game,
)

__all__ = [
    "EmpiricalExperiment",
    "GameResult",
    "RocEstimate",
    "clopper_pearson",
    "empirical_epsilon_lower_bound",
    "empirical_roc",
    "run_experiment",
    "run_game",
]
