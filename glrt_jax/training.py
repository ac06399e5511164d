"""Privacy accounting inside JAX training loops: DP-SGD aggregation, a privacy ledger, budgets."""

from glrt_jax._src.training import (
    DpAggregateState,
    Ledger,
    dp_aggregate,
    dp_aggregate_for_budget,
    epsilon_spent,
    init_ledger,
    noise_multiplier_for_budget,
    record,
    steps_within_budget,
)

__all__ = [
    "DpAggregateState",
    "Ledger",
    "dp_aggregate",
    "dp_aggregate_for_budget",
    "epsilon_spent",
    "init_ledger",
    "noise_multiplier_for_budget",
    "record",
    "steps_within_budget",
]
