"""Privacy profiles δ(ε) and ε(δ): glrt_jax.profile against dp_accounting and autodp, one process.

Usage:
    python benchmarks/profile.py [--repeat 5] [--n 100000] [--n-peer 200] [--markdown PATH]

Rows (all timings warm, best of ``--repeat``; compile times listed separately):

* one point through the public API (validation, padding and dispatch included):
  NPO and GLRT δ(ε) and ε(δ) — target ≤ 1 ms on CPU;
* ``--n`` random (ε, μ, d) points in one call: GLRT δ(ε) (μ ∈ [0.1, 3], ε ∈ [0, 10],
  d ∈ {1, 2, 5, 10, 50, 300, 1000}) — target ≤ 1 s — and NPO δ(ε);
* the NPO ε(δ) (analytic Gaussian mechanism, Balle & Wang 2018) against
  dp_accounting's ``get_epsilon_gaussian`` and autodp's f-DP route
  (``GaussianMechanism(σ, fdp_off=False)``, ε from the convex conjugate of the
  trade-off function): per point, and ``--n-peer`` points (the peers loop in Python,
  ours is one vectorised call). The peers get σ = 1/μ (unit sensitivity).

The accuracy column is the largest relative difference from our value over the
``--n-peer`` points.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from _report import add_argument, markdown_page  # noqa: E402
from _timing import best as _best  # noqa: E402

from glrt_jax import profile  # noqa: E402


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _first(fn):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t0


def _fmt(s):
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--n-peer", type=int, default=200)
    add_argument(p)
    args = p.parse_args(argv)
    with markdown_page(
        args.markdown,
        "Privacy profiles: glrt_jax.profile against dp_accounting and autodp",
        "One-point latency of δ(ε) and ε(δ) through the public API, throughput on many "
        "(ε, μ, d) points, and the NPO ε(δ) (analytic Gaussian mechanism) against "
        "dp_accounting's `get_epsilon_gaussian` and autodp's f-DP route, in one process.",
        peers=["dp-accounting", "autodp"],
    ):
        _run(args)


def _run(args):
    rng = np.random.default_rng(0)

    rows = []  # (what, ours, peer name, peer time)
    compile_rows = []

    # --- one point -----------------------------------------------------------------
    single = [
        ("NPO δ(ε), one point", lambda: profile.delta(1.0, 0.5)),
        ("NPO ε(δ), one point", lambda: profile.epsilon(1e-5, 0.5)),
        ("GLRT δ(ε), one point, d = 10", lambda: profile.delta(1.0, 0.5, 10, adversary="glrt")),
        ("GLRT ε(δ), one point, d = 10", lambda: profile.epsilon(1e-5, 0.5, 10, adversary="glrt")),
    ]
    for name, fn in single:
        compile_rows.append((name, _first(fn)))
        t, _ = _best(fn, max(args.repeat, 20))
        rows.append((name, t, None, None))

    # --- many points -----------------------------------------------------------------
    n = args.n
    eps = rng.uniform(0.0, 10.0, n)
    mu = rng.uniform(0.1, 3.0, n)
    d = rng.choice([1, 2, 5, 10, 50, 300, 1000], n).astype(float)
    many = [
        (
            f"GLRT δ(ε), {n:.0e} (ε, μ, d) points",
            lambda: profile.log_delta(eps, mu, d, adversary="glrt"),
        ),
        (f"NPO δ(ε), {n:.0e} (ε, μ) points", lambda: profile.log_delta(eps, mu)),
    ]
    for name, fn in many:
        compile_rows.append((name, _first(fn)))
        t, _ = _best(fn, args.repeat)
        rows.append((name, t, None, None))

    # --- NPO ε(δ) against the peers ------------------------------------------------------
    k = args.n_peer
    mus = rng.uniform(0.2, 3.0, k)
    deltas = 10.0 ** rng.uniform(-12, -2, k)
    ours_one = lambda: profile.epsilon(deltas[0], mus[0])  # noqa: E731
    ours_all = lambda: profile.epsilon(deltas, mus)  # noqa: E731
    compile_rows.append((f"NPO ε(δ), {k} points", _first(ours_all)))
    t_one, _ = _best(ours_one, max(args.repeat, 20))
    t_all, e_ours = _best(ours_all, args.repeat)
    e_ours = np.asarray(e_ours)

    peers = []
    if _version("dp-accounting"):
        from dp_accounting import gaussian_mechanism

        peers.append(
            (
                "dp_accounting get_epsilon_gaussian",
                lambda m, dl: gaussian_mechanism.get_epsilon_gaussian(1.0 / m, dl),
            )
        )
    if _version("autodp"):
        from autodp import mechanism_zoo

        def autodp_fdp(m, dl):
            mech = mechanism_zoo.GaussianMechanism(
                1.0 / m, RDP_off=True, approxDP_off=True, fdp_off=False
            )
            try:
                return mech.get_approxDP(dl)
            except RuntimeError:  # "'find_logx' fails to find the tangent line."
                return np.nan

        peers.append(("autodp f-DP route", autodp_fdp))
    accuracy = {}
    for pname, pfn in peers:
        t_p1, _ = _best(lambda pfn=pfn: pfn(mus[0], deltas[0]), max(1, args.repeat))
        t0 = time.perf_counter()
        vals = np.array([pfn(m, dl) for m, dl in zip(mus, deltas, strict=True)])
        t_pall = time.perf_counter() - t0
        ok = np.isfinite(vals)
        accuracy[pname] = (float(np.max(np.abs(vals - e_ours)[ok] / e_ours[ok])), int(np.sum(~ok)))
        rows.append(("NPO ε(δ), one point", t_one, pname, t_p1))
        rows.append((f"NPO ε(δ), {k} points", t_all, pname, t_pall))

    # --- report ---------------------------------------------------------------------------
    dev = jax.devices()[0]
    print(
        f"jax {jax.__version__}, device {dev.platform.upper()} ({dev.device_kind}), "
        f"{platform.processor() or platform.machine()}, x64; "
        f"dp_accounting {_version('dp-accounting')}, autodp {_version('autodp')}\n"
    )
    print("| case | glrt_jax | peer | peer time | peer / ours |")
    print("| --- | --- | --- | --- | --- |")
    for name, t, pname, tp in rows:
        if pname is None:
            print(f"| {name} | {_fmt(t)} | – | – | – |")
        else:
            print(f"| {name} | {_fmt(t)} | {pname} | {_fmt(tp)} | {tp / t:.3g}× |")
    print("\nCompilation (first call, includes tracing):\n")
    print("| case | first call |")
    print("| --- | --- |")
    for name, t in compile_rows:
        print(f"| {name} | {_fmt(t)} |")
    if accuracy:
        print("\nLargest relative difference of the peers' NPO ε from ours:\n")
        for pname, (acc, failed) in accuracy.items():
            note = f" ({failed} of {k} points raised an error and are left out)" if failed else ""
            print(f"- {pname}: {acc:.2e}{note}")


if __name__ == "__main__":
    main()
