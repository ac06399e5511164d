"""Composition at scale: glrt_jax's engine against dp_accounting and prv_accountant.

Usage:
    python benchmarks/composition.py [--repeat 3] [--plot PNG] [--k1000-peer] [--quick]
                                     [--markdown PATH]

Runs the cases of ``composition_scale.py`` in one process (ours warm and first call,
dp_accounting's PLD accountant at its default discretisation, prv_accountant's bounds):
P1–P4 (σ, q, N up to 5·10⁶, δ down to 1e-7), the DP-SGD case σ = 1, q = 0.01, N = 1000,
K-phase schedules, and N = 10…10⁷ at fixed (σ, q) with a plot of time against N.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import composition_scale  # noqa: E402
from _report import add_argument, markdown_page  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plot", default=None, help="write the time-vs-N plot here")
    ap.add_argument(
        "--k1000-peer",
        action="store_true",
        help="also run dp_accounting at K = 1000 phases (about 4 minutes)",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="fewer rows: K ≤ 100, N = 10, 10^3, 10^5, 10^7; no dp_accounting at 1e-5; "
        "prv_accountant only up to 2·10^5 steps and 10 phases",
    )
    ap.add_argument("--scale", action="store_true", help=argparse.SUPPRESS)  # old spelling
    add_argument(ap)
    args = ap.parse_args(argv)
    with markdown_page(
        args.markdown,
        "Composition at scale: glrt-jax against dp_accounting and prv_accountant",
        "Certified ε bounds of `accountant.schedule_epsilon` (NPO; GLRT d = 1 beside it) for "
        "long DP-SGD runs (P1–P4: N up to 5·10⁶), K-phase schedules and N = 10…10⁷ rounds at "
        "fixed (σ, q), with dp_accounting's PLD accountant (default discretisation 1e-4, and "
        "1e-5 where affordable) and prv_accountant's bounds in the same process. Our first "
        "call includes compilation (the first row pays for it; later rows reuse compiled "
        "programs); warm is the best of repeats; speed-up = peer time / our warm time. "
        "Brackets (ours and prv_accountant's) are printed rounded outward, upper bounds up "
        "and lower bounds down; dp_accounting's ε to the nearest.",
        peers=["dp-accounting", "prv-accountant"],
    ):
        composition_scale.run(
            repeat=args.repeat, plot=args.plot, k1000_peer=args.k1000_peer, quick=args.quick
        )


if __name__ == "__main__":
    main()
