"""One round, answered from its own tails: no grids, no transform.

A schedule whose steps add up to one is a single round of the Poisson-subsampled
Gaussian mechanism, and its privacy profile needs no composition: per direction of the
neighbouring relation (the pairs ``(P', Q')`` of :mod:`glrt_jax._src.losses`),

    δ(ε) = E_P'[(1 − e^{ε − L'})_+] = P'[L' > ε] − e^ε Q'[L' > ε],

two tails of the round at the loss level ε. Written with the base pair's tails at the
base level ``b`` (:func:`glrt_jax._src.losses.hinge_terms`) it is one positive term minus
one or two, each a coefficient (q, e^ε − 1 + q, q e^ε, …) times a tail:

* remove: ``q P[L > b] − (e^ε − 1 + q) Q[L > b]``;
* add (``ε < −log(1 − q)``, else 0): ``(1 − (1 − q)e^ε) Q[L < b] − q e^ε P[L < b]``;
* replace (NPO): ``q Φ(μ − z) − q e^ε Φ(−μ − z) − (e^ε − 1)(1 − q) Φ(−z)``.

The engine's answer for one round carries the error terms of a Fourier inversion, which
at small q and tiny δ stay large against δ (see ``docs/how-it-works/composition.md``,
Limits): one round at σ = 0.9, q = 1e-6, δ = 1e-15 got a bracket 7e-3 wide, and
``tol = 1e-5`` was missed on one round at δ = 6.9e-13 (2.4e-5 above the truth). Here the
only error is that of the tails.

Each tail is computed on its own, with relative accuracy (not as the complement of the
other tail, which the engine's grids use where it is the larger one): NPO's are normal
tails Φ(x) (``erfc`` of ``|x|``, or its complement where that is at least 1/2); GLRT's
upper tails come from the non-central χ² log-sf, its lower tails from the log-cdf (the
Poisson mixture's, ``ncx2.logcdf_mixture``), and for d = 1 from ``erf`` and a difference
of normal tails, whose error is then relative to the two (``hinge_terms``' ``scale``).

Why it is a bound. Each tail ``t`` is taken within ``TAIL_REL·s + TAIL_ABS`` of its
computed value ``t̂`` (``s`` its scale, mostly ``t̂`` itself; ``TAIL_REL_NCX2 = 1e-9``
for the non-central χ² tails of GLRT with d > 1, whose log-tails are within
``1e-13·max(1, |log|)`` of the mpmath grid in ``tests/test_ncx2.py``, at most 7.5e-11
relative above the smallest double, and whose thresholds ``t = ℓ⁻¹(b)`` are solved to
rounding): ``TAIL_ABS = 1e-307`` for tails below the smallest normal double, which
underflow to subnormals or 0 (one round at σ = 0.31, q = 1, δ = 1e-300, ε ≈ 124.5: ``e^ε
Q[L > b]`` is about 1e-300 while ``Q[L > b]`` is below 1e-353; taken as exact, the lower
bound came out at 124.71). ``TAIL_REL = 1e-10`` is a wide margin: the normal tails are
within 2.2e-13 of 50-digit values over their whole range (``tests/test_one_round.py``
fails above ``TAIL_REL/100``; the rounding of ``x/√2`` moves ``Φ(−x)`` by a relative
``x²u``); the levels ``b`` and ``z`` carry a few ulps of ``ε`` and ``log q`` (for σ ≤ 20
a relative ``|x|·Δx`` below 3e-11 of any tail above the smallest double, ``|x| ≤ 38``);
and the coefficients and the sum round by a few ulps. The tests' brackets, about 1e-9
wide (1e-8 for GLRT with d > 1; up to 5e-8, and 2e-6 for GLRT with d = 100, where ε lies
below q), hold the 50-digit truths over σ ∈ [0.3, 20], q ∈ [1e-6, 1] and δ ∈ [1e-15,
0.1] (GLRT: a 30-digit Poisson-mixture reference at d = 1 to 100). Raising the positive
term and lowering the negative ones by the allowance gives an upper bound on δ(ε), the
converse a lower bound; both are clipped to ``[0, 1]``. The answer is the maximum over
the directions, so the maximum of the directions' bounds bounds it. ε(δ): any ε whose
upper bound on δ(ε) is at most δ is an upper bound on ε(δ) (δ(ε) is non-increasing), and
any ε whose lower bound exceeds δ lies below ε(δ); both are found by bisection on ``log
ε`` (64 halvings of ``[−745, log EPS_MAX]``, to the last bits of ε), the estimate
likewise on the computed value.

Where the cancellation between the terms is strong the bracket widens; the caller
(:func:`glrt_jax._src.composition._query_once`) keeps this answer when it meets the
tolerance and otherwise intersects it with the engine's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from glrt_jax._src import losses, programs
from glrt_jax._src.transform import UNIT_ROUNDOFF

# The tails' allowance, relative (normal tails; the non-central χ² ones of GLRT with d > 1)
# and absolute for tails below the smallest normal double (see the module's docstring).
TAIL_REL = 1e-10
TAIL_REL_NCX2 = 1e-9
TAIL_ABS = 1e-307


def tail_rel(loss: str) -> float:
    """The relative allowance of the tails of the static ``loss`` (:func:`losses.program_key`)."""
    return TAIL_REL_NCX2 if loss in losses.GLRT_LOSSES else TAIL_REL


# The ε search: bisection on log ε over [log ε_min, log EPS_MAX] (e^ε stays finite); ε
# above EPS_MAX (far beyond one round's at δ ≥ 1e-15 for σ ≥ 0.3) is left to the engine.
EPS_MAX = 700.0
_LOG_EPS_MIN = -745.0
_HALVINGS = 64


def delta_bounds(loss, value, mu, q, eps):
    """``(lower, estimate, upper)`` of one round's δ at ``eps`` (arrays of ε), maximised
    over the directions of the static ``loss`` (:func:`losses.program_key`); ``value``:
    :func:`losses.phase_value`'s view of the round's value."""
    coef, tail, scale, ulps = losses.hinge_terms(loss, value, mu, q, eps)  # (..., n_dir, 3)
    err = tail_rel(loss) * scale + ulps * UNIT_ROUNDOFF * tail + TAIL_ABS
    lo_t = jnp.maximum(tail - err, 0.0)
    hi_t = tail + err
    sign = jnp.asarray([1.0, -1.0, -1.0])
    upper = jnp.sum(coef * jnp.where(sign > 0, hi_t, lo_t) * sign, axis=-1)
    lower = jnp.sum(coef * jnp.where(sign > 0, lo_t, hi_t) * sign, axis=-1)
    value_ = jnp.sum(coef * tail * sign, axis=-1)

    def clip(v, nan):  # (a NaN, which no valid input gives, says nothing: [0, 1])
        return jnp.max(jnp.where(jnp.isnan(v), nan, jnp.clip(v, 0.0, 1.0)), axis=-1)

    return clip(lower, 0.0), clip(value_, 1.0), clip(upper, 1.0)


def _epsilon_bounds(loss, value, mu, q, delta):
    """``(lower, estimate, upper)`` of one round's ε(δ) (see the module's docstring)."""
    lo_s, hi_s = jnp.float64(_LOG_EPS_MIN), jnp.float64(np.log(EPS_MAX))
    ends = jnp.concatenate([jnp.full(3, -jnp.inf), jnp.full(3, hi_s)])  # ε = 0 and EPS_MAX

    def step(i, carry):
        # Per search (lower bound, estimate, upper bound): the largest s known with its δ
        # above delta (a), and the smallest known with it at or below (b). Step 0
        # evaluates δ at both ends instead (one evaluation of the tails in the program).
        a, b, at_ends = carry
        mid = 0.5 * (a + b)
        points = jnp.where(i == 0, ends, jnp.concatenate([mid, mid]))
        # (lower, estimate, upper) at each point; search k takes kind k at its point k
        kinds = jnp.stack(delta_bounds(loss, value, mu, q, jnp.exp(points)))
        above = jnp.diagonal(kinds[:, :3]) > delta
        bisect = i > 0
        a = jnp.where(bisect & above, mid, a)
        b = jnp.where(bisect & ~above, mid, b)
        at_ends = jnp.where(
            bisect, at_ends, jnp.stack([jnp.diagonal(kinds[:, k : k + 3]) for k in (0, 3)])
        )
        return a, b, at_ends

    init = (jnp.full(3, lo_s), jnp.full(3, hi_s), jnp.zeros((2, 3)))
    a, b, (zero, top) = lax.fori_loop(0, _HALVINGS + 1, step, init)
    at_zero = zero <= delta  # ε = 0 already meets δ
    beyond = top > delta  # ε(δ) above EPS_MAX
    # (the lower search's a is known above δ only once it moved; at ε ≈ 0 it says 0)
    found = jnp.where(jnp.arange(3) == 0, jnp.where(a > lo_s, jnp.exp(a), 0.0), jnp.exp(b))
    eps = jnp.where(at_zero, 0.0, found)
    eps = jnp.where(beyond, jnp.asarray([EPS_MAX, jnp.inf, jnp.inf]), eps)
    return eps[0], jnp.clip(eps[1], eps[0], eps[2]), eps[2]


@programs.stored(static_argnames=("loss", "query"))
def _one_round_program(mu, q, target, value, *, loss, query):
    v = losses.phase_value(loss, value[None])(value)
    if query == "delta":
        return delta_bounds(loss, v, mu, q, target)
    return _epsilon_bounds(loss, v, mu, q, target)


def one_round(query, sigma, q, target, *, adversary, d, neighbouring):
    """Bounds ``(lower, estimate, upper)`` (float64 NumPy scalars) on ε(δ = target) or
    δ(ε = target) of one round at noise multiplier ``sigma``, sampling rate ``q`` and
    dimension ``d`` (concrete inputs, checked by the caller)."""
    loss, values = losses.program_key(adversary, d if adversary == "glrt" else 1, neighbouring, 1)
    out = _one_round_program(
        np.float64(1.0 / sigma),
        np.float64(q),
        np.float64(target),
        np.float64(values[0]),
        loss=loss,
        query=query,
    )
    return tuple(np.float64(v) for v in jax.device_get(out))
