"""Cost of the privacy ledger in a float32 DP-SGD training loop (x64 off), per training step.

    python benchmarks/ledger.py [--steps 2000] [--every 1000 100 10] [--markdown PATH]

A small MLP (64 → 32 → 10) on synthetic data, batch 64, DP-SGD (``training.dp_aggregate``
+ adam), jitted step. Three loops over the same steps: no ledger; the ledger recorded in
the jitted step (``training.record``); and, in addition, ``training.epsilon_spent`` asked
every ``k`` steps. Each recorded step is a new history, so each question is one eager
float64 query on the host (memoised per history). Each loop with questions runs twice: the
first compiles the accountant's programs for those histories, then the memo is cleared and
the second is timed (compiled programs, fresh questions). Prints the time per step of each
loop and the ledger's overhead per step.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import optax

from glrt_jax import training
from glrt_jax._src.training import _epsilon64

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import add_argument, markdown_page  # noqa: E402

DELTA = 1e-5
SIGMA, Q = 1.1, 0.01


def _mlp(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def _loss(params, x, y):
    logits = _mlp(params, x[None])
    return optax.softmax_cross_entropy_with_integer_labels(logits, y[None]).mean()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--every", type=int, nargs="+", default=[1000, 100, 10])
    add_argument(ap)
    args = ap.parse_args(argv)
    with markdown_page(
        args.markdown,
        "The privacy ledger inside a float32 training step",
        "Cost per training step of recording DP-SGD rounds in a jitted float32 step "
        "(`training.record`, 64-bit floats off) and of asking `training.epsilon_spent` every "
        "k steps, on a small MLP (64 → 32 → 10, batch 64, adam).",
    ):
        _run(args)


def _run(args) -> None:
    assert not jax.config.jax_enable_x64, "this benchmark is a float32 program"

    k = jax.random.split(jax.random.key(0), 4)
    params = {
        "w1": 0.1 * jax.random.normal(k[0], (64, 32)),
        "b1": jnp.zeros(32),
        "w2": 0.1 * jax.random.normal(k[1], (32, 10)),
        "b2": jnp.zeros(10),
    }
    x = jax.random.normal(k[2], (64, 64))
    y = jax.random.randint(k[3], (64,), 0, 10)
    tx = optax.chain(training.dp_aggregate(1.0, SIGMA, key=jax.random.key(1)), optax.adam(1e-3))

    def grad_step(params, opt):
        g = jax.vmap(jax.grad(_loss), in_axes=(None, 0, 0))(params, x, y)
        upd, opt = tx.update(g, opt, params)
        return optax.apply_updates(params, upd), opt

    plain = jax.jit(grad_step)

    @jax.jit
    def with_ledger(params, opt, led):
        params, opt = grad_step(params, opt)
        return params, opt, training.record(led, SIGMA, Q)

    ask = jax.jit(lambda led: training.epsilon_spent(led, DELTA))

    def run(kind, every=None):
        p, o, led = params, tx.init(params), training.init_ledger()
        first = None
        t0 = time.perf_counter()
        for i in range(args.steps):
            if kind == "plain":
                p, o = plain(p, o)
            else:
                p, o, led = with_ledger(p, o, led)
                if every and (i + 1) % every == 0:
                    tq = time.perf_counter()
                    eps = float(ask(led))
                    if first is None:
                        first = time.perf_counter() - tq
        jax.block_until_ready(p)
        total = time.perf_counter() - t0
        return total - (first or 0.0), first, (eps if every else None)

    run("plain")  # compile
    run("ledger")
    base, _, _ = run("plain")
    rec, _, _ = run("ledger")
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, x64 off, {args.steps} steps\n")
    print("| loop | ms/step | ledger overhead ms/step | first question (s) | ε at end |")
    print("|---|---|---|---|---|")
    print(f"| no ledger | {1e3 * base / args.steps:.3f} | – | – | – |")
    print(
        f"| record every step | {1e3 * rec / args.steps:.3f} | "
        f"{1e3 * (rec - base) / args.steps:.3f} | – | – |"
    )
    for every in args.every:
        run("ledger", every)  # compiles the accountant's programs for these histories
        _epsilon64.cache_clear()  # then measure fresh questions with compiled programs
        t, first, eps = run("ledger", every)
        print(
            f"| + epsilon_spent every {every} | {1e3 * t / args.steps:.3f} | "
            f"{1e3 * (t - base) / args.steps:.3f} | {first:.2f} | {eps:.4f} |"
        )


if __name__ == "__main__":
    main()
