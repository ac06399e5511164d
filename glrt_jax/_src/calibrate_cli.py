"""``glrt-jax calibrate``: noise multipliers for NPO and GLRT at the same (ε, δ)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial


def add_subparser(subparsers, setup: Callable[[], None] | None = None) -> argparse.ArgumentParser:
    """Register the ``calibrate`` subcommand on an ``argparse`` subparsers object.

    Args:
      subparsers: the object returned by ``ArgumentParser.add_subparsers``.
      setup: called before the command runs (the command line passes the function that
        enables float64 and the compilation cache).

    Returns:
      The new subparser (its default ``func`` is :func:`run`).
    """
    p = subparsers.add_parser(
        "calibrate",
        help="noise multiplier for a target epsilon, NPO and GLRT side by side",
        description=(
            "Smallest noise multiplier (noise std / sensitivity) whose certified epsilon at "
            "delta is at most the target, for the NPO and the GLRT adversary."
        ),
    )
    p.add_argument("--epsilon", type=float, required=True, help="target epsilon > 0")
    p.add_argument("--delta", type=float, required=True, help="delta in (0, 1)")
    p.add_argument("--steps", type=int, default=1, help="number of rounds N (default 1)")
    p.add_argument(
        "--sampling-rate",
        type=float,
        default=1.0,
        help="Poisson sampling rate q in (0, 1] (default 1)",
    )
    p.add_argument("--d", type=int, default=1, help="query dimension d (GLRT; default 1)")
    p.add_argument(
        "--threat-model",
        choices=("per_round", "shared"),
        default="per_round",
        help="per_round: independent rounds (DP-SGD, default); shared: one shared direction "
        "(Theorem 2, no subsampling)",
    )
    p.add_argument("--neighbouring", choices=("add_remove", "replace_one"), default="add_remove")
    p.add_argument(
        "--tol",
        type=float,
        default=1e-3,
        help="relative accuracy of the certified epsilon (default 1e-3)",
    )
    p.set_defaults(func=partial(run, setup=setup))
    return p


def run(args: argparse.Namespace, setup: Callable[[], None] | None = None) -> int:
    """Run ``glrt-jax calibrate`` on parsed arguments; prints a markdown table.

    Args:
      args: the parsed arguments. setup: optional callable run first (e.g. enabling
        float64).

    Returns:
      0 on success; invalid input or an unreachable target raises ``ValueError``
      (:func:`glrt_jax.cli.main` prints it on one line, exit status 2).
    """
    if setup is not None:
        setup()
    from glrt_jax import calibrate

    res = calibrate.calibrate(
        args.epsilon,
        args.delta,
        args.steps,
        args.sampling_rate,
        args.d,
        threat_model=args.threat_model,
        neighbouring=args.neighbouring,
        tol=args.tol,
    )
    print(
        f"target epsilon={res.target_epsilon:g} at delta={res.delta:g}; steps={res.steps}, "
        f"sampling_rate={res.sampling_rate:g}, d={res.d}, threat_model={res.threat_model}, "
        f"neighbouring={res.neighbouring}\n"
    )
    print(res.table())
    return 0
