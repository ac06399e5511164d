"""The composition engine on whatever device JAX uses (CPU, GPU): times and bounds.

Usage:
    python benchmarks/device.py [--repeat 3] [--quick] [--only SECTION ...] [--batches B ...]
                                [--glrt-blocks] [--markdown PATH]

No peers: this script is for comparing devices, so run it on each and put the tables side
by side (the bounds must agree to the digits printed; the times are the point). Rows:

- P1–P4 and the DP-SGD case of ``composition_scale.py``: ``accountant.schedule_epsilon``
  eagerly (NPO first call in this process, compilation included, then warm; GLRT d = 1 warm);
- N = 10 … 10⁷ rounds at σ = 1, q = 1e-3, δ = 1e-5 (warm);
- K-phase schedules (σ_k ∈ U[0.8, 1.5], q_k ∈ U[0.005, 0.02], 10 steps each, δ = 1e-5),
  K = 10 … 10⁴: first call and warm, NPO and GLRT with d = 10 (its first call comes after
  NPO's in the same process);
- batch evaluation: ``jax.jit(jax.vmap(...))`` of the certified upper bound over B ≤ 256
  scalings of one K = 100 schedule (the σ-schedule search's inner loop), compile time, warm time
  and queries per second; and ``jax.jit(jax.grad(...))`` of it with respect to the K = 1000
  noise multipliers;
- ``calibrate.noise_multiplier`` for the DP-SGD case (first call and warm).

``--glrt-blocks`` maps GLRT's phases (d > 1) in blocks under a ``vmap``, as NPO's, instead
of one per step of the engine's scans (``losses.batch_phases``, chosen on a CPU, where the
blocks are about 3× slower): run it beside a plain run to choose on another device.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import add_argument, markdown_page  # noqa: E402
from _timing import steady  # noqa: E402
from composition_scale import CASES  # noqa: E402

from glrt_jax import accountant, calibrate  # noqa: E402
from glrt_jax._src import losses  # noqa: E402


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    return time.perf_counter() - t0, out


def _first_warm(repeat, fn, *args, **kwargs):
    """(first call s, best of ``repeat`` warm calls s, output)."""
    first, out = _timed(fn, *args, **kwargs)
    steady(lambda: fn(*args, **kwargs))
    warm = min(_timed(fn, *args, **kwargs)[0] for _ in range(repeat))
    return first, warm, out


def _compiled(jitted, arg, repeat):
    """(compile s, best of ``repeat`` warm calls s, output) of ``jitted`` at ``arg``."""
    t0 = time.perf_counter()
    compiled = jitted.lower(arg).compile()
    comp = time.perf_counter() - t0
    warm, out = min((_timed(compiled, arg) for _ in range(repeat)), key=lambda t: t[0])
    return comp, warm, np.asarray(out)


# The GLRT columns of the K-phase rows: a query of dimension d > 1, whose per-phase
# thresholds and non-central χ² tails make it the costliest kind of phase.
GLRT_D = 10


def _schedule(k, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.8, 1.5, k), rng.uniform(0.005, 0.02, k), np.full(k, 10)


def cases(repeat, quick):
    print("| case | NPO lower | NPO upper | first call s | warm ms | GLRT upper | GLRT warm ms |")
    print("|---|---|---|---|---|---|---|")
    for name, s, q, n, d in CASES:
        first, warm, b = _first_warm(repeat, accountant.schedule_epsilon, s, q, n, d)
        _, gwarm, g = _first_warm(repeat, accountant.schedule_epsilon, s, q, n, d, adversary="glrt")
        print(
            f"| {name} (σ={s}, q={q}, N={n}, δ={d}) | {float(b.lower):.7g} | "
            f"{float(b.upper):.7g} | {first:.2f} | {warm * 1e3:.0f} | {float(g.upper):.7g} "
            f"| {gwarm * 1e3:.0f} |",
            flush=True,
        )
    print()


def rounds(repeat, quick):
    print("| N (σ = 1, q = 1e-3, δ = 1e-5) | NPO upper | warm ms |")
    print("|---|---|---|")
    for e in range(1, 8, 2 if quick else 1):
        n = 10**e
        _, warm, b = _first_warm(repeat, accountant.schedule_epsilon, 1.0, 1e-3, n, 1e-5)
        print(f"| 10^{e} | {float(b.upper):.7g} | {warm * 1e3:.0f} |", flush=True)
    print()


def phases(repeat, quick):
    print(
        "| K phases × 10 steps (δ = 1e-5) | NPO upper | first call s | warm s "
        f"| GLRT d = {GLRT_D} upper | first call s | warm s |"
    )
    print("|---|---|---|---|---|---|---|")
    for k in (10, 100, 1000) if quick else (10, 100, 1000, 10000):
        s, q, n = _schedule(k)
        first, warm, b = _first_warm(repeat, accountant.schedule_epsilon, s, q, n, 1e-5)
        gfirst, gwarm, g = _first_warm(
            repeat, accountant.schedule_epsilon, s, q, n, 1e-5, adversary="glrt", d=GLRT_D
        )
        print(
            f"| {k} | {float(b.upper):.7g} | {first:.2f} | {warm:.3f} "
            f"| {float(g.upper):.7g} | {gfirst:.2f} | {gwarm:.3f} |",
            flush=True,
        )
    print()


def batch(repeat, quick, sizes=(1, 64, 256)):
    s, q, n = _schedule(100)
    s, q, n = jnp.asarray(s), jnp.asarray(q), jnp.asarray(n)

    def upper(scale):
        return accountant.schedule_epsilon(scale * s, q, n, 1e-5).upper

    vupper = jax.jit(jax.vmap(upper))
    print("| B schedules (K = 100) under jit(vmap) | compile s | warm s | queries/s | ε range |")
    print("|---|---|---|---|---|")
    for b in [b for b in sizes if b <= 64] if quick else sizes:
        scales = jnp.linspace(0.9, 1.1, b) if b > 1 else jnp.ones(1)
        comp, warm, eps = _compiled(vupper, scales, repeat)
        print(
            f"| {b} | {comp:.1f} | {warm:.3f} | {b / warm:.0f} | "
            f"[{eps.min():.5g}, {eps.max():.5g}] |",
            flush=True,
        )
    s, q, n = _schedule(1000)
    s, q, n = jnp.asarray(s), jnp.asarray(q), jnp.asarray(n)
    grad = jax.jit(jax.grad(lambda sig: accountant.schedule_epsilon(sig, q, n, 1e-5).upper))
    comp, warm, g = _compiled(grad, s, repeat)
    print(
        f"\njit(grad) of the upper bound w.r.t. the K = 1000 noise multipliers: compile "
        f"{comp:.1f} s, warm {warm * 1e3:.0f} ms, all finite {bool(np.isfinite(g).all())}, "
        f"all negative {bool((g < 0).all())}, Σ ∂ε/∂σ_k = {g.sum():.6g}.\n"
    )


def calibration(repeat, quick):
    first, warm, sig = _first_warm(
        repeat, calibrate.noise_multiplier, 1.0, 1e-5, steps=1000, sampling_rate=0.01
    )
    eps = accountant.schedule_epsilon(float(sig), 0.01, 1000, 1e-5).upper
    print(
        f"calibrate.noise_multiplier(ε = 1, δ = 1e-5, N = 1000, q = 0.01): σ = {float(sig):.6f} "
        f"(certified ε {float(eps):.9f}), first call {first:.2f} s, warm {warm * 1e3:.0f} ms.\n"
    )


SECTIONS = {
    "cases": cases,
    "rounds": rounds,
    "phases": phases,
    "batch": batch,
    "calibration": calibration,
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer rows (K ≤ 1000, B ≤ 64)")
    ap.add_argument("--only", nargs="+", choices=sorted(SECTIONS), help="default: all")
    ap.add_argument(
        "--batches",
        nargs="+",
        type=int,
        default=[1, 64, 256],
        help="batch sizes B of the jit(vmap) rows (default: 1 64 256; a GPU compiles B = 256 "
        "in about two minutes)",
    )
    ap.add_argument(
        "--glrt-blocks",
        action="store_true",
        help="map GLRT's phases (d > 1) in blocks, as NPO's, not one per step (set before "
        "any program is traced)",
    )
    add_argument(ap)
    args = ap.parse_args(argv)
    if args.glrt_blocks:
        losses.batch_phases = lambda loss: True
    with markdown_page(
        args.markdown,
        "The composition engine on " + jax.devices()[0].platform.upper(),
        "Times and certified bounds of `accountant.schedule_epsilon`, its jit/vmap/grad "
        f"forms and calibration on {jax.devices()[0].device_kind} (float64). First call "
        "includes compilation; warm is the best of repeats.",
        peers=[],
    ):
        print(f"Device: {jax.devices()[0].device_kind} ({jax.devices()[0].platform}).\n")
        if args.glrt_blocks:
            print("GLRT's phases mapped in blocks (--glrt-blocks).\n")
        for name, section in SECTIONS.items():
            if not args.only or name in args.only:
                extra = {"sizes": tuple(args.batches)} if name == "batch" else {}
                section(args.repeat, args.quick, **extra)


if __name__ == "__main__":
    main()
