"""``glrt-jax calibrate``: noise multipliers for NPO and GLRT at the same (ε, δ)."""

from __future__ import annotations

import argparse
import sys


def add_subparser(subparsers) -> argparse.ArgumentParser:
    """Register the ``calibrate`` subcommand on an ``argparse`` subparsers object.

    Args:
      subparsers: the object returned by ``ArgumentParser.add_subparsers``.

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
    p.add_argument("--dim", type=int, default=1, help="query dimension d (GLRT; default 1)")
    p.add_argument(
        "--composition",
        choices=("rounds", "shared"),
        default="rounds",
        help="independent rounds (DP-SGD, default) or one shared direction "
        "(Theorem 2, no subsampling)",
    )
    p.add_argument("--neighbouring", choices=("add_remove", "replace_one"), default="add_remove")
    p.add_argument(
        "--tol",
        type=float,
        default=1e-3,
        help="relative accuracy of the certified epsilon (default 1e-3)",
    )
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    """Run ``glrt-jax calibrate`` on parsed arguments; prints a markdown table.

    Returns:
      0 on success, 2 on invalid input or an unreachable target (message on stderr).
    """
    import jax

    jax.config.update("jax_enable_x64", True)
    from glrt_jax import calibrate

    try:
        res = calibrate.calibrate(
            args.epsilon,
            args.delta,
            args.steps,
            args.sampling_rate,
            args.dim,
            composition=args.composition,
            neighbouring=args.neighbouring,
            tol=args.tol,
        )
    except ValueError as exc:
        print(f"glrt-jax calibrate: {exc}", file=sys.stderr)
        return 2
    print(
        f"target epsilon={res.target_epsilon:g} at delta={res.delta:g}; steps={res.steps}, "
        f"sampling rate={res.sampling_rate:g}, dim={res.dim}, "
        f"composition={res.composition}\n"
    )
    print(res.table())
    return 0
