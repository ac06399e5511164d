"""Privacy profiles: docs/design.md §3 numbers, mpmath references, exact gradients, bad input."""

from __future__ import annotations

import functools
import json
import math
import pathlib

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

from glrt_jax import profile, reproduce

REF = pathlib.Path(__file__).parent / "reference" / "profile_refs.json"
# Every GLRT call in this file has at most BATCH points: the public functions pad their
# inputs to a power of two (at least 16), so each function compiles once.
BATCH = 16


# (description, adversary, delta, mu, d, exact value from docs/design.md §3 (mpmath, 50 digits)),
# read from the package's data file (checked against the mpmath references in
# tests/test_reproduce.py).
DESIGN_TABLE = [
    (row.id, row.adversary, row.delta, row.mu, row.d, row.exact) for row in reproduce.PAPER_NUMBERS
]


def test_design_table_reproduced():
    npo = [row for row in DESIGN_TABLE if row[1] == "npo"]
    glrt = [row for row in DESIGN_TABLE if row[1] == "glrt"]
    got_npo = profile.epsilon(np.array([r[2] for r in npo]), np.array([r[3] for r in npo]))
    got_glrt = profile.epsilon(
        np.array([r[2] for r in glrt]),
        np.array([r[3] for r in glrt]),
        np.array([r[4] for r in glrt]),
        adversary="glrt",
    )
    for rows, got in ((npo, got_npo), (glrt, got_glrt)):
        for (name, *_, exact), g in zip(rows, np.asarray(got), strict=True):
            assert f"{g:.4f}" == exact, (name, g, exact)


def _mp_npo_delta(eps, mu):
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def test_npo_delta_against_mpmath_deep_tail():
    mp.mp.dps = 40
    eps = np.array([0.1, 1.0, 5.0, 30.0, 60.0])
    for mu in (0.5, 1.0, 3.0):
        got = np.asarray(profile.log_delta(eps, mu))
        for e, g in zip(eps, got, strict=True):
            ref = mp.log(_mp_npo_delta(e, mu))
            assert abs(g - float(ref)) <= 1e-10 * max(1.0, abs(float(ref))), (e, mu, g, ref)


def test_npo_epsilon_inverts_delta():
    deltas = np.array([0.1, 1e-5, 1e-30, 1e-300])
    eps = profile.epsilon(deltas, 1.5)
    np.testing.assert_allclose(np.exp(profile.log_delta(eps, 1.5)), deltas, rtol=1e-10)


def test_glrt_epsilon_inverts_delta_and_is_below_npo():
    deltas = np.tile([0.1, 1e-5, 1e-30, 1e-300], 3)
    d = np.repeat([1, 10, 300], 4)
    eps = np.asarray(profile.epsilon(deltas, 2.0, d, adversary="glrt"))
    back = np.exp(np.asarray(profile.log_delta(eps, 2.0, d, adversary="glrt")))
    pos = eps > 0
    np.testing.assert_allclose(back[pos], deltas[pos], rtol=1e-9)
    # ε = 0 exactly where δ(0) (the total variation) is already below the target.
    tv = np.asarray(profile.delta(np.zeros(12), 2.0, d, adversary="glrt"))
    np.testing.assert_array_equal(~pos, tv <= deltas)
    assert np.all(eps <= np.asarray(profile.epsilon(deltas, 2.0)))


def _load_refs():
    if not REF.exists():
        pytest.skip("reference fixture missing: run tests/reference/make_profile_refs.py")
    return json.loads(REF.read_text())


def test_npo_delta_against_mpmath_reference_grid():
    mp.mp.dps = 50
    recs = _load_refs()["profile_npo"]
    eps = jnp.asarray([r["eps"] for r in recs])
    mu = jnp.asarray([r["mu"] for r in recs])
    ref = np.asarray([float(mp.log(mp.mpf(r["delta"]))) for r in recs])
    got = np.asarray(profile.log_delta(eps, mu))
    assert np.max(np.abs(got - ref)) <= 1e-10


def test_glrt_delta_against_mpmath_reference_grid():
    """δ(ε) relative error ≤ 1e-10 where δ ≥ 1e-300 (checked on log δ, all records at once).

    The grid includes the records where δ_R is 1e-3..1e-4 of Ψ_λ(c) (strong cancellation),
    handled by the tail-gap series.
    """
    mp.mp.dps = 50
    recs = _load_refs()["profile_glrt"]
    eps = jnp.asarray([r["eps"] for r in recs])
    mu = jnp.asarray([r["mu"] for r in recs])
    d = jnp.asarray([float(r["d"]) for r in recs])
    ref = np.asarray([float(mp.mpf(r["log_delta"])) for r in recs])
    got = np.concatenate(
        [
            profile.log_delta(
                eps[k : k + BATCH], mu[k : k + BATCH], d[k : k + BATCH], adversary="glrt"
            )
            for k in range(0, len(recs), BATCH)
        ]
    )
    err = np.abs(got - ref)  # |Δ log δ| ≤ 1e-10 means relative error ≤ 1e-10 in δ
    assert np.max(err) <= 1e-10, recs[int(np.argmax(err))]


def _eps_grid_batches(recs):
    """Records grouped by μ (mixing scales in one batch makes every loop run to the
    slowest element), in chunks of at most BATCH."""
    for m in sorted({r["mu"] for r in recs}):
        group = [r for r in recs if r["mu"] == m]
        for k in range(0, len(group), BATCH):
            yield group[k : k + BATCH]


@pytest.mark.parametrize("kind", ["eps_npo", "eps_glrt"])
def test_epsilon_against_mpmath_reference_grid(kind):
    """ε(δ) relative error ≤ 1e-9 for δ ∈ [1e-300, 0.5], μ ∈ [1e-3, 30], d ∈ [1, 1e4]."""
    recs = _load_refs()[kind]
    worst = (0.0, None)
    for chunk in _eps_grid_batches(recs):
        delta = jnp.asarray([r["delta"] for r in chunk])
        mu = jnp.asarray([r["mu"] for r in chunk])
        if kind == "eps_npo":
            got = np.asarray(profile.epsilon(delta, mu))
        else:
            d = jnp.asarray([float(r["d"]) for r in chunk])
            got = np.asarray(profile.epsilon(delta, mu, d, adversary="glrt"))
        ref = np.asarray([float(mp.mpf(r["eps"])) for r in chunk])
        rel = np.abs(got - ref) / ref
        i = int(np.argmax(rel))
        if rel[i] > worst[0]:
            worst = (rel[i], chunk[i])
    assert worst[0] <= 1e-9, worst
    # The grid reaches every corner of the target range.
    assert min(r["delta"] for r in recs) == 1e-300 and max(r["delta"] for r in recs) == 0.5
    assert {1e-3, 30.0} <= {r["mu"] for r in recs}
    if kind == "eps_glrt":
        assert {1, 10000} <= {r["d"] for r in recs}


def test_exact_gradients_match_closed_forms_and_finite_differences():
    # NPO: dδ/dε = −e^ε Φ(−ε/μ − μ/2) and dδ/dμ = φ(−ε/μ + μ/2) (closed forms).
    eps, mu = 1.3, 0.8
    g_eps, g_mu = jax.grad(profile.delta, argnums=(0, 1))(eps, mu)
    assert math.isclose(
        float(g_eps), -math.exp(eps) * float(mp.ncdf(-eps / mu - mu / 2)), rel_tol=1e-12
    )
    assert math.isclose(float(g_mu), float(mp.npdf(-eps / mu + mu / 2)), rel_tol=1e-12)
    # GLRT, both branches (R' is the larger one at small ε), against central differences.
    d = np.array([1.0, 20.0, 1.0, 3.0, 300.0])
    e0 = np.array([0.7, 0.7, 0.02, 0.05, 0.3])
    m0 = np.array([1.2, 1.2, 2.0, 1.5, 3.0])

    def total(fn):
        return lambda a, b: jnp.sum(fn(a, b, d))

    g_e, g_m = jax.grad(total(functools.partial(profile.delta, adversary="glrt")), argnums=(0, 1))(
        e0, m0
    )
    h = 1e-5
    fd_e = (
        profile.delta(e0 + h, m0, d, adversary="glrt")
        - profile.delta(e0 - h, m0, d, adversary="glrt")
    ) / (2 * h)
    fd_m = (
        profile.delta(e0, m0 + h, d, adversary="glrt")
        - profile.delta(e0, m0 - h, d, adversary="glrt")
    ) / (2 * h)
    np.testing.assert_allclose(g_e, fd_e, rtol=1e-6)
    np.testing.assert_allclose(g_m, fd_m, rtol=1e-6)
    # ε(δ): implicit derivatives.
    dl = np.array([1e-3, 1e-3, 1e-8, 1e-2, 1e-5])
    ge_d, ge_m = jax.grad(
        total(functools.partial(profile.epsilon, adversary="glrt")), argnums=(0, 1)
    )(dl, m0)
    fd = (
        profile.epsilon(dl, m0 + h, d, adversary="glrt")
        - profile.epsilon(dl, m0 - h, d, adversary="glrt")
    ) / (2 * h)
    np.testing.assert_allclose(ge_m, fd, rtol=1e-6)
    # dε/dδ = 1 / (dδ/dε) at the solution (closed form −e^ε Ψ_0(c) through the custom JVP).
    e = profile.epsilon(dl, m0, d, adversary="glrt")
    slope, _ = jax.grad(total(functools.partial(profile.delta, adversary="glrt")), argnums=(0, 1))(
        e, m0
    )
    np.testing.assert_allclose(ge_d, 1.0 / slope, rtol=1e-8)


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: profile.epsilon(0.0, 1.0), "delta"),
        (lambda: profile.epsilon(1.0, 1.0), "delta"),
        (lambda: profile.epsilon(float("nan"), 1.0, 1, adversary="glrt"), "delta"),
        (lambda: profile.delta(-0.1, 1.0), "epsilon"),
        (lambda: profile.delta(1.0, -1.0, 1, adversary="glrt"), "mu"),
        (lambda: profile.delta(1.0, 1.0, 0, adversary="glrt"), "d"),
        (lambda: profile.delta(1.0, 1.0, 2.5, adversary="glrt"), "d"),
        (lambda: profile.delta(1.0, 1.0, 0), "d"),
        (lambda: profile.epsilon(1e-5, 1.0, adversary="x"), "adversary"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        call()
