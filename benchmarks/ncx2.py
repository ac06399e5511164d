"""Speed and accuracy of glrt_jax.ncx2 against scipy.stats.ncx2 and TFP, in one process.

Usage:
    python benchmarks/ncx2.py [--n 1000000] [--nq 100000] [--no-tfp] [--cpus 1]
    python benchmarks/ncx2.py --gpu-sizes [--n-sf 100000000] [--n-isf 10000000]
    python benchmarks/ncx2.py --chunk-study [--chunks 1024 4096 ...]
    (any of them with --markdown PATH: also write the output as a Markdown page)

For each (df, nc) case, draws ``n`` points spread over both tails (from the bulk
out to sf ≈ 1e-12), times sf and cdf (warm, after compilation; compile time is
reported separately), and times isf/ppf on ``nq`` probabilities. Prints a
markdown table with the ratios scipy-time / glrt-time (> 1 means we are faster),
the device and the jax version. TFP's JAX ``NoncentralChi2`` is timed on the
same points when ``tfp-nightly`` is installed; its accuracy is measured against
glrt_jax where both are positive (glrt_jax agrees with mpmath to ~1e-13).

``--cpus N`` pins the process to N cores before JAX starts its thread pool: with
``--cpus 1`` both sides run on one core (scipy is single-threaded anyway), the
steadiest comparison on a shared machine.

``--gpu-sizes`` times throughput instead, on whatever device JAX uses: sf and cdf
on ``--n-sf`` points (default 1e8) and isf on ``--n-isf`` (default 1e7), in
float64 and float32, and checks a subsample of each against scipy.

``--chunk-study`` times sf (``n`` points) and ppf (``nq`` probabilities) with the
CPU chunk size of the kernels set to each of ``--chunks`` in turn (ns/point).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import ncx2 as sp_ncx2

jax.config.update("jax_enable_x64", True)

from _report import add_argument, markdown_page  # noqa: E402
from _timing import best as _best  # noqa: E402

from glrt_jax import ncx2  # noqa: E402

CASES = [(1.0, 1.0), (10.0, 36.0), (300.0, 1e3), (10.0, 1e5)]


def _points(df, nc, n, rng):
    mean = df + nc
    sd = np.sqrt(2 * (df + 2 * nc))
    x = mean + sd * rng.uniform(-3.0, 7.0, n)
    return np.maximum(x, 1e-3)


def _tfp_dist():
    try:
        from tensorflow_probability.substrates import jax as tfp
    except Exception:  # pragma: no cover - optional peer
        return None
    return tfp.distributions.NoncentralChi2


def _throughput(n_sf, n_isf, rng):
    """Evaluations per second on large arrays, float64 and float32."""
    print(
        "| (df, nc) | fn | dtype | points | ms | evaluations/s | compile s "
        "| max rel diff vs scipy (1e5 subsample) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for df, nc in CASES:
        x = _points(df, nc, n_sf, rng)
        p = np.exp(rng.uniform(np.log(1e-12), np.log(0.5), n_isf))
        for name, ours, peer, arg in [
            ("sf", ncx2.sf, sp_ncx2.sf, x),
            ("cdf", ncx2.cdf, sp_ncx2.cdf, x),
            ("isf", ncx2.isf, sp_ncx2.isf, p),
        ]:
            for dtype in (jnp.float64, jnp.float32):
                a = jax.device_put(jnp.asarray(arg, dtype))
                f = jax.jit(lambda v, ours=ours, df=df, nc=nc: ours(v, df, nc))
                t0 = time.perf_counter()
                c = f.lower(a).compile()
                compile_s = time.perf_counter() - t0
                jax.block_until_ready(c(a))
                t, out = _best(lambda c=c, a=a: c(a))
                sub = np.asarray(out[:100_000], np.float64)
                ref = peer(np.asarray(a[:100_000], np.float64), df, nc)
                tiny = 1e-300 if dtype == jnp.float64 else 1e-30
                ok = np.isfinite(ref) & (ref > tiny)
                agree = np.max(np.abs(sub[ok] / ref[ok] - 1))
                print(
                    f"| ({df:g}, {nc:g}) | {name} | {jnp.dtype(dtype).name} | {len(arg):.0e} "
                    f"| {t * 1e3:.1f} | {len(arg) / t:.2e} | {compile_s:.1f} | {agree:.1e} |",
                    flush=True,
                )
                del a, out


def _chunk_study(n, nq, chunks, rng):
    """ns/point of sf and ppf for each CPU chunk size (the library's is ``batching.CHUNK``)."""
    from glrt_jax._src.special import batching

    default = batching.CHUNK
    print(f"library chunk: {default}\n")
    print("| (df, nc) | fn | " + " | ".join(f"chunk {c}" for c in chunks) + " |")
    print("|---|---|" + "---|" * len(chunks))
    try:
        for df, nc in CASES:
            x = jnp.asarray(_points(df, nc, n, rng))
            p = jnp.asarray(np.exp(rng.uniform(np.log(1e-12), np.log(0.5), nq)))
            for name, fn, arg in [("sf", ncx2.sf, x), ("ppf", ncx2.ppf, p)]:
                cells = []
                for c in chunks:
                    batching.CHUNK = c
                    jax.clear_caches()  # the chunk size is read when tracing
                    f = jax.jit(lambda v, fn=fn, df=df, nc=nc: fn(v, df, nc))
                    jax.block_until_ready(f(arg))
                    t, _ = _best(lambda f=f, arg=arg: f(arg), repeat=5)
                    cells.append(f"{t / arg.shape[0] * 1e9:.0f}")
                print(f"| ({df:g}, {nc:g}) | {name} | " + " | ".join(cells) + " |", flush=True)
    finally:
        batching.CHUNK = default
        jax.clear_caches()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--nq", type=int, default=100_000)
    ap.add_argument("--no-tfp", action="store_true")
    ap.add_argument("--gpu-sizes", action="store_true", help="throughput on large arrays")
    ap.add_argument("--n-sf", type=int, default=100_000_000)
    ap.add_argument("--n-isf", type=int, default=10_000_000)
    ap.add_argument("--cpus", type=int, default=None, help="pin to this many cores")
    ap.add_argument("--chunk-study", action="store_true", help="time CPU chunk sizes")
    ap.add_argument(
        "--chunks", type=int, nargs="+", default=[1024, 4096, 16384, 32768, 65536, 131072]
    )
    add_argument(ap)
    args = ap.parse_args(argv)
    with markdown_page(
        args.markdown,
        "Non-central chi-squared: glrt_jax.ncx2 against SciPy and TFP",
        "Speed (ns per point, warm, after compilation) and accuracy of `glrt_jax.ncx2`'s sf, "
        "cdf, isf and ppf against `scipy.stats.ncx2` (and TensorFlow Probability's JAX "
        "`NoncentralChi2` where installed) on points spread over both tails, out to "
        "sf ≈ 1e-12. Speed-up > 1 means glrt-jax is faster.",
        peers=["scipy", "tfp-nightly"],
    ):
        _run(args)


def _run(args):
    if args.cpus is not None:
        # Before the first computation, so JAX's CPU thread pool inherits it.
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cpus])
    rng = np.random.default_rng(0)
    tfp_ncx2 = None if args.no_tfp else _tfp_dist()
    dev = jax.devices()[0]
    cpu = platform.processor() or platform.machine()
    print(
        f"device: {dev.platform} ({dev.device_kind}), {cpu}, {len(os.sched_getaffinity(0))} cores"
    )
    if args.gpu_sizes:
        print(f"jax {jax.__version__}\n")
        _throughput(args.n_sf, args.n_isf, rng)
        return
    if args.chunk_study:
        print(f"jax {jax.__version__}, n = {args.n:.0e} (sf), {args.nq:.0e} (ppf)\n")
        _chunk_study(args.n, args.nq, args.chunks, rng)
        return
    print(f"jax {jax.__version__}, n = {args.n:.0e} points (sf/cdf), {args.nq:.0e} (isf/ppf)\n")
    rows = []
    for df, nc in CASES:
        x = _points(df, nc, args.n, rng)
        xj = jnp.asarray(x)
        p = np.exp(rng.uniform(np.log(1e-12), np.log(0.5), args.nq))
        pj = jnp.asarray(p)
        for name, ours, peer, arg, arg_np in [
            ("sf", ncx2.sf, sp_ncx2.sf, xj, x),
            ("cdf", ncx2.cdf, sp_ncx2.cdf, xj, x),
            ("isf", ncx2.isf, sp_ncx2.isf, pj, p),
            ("ppf", ncx2.ppf, sp_ncx2.ppf, pj, p),
        ]:
            f = jax.jit(lambda v, ours=ours, df=df, nc=nc: ours(v, df, nc))
            t0 = time.perf_counter()
            f.lower(arg).compile()
            compile_s = time.perf_counter() - t0
            jax.block_until_ready(f(arg))
            t_ours, out = _best(lambda f=f, arg=arg: f(arg))
            t_peer, ref = _best(
                lambda peer=peer, arg_np=arg_np, df=df, nc=nc: peer(arg_np, df, nc), repeat=1
            )
            out = np.asarray(out)
            ok = np.isfinite(ref) & (ref > 0) & (out > 0)
            agree = np.max(np.abs(out[ok] / ref[ok] - 1)) if ok.any() else float("nan")
            tfp_cell = "n/a"
            if tfp_ncx2 is not None and name in ("sf", "cdf"):
                dist = tfp_ncx2(df=df, noncentrality=nc)
                method = dist.survival_function if name == "sf" else dist.cdf
                g = jax.jit(method)
                jax.block_until_ready(g(arg))
                t_tfp, tout = _best(lambda g=g, arg=arg: g(arg), repeat=1)
                tout = np.asarray(tout)
                both = (out > 1e-300) & np.isfinite(tout)
                err = np.max(np.abs(tout[both] / out[both] - 1)) if both.any() else float("nan")
                zeros = int(np.sum((tout == 0) & (out > 0)))
                tfp_cell = f"{t_tfp / len(arg_np) * 1e9:.0f} ns, err {err:.1e}, {zeros} zeros"
            rows.append(
                (
                    f"({df:g}, {nc:g})",
                    name,
                    t_ours / len(arg_np) * 1e9,
                    t_peer / len(arg_np) * 1e9,
                    t_peer / t_ours,
                    compile_s,
                    agree,
                    tfp_cell,
                )
            )
            print(f"  done ({df:g}, {nc:g}) {name}", file=sys.stderr, flush=True)
    print()
    print(
        "| (df, nc) | fn | glrt-jax ns/pt | scipy ns/pt | speed-up vs scipy | compile s "
        "| max rel diff vs scipy | TFP (JAX) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r[0]} | {r[1]} | {r[2]:.0f} | {r[3]:.0f} | {r[4]:.2f}x | {r[5]:.1f} | "
            f"{r[6]:.1e} | {r[7]} |"
        )


if __name__ == "__main__":
    main()
