"""Noise calibration: glrt_jax.calibrate against dp_accounting, same process, warm.

Cases: DP-SGD (σ with ε(σ) = 1 at δ = 1e-5, Poisson rate q = 0.01, N = 1000 rounds) and,
with ``--scale``, long runs like P1–P4 of the composition benchmark (N up to 5·10⁶);
add/remove, NPO (classical DP). dp_accounting's ``calibrate_dp_mechanism`` with its PLD
accountant is the peer. We report cold (first call: compilation included) and warm
(minimum of repeats) times, the σ found and our certified ε at it (the engine's upper
bound; ≤ target is the safe side), the GLRT calibration next to it, and the time of one
jitted call calibrating a batch of targets (closed form: 1000 targets; the composition
engine: ``--batch`` targets through ``lax.map``).

    python benchmarks/calibrate.py [--repeats 3] [--batch 64] [--scale] [--markdown PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from glrt_jax import accountant, calibrate  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import add_argument, markdown_page  # noqa: E402
from _timing import steady  # noqa: E402

EPS, DELTA, Q, N = 1.0, 1e-5, 0.01, 1000
# (target ε, δ, q, N): the regimes of P1–P4 in benchmarks/composition.py.
SCALE = [
    (3.0, 1e-6, 5e-4, 200_000),
    (1.5, 1e-7, 1e-4, 5_000_000),
    (80.0, 1e-5, 2e-3, 1_000_000),
    (60.0, 1e-5, 0.02, 500_000),
]


def timed(fn, repeats):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    cold = time.perf_counter() - t0
    steady(fn)
    warm = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        warm.append(time.perf_counter() - t0)
    return out, cold, min(warm)


def peer_sigma(eps, delta, q, n):
    from dp_accounting import dp_event, mechanism_calibration
    from dp_accounting import pld as dpld

    def make_event(s):
        return dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s)), n
        )

    return mechanism_calibration.calibrate_dp_mechanism(dpld.PLDAccountant, make_event, eps, delta)


def compare(eps, delta, q, n, repeats, adversaries=("npo", "glrt")):
    """Rows (method, σ, our certified ε at σ, cold, warm) and the peer's warm time."""
    s_peer, c_peer, w_peer = timed(lambda: peer_sigma(eps, delta, q, n), repeats)
    e_peer = float(accountant.schedule_epsilon(float(s_peer), q, n, delta).upper)
    rows = [
        ("dp_accounting calibrate_dp_mechanism (PLD), NPO", float(s_peer), e_peer, c_peer, w_peer)
    ]
    for adv in adversaries:
        s, cold, warm = timed(
            lambda adv=adv: calibrate.noise_multiplier(eps, delta, n, q, adversary=adv), repeats
        )
        e = float(accountant.schedule_epsilon(float(s), q, n, delta, adversary=adv).upper)
        rows.append(
            (f"glrt_jax.calibrate.noise_multiplier, {adv.upper()}", float(s), e, cold, warm)
        )
    return rows, w_peer


def print_rows(rows, w_peer):
    print("| method | σ | our certified ε at σ | cold (s) | warm (s) | warm speed-up vs peer |")
    print("|---|---|---|---|---|---|")
    for name, s, e, cold, warm in rows:
        print(f"| {name} | {s:.6f} | {e:.8f} | {cold:.2f} | {warm:.3f} | {w_peer / warm:.1f}× |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--scale", action="store_true", help="also the long runs (P1–P4)")
    add_argument(ap)
    args = ap.parse_args(argv)
    with markdown_page(
        args.markdown,
        "Calibration: glrt_jax.calibrate against dp_accounting",
        "The noise multiplier σ that meets a target (ε, δ) for Poisson-subsampled DP-SGD: "
        "glrt-jax's `calibrate.noise_multiplier` (NPO and GLRT) beside dp_accounting's "
        "`calibrate_dp_mechanism` with its PLD accountant, same process. The σ found is "
        "checked with glrt-jax's certified ε upper bound (≤ target is the safe side). Cold is "
        "the first call (compilation included), warm the best of repeats.",
        peers=["dp-accounting"],
    ):
        _run(args)


def _run(args):

    print(
        f"jax {jax.__version__}, backend {jax.default_backend()}, "
        f"{platform.processor() or platform.machine()}, float64\n"
    )
    print(f"Calibrating σ for ε = {EPS} at δ = {DELTA}, q = {Q}, N = {N} (add/remove):\n")
    print_rows(*compare(EPS, DELTA, Q, N, args.repeats))
    if args.scale:
        for eps, delta, q, n in SCALE:
            print(f"\nε = {eps} at δ = {delta}, q = {q}, N = {n}:\n")
            print_rows(*compare(eps, delta, q, n, 1, adversaries=("npo",)))

    # Batches in one jitted call.
    targets = jnp.linspace(0.5, 4.0, 1000)
    closed = jax.jit(jax.vmap(lambda e: calibrate.noise_multiplier(e, DELTA, steps=N)))
    sig, c1, w1 = timed(lambda: closed(targets), args.repeats)
    assert np.all(np.isfinite(np.asarray(sig)))

    bt = jnp.linspace(0.7, 1.5, args.batch)
    numeric = jax.jit(
        lambda ts: jax.lax.map(
            lambda e: calibrate.noise_multiplier(e, DELTA, N, Q, sigma_bounds=(1.0, 3.0)),
            ts,
            batch_size=8,
        )
    )
    sig2, c2, w2 = timed(lambda: numeric(bt), 1)
    assert np.all(np.isfinite(np.asarray(sig2)))
    print("\nBatches of targets in one jitted call:\n")
    print("| batch | accountant | cold (s) | warm (s) | warm per target (ms) |")
    print("|---|---|---|---|---|")
    print(
        f"| 1000 targets ε ∈ [0.5, 4], N = {N}, q = 1 | NPO closed form | {c1:.2f} | "
        f"{w1:.3f} | {1e3 * w1 / 1000:.3f} |"
    )
    print(
        f"| {args.batch} targets ε ∈ [0.7, 1.5], q = {Q}, N = {N} | NPO composition engine | "
        f"{c2:.2f} | {w2:.3f} | {1e3 * w2 / args.batch:.1f} |"
    )


if __name__ == "__main__":
    main()
