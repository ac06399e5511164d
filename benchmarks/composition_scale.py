"""Composition at scale: accountant.schedule_epsilon against dp_accounting and prv_accountant.

Usage:
    python benchmarks/composition.py --scale [--repeat 3] [--plot PNG] [--k1000-peer]

Prints, for the cases P1–P4, K-phase schedules and N = 10¹…10⁷ rounds at fixed (σ, q):
our certified bounds (lower, upper) and times (first call in this process, compile
included, and warm), dp_accounting's PLD ε (pessimistic) at its default discretisation
1e-4 and at 1e-5 (skipped where it would take minutes), prv_accountant's bounds and
time, and the speed ratios (peer time / our warm time); then, for P1–P4, DP-SGD, N = 10
and the schedules of K = 10 and 100 phases, how far above the truth (bracketed by our
bounds at tol = 1e-6) dp_accounting's ε and our upper bounds at tol = 1e-3 … 1e-6 lie,
with our warm time at each tolerance, and the loosest of them at which ours is at least
as tight as dp_accounting's, with the speed-up there.
"""

from __future__ import annotations

import time

import jax
import numpy as np
from _report import figure
from _timing import steady

from glrt_jax import accountant
from glrt_jax._src.formatting import rounded

CASES = [  # (name, σ, q, N, δ)
    ("P1", 0.7, 5e-4, 2 * 10**5, 1e-6),
    ("P2", 1.0, 1e-4, 5 * 10**6, 1e-7),
    ("P3", 0.55, 2e-3, 10**6, 1e-5),
    ("P4", 2.0, 0.02, 5 * 10**5, 1e-5),
    ("DP-SGD", 1.0, 0.01, 1000, 1e-5),
]


def _timed(fn):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - t0, out


_DP_RUNS: dict = {}


def _dp(sig, q, n, delta, interval):
    """dp_accounting's pessimistic ε and its time (each case run once per process)."""
    key = tuple(np.asarray(v, np.float64).tobytes() for v in (sig, q, n)) + (delta, interval)
    if key not in _DP_RUNS:
        _DP_RUNS[key] = _dp_run(sig, q, n, delta, interval)
    return _DP_RUNS[key]


def _dp_run(sig, q, n, delta, interval):
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    def run():
        acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
        events = [
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(qk, dp_accounting.GaussianDpEvent(sk)), int(nk)
            )
            for sk, qk, nk in zip(
                np.atleast_1d(sig), np.atleast_1d(q), np.atleast_1d(n), strict=True
            )
        ]
        acc.compose(dp_accounting.ComposedDpEvent(events))
        return acc.get_epsilon(delta)

    return _timed(run)


def _prv(sig, q, n, delta, eps_error=1e-2):
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    def run():
        prvs = [
            PoissonSubsampledGaussianMechanism(sampling_probability=qk, noise_multiplier=sk)
            for sk, qk in zip(np.atleast_1d(sig), np.atleast_1d(q), strict=True)
        ]
        ns = [int(x) for x in np.atleast_1d(n)]
        acc = PRVAccountant(
            prvs=prvs, max_self_compositions=ns, eps_error=eps_error, delta_error=delta / 1000
        )
        lo, _, up = acc.compute_epsilon(delta, ns)
        return lo, up

    return _timed(run)


def _ours(sig, q, n, delta, repeat, adversary="npo", tol=1e-3):
    def run():
        return accountant.schedule_epsilon(sig, q, n, delta, adversary=adversary, tol=tol)

    first, b = _timed(run)
    steady(run)
    warm = min(_timed(run)[0] for _ in range(repeat))
    return first, warm, b


def _up(x, decimals=5):
    """An upper bound printed rounded up (a lower bound, :func:`_down`, down): the printed
    bracket still contains the truth."""
    return rounded(float(x), decimals, direction="up", fixed=True)


def _down(x, decimals=5):
    return rounded(float(x), decimals, direction="down", fixed=True)


def _row(name, sig, q, n, delta, repeat, fine=True, peers=True, prv=True):
    first, warm, b = _ours(sig, q, n, delta, repeat)
    gfirst, gwarm, g = _ours(sig, q, n, delta, repeat, adversary="glrt")
    cells = [
        name,
        _down(b.lower),
        _up(b.upper),
        f"{first:.2f}",
        f"{warm * 1e3:.0f}",
        _up(g.upper),
        f"{(warm + gwarm) * 1e3:.0f}",
    ]
    t_dp = None
    if peers:
        t_dp, e_dp = _dp(sig, q, n, delta, 1e-4)
        cells += [
            f"{e_dp:.5f}",
            f"{t_dp:.2f}",
            f"{t_dp / warm:.1f}×",
            f"{t_dp / (warm + gwarm):.1f}×",
        ]
        if fine:
            t5, e5 = _dp(sig, q, n, delta, 1e-5)
            cells += [f"{e5:.5f} ({t5:.1f} s)"]
        else:
            cells += ["skipped"]
        # prv_accountant's mesh is eps_error/√(N ln(12/δ_err)/2) over the loss range: at
        # ε in the tens an absolute 1e-2 needs tens of GB, so its error scales with ε.
        if prv:
            err = 1e-2 * max(1.0, float(b.upper) / 10)
            tp, (plo, pup) = _prv(sig, q, n, delta, eps_error=err)
            cells += [f"[{_down(plo, 4)}, {_up(pup, 4)}] ({tp:.2f} s)"]
        else:
            cells += ["skipped"]
    print("| " + " | ".join(cells) + " |", flush=True)
    return warm, t_dp


def _k_phases():
    """The K-phase schedules of the tables: σ_k ∈ [0.8, 1.5], q_k ∈ [0.005, 0.02], 10 steps."""
    rng = np.random.default_rng(0)
    out = {}
    for k in (10, 100, 1000):
        out[k] = (rng.uniform(0.8, 1.5, k), rng.uniform(0.005, 0.02, k), np.full(k, 10))
    return out


# Cases of the accuracy table beyond CASES: few rounds, and heterogeneous schedules.
_N10 = ("N = 10", 1.0, 1e-3, 10, 1e-5)


def _accuracy(repeat):
    """Upper bounds at tol 1e-3…1e-6 against the tol = 1e-6 bracket and dp_accounting's ε;
    the loosest tolerance at which ours is the tighter, and its speed-up."""
    print(
        "\nHow far above the truth (relative; the truth bracketed by our tol = 1e-6 bounds, "
        "whose lower end is used, so the excess is certified) each upper bound lies, and our "
        "warm NPO time at each tolerance; then the loosest of these tolerances at which our "
        "upper bound is at least as tight as dp_accounting's, and dp_accounting's time over "
        "ours there:\n"
    )
    tols = (1e-3, 1e-4, 1e-5, 1e-6)
    head = "| case | truth in (tol 1e-6) | dp_acc (1e-4) excess | " + " | ".join(
        f"ours tol {t:g}: excess, warm ms" for t in tols
    )
    print(head + " | as tight as dp_acc: tol, speed-up |")
    print("|" + "---|" * (4 + len(tols)))
    phases = _k_phases()
    cases = [*CASES, _N10] + [(f"K = {k} phases", *phases[k], 1e-5) for k in (10, 100)]
    for name, sig, q, n, delta in cases:
        runs = {tol: _ours(sig, q, n, delta, repeat, tol=tol)[1:] for tol in tols}
        ref = runs[1e-6][1]
        lo, up = float(ref.lower), float(ref.upper)
        cells = [name, f"[{rounded(lo, 8, direction='down')}, {rounded(up, 8, direction='up')}]"]
        t_dp, e_dp = _dp(sig, q, n, delta, 1e-4)
        cells.append(f"{e_dp / lo - 1:.1e}")
        matched = None
        for tol in tols:
            warm, b = runs[tol]
            excess = float(b.upper) / lo - 1
            cells.append(f"{excess:.1e}, {warm * 1e3:.0f}")
            if matched is None and float(b.upper) <= e_dp:
                matched = f"{tol:g}, {t_dp / warm:.1f}×"
        cells.append(matched or "none of these")
        print("| " + " | ".join(cells) + " |", flush=True)


def run(repeat=3, plot=None, k1000_peer=False, quick=False):
    jax.config.update("jax_enable_x64", True)
    print("Times in seconds unless marked ms.\n")
    head = (
        "| case | ours lower | ours upper (NPO) | first call s | warm ms | GLRT upper | "
        "NPO+GLRT warm ms | dp_acc ε (1e-4) | dp_acc s | NPO speed-up | NPO+GLRT speed-up | "
        "dp_acc ε (1e-5) | prv bounds |"
    )
    sep = "|" + "---|" * (head.count("|") - 1)
    print(head)
    print(sep)
    for name, s, q, n, d in CASES:
        fine = n <= 2 * 10**5 and not quick
        prv = not quick or n <= 2 * 10**5
        _row(f"{name} (σ={s}, q={q}, N={n}, δ={d})", s, q, n, d, repeat, fine=fine, prv=prv)
    phases = _k_phases()
    for k in (10, 100) if quick else (10, 100, 1000):
        s, q, n = phases[k]
        _row(
            f"K = {k} phases × 10 steps",
            s,
            q,
            n,
            1e-5,
            repeat,
            fine=False,
            peers=k <= 100 or k1000_peer,
            prv=not quick or k <= 10,
        )
    ns = [10**e for e in (range(1, 8, 2) if quick else range(1, 8))]
    warms, peers = [], []
    for n in ns:
        w, t = _row(
            f"N = {n:.0e} (σ=1, q=1e-3, δ=1e-5)",
            1.0,
            1e-3,
            n,
            1e-5,
            repeat,
            fine=n <= 10**5 and not quick,
            prv=not quick or n <= 10**5,
        )
        warms.append(w)
        peers.append(t)
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.loglog(ns, warms, "o-", label="glrt-jax (NPO, warm)")
        ax.loglog(ns, peers, "s--", label="dp_accounting (1e-4)")
        ax.set_xlabel("rounds N (σ = 1, q = 1e-3)")
        ax.set_ylabel("seconds per ε(δ = 1e-5)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
        figure(plot, "Time of one ε(δ) query against the number of rounds N")
    _accuracy(repeat)
