"""Noise calibration: glrt_jax.calibrate against dp_accounting, same process, warm.

Case of the issue: σ with ε(σ) = 1 at δ = 1e-5, Poisson rate q = 0.01, N = 1000 rounds,
add/remove, NPO (classical DP). dp_accounting's ``calibrate_dp_mechanism`` with its PLD
accountant is the peer. We report cold (first call: compilation included) and warm
(minimum of repeats) times, the σ found and the certified ε at it, the GLRT calibration
next to it, and the time of one jitted call calibrating a batch of targets (closed form:
1000 targets; numeric accountant: ``--batch`` targets through ``lax.map``).

    python benchmarks/calibrate.py [--repeats 3] [--batch 64]
"""

from __future__ import annotations

import argparse
import platform
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from glrt_jax import calibrate, pld  # noqa: E402

EPS, DELTA, Q, N = 1.0, 1e-5, 0.01, 1000


def timed(fn, repeats):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        warm.append(time.perf_counter() - t0)
    return out, cold, min(warm)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()

    from dp_accounting import dp_event, mechanism_calibration
    from dp_accounting import pld as dpld

    def peer():
        def make_event(s):
            return dp_event.SelfComposedDpEvent(
                dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(s)), N
            )

        return mechanism_calibration.calibrate_dp_mechanism(
            dpld.PLDAccountant, make_event, EPS, DELTA
        )

    rows = []
    s_peer, c_peer, w_peer = timed(peer, args.repeats)
    rows.append(
        ("dp_accounting calibrate_dp_mechanism (PLD), NPO", float(s_peer), None, c_peer, w_peer)
    )

    def ours(adv):
        return lambda: calibrate.noise_multiplier(EPS, DELTA, N, Q, adversary=adv)

    for adv in ("npo", "glrt"):
        s, cold, warm = timed(ours(adv), args.repeats)
        block = pld.GaussianBlock(sigma=float(s), sampling_rate=Q, steps=N, adversary=adv)
        e = float(pld.epsilon_for_delta(block, DELTA).upper)
        rows.append(
            (f"glrt_jax.calibrate.noise_multiplier, {adv.upper()}", float(s), e, cold, warm)
        )

    print(
        f"jax {jax.__version__}, backend {jax.default_backend()}, "
        f"{platform.processor() or platform.machine()}, float64\n"
    )
    print(f"Calibrating σ for ε = {EPS} at δ = {DELTA}, q = {Q}, N = {N} (add/remove):\n")
    print("| method | σ | certified ε at σ | cold (s) | warm (s) | warm speed-up vs peer |")
    print("|---|---|---|---|---|---|")
    for name, s, e, cold, warm in rows:
        es = "—" if e is None else f"{e:.10f}"
        print(f"| {name} | {s:.6f} | {es} | {cold:.2f} | {warm:.3f} | {w_peer / warm:.1f}× |")

    # Batches in one jitted call.
    targets = jnp.linspace(0.5, 4.0, 1000)
    closed = jax.jit(jax.vmap(lambda e: calibrate.noise_multiplier(e, DELTA, steps=N)))
    sig, c1, w1 = timed(lambda: closed(targets), args.repeats)
    assert np.all(np.isfinite(np.asarray(sig)))

    lo, hi = 1.0, 3.0
    grid = pld.make_grid(pld.GaussianBlock(sigma=np.array([lo, hi]), sampling_rate=Q, steps=N))
    bt = jnp.linspace(0.7, 1.5, args.batch)
    numeric = jax.jit(
        lambda ts: jax.lax.map(
            lambda e: calibrate.noise_multiplier(e, DELTA, N, Q, grid=grid, sigma_bounds=(lo, hi)),
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
        f"| {args.batch} targets ε ∈ [0.7, 1.5], q = {Q}, N = {N} | NPO numeric (PLD) | "
        f"{c2:.2f} | {w2:.3f} | {1e3 * w2 / args.batch:.1f} |"
    )


if __name__ == "__main__":
    main()
