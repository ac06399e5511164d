"""Numerical composition: glrt_jax.pld against dp_accounting and prv_accountant, in one process.

Usage:
    python benchmarks/composition.py [--repeat 5] [--no-fine-reference]
    python benchmarks/composition.py --scale [--plot PNG] [--k1000-peer]

Cases (δ = 1e-5, add/remove, Poisson subsampling):

* DP-SGD: σ = 1, q = 0.01, N = 1000, NPO — ours vs dp_accounting's PLD accountant
  (default discretisation 1e-4) and prv_accountant (eps_error 0.01 as in Opacus, and
  0.005, whose bound width matches ours);
* the paper's subsampling example: Δ = 1, σ = 6, q = 0.2, N = 100, NPO and GLRT (d = 1);
* the DP-SGD case for the GLRT adversary (d = 1).

All timings are warm (after compilation; compile times are listed separately), the
best of ``--repeat`` runs. "ours (auto grid)" is the one-call API, which also chooses
the grid; "ours (fixed grid)" is a jitted ε(σ) with the grid built once (the
calibration and training-loop use). "ε + dε/dσ" is ``jax.value_and_grad`` (reverse
mode) of that function. Accuracy: every number shown is an upper bound on ε; its
error is measured against the smallest upper bound we know (dp_accounting at a fine
discretisation, 1e-5, and ours at eps_tol = 1e-3). Peak memory: tracemalloc peak of
the call for the numpy peers; for ours, XLA's memory analysis of the compiled
program (arguments + outputs + temporaries) — tracemalloc does not see XLA buffers.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import time
import tracemalloc

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from _timing import best as _best  # noqa: E402

from glrt_jax import pld  # noqa: E402

DELTA = 1e-5


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _peak_python(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _xla_bytes(fn, *args):
    stats = jax.jit(fn).lower(*args).compile().memory_analysis()
    return stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes


def _dp_accounting(sigma, q, steps, interval):
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
        )
    )
    return acc.get_epsilon(DELTA)


def _prv(sigma, q, steps, eps_error):
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    prv = PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=sigma)
    acc = PRVAccountant(
        prvs=[prv], max_self_compositions=[steps], eps_error=eps_error, delta_error=DELTA / 1000
    )
    return acc.compute_epsilon(DELTA, [steps])[2]  # (lower, estimate, upper)


def _ours_fns(sigma, q, steps, adversary):
    block = pld.GaussianBlock(sigma=sigma, sampling_rate=q, steps=steps, adversary=adversary)
    grid = pld.make_grid(block)

    def eps_upper(s):
        b = pld.GaussianBlock(sigma=s, sampling_rate=q, steps=steps, adversary=adversary)
        return pld.epsilon_for_delta(b, DELTA, grid=grid).upper

    return block, jax.jit(eps_upper), jax.jit(jax.value_and_grad(eps_upper)), eps_upper


def _row(name, seconds, eps, ref, peak, base):
    ratio = "" if base is None else f"{base / seconds:.1f}×"
    err = f"{eps - ref:+.1e}" if ref is not None else ""
    mem = f"{peak / 2**20:.1f}" if peak is not None else ""
    return f"| {name} | {seconds * 1e3:.1f} | {ratio} | {eps:.6f} | {err} | {mem} |"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scale", action="store_true", help="composition at scale (P1–P4, K, N)")
    ap.add_argument("--plot", default=None, help="with --scale: write time-vs-N plot here")
    ap.add_argument(
        "--k1000-peer",
        action="store_true",
        help="with --scale: also run dp_accounting at K = 1000 phases (about 4 minutes)",
    )
    ap.add_argument(
        "--no-fine-reference", action="store_true", help="skip dp_accounting at 1e-5 (about 10 s)"
    )
    args = ap.parse_args(argv)
    if args.scale:
        import composition_scale

        composition_scale.run(
            repeat=min(args.repeat, 3), plot=args.plot, k1000_peer=args.k1000_peer
        )
        return
    dev = jax.devices()[0]
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    print(f"device: {dev.platform} ({dev.device_kind}), {cpu}, {os.cpu_count()} cores")
    print(
        f"jax {jax.__version__}, dp_accounting {_version('dp-accounting')}, "
        f"prv_accountant {_version('prv-accountant')}, numpy {np.__version__}"
    )
    print(f"δ = {DELTA:g}, warm timings (best of {args.repeat})\n")

    # ------------------------------------------------------------ DP-SGD, NPO
    sigma, q, steps = 1.0, 0.01, 1000
    block, f, vg, raw = _ours_fns(sigma, q, steps, "npo")
    t0 = time.perf_counter()
    jax.block_until_ready(pld.epsilon_for_delta(block, DELTA))
    compile_auto = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(f(sigma))
    compile_fixed = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(vg(sigma))
    compile_grad = time.perf_counter() - t0

    refs = [float(pld.epsilon_for_delta(block, DELTA, eps_tol=1e-3).upper)]
    if not args.no_fine_reference:
        refs.append(_dp_accounting(sigma, q, steps, 1e-5))
    ref = min(refs)

    t_auto, b_auto = _best(lambda: pld.epsilon_for_delta(block, DELTA), args.repeat)
    t_fixed, e_fixed = _best(lambda: f(sigma), args.repeat)
    t_grad, (e_grad, g_grad) = _best(lambda: vg(sigma), args.repeat)
    jvp = jax.jit(lambda s: jax.jvp(raw, (s,), (1.0,)))
    jax.block_until_ready(jvp(sigma))
    t_jvp, _ = _best(lambda: jvp(sigma), args.repeat)
    t_dp, e_dp = _best(lambda: _dp_accounting(sigma, q, steps, 1e-4), args.repeat)
    t_prv, e_prv = _best(lambda: _prv(sigma, q, steps, 0.01), args.repeat)
    t_prv5, e_prv5 = _best(lambda: _prv(sigma, q, steps, 0.005), args.repeat)

    mem_ours = _xla_bytes(raw, sigma)
    mem_grad = _xla_bytes(jax.value_and_grad(raw), sigma)
    mem_dp = _peak_python(lambda: _dp_accounting(sigma, q, steps, 1e-4))
    mem_prv = _peak_python(lambda: _prv(sigma, q, steps, 0.01))

    print(f"### DP-SGD case: σ = {sigma}, q = {q}, N = {steps}, NPO, add/remove\n")
    print(
        f"reference ε (smallest known upper bound) = {ref:.7f}; ours: "
        f"[{float(b_auto.lower):.5f}, {float(b_auto.upper):.5f}] "
        f"(width {float(b_auto.upper - b_auto.lower):.4f}), "
        f"estimate {float(b_auto.estimate):.7f}"
    )
    print(
        f"compile: auto-grid call {compile_auto:.1f} s, fixed-grid ε {compile_fixed:.1f} s, "
        f"ε + dε/dσ {compile_grad:.1f} s; dε/dσ = {float(g_grad):.5f}\n"
    )
    print("| method | time (ms) | speed-up vs dp_accounting | ε (upper) | ε − ref | peak MiB |")
    print("|---|---|---|---|---|---|")
    print(_row("dp_accounting PLD (1e-4)", t_dp, e_dp, ref, mem_dp, None))
    print(_row("prv_accountant (eps_error 0.01)", t_prv, e_prv, ref, mem_prv, t_dp))
    print(_row("prv_accountant (eps_error 0.005)", t_prv5, e_prv5, ref, None, t_dp))
    print(_row("ours, auto grid (one call)", t_auto, float(b_auto.upper), ref, None, t_dp))
    print(_row("ours, fixed grid, jit ε(σ)", t_fixed, float(e_fixed), ref, mem_ours, t_dp))
    print(_row("ours, fixed grid, ε + dε/dσ (grad)", t_grad, float(e_grad), ref, mem_grad, t_dp))
    print(_row("ours, fixed grid, ε + dε/dσ (jvp)", t_jvp, float(e_fixed), ref, None, t_dp))
    print()
    print(
        f"ε + dε/dσ vs ε alone: {t_grad / t_fixed:.2f}× (reverse), {t_jvp / t_fixed:.2f}× (jvp); "
        f"prv_accountant (0.01) / ours (auto grid): {t_prv / t_auto:.1f}×\n"
    )

    # ------------------------------------------------ GLRT next to NPO
    print("### GLRT (d = 1, per round) next to NPO\n")
    print("| case | adversary | time auto grid (ms) | time fixed grid (ms) | ε lower | ε upper |")
    print("|---|---|---|---|---|---|")
    times = {}
    for sigma, q, steps in [(6.0, 0.2, 100), (1.0, 0.01, 1000)]:
        for adversary in ("npo", "glrt"):
            block, f, _, _ = _ours_fns(sigma, q, steps, adversary)
            jax.block_until_ready(pld.epsilon_for_delta(block, DELTA))
            jax.block_until_ready(f(sigma))
            t_a, b = _best(lambda block=block: pld.epsilon_for_delta(block, DELTA), args.repeat)
            t_f, _ = _best(lambda f=f, sigma=sigma: f(sigma), args.repeat)
            times[(sigma, adversary)] = t_f
            print(
                f"| σ={sigma:g}, q={q:g}, N={steps} | {adversary} | {t_a * 1e3:.1f} | "
                f"{t_f * 1e3:.1f} | {float(b.lower):.4f} | {float(b.upper):.4f} |"
            )
    print()
    for sigma in (6.0, 1.0):
        ratio = times[(sigma, "glrt")] / times[(sigma, "npo")]
        print(f"GLRT / NPO time (fixed grid) at σ = {sigma:g}: {ratio:.2f}×")


if __name__ == "__main__":
    main()
