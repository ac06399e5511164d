"""glrt-jax beside the peer accountants on the same DP-SGD cases, in one process.

Usage:
    python benchmarks/peers.py [--markdown docs/comparison.md] [--repeat 3] [--limit 120]
                               [--quick]

Cases: P1–P4 of the composition benchmark (Poisson-subsampled Gaussian, N up to 5·10⁶),
a q = 1 case whose exact ε is the analytic Gaussian mechanism's (the composition of N
Gaussian rounds is one Gaussian with μ = √N/σ), and K = 100 heterogeneous phases.
For each case: glrt-jax's certified NPO bounds (``accountant.epsilon``, which also gives
the GLRT adversary's bound at d = 1) with its first-call time in a fresh process and its
warm times; dp_accounting's PLD (default discretisation 1e-4) and RDP accountants;
prv_accountant's bounds; autodp's RDP composition; Opacus's RDP and PRV accountants (if
the ``opacus`` extra is installed: it pulls PyTorch); jax_privacy's DP-SGD accountant (which
calls dp_accounting); and riskcal's TPR and advantage from dp_accounting's PLD (NPO).
Peers run once per case; a call that takes longer than ``--limit`` seconds is stopped and
reported as such. ``--quick`` drops P2–P4 (for a smoke run).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import signal
import subprocess
import sys
import time
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from _report import add_argument, markdown_page  # noqa: E402
from _timing import steady  # noqa: E402

from glrt_jax import accountant, roc  # noqa: E402

_RNG = np.random.default_rng(0)
K100 = (
    _RNG.uniform(0.8, 1.5, 100),
    _RNG.uniform(0.005, 0.02, 100),
    np.full(100, 10),
)

# (name, σ, q, N, δ): scalars, or arrays of phases.
CASES = [
    ("P1", 0.7, 5e-4, 200_000, 1e-6),
    ("P2", 1.0, 1e-4, 5_000_000, 1e-7),
    ("P3", 0.55, 2e-3, 1_000_000, 1e-5),
    ("P4", 2.0, 0.02, 500_000, 1e-5),
    ("G (q = 1)", 2.0, 1.0, 100, 1e-5),
    ("K100", *K100, 1e-5),
]
FPRS = (1e-3, 1e-2, 1e-1)
PEER_DISTS = ["dp-accounting", "prv-accountant", "autodp", "riskcal", "jax-privacy", "opacus"]


class _Stopped(Exception):
    pass


def _limited(fn, seconds):
    """(seconds, output, note) of ``fn()``; stopped after ``seconds`` (note "> N s")."""

    def handler(signum, frame):
        raise _Stopped

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    t0 = time.perf_counter()
    try:
        out = fn()
        return time.perf_counter() - t0, out, None
    except _Stopped:
        return None, None, f"> {seconds:g} s"
    except Exception as e:  # a peer's own error is a result to report
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        return time.perf_counter() - t0, None, f"error: {msg[:80]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _phases(sig, q, n):
    return [
        (float(s), float(r), int(k))
        for s, r, k in zip(np.atleast_1d(sig), np.atleast_1d(q), np.atleast_1d(n), strict=True)
    ]


# --- truth ---------------------------------------------------------------------------


def exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """ε of the Gaussian mechanism with μ = Δ/σ at δ (Balle & Wang 2018), by mpmath."""
    import mpmath as mp

    mp.mp.dps = 40
    mu, delta = mp.mpf(mu), mp.mpf(delta)

    def d(e):
        return mp.ncdf(mu / 2 - e / mu) - mp.exp(e) * mp.ncdf(-mu / 2 - e / mu) - delta

    lo, hi = mp.mpf(0), mp.mpf(1)
    while d(hi) > 0:  # δ(ε) decreases in ε
        hi *= 2
    for _ in range(200):  # bisection to far below float64 resolution
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if d(mid) > 0 else (lo, mid)
    return float((lo + hi) / 2)


# --- glrt-jax ------------------------------------------------------------------------

_FRESH = """
import json, sys, time
t0 = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
from glrt_jax import accountant
t1 = time.perf_counter()
a = json.loads(sys.argv[1])
r = accountant.epsilon(a["delta"], a["sigma"], a["q"], a["n"])
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "npo": r.npo.upper}))
"""


def glrt_fresh(sig, q, n, delta):
    """First answer (NPO and GLRT) in a fresh Python process: import and first call."""
    arg = json.dumps(
        {
            "sigma": np.atleast_1d(sig).tolist(),
            "q": np.atleast_1d(q).tolist(),
            "n": np.atleast_1d(n).astype(int).tolist(),
            "delta": delta,
        }
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    out = subprocess.run(
        [sys.executable, "-c", _FRESH, arg], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def glrt_warm(sig, q, n, delta, repeat):
    """Certified bounds and warm times: NPO alone, and the NPO + GLRT report."""
    report = accountant.epsilon(delta, sig, q, n)  # compiles what is not compiled yet

    def npo():
        return accountant.schedule_epsilon(sig, q, n, delta)

    steady(npo)
    t_npo = min(_timed(npo) for _ in range(repeat))
    t_both = min(_timed(lambda: accountant.epsilon(delta, sig, q, n)) for _ in range(repeat))
    return report, t_npo, t_both


def _timed(fn):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t0


# --- peers ---------------------------------------------------------------------------


def _dp_events(phases):
    import dp_accounting

    events = []
    for s, q, k in phases:
        g = dp_accounting.GaussianDpEvent(s)
        e = g if q == 1.0 else dp_accounting.PoissonSampledDpEvent(q, g)
        events.append(dp_accounting.SelfComposedDpEvent(e, k))
    return dp_accounting.ComposedDpEvent(events)


def dp_pld(phases, delta):
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(_dp_events(phases))
    return acc.get_epsilon(delta)


def dp_rdp(phases, delta):
    from dp_accounting.rdp import rdp_privacy_accountant

    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(_dp_events(phases))
    return acc.get_epsilon(delta)


def prv(phases, delta, scale):
    """prv_accountant's (lower, estimate, upper); eps_error 1e-2, relative beyond ε = 10."""
    from prv_accountant import GaussianMechanism, PoissonSubsampledGaussianMechanism, PRVAccountant

    prvs = [
        GaussianMechanism(noise_multiplier=s)
        if q == 1.0
        else PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=s)
        for s, q, _ in phases
    ]
    ns = [k for _, _, k in phases]
    acc = PRVAccountant(
        prvs=prvs,
        max_self_compositions=ns,
        eps_error=1e-2 * max(1.0, scale / 10),
        delta_error=delta / 1000,
    )
    return acc.compute_epsilon(delta, ns)


def autodp_rdp(phases, delta):
    from autodp import mechanism_zoo, transformer_zoo

    sub = transformer_zoo.AmplificationBySampling(PoissonSampling=True)
    mechs = []
    for s, q, _ in phases:
        m = mechanism_zoo.GaussianMechanism(sigma=s)
        mechs.append(m if q == 1.0 else sub(m, q, improved_bound_flag=True))
    composed = transformer_zoo.Composition()(mechs, [k for _, _, k in phases])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return composed.get_approxDP(delta)


def _opacus_accountants():
    """``opacus.accountants``, imported without this folder on the path: its
    ``profile.py`` would shadow the standard library's ``profile``, which PyTorch imports."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import opacus.accountants
    finally:
        sys.path[:] = saved
    return opacus.accountants


def opacus_accountant(kind, phases, delta):
    """Opacus's ``RDPAccountant`` or ``PRVAccountant`` (its default ``get_epsilon``, which for
    PRV is the upper bound) over the phases as its history of (σ, q, steps)."""
    accountants = _opacus_accountants()
    acc = {"rdp": accountants.RDPAccountant, "prv": accountants.PRVAccountant}[kind]()
    acc.history = [(float(s), float(q), int(k)) for s, q, k in phases]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return acc.get_epsilon(delta)


def _opacus_installed():
    try:
        _opacus_accountants()
    except ImportError:
        return False
    return True


def jax_privacy_pld(phases, delta):
    """jax_privacy's DpsgdTrainingAccountant (PLD config) for a single phase."""
    from jax_privacy import accounting

    (s, q, k) = phases[0]
    m = 1_000_000  # q = batch_size / num_samples exactly for the cases' q
    params = accounting.DpParams(
        noise_multipliers=s, num_samples=m, batch_size=round(q * m), delta=delta
    )
    acc = accounting.DpsgdTrainingAccountant(accounting.PldAccountantConfig())
    return acc.compute_epsilon(num_updates=k, dp_params=params)


def riskcal_risk(phases):
    """riskcal's TPR at FPRS and advantage from dp_accounting's PLD: (values, PLD s, riskcal s)."""
    from dp_accounting.pld import privacy_loss_distribution as pldlib
    from riskcal import analysis

    t0 = time.perf_counter()
    pld = None
    for s, q, k in phases:
        one = pldlib.from_gaussian_mechanism(
            standard_deviation=s, sampling_prob=q, value_discretization_interval=1e-4
        ).self_compose(k)
        pld = one if pld is None else pld.compose(one)
    t1 = time.perf_counter()
    beta = np.asarray(analysis.get_beta_from_pld(pld, alpha=np.array(FPRS)))
    adv = float(analysis.get_advantage_from_pld(pld))
    t2 = time.perf_counter()
    return (1.0 - beta).tolist() + [adv], t1 - t0, t2 - t1


def gaussian_risk(mu):
    """Closed form of one Gaussian test with mean shift μ: TPR at FPRS and advantage."""
    from scipy.stats import norm

    return [float(norm.sf(norm.isf(a) - mu)) for a in FPRS] + [float(2 * norm.cdf(mu / 2) - 1)]


# --- tables --------------------------------------------------------------------------


def _f(x, digits=5):
    return "–" if x is None else f"{x:.{digits}f}"


def _t(s):
    if s is None:
        return "–"
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.2f} s"


def _cell(seconds, value, note, fmt):
    if note:
        return note
    return fmt(value)


def _describe(name, sig, q, n, delta):
    if np.ndim(sig):
        return (
            f"{name}: K = {len(sig)} phases, σ_k ∈ [0.8, 1.5], q_k ∈ [0.005, 0.02], "
            f"{int(n[0])} steps each, δ = {delta:g}"
        )
    return f"{name}: σ = {sig}, q = {q:g}, N = {n:,}, δ = {delta:g}"


LIBRARIES = ["glrt-jax", "dp_accounting", "prv_accountant", "Opacus", "jax_privacy", "autodp"]
LIBRARIES += ["riskcal"]
# One row per feature, one cell per library in LIBRARIES' order; "–": not found in its
# documentation or source (the footnotes say where each entry was read).
FEATURE_ROWS = [
    (
        "composition method",
        "characteristic functions at fixed frequency nodes, smoothed Fourier inversion",
        "PLD (FFT) [^dpa-pld]; RDP [^dpa-rdp]",
        "PRV discretisation + FFT (Gopi et al. 2021) [^prv]",
        "RDP (TF Privacy's code) [^op-rdp]; PRV, after prv_accountant's code [^op-prv]; GDP",
        "dp_accounting's PLD or RDP accountant [^jxp]",
        "RDP; f-DP and privacy profiles [^autodp]",
        "dp_accounting's PLD [^riskcal]",
    ),
    (
        "answer",
        "`Bounds(lower, estimate, upper)`",
        'one number; PLD rounding "gives an upper estimate" [^dpa-pld]',
        "`(eps_low, eps_estimate, eps_upper)` [^prv]",
        "`eps_upper` of the PRV bounds [^op-prv]; RDP bound",
        "dp_accounting's number [^jxp]",
        "RDP-converted bound [^autodp]",
        "trade-off curve, advantage [^riskcal]",
    ),
    ("GLRT adversary (unknown direction, d)", "yes, beside NPO", "–", "–", "–", "–", "–", "–"),
    (
        "heterogeneous phases",
        "arrays of phases, one compiled program for any K",
        "`ComposedDpEvent` (cost grows with K)",
        "list of PRVs with their counts [^prv]",
        "history of (σ, q, steps) [^op-prv]",
        "σ and batch-size schedules [^jxp]",
        "`Composition` of mechanisms [^autodp]",
        "through dp_accounting PLDs",
    ),
    (
        "jit / vmap / grad in JAX",
        "`accountant.schedule_epsilon`",
        "– (NumPy/SciPy)",
        "– (NumPy/SciPy)",
        "–",
        "– (NumPy, via dp_accounting) [^jxp]",
        "–",
        "–",
    ),
    (
        "inside a float32 jitted training step",
        "`training.record` (ledger)",
        "–",
        "–",
        "–",
        "–",
        "–",
        "–",
    ),
    (
        "TPR at FPR, advantage",
        "`glrt_jax.roc` (shared-direction releases)",
        "–",
        "–",
        "–",
        "–",
        "hypothesis-testing interpretation [^autodp]",
        "`get_beta_from_pld`, `get_advantage_from_pld` (NPO) [^riskcal]",
    ),
    (
        "calibration",
        "`calibrate.noise_multiplier`, `max_steps`, `max_sampling_rate` (NPO and GLRT)",
        "`calibrate_dp_mechanism` [^dpa-cal]",
        "–",
        "`get_noise_multiplier` [^op-util]",
        "`calibrate_noise_multiplier`, `calibrate_batch_size`, `calibrate_num_updates` [^jxp]",
        "`calibrator_zoo` [^autodp]",
        "noise for a target advantage or (α, β) [^riskcal]",
    ),
]


def feature_table() -> str:
    lines = ["| | " + " | ".join(LIBRARIES) + " |", "|---|" + "---|" * len(LIBRARIES)]
    lines += ["| " + " | ".join(row) + " |" for row in FEATURE_ROWS]
    return "\n".join(lines)


FEATURES_INTRO = """\
## Features

What each library offers for the (Poisson-subsampled) Gaussian mechanism, from its own
documentation or source (links below the table). "–" means not found there.
"""

FOOTNOTES = """\
[^dpa-pld]: dp_accounting, `pld/privacy_loss_distribution.py`,
    <https://github.com/google/differential-privacy/blob/main/python/dp_accounting/dp_accounting/pld/privacy_loss_distribution.py>;
    and "Privacy Loss Distributions",
    <https://raw.githubusercontent.com/google/differential-privacy/main/common_docs/Privacy_Loss_Distributions.pdf>.
[^dpa-rdp]: dp_accounting, `rdp/rdp_privacy_accountant.py`,
    <https://github.com/google/differential-privacy/blob/main/python/dp_accounting/dp_accounting/rdp/rdp_privacy_accountant.py>.
[^dpa-cal]: dp_accounting, `mechanism_calibration.py`,
    <https://github.com/google/differential-privacy/blob/main/python/dp_accounting/dp_accounting/mechanism_calibration.py>.
[^prv]: prv_accountant, <https://pypi.org/project/prv-accountant/> (Gopi, Lee, Wutschitz,
    "Numerical Composition of Differential Privacy", 2021).
[^op-rdp]: Opacus, `opacus/accountants/analysis/rdp.py` ("Based on Google's TF Privacy"),
    <https://github.com/pytorch/opacus/blob/main/opacus/accountants/analysis/rdp.py>.
[^op-prv]: Opacus, `opacus/accountants/prv.py` ("heavily inspired by the implementation of
    the authors", i.e. <https://github.com/microsoft/prv_accountant>; `get_epsilon` returns the
    upper bound), <https://github.com/pytorch/opacus/blob/main/opacus/accountants/prv.py>.
[^op-util]: Opacus, `opacus/accountants/utils.py`,
    <https://github.com/pytorch/opacus/blob/main/opacus/accountants/utils.py>.
[^jxp]: jax_privacy, `jax_privacy/accounting/` (`accountants.py` builds dp_accounting's
    `PLDAccountant` or `RdpAccountant`), <https://github.com/google-deepmind/jax_privacy>.
[^autodp]: autodp, <https://github.com/yuxiangw/autodp>.
[^riskcal]: riskcal, <https://pypi.org/project/riskcal/>,
    <https://github.com/interpretable-dp/riskcal> (Kulynych et al., "Attack-aware noise
    calibration for differential privacy", NeurIPS 2024).
"""

NOT_RUN = """\
## What was not run, and why

* **Opacus** needs PyTorch (about 3 GB installed, CUDA libraries included), so it is an
  extra of its own, not part of `bench`: `pip install -e ".[bench,opacus]"`. Without it the
  Opacus columns say "not installed". Its accountants are not new analyses: its RDP
  accountant is TF Privacy's RDP analysis of the sampled Gaussian mechanism, the analysis
  behind dp_accounting's RDP accountant (column "dp_acc RDP"), and its PRV accountant
  follows the code of prv_accountant, with the same mesh rule, and reports its upper
  bound [^op-rdp] [^op-prv]. Its GDP accountant is not run (a CLT approximation, not a
  bound).
* **jax_privacy** ran on the single-phase cases; its accounting calls dp_accounting's
  `PLDAccountant` [^jxp], so its ε equals the "dp_acc PLD" column. K100 is not run through
  it (it takes schedules as step boundaries; the computation is the same dp_accounting
  call).
"""

READING = """\
## How to read these numbers

* **Certified** means a proved `lower ≤ ε ≤ upper`: glrt-jax's bounds (default
  tolerance `tol = 1e-3`, relative, on the upper bound). prv_accountant's lower and upper
  bounds come with its own error analysis (Gopi et al. 2021). dp_accounting's PLD ε is one
  number from a pessimistic discretisation, without an error bar. RDP (dp_accounting,
  autodp) gives an upper bound whose conversion from Rényi to (ε, δ) is loose.
* The **G (q = 1)** row has an exact answer: N Gaussian rounds compose to one Gaussian with
  μ = √N/σ, and its ε(δ) is the analytic Gaussian mechanism's, computed with mpmath.
* **Times**: glrt-jax's "first call" is a fresh Python process (import excluded, shown
  separately) answering NPO and GLRT; "warm" is the best of repeated calls in this process
  (NPO alone through `accountant.schedule_epsilon`, and the NPO + GLRT report through
  `accountant.epsilon`). Peers ran once each. All on the same machine in one run; the
  speed-ups are peer time / glrt-jax warm NPO time.
"""


def run(repeat, limit, quick, save_rows=None, load_rows=None):
    cases = [c for c in CASES if not quick or c[0] in ("P1", "G (q = 1)", "K100")]
    if load_rows:
        with open(load_rows, "rb") as f:
            rows = pickle.load(f)
    else:
        rows = measure(cases, repeat, limit)
        if save_rows:
            os.makedirs(os.path.dirname(os.path.abspath(save_rows)), exist_ok=True)
            with open(save_rows, "wb") as f:
                pickle.dump(rows, f)
    render(rows)


def measure(cases, repeat, limit):
    rows = []
    have_opacus = _opacus_installed()
    for name, sig, q, n, delta in cases:
        print(f"  {name} ...", file=sys.stderr, flush=True)
        phases = _phases(sig, q, n)
        fresh = glrt_fresh(sig, q, n, delta)
        report, t_npo, t_both = glrt_warm(sig, q, n, delta, repeat)
        up = report.npo.upper
        row = dict(
            name=name,
            desc=_describe(name, sig, q, n, delta),
            lower=report.npo.lower,
            upper=up,
            glrt=report.glrt.upper,
            fresh=fresh,
            t_npo=t_npo,
            t_both=t_both,
            truth=None,
        )
        if np.ndim(sig) == 0 and q == 1.0:
            row["truth"] = exact_gaussian_epsilon(math.sqrt(n) / sig, delta)
        print(
            f"    glrt-jax done (fresh {fresh['first']:.1f} s, warm {t_npo:.3f} s)",
            file=sys.stderr,
            flush=True,
        )
        row["pld"] = _limited(lambda ph=phases, d=delta: dp_pld(ph, d), limit)
        row["rdp"] = _limited(lambda ph=phases, d=delta: dp_rdp(ph, d), limit)
        row["prv"] = _limited(lambda ph=phases, d=delta, u=up: prv(ph, d, u), limit)
        row["autodp"] = _limited(lambda ph=phases, d=delta: autodp_rdp(ph, d), limit)
        for kind in ("rdp", "prv"):
            row[f"opacus_{kind}"] = (
                _limited(lambda k=kind, ph=phases, d=delta: opacus_accountant(k, ph, d), limit)
                if have_opacus
                else (None, None, "not installed")
            )
        row["jxp"] = (
            _limited(lambda ph=phases, d=delta: jax_privacy_pld(ph, d), limit)
            if len(phases) == 1
            else (None, None, "not run")
        )
        row["risk"] = _limited(lambda ph=phases: riskcal_risk(ph), limit)
        if np.ndim(sig) == 0 and q == 1.0:
            mu = math.sqrt(n) / sig
            row["risk_exact"] = gaussian_risk(mu)
            tpr = roc.curve(np.array(FPRS), mu, adversary="npo")
            row["risk_ours"] = [float(v) for v in np.asarray(tpr)]
        rows.append(row)
    return rows


def render(rows):
    print(FEATURES_INTRO)
    print(feature_table())
    print()
    print(FOOTNOTES)
    print("## Measured: ε at δ on the same cases\n")
    print("Cases:\n")
    for r in rows:
        print(f"* {r['desc']}")
    print(
        "\n| case | exact ε | glrt-jax NPO [lower, **upper**] (certified) "
        "| glrt-jax GLRT d = 1 (certified upper) | dp_acc PLD (pessimistic estimate) "
        "| dp_acc RDP (upper bound) | prv_accountant [lower, upper] (error-bounded) "
        "| autodp RDP (upper bound) | Opacus RDP (upper bound) | Opacus PRV (its upper bound) "
        "| jax_privacy (dp_acc PLD) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        prv_cell = _cell(*r["prv"], lambda v: f"[{v[0]:.4f}, {v[2]:.4f}]")
        print(
            f"| {r['name']} | {_f(r['truth'])} | [{r['lower']:.5f}, **{r['upper']:.5f}**] "
            f"| {r['glrt']:.5f} | {_cell(*r['pld'], _f)} | {_cell(*r['rdp'], _f)} "
            f"| {prv_cell} | {_cell(*r['autodp'], _f)} | {_cell(*r['opacus_rdp'], _f)} "
            f"| {_cell(*r['opacus_prv'], _f)} | {_cell(*r['jxp'], _f)} |"
        )
    disjoint = [
        r["name"]
        for r in rows
        if not r["prv"][2] and (r["prv"][1][2] < r["lower"] or r["prv"][1][0] > r["upper"])
    ]
    if disjoint:
        print(
            f"\nOn {', '.join(disjoint)}, prv_accountant's interval and glrt-jax's certified "
            "interval do not overlap: at least one of the two is wrong there. Compare with "
            "dp_accounting's PLD estimate in the same row."
        )
        if "P4" in disjoint:
            print(
                "On P4 an independent reference decides: the saddle-point expansion of δ(ε) "
                "from mpmath cumulants of one round (`tests/reference/saddle_refs.json`, "
                "checked against glrt-jax by `test_large_n_against_saddle_point_reference`) "
                "gives δ(59.3) ≈ 1.20e-5 > 1e-5, so ε(1e-5) > 59.3, above prv_accountant's "
                "upper bound."
            )
    print("\n## Measured: time per answer\n")
    print(
        "| case | glrt-jax import | glrt-jax first call (fresh process) "
        "| glrt-jax warm NPO | glrt-jax warm NPO + GLRT | dp_acc PLD | dp_acc RDP "
        "| prv_accountant | autodp RDP | Opacus RDP | Opacus PRV | jax_privacy "
        "| dp_acc PLD / glrt-jax NPO |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        peers = [r[k] for k in ("pld", "rdp", "prv", "autodp", "opacus_rdp", "opacus_prv", "jxp")]
        cells = [p[2] if p[2] else _t(p[0]) for p in peers]
        ratio = f"{r['pld'][0] / r['t_npo']:.0f}×" if r["pld"][0] else "–"
        print(
            f"| {r['name']} | {_t(r['fresh']['import'])} | {_t(r['fresh']['first'])} "
            f"| {_t(r['t_npo'])} | {_t(r['t_both'])} | " + " | ".join(cells) + f" | {ratio} |"
        )
    print("\n## Measured: attack risk (NPO) from riskcal\n")
    print(
        "riskcal's `get_beta_from_pld` and `get_advantage_from_pld` on dp_accounting's PLD "
        "(discretisation 1e-4) of each case: the most powerful (NPO) membership test's TPR at "
        "a given FPR, and its advantage max(TPR − FPR). For the q = 1 case the N rounds compose "
        "to one Gaussian test with μ = √N/σ: its closed form and glrt-jax's `roc.curve` for "
        "it are given beside riskcal. glrt-jax's composed trade-off for subsampled rounds is "
        "not part of this table.\n"
    )
    print(
        "| case | "
        + " | ".join(f"TPR at FPR {a:g}" for a in FPRS)
        + " | advantage | PLD build | riskcal |"
    )
    print("|---|" + "---|" * (len(FPRS) + 3))
    for r in rows:
        sec, val, note = r["risk"]
        if note:
            cells = " | ".join([note] * (len(FPRS) + 1))
            print(f"| {r['name']} (riskcal) | {cells} | – | – |")
        else:
            vals, t_pld, t_rc = val
            print(
                f"| {r['name']} (riskcal) | "
                + " | ".join(f"{v:.6f}" for v in vals)
                + f" | {_t(t_pld)} | {_t(t_rc)} |"
            )
        if "risk_ours" in r:
            print(
                f"| {r['name']} (glrt-jax `roc.curve`, NPO) | "
                + " | ".join(f"{v:.6f}" for v in r["risk_ours"])
                + " | – | – | – |"
            )
        if "risk_exact" in r:
            print(
                f"| {r['name']} (closed form) | "
                + " | ".join(f"{v:.6f}" for v in r["risk_exact"])
                + " | – | – |"
            )
    bad = [
        r["name"]
        for r in rows
        if not r["risk"][2]
        and (
            any(v < a for v, a in zip(r["risk"][1][0], FPRS, strict=False))
            or not 0.0 <= r["risk"][1][0][-1] <= 1.0
        )
    ]
    if bad:
        print(
            f"\nOn {', '.join(bad)}, riskcal's values break TPR ≥ FPR or 0 ≤ advantage ≤ 1, "
            "which every test satisfies: they are not valid answers there (computed from "
            "the same dp_accounting PLD whose ε is in the table above)."
        )
    print()
    print(NOT_RUN)
    print(READING)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit", type=float, default=120.0, help="seconds per peer call")
    ap.add_argument("--quick", action="store_true", help="P1, the q = 1 case and K100 only")
    ap.add_argument("--save-rows", default=None, help="also pickle the measurements here")
    ap.add_argument("--load-rows", default=None, help="render saved measurements, measure none")
    add_argument(ap)
    args = ap.parse_args(argv)
    intro = (
        "glrt-jax and the accountants people use for DP-SGD, run side by side in one process "
        "on the same cases: features first, then ε, time and attack risk as measured."
    )
    with markdown_page(args.markdown, "Comparison with other accountants", intro, peers=PEER_DISTS):
        run(args.repeat, args.limit, args.quick, args.save_rows, args.load_rows)


if __name__ == "__main__":
    main()
