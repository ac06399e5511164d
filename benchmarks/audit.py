"""Benchmark: Monte Carlo membership-inference games, glrt_jax.audit vs plain NumPy.

Plays the paper's two games (Δ = 1, σ² = 36, N = 70, d = 1 and Δ = 1, σ² = 12.25,
N = 50, d = 50) with both samplers on the default JAX device and with a plain
NumPy implementation of the same game in the same process, and prints a markdown
table: games per second and Gaussian draws per second (warm, best of a few
repeats), compile time reported separately, and the JAX/NumPy speed ratio.

"Gaussian draws" counts the N·d noise draws of the direct simulation (the extra
draw used for the coin is not counted); for the sufficient-statistic sampler
only games per second is meaningful.

Usage:
    python benchmarks/audit.py [--draws 67108864] [--repeats 3] [--float32] [--markdown PATH]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import add_argument, markdown_page  # noqa: E402

SETTINGS = [
    # (label, Δ, σ², N, d)
    ("Δ=1, σ²=36, N=70, d=1", 1.0, 36.0, 70, 1),
    ("Δ=1, σ²=12.25, N=50, d=50", 1.0, 12.25, 50, 50),
]


def numpy_game(rng, *, sigma, sensitivity, steps, d, games, method, dtype, chunk_elements):
    """The same game in plain NumPy: returns (member, npo, glrt)."""
    rounds, dim = steps, d
    w = sensitivity / sigma**2
    lam = rounds * sensitivity**2 / sigma**2
    scale = math.sqrt(lam)
    u = np.full(dim, 1.0 / math.sqrt(dim), dtype)
    per_game = rounds * dim if method == "direct" else 1
    chunk = max(1, min(games, chunk_elements // per_game))
    member, npo, glrt = [], [], []
    for start in range(0, games, chunk):
        g = min(chunk, games - start)
        coin = rng.random(g) < 0.5
        if method == "direct":
            z = rng.standard_normal((g, rounds, dim), dtype=dtype)
            y = (coin[:, None, None] * sensitivity) * u + sigma * z
            v = w * y.sum(axis=1)  # Σ_i w_i y_i with equal weights
            s = v @ u / scale
            t = np.einsum("gd,gd->g", v, v) / lam
        else:
            s = rng.standard_normal(g, dtype=dtype) + coin * scale
            t = s * s + (rng.chisquare(dim - 1, g) if dim > 1 else 0.0)
        member.append(coin)
        npo.append(s)
        glrt.append(t)
    return np.concatenate(member), np.concatenate(npo), np.concatenate(glrt)


def best_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=1 << 26, help="Gaussian draws per direct run")
    parser.add_argument("--sufficient-games", type=int, default=1 << 22)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--float32", action="store_true", help="run in float32 (default: x64)")
    add_argument(parser)
    args = parser.parse_args(argv)
    with markdown_page(
        args.markdown,
        "Membership-inference games: glrt_jax.audit against NumPy",
        "The paper's two games played by Monte Carlo with `glrt_jax.audit.run_game` (direct "
        "simulation of all N·d Gaussian draws, and the sufficient-statistic sampler) and with "
        "a plain NumPy implementation of the same game, same process: games and Gaussian "
        "draws per second (warm, best of repeats), compile time apart, and the speed ratio.",
    ):
        _run(args)


def _run(args):
    if not args.float32:
        jax.config.update("jax_enable_x64", True)
    dtype = np.float32 if args.float32 else np.float64

    from glrt_jax import audit

    device = jax.devices()[0]
    print(
        f"device: {device.platform} ({device.device_kind}), jax {jax.__version__}, "
        f"numpy {np.__version__}, dtype {np.dtype(dtype).name}, "
        f"python {platform.python_version()}\n"
    )
    print(
        "| setting | sampler | impl | games | games/s | Gaussian draws/s | compile (s) "
        "| JAX/NumPy |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    key = jax.random.key(0)
    rng = np.random.default_rng(0)
    for label, delta, var, rounds, dim in SETTINGS:
        sigma = math.sqrt(var)
        for method in ("direct", "sufficient"):
            per_game = rounds * dim
            games = max(1, args.draws // per_game) if method == "direct" else args.sufficient_games
            kw = dict(
                sigma=jnp.asarray(sigma, dtype),
                sensitivity=jnp.asarray(delta, dtype),
                steps=rounds,
                d=dim,
                games=games,
                method=method,
            )
            fn = jax.jit(partial(audit.run_game, **kw))
            t0 = time.perf_counter()
            compiled = fn.lower(key).compile()
            compile_s = time.perf_counter() - t0
            t_jax = best_time(lambda c=compiled: c(key), args.repeats)

            run_numpy = partial(
                numpy_game,
                rng,
                sigma=sigma,
                sensitivity=delta,
                steps=rounds,
                d=dim,
                games=games,
                method=method,
                dtype=dtype,
                chunk_elements=1 << 23,
            )
            t_np = best_time(run_numpy, args.repeats)
            for impl, t, comp in (("glrt_jax", t_jax, f"{compile_s:.2f}"), ("numpy", t_np, "–")):
                draws = f"{games * per_game / t:.3g}" if method == "direct" else "–"
                ratio = f"{t_np / t_jax:.2f}×" if impl == "glrt_jax" else ""
                print(
                    f"| {label} | {method} | {impl} | {games} | {games / t:.3g} | {draws} "
                    f"| {comp} | {ratio} |"
                )


if __name__ == "__main__":
    main()
