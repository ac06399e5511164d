"""DP-SGD on real data (scikit-learn's digits), noise calibrated for NPO and for GLRT.

A small MLP (64 → 32 → 10, tanh; d = 2 410 parameters) is trained with DP-SGD on the
8×8 digits bundled with scikit-learn (1 797 images, nothing is downloaded), with the
train/test split fixed by a seed. Each step samples a Poisson batch (every training
example independently with probability q), pads it to a fixed size with a mask (one
compiled step; a step whose batch does not fit takes a full-data masked branch, so the
sampling is exactly Poisson), clips the per-example gradients to norm C, adds
N(0, (Cσ)²) noise and divides by the expected batch size q·n
(:func:`glrt_jax.training.dp_aggregate` chained with ``optax.adam``).

For every target ε the noise multiplier σ is calibrated with
:func:`glrt_jax.calibrate.noise_multiplier` for the fixed number of steps at δ = 1e-5,
twice: against the NPO adversary (classical DP) and against the per-round GLRT
adversary, which sees ‖y‖² of each noisy gradient sum but not its direction (query
dimension d = number of parameters). A privacy ledger
(:func:`glrt_jax.training.record`) is carried in the jitted train state and
:func:`glrt_jax.training.epsilon_spent` is asked at the end: the certified ε of the run
must not exceed the target. A GLRT-calibrated run is also charged against the NPO
adversary (what it costs under classical DP) unless ``--quick``. A non-private run
(same model, optimiser and sampling; no clipping, no noise) is the reference.

The training program runs with ``jax_enable_x64`` off (JAX's default, float32). Only the
calibration needs float64, in a thread-local ``with jax.enable_x64(True):``; σ is then
rounded *up* to float32 (more noise, never less), so the σ that is recorded, the σ that
noises the gradients and the σ reported are one number. The ledger answers in float32 by
itself (host callback, rounded up).

    python examples/dpsgd_digits.py            # full: 5 ε values, 3 seeds, the figure
    python examples/dpsgd_digits.py --quick    # CI: 2 ε values, 1 seed, few steps

The notebook ``notebooks/dpsgd_digits.ipynb`` imports this file and runs the same code.
Hyperparameters (C = 1, Adam learning rate 1e-2, 1 000 steps, q = 1/16) are the same for
every ε and both adversaries; they were picked once by a small sweep (steps ∈ {500, 1000,
2000}, learning rate ∈ {1e-3, 3e-3, 1e-2}, C ∈ {0.5, 1, 2}) on this split, whose privacy
cost is not accounted, as usual in examples.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import pathlib
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from glrt_jax import calibrate, training

ADVERSARIES = ("npo", "glrt")
NAMES = {"npo": "NPO (Gaussian DP)", "glrt": "GLRT (per round)"}
FIGURE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "figures" / "dpsgd_digits.png"


@dataclasses.dataclass(frozen=True)
class Config:
    """One experiment: the privacy targets and the (fixed) training hyperparameters."""

    epsilons: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0)
    delta: float = 1e-5
    steps: int = 1000
    sampling_rate: float = 1 / 16  # exact in float32: recorded, sampled and accounted alike
    seeds: int = 3
    hidden: int = 32
    l2_norm_clip: float = 1.0
    learning_rate: float = 1e-2
    test_fraction: float = 0.2
    split_seed: int = 0
    # Also charge each run against the other adversary (the NPO ε of a GLRT-calibrated
    # run). Costs extra accountant compilations, so --quick leaves it out.
    cross_epsilon: bool = True


FULL = Config()
# ε = 1 and 4 share the accountant's engine sizes at 200 steps: one compilation each.
QUICK = Config(epsilons=(1.0, 4.0), steps=200, seeds=1, cross_epsilon=False)


def config(quick: bool = False) -> Config:
    """The full or the quick (CI) configuration."""
    return QUICK if quick else FULL


# ---------------------------------------------------------------------------
# Data and model
# ---------------------------------------------------------------------------


def load_data(test_fraction: float = 0.2, split_seed: int = 0):
    """Digits as float32 arrays ``(x_train, y_train, x_test, y_test)``, pixels in [0, 1].

    Pixels are divided by 16, their known range, not standardised with statistics of the
    (private) training set.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(
        (x / 16.0).astype(np.float32),
        y.astype(np.int32),
        test_size=test_fraction,
        random_state=split_seed,
        stratify=y,
    )
    return x_tr, y_tr, x_te, y_te


def init_params(key, sizes):
    """MLP parameters: a list of ``{"w", "b"}`` layers (LeCun-normal weights, zero biases).

    In JAX's default float dtype: float32 unless x64 is on.
    """
    keys = jax.random.split(key, len(sizes) - 1)
    init = jax.nn.initializers.lecun_normal()
    dtype = jnp.result_type(float)
    return [
        {"w": init(k, (m, n), dtype), "b": jnp.zeros((n,), dtype)}
        for k, m, n in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def num_params(sizes) -> int:
    """The model's parameter count: the dimension d of the released gradient."""
    return sum(m * n + n for m, n in zip(sizes[:-1], sizes[1:], strict=True))


def logits(params, x):
    for layer in params[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def example_loss(params, x, y):
    """Cross-entropy of one example (``x``: (64,), ``y``: a label)."""
    return optax.softmax_cross_entropy_with_integer_labels(logits(params, x), y)


@jax.jit
def accuracy(params, x, y):
    return jnp.mean(jnp.argmax(logits(params, x), axis=-1) == y)


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------


class TrainState(NamedTuple):
    params: list
    opt_state: optax.OptState
    ledger: training.Ledger  # the privacy ledger travels with the model
    full_batch_steps: jax.Array  # steps whose Poisson batch overflowed the padded size


def padded_batch_size(n: int, q: float) -> int:
    """Fixed batch buffer: q·n plus five standard deviations, a multiple of 8."""
    return min(n, 8 * math.ceil((q * n + 5.0 * math.sqrt(n * q * (1.0 - q))) / 8.0))


def make_train(x, y, cfg: Config, *, private: bool = True):
    """A jitted ``train(key, noise_multiplier) -> TrainState`` running ``cfg.steps`` steps.

    σ is an argument, so one compilation serves every ε and both adversaries.
    """
    n = x.shape[0]
    q = cfg.sampling_rate
    size = padded_batch_size(n, q)
    sizes = (x.shape[1], cfg.hidden, int(y.max()) + 1)
    per_example = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))

    def batch_mean_loss(params, xb, yb, mask):
        losses = jax.vmap(example_loss, in_axes=(None, 0, 0))(params, xb, yb)
        return jnp.sum(losses * mask) / jnp.maximum(jnp.sum(mask), 1.0)

    def train(key, noise_multiplier):
        k_init, k_noise, k_steps = jax.random.split(key, 3)
        params = init_params(k_init, sizes)
        if private:
            tx = optax.chain(
                training.dp_aggregate(cfg.l2_norm_clip, key=k_noise, expected_batch_size=q * n),
                optax.adam(cfg.learning_rate),
            )
        else:
            tx = optax.adam(cfg.learning_rate)
        ledger = training.init_ledger(capacity=4)
        sigma = jnp.asarray(noise_multiplier, ledger.noise_multiplier.dtype)
        state = TrainState(params, tx.init(params), ledger, jnp.zeros((), jnp.int32))

        def step(state, k):
            params, opt_state, ledger, full = state
            sampled = jax.random.bernoulli(k, q, (n,))  # Poisson sampling
            count = jnp.sum(sampled)
            idx = jnp.nonzero(sampled, size=size, fill_value=0)[0]
            mask = jnp.arange(size) < count
            if private:

                def padded(opt_state):
                    grads = per_example(params, x[idx], y[idx])
                    return tx.update(grads, opt_state, params, noise_multiplier=sigma, mask=mask)

                def everyone(opt_state):  # rare: the batch does not fit the buffer
                    grads = per_example(params, x, y)
                    return tx.update(grads, opt_state, params, noise_multiplier=sigma, mask=sampled)

                updates, opt_state = jax.lax.cond(count > size, everyone, padded, opt_state)
                ledger = training.record(ledger, sigma, q)
            else:
                grads = jax.grad(batch_mean_loss)(params, x[idx], y[idx], mask)
                updates, opt_state = tx.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            full = full + (count > size).astype(jnp.int32)
            return TrainState(params, opt_state, ledger, full), None

        state, _ = jax.lax.scan(step, state, jax.random.split(k_steps, cfg.steps))
        return state

    return jax.jit(train)


# ---------------------------------------------------------------------------
# Calibration (float64, in a thread-local context)
# ---------------------------------------------------------------------------


def float32_up(x: float) -> float:
    """``x`` rounded up to the nearest float32 (as a Python float)."""
    v = np.float32(x)
    if float(v) < x:
        v = np.nextafter(v, np.float32(np.inf))
    return float(v)


def calibrated_noise_multiplier(cfg: Config, epsilon: float, adversary: str, d: int) -> float:
    """σ for ``epsilon`` at ``cfg.delta`` after ``cfg.steps`` steps, rounded up to float32."""
    with jax.enable_x64(True):
        sigma = calibrate.noise_multiplier(
            epsilon,
            cfg.delta,
            steps=cfg.steps,
            sampling_rate=cfg.sampling_rate,
            d=d,
            adversary=adversary,
        )
        return float32_up(float(sigma))


# ---------------------------------------------------------------------------
# The experiment
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    adversary: str
    epsilon: float
    noise_multiplier: float
    accuracy: list[float]
    spent: dict[str, float]  # certified ε of the run, per adversary asked
    train_s: list[float]
    calibration_s: float
    ledger_s: float

    @property
    def accounting_s(self) -> float:
        return self.calibration_s + self.ledger_s

    @property
    def overhead(self) -> float:
        """Accounting time over training time."""
        return self.accounting_s / sum(self.train_s)


@dataclasses.dataclass
class Results:
    config: Config
    d: int
    n_train: int
    n_test: int
    batch_size: int
    rows: list[Row]
    baseline_accuracy: list[float]
    baseline_train_s: list[float]
    compile_s: float  # compiling the two training programs (once, not in train_s)
    full_batch_steps: int  # steps (all runs) that took the full-data branch

    def row(self, adversary: str, epsilon: float) -> Row:
        return next(r for r in self.rows if r.adversary == adversary and r.epsilon == epsilon)


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - t0


def run(cfg: Config = FULL, *, verbose: bool = True) -> Results:
    """Calibrate, train and account every (adversary, ε); the non-private baseline too."""
    say = print if verbose else (lambda *a, **k: None)
    x_tr, y_tr, x_te, y_te = load_data(cfg.test_fraction, cfg.split_seed)
    x_tr, x_te = (jnp.asarray(v, jnp.result_type(float)) for v in (x_tr, x_te))
    y_tr, y_te = jnp.asarray(y_tr), jnp.asarray(y_te)
    n = x_tr.shape[0]
    if float(np.float32(cfg.sampling_rate)) != cfg.sampling_rate:
        raise ValueError("choose a sampling rate exact in float32 (e.g. 1/16)")
    d = num_params((x_tr.shape[1], cfg.hidden, int(y_tr.max()) + 1))
    keys = [jax.random.key(1000 + s) for s in range(cfg.seeds)]

    t0 = time.perf_counter()
    dp_train = make_train(x_tr, y_tr, cfg).lower(keys[0], np.float32(1.0)).compile()
    plain_train = make_train(x_tr, y_tr, cfg, private=False).lower(keys[0], 0.0).compile()
    compile_s = time.perf_counter() - t0
    say(f"digits: n_train = {n}, n_test = {x_te.shape[0]}, d = {d}, q = {cfg.sampling_rate}, "
        f"steps = {cfg.steps}, padded batch {padded_batch_size(n, cfg.sampling_rate)}; "
        f"training programs compiled in {compile_s:.1f} s")  # fmt: skip

    base_acc, base_s = [], []
    for k in keys:
        state, s = _timed(plain_train, k, 0.0)
        base_acc.append(float(accuracy(state.params, x_te, y_te)))
        base_s.append(s)
    say(f"non-private: accuracy {np.mean(base_acc):.4f}")

    rows, full = [], 0
    for adversary in ADVERSARIES:
        for epsilon in cfg.epsilons:
            t0 = time.perf_counter()
            sigma = calibrated_noise_multiplier(cfg, epsilon, adversary, d)
            cal_s = time.perf_counter() - t0
            acc, train_s, ledger_s, spent = [], [], 0.0, {}
            asked = ADVERSARIES if cfg.cross_epsilon else (adversary,)
            for k in keys:
                state, s = _timed(dp_train, k, np.float32(sigma))
                train_s.append(s)
                acc.append(float(accuracy(state.params, x_te, y_te)))
                full += int(state.full_batch_steps)
                t0 = time.perf_counter()
                for a in asked:  # the certified ε of this run, from its own ledger
                    eps_a = training.epsilon_spent(state.ledger, cfg.delta, adversary=a, d=d)
                    spent[a] = float(eps_a)
                ledger_s += time.perf_counter() - t0
                if spent[adversary] > epsilon:
                    raise AssertionError(
                        f"{adversary} ε spent {spent[adversary]} exceeds the target {epsilon}"
                    )
            row = Row(adversary, epsilon, sigma, acc, spent, train_s, cal_s, ledger_s)
            rows.append(row)
            say(f"{NAMES[adversary]:18s} ε = {epsilon:<4g} σ = {sigma:.4f}  accuracy "
                f"{np.mean(acc):.4f}  spent {spent[adversary]:.6g}  calibration {cal_s:.1f} s  "
                f"ledger {ledger_s:.2f} s  training {sum(train_s):.2f} s")  # fmt: skip
    return Results(
        cfg,
        d,
        n,
        int(x_te.shape[0]),
        padded_batch_size(n, cfg.sampling_rate),
        rows,
        base_acc,
        base_s,
        compile_s,
        full,
    )


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def _mean_sd(values) -> str:
    v = np.asarray(values)
    return f"{v.mean():.3f}" if v.size == 1 else f"{v.mean():.3f} ± {v.std(ddof=1):.3f}"


def table(results: Results) -> str:
    """Markdown table: per (adversary, ε) σ, certified ε spent, accuracy, times, overhead."""
    cfg, d = results.config, results.d
    lines = [
        f"| calibrated for | target ε | σ | ε spent, NPO | ε spent, GLRT (d = {d}) | "
        f"test accuracy ({cfg.seeds} seed{'s' * (cfg.seeds > 1)}) | training s | "
        "calibration s | ledger s | overhead |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results.rows:
        spent = [f"{r.spent[a]:.4g}" if a in r.spent else "—" for a in ADVERSARIES]
        lines.append(
            f"| {NAMES[r.adversary]} | {r.epsilon:g} | {r.noise_multiplier:.4f} | "
            f"{spent[0]} | {spent[1]} | {_mean_sd(r.accuracy)} | {sum(r.train_s):.2f} | "
            f"{r.calibration_s:.2f} | {r.ledger_s:.2f} | {r.overhead:.1f}× |"
        )
    lines.append(
        f"| non-private | ∞ | 0 | — | — | {_mean_sd(results.baseline_accuracy)} | "
        f"{sum(results.baseline_train_s):.2f} | — | — | — |"
    )
    train = sum(sum(r.train_s) for r in results.rows)
    acct = sum(r.accounting_s for r in results.rows)
    lines += [
        "",
        f"δ = {cfg.delta:g}, steps = {cfg.steps}, q = {cfg.sampling_rate:g} "
        f"(expected batch {cfg.sampling_rate * results.n_train:.1f}, padded to "
        f"{results.batch_size}; {results.full_batch_steps} step(s) overflowed and took the "
        f"full-data branch), C = {cfg.l2_norm_clip:g}, Adam lr = {cfg.learning_rate:g}; "
        f"n_train = {results.n_train}, n_test = {results.n_test}.",
        f"Private training {train:.2f} s in all; accounting (calibration + ledger) "
        f"{acct:.2f} s = {acct / train:.1f}× the training time (the first calibration and "
        f"ledger query of each adversary and engine size include JIT compilation); the "
        f"training programs compiled once in {results.compile_s:.1f} s (not counted).",
    ]
    return "\n".join(lines)


def _short(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def figure(results: Results):
    """Test accuracy against ε (log axis), one line per adversary; non-private line."""
    from matplotlib.figure import Figure

    cfg = results.config
    fig = Figure(figsize=(6.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for adversary, marker in zip(ADVERSARIES, "os", strict=True):
        rows = [results.row(adversary, e) for e in cfg.epsilons]
        mean = [np.mean(r.accuracy) for r in rows]
        sd = [np.std(r.accuracy, ddof=1) if len(r.accuracy) > 1 else 0.0 for r in rows]
        label = NAMES[adversary] + (f", d = {results.d}" if adversary == "glrt" else "")
        ax.errorbar(cfg.epsilons, mean, yerr=sd, marker=marker, capsize=3, label=label)
    charged = [results.row("glrt", e).spent.get("npo") for e in cfg.epsilons]
    if all(c is not None for c in charged):  # a GLRT ε is never shown without the NPO one
        ax.text(
            0.97,
            0.4,
            "the GLRT-calibrated runs spend\n"
            f"ε = {_short(min(charged))} … {_short(max(charged))} against NPO",
            transform=ax.transAxes,
            ha="right",
            va="center",
            color="C1",
        )
    base = np.mean(results.baseline_accuracy)
    ax.axhline(base, color="0.3", linestyle="--", label=f"non-private ({base:.3f})")
    ax.set_xscale("log")
    ax.set_xticks(cfg.epsilons, [f"{e:g}" for e in cfg.epsilons])
    ax.minorticks_off()
    ax.set_xlabel(f"target ε (δ = {cfg.delta:g}, {cfg.steps} steps, q = {cfg.sampling_rate:g})")
    ax.set_ylabel(
        f"test accuracy (mean{' ± sd' if cfg.seeds > 1 else ''} over {cfg.seeds} "
        f"seed{'s' * (cfg.seeds > 1)})"
    )
    ax.set_title("DP-SGD on digits: MLP 64-32-10, noise calibrated per adversary")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 ε values, 1 seed, 200 steps (CI)")
    ap.add_argument("--steps", type=int, help="override the number of steps")
    ap.add_argument("--seeds", type=int, help="override the number of seeds")
    ap.add_argument(
        "--figure",
        default=None,
        help=f"where to save the plot (default: {FIGURE} for the full run, none with --quick)",
    )
    ap.add_argument(
        "--no-cache",
        action="store_true",
        help="do not keep compiled programs in the persistent cache ($GLRT_JAX_CACHE or "
        "~/.cache/glrt-jax, as the command line does)",
    )
    args = ap.parse_args(argv)
    if not args.no_cache:
        cache = os.environ.get("GLRT_JAX_CACHE", os.path.expanduser("~/.cache/glrt-jax"))
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    cfg = config(args.quick)
    overrides = {k: v for k, v in (("steps", args.steps), ("seeds", args.seeds)) if v}
    cfg = dataclasses.replace(cfg, **overrides)
    t0 = time.perf_counter()
    results = run(cfg)
    print(f"\n{table(results)}\n\ntotal wall time {time.perf_counter() - t0:.1f} s")
    out = args.figure or (None if args.quick else str(FIGURE))
    if out:
        pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
        figure(results).savefig(out, dpi=150)
        print(f"figure: {out}")


if __name__ == "__main__":
    main()
