"""``glrt-jax reproduce``: argument parsing for the reproduction driver.

This module owns the command line of :func:`glrt_jax._src.reproduce.reproduce`: the
``reproduce`` sub-command's flags (:func:`add_subparser`) and running it on parsed
arguments (:func:`run`), with errors reported as exit status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial

from glrt_jax._src import reproduce
from glrt_jax._src.reproduce import (
    DEFAULT_GAMES,
    DEFAULT_THRESHOLDS,
    FIGURES,
    FULL_GAMES,
    FULL_THRESHOLDS,
)

__all__ = ["add_subparser", "run"]


def add_subparser(subparsers, setup: Callable[[], None] | None = None) -> argparse.ArgumentParser:
    """Add the ``reproduce`` command to an ``argparse`` sub-parser collection.

    Args:
      subparsers: the object returned by ``ArgumentParser.add_subparsers()``.
      setup: called before the command runs (the command line passes the function
        that enables float64 and the compilation cache).

    Returns:
      The new sub-parser (its ``func`` default runs :func:`run`).

    Example:
      >>> import argparse
      >>> from glrt_jax._src import reproduce_cli
      >>> parser = argparse.ArgumentParser(prog="glrt-jax")
      >>> _ = reproduce_cli.add_subparser(parser.add_subparsers())
      >>> args = parser.parse_args(["reproduce", "--out", "figs", "--full"])
      >>> args.out, args.full, args.games
      ('figs', True, None)
    """
    p = subparsers.add_parser(
        "reproduce",
        help="regenerate every figure of the paper (PNG) and numbers.md",
        description="Write every figure of the paper as PNG and numbers.md (every (epsilon, "
        "delta) the paper states, next to ours and the exact value) into DIR.",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument(
        "--full",
        action="store_true",
        help=f"the paper's {FULL_GAMES} games x {FULL_THRESHOLDS} cut-offs per experiment "
        f"(default {DEFAULT_GAMES} x {DEFAULT_THRESHOLDS})",
    )
    p.add_argument("--games", type=int, help="games per experiment (overrides --full)")
    p.add_argument("--thresholds", type=int, help="cut-offs per experiment (overrides --full)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed of the games (default 0)")
    p.add_argument("--only", nargs="+", choices=FIGURES, metavar="NAME",
                   help=f"produce only these outputs: {', '.join(FIGURES)}")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=partial(run, setup=setup))
    return p


def run(args: argparse.Namespace, setup: Callable[[], None] | None = None) -> int:
    """Run ``glrt-jax reproduce`` with parsed arguments; returns the exit status.

    Args:
      args: the parsed arguments of :func:`add_subparser`'s parser.
      setup: optional callable run first (e.g. enabling float64).

    Returns:
      0 on success, 2 on a bad argument (message on stderr).

    Example (writes ``figs/teaser.png``)::

      import argparse, jax
      jax.config.update("jax_enable_x64", True)
      from glrt_jax._src import reproduce_cli
      parser = argparse.ArgumentParser(prog="glrt-jax")
      reproduce_cli.add_subparser(parser.add_subparsers())
      args = parser.parse_args(["reproduce", "--out", "figs", "--only", "teaser"])
      assert args.func(args) == 0
    """
    if setup is not None:
        setup()
    written = reproduce.reproduce(
        args.out,
        full=args.full,
        games=args.games,
        thresholds=args.thresholds,
        seed=args.seed,
        only=args.only,
        progress=not args.quiet,
    )
    for name, p in written.items():
        print(f"{name}: {p}")
    return 0
