"""Composition at scale: glrt_jax's engine against dp_accounting and prv_accountant.

Usage:
    python benchmarks/composition.py [--repeat 3] [--plot PNG] [--k1000-peer]

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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plot", default=None, help="write the time-vs-N plot here")
    ap.add_argument(
        "--k1000-peer",
        action="store_true",
        help="also run dp_accounting at K = 1000 phases (about 4 minutes)",
    )
    ap.add_argument("--scale", action="store_true", help=argparse.SUPPRESS)  # old spelling
    args = ap.parse_args(argv)
    composition_scale.run(repeat=args.repeat, plot=args.plot, k1000_peer=args.k1000_peer)


if __name__ == "__main__":
    main()
