"""Generate ``calibrate_refs.json``: mpmath noise multipliers for the closed-form accountants.

Independent of ``glrt_jax``: the privacy profiles come from ``make_profile_refs.py`` (mpmath
from first principles). For each case the script finds mu* > 0 with

    delta(eps*; mu*) = delta*        (delta increasing in mu)

and writes sigma* = sqrt(N) / mu*: the noise multiplier (noise std / sensitivity) at which N
releases with a shared direction (or, for NPO, N independent rounds without subsampling)
have exactly (eps*, delta*). Both ``calibrate.noise_multiplier(eps*, delta*, N, ...)`` and
``calibrate.for_delta(delta*, eps*, N, ...)`` must return it.

Run from the repository root (a minute or two)::

    python tests/reference/make_calibrate_refs.py [--dps 40] [--out PATH]

Schema: {"schema": "glrt_jax.calibrate_refs/1", "generator", "mpmath_version", "dps",
"cases": [{adversary ("npo"/"glrt"), d (null for npo), steps, eps, delta, mu, sigma}]}; mu
and sigma are decimal strings with 30 significant digits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import mpmath as mp
from mpmath import mpf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_profile_refs as prof  # noqa: E402

CASES = [
    # adversary, d, steps, eps, delta
    ("npo", None, 1, 1.0, 1e-5),
    ("npo", None, 1000, 1.0, 1e-5),
    ("npo", None, 100, 0.5, 1e-6),
    ("npo", None, 1, 8.0, 1e-3),
    ("glrt", 1, 10, 1.0, 1e-5),
    ("glrt", 5, 10, 1.0, 1e-5),
    ("glrt", 1, 70, 2.9437, 1e-2),
]


def _log_delta(adversary, d, eps, mu, dps):
    if adversary == "npo":
        dl, _ = prof.npo_delta(eps, mu, dps)
    else:
        dl, _, _, _ = prof._glrt_delta_and_slope(mpf(eps), d, mpf(mu) ** 2, dps)
    return mp.log(dl)


def solve_mu(adversary, d, eps, delta, dps):
    """mu* with log delta(eps; mu*) = log delta*, by bracketed Newton in log mu."""
    eps, target = mpf(eps), mp.log(mpf(delta))
    h = mpf(10) ** (-(dps // 3))

    def fn(mu):
        f = _log_delta(adversary, d, eps, mu, dps) - target
        df = (_log_delta(adversary, d, eps, mu * (1 + h), dps) - f - target) / (mu * h)
        return f, df

    return prof._solve_log(fn, mpf(1), True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dps", type=int, default=40)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "calibrate_refs.json"))
    args = ap.parse_args()
    cases = []
    with mp.workdps(args.dps):
        for adversary, d, steps, eps, delta in CASES:
            mu = solve_mu(adversary, d, eps, delta, args.dps)
            sigma = mp.sqrt(steps) / mu
            cases.append(
                dict(
                    adversary=adversary,
                    d=d,
                    steps=steps,
                    eps=eps,
                    delta=delta,
                    mu=mp.nstr(mu, 30),
                    sigma=mp.nstr(sigma, 30),
                )
            )
            print(cases[-1], flush=True)
    out = {
        "schema": "glrt_jax.calibrate_refs/1",
        "generator": "tests/reference/make_calibrate_refs.py",
        "mpmath_version": mp.__version__,
        "dps": args.dps,
        "cases": cases,
    }
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
