"""Generate ``saddle_refs.json``: saddle-point references of δ(ε) at a large number of steps.

Independent of ``glrt_jax``: mpmath quadrature and a textbook saddle-point expansion. For N
rounds of the Poisson-subsampled Gaussian mechanism (noise multiplier σ, rate q, μ = 1/σ),
per direction of the add/remove relation (remove: P = (1 − q)N(0, 1) + qN(μ, 1),
Q = N(0, 1); add: the pair swapped), with L = log(dP/dQ) and K(t) = log E_P[e^{tL}]:

    δ(ε) = E_P[(1 − e^{ε − S})_+] = (1/2πi) ∫_{a − i∞}^{a + i∞} e^{N K(z) − zε} h(z) dz,
    h(z) = 1/(z(1 + z)),

with a the saddle point, N K'(a) = ε. Expanding the exponent to fourth order and h to second
order around a (σ² = N K''(a), κ3 = N K'''(a), κ4 = N K''''(a)):

    δ ≈ e^{N K(a) − aε}/√(2π σ²) · [h + h κ4/(8σ⁴) − 5 h κ3²/(24σ⁶) + h' κ3/(2σ⁴) − h''/(2σ²)].

The first bracket term alone is the leading order; the file stores both. The next order is
about the square of their relative difference (``rel_step``), so the second-order value is a
reference to a few tenths of that. The cumulants of the tilted round are mpmath integrals over
x at ``--dps`` digits.

Run (a few minutes)::

    python tests/reference/make_saddle_refs.py [--dps 30] [--out PATH]

Schema: ``{"schema": "glrt_jax.saddle_refs/1", "generator", "mpmath_version", "dps",
"cases": [{"sigma", "q", "steps", "eps", "directions": {"remove" | "add": {"saddle",
"delta_leading", "delta_second"}}, "delta": max of delta_second, "rel_step": max of
|second − leading|/second}]}``.
"""

from __future__ import annotations

import argparse
import json
import os

import mpmath as mp

CASES = [
    # P4 of the composition issue: sigma = 2, q = 0.02, N = 5e5; eps near the answer at
    # delta = 1e-5, and near prv_accountant's upper bound there (59.34).
    (2.0, 0.02, 500_000, eps)
    for eps in (59.3, 59.6, 59.9)
]


def _cumulants(t, sigma, q, direction):
    mu = 1 / mp.mpf(sigma)
    q = mp.mpf(q)
    c = -mp.log(mp.sqrt(2 * mp.pi))

    def lphi(x):
        return -x * x / 2 + c

    def lmix(x):
        return mp.log((1 - q) + q * mp.exp(mu * x - mu * mu / 2)) + lphi(x)

    lp, lq = (lmix, lphi) if direction == "remove" else (lphi, lmix)

    def loss(x):
        return lp(x) - lq(x)

    def weight(x):
        return mp.exp(lp(x) + t * loss(x))

    cuts = [-mp.inf, -10, 0, 10, mp.inf]
    m0 = mp.quad(weight, cuts)
    m1 = mp.quad(lambda x: weight(x) * loss(x), cuts) / m0
    cm = [mp.quad(lambda x, k=k: weight(x) * (loss(x) - m1) ** k, cuts) / m0 for k in (2, 3, 4)]
    return mp.log(m0), m1, cm[0], cm[1], cm[2] - 3 * cm[0] ** 2


def delta_saddle(sigma, q, steps, eps, direction):
    eps = mp.mpf(eps)
    a = mp.findroot(lambda t: steps * _cumulants(t, sigma, q, direction)[1] - eps, mp.mpf(0.5))
    k0, _, k2, k3, k4 = _cumulants(a, sigma, q, direction)
    s2, c3, c4 = steps * k2, steps * k3, steps * k4
    h = 1 / (a * (1 + a))
    h1 = -(1 + 2 * a) / (a * (1 + a)) ** 2
    h2 = 2 * (1 + 3 * a + 3 * a * a) / (a * (1 + a)) ** 3
    base = mp.exp(steps * k0 - a * eps) / mp.sqrt(2 * mp.pi * s2)
    lead = base * h
    second = base * (
        h + c4 * h / (8 * s2**2) - 5 * c3**2 * h / (24 * s2**3) + h1 * c3 / (2 * s2**2)
        - h2 / (2 * s2)
    )  # fmt: skip
    return a, lead, second


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dps", type=int, default=30)
    parser.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "saddle_refs.json")
    )
    args = parser.parse_args()
    mp.mp.dps = args.dps
    cases = []
    for sigma, q, steps, eps in CASES:
        dirs = {}
        for direction in ("remove", "add"):
            a, lead, second = delta_saddle(sigma, q, steps, eps, direction)
            dirs[direction] = {
                "saddle": mp.nstr(a, 20),
                "delta_leading": mp.nstr(lead, 20),
                "delta_second": mp.nstr(second, 20),
            }
            print(sigma, q, steps, eps, direction, dirs[direction], flush=True)
        seconds = [mp.mpf(v["delta_second"]) for v in dirs.values()]
        steps_rel = [
            abs(mp.mpf(v["delta_second"]) - mp.mpf(v["delta_leading"])) / mp.mpf(v["delta_second"])
            for v in dirs.values()
        ]
        cases.append(
            {
                "sigma": sigma,
                "q": q,
                "steps": steps,
                "eps": eps,
                "directions": dirs,
                "delta": mp.nstr(max(seconds), 20),
                "rel_step": mp.nstr(max(steps_rel), 6),
            }
        )
    out = {
        "schema": "glrt_jax.saddle_refs/1",
        "generator": "tests/reference/make_saddle_refs.py",
        "mpmath_version": mp.__version__,
        "dps": args.dps,
        "cases": cases,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
