"""Noise calibration: σ ↔ ε inversion for NPO and GLRT, jittable and differentiable.

What is solved
--------------
For a training run of ``N = steps`` rounds of the (Poisson-subsampled, rate ``q``)
Gaussian mechanism with sensitivity 1, the privacy guarantee ``ε(σ)`` at a fixed ``δ``
is decreasing in the noise multiplier ``σ`` (noise standard deviation divided by the
sensitivity, e.g. by the clipping norm in DP-SGD). :func:`noise_multiplier` returns
the smallest ``σ`` it can certify with

    ε(σ) ≤ ε*   and   ε(σ) ≥ ε*(1 − rtol)

(the solver aims at ``ε*(1 − rtol/2)``, so re-evaluating ε at the returned σ keeps a
margin). :func:`for_delta` does the same for a target ``δ*`` at fixed ``ε`` (gap
``rtol`` in ``log δ``), :func:`max_sampling_rate` finds the largest ``q`` and
:func:`max_steps` the most rounds that fit a budget.

Accountants (which ``ε(σ)``):

* ``threat_model="per_round"`` (default): independent rounds, each seen on its own
  (DP-SGD). NPO is classical Gaussian DP; GLRT is the per-round adversary that sees
  ``‖y_i‖²``. Without subsampling the NPO case has the closed form ``μ = √N/σ``
  (:func:`glrt_jax.profile.epsilon`); everything else uses the certified upper
  bound of the composition engine (:func:`glrt_jax.accountant.schedule_epsilon`), whose
  cost does not depend on N: one compiled program serves every N.
* ``threat_model="shared"``: the ``N`` releases share one unknown direction (paper,
  Theorem 2): ``λ = N/σ²`` in the closed forms of :mod:`glrt_jax.profile`. No
  subsampling.

Solver
------
With ``u = log σ`` (``u = −log q`` for the sampling rate) the residual
``g(u) = ε(e^u) − ε*(1 − rtol/2)`` is decreasing; :func:`glrt_jax._src.solvers.find_root`
(bracketed, safeguarded Newton with forward-mode slopes) returns the smallest ``u``
found with ``g ≤ 0`` once ``g ≥ −rtol·ε*/4``. The engine's certified bound can jump by
up to about its ``tol`` where its internal choices (tilt, window) change with σ; a root
at such a jump ends with a bracket narrower than 1e-12 in ``u`` and the safe end
returned (then the gap to the target is the jump, at most about ``tol·ε*``). This is a
one-dimensional root, so no optimiser library is involved.

Derivatives of the returned σ do not flow through the loop: the solver's ``custom_jvp``
applies the implicit function theorem to ``g(u, θ) = 0``,
``du/dθ = −(∂g/∂θ)/(∂g/∂u)``, for θ = target ε (or δ), δ (or ε) and ``q`` (or σ).

jit and vmap
------------
Everything is jittable and vmappable. Eagerly, the engine's sizes (per-round points and
frequency nodes) are chosen for ``tol`` at the solution (re-solved if the solution asks
for other sizes than the guess did) and the search interval is widened until it holds
the root. Under jit the sizes are :data:`glrt_jax.accountant.JIT_SIZES` unless
``points``/``nodes`` are given, the interval is ``sigma_bounds`` (default: a factor 55
either side of a CLT guess), and failures (no σ in the interval, non-convergence,
invalid input) give NaN instead of an error.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np

from glrt_jax._src import composition, profile, solvers
from glrt_jax._src.composition import validate_sizes
from glrt_jax._src.validation import (
    ADVERSARIES,
    NEIGHBOURINGS,
    THREAT_MODELS,
    check_choice,
    check_range,
    check_x64,
)

__all__ = [
    "Calibration",
    "calibrate",
    "for_delta",
    "max_sampling_rate",
    "max_steps",
    "noise_multiplier",
]

# Half-width of the default search interval in log σ (or −log q), and how often an eager
# search moves it before giving up.
_HALF_WIDTH = 4.0
_MAX_MOVES = 6


# ---------------------------------------------------------------------------
# Problems: residual g(u, θ) for each quantity and accountant
# ---------------------------------------------------------------------------


class _Problem(NamedTuple):
    """Static description of one calibration problem (hashable: shapes the program)."""

    quantity: str  # "sigma_for_epsilon", "sigma_for_delta", "q_for_epsilon"
    adversary: str
    d: int  # static for the engine (0 for the closed forms, where d is data)
    neighbouring: str
    closed: bool  # closed forms vs the composition engine
    points: int
    nodes: int
    max_iter: int


def _residual(problem: _Problem, u, theta):
    """g(u, θ): decreasing in u; the solution is its root.

    θ = (target, other, knob, steps, d, tol, rtol), all float64 scalars (data, so that
    one compilation serves every N, d, tolerance).
    """
    target, other, knob, steps, d, tol, rtol = theta
    if problem.quantity == "q_for_epsilon":
        sigma, q = knob, jnp.exp(-u)
    else:
        sigma, q = jnp.exp(u), knob
    if problem.closed:
        mu = jnp.sqrt(steps) / sigma
    else:
        kw = dict(
            adversary=problem.adversary,
            d=problem.d,
            neighbouring=problem.neighbouring,
            B=problem.points,
            J=problem.nodes,
        )
        phases = ((1.0 / sigma)[None], q[None], steps.astype(jnp.int64)[None])
    if problem.quantity == "sigma_for_delta":
        aim = jnp.log(target) - 0.5 * rtol
        if problem.closed:
            if problem.adversary == "npo":
                val = profile._npo_log_delta(other, mu)
            else:
                val = profile._glrt_log_delta(other, mu * mu, d)
        else:
            bounds, _ = composition.compose_query(*phases, other, tol, query="delta", **kw)
            val = jnp.log(bounds.upper)
        return val - aim
    aim = target * (1.0 - 0.5 * rtol)
    if problem.closed:
        log_delta = jnp.log(other)
        if problem.adversary == "npo":
            val = profile._npo_epsilon(log_delta, mu)
        else:
            val = profile._glrt_epsilon(log_delta, mu, d)
    else:
        val = composition.compose_query(*phases, other, tol, query="epsilon", **kw)[0].upper
    return val - aim


def _theta(target, other, knob, steps, d, tol, rtol):
    """The data of :func:`_residual`, as float64 scalars (``steps``, ``d``: integers)."""
    return tuple(_f64(v) for v in (target, other, knob, int(steps), int(d), tol, rtol))


def _ftol(problem, theta):
    """Stopping tolerance in units of g: rtol·ε*/4 (ε targets), rtol/4 (log δ targets)."""
    target, rtol = theta[0], theta[-1]
    if problem.quantity == "sigma_for_delta":
        return 0.25 * rtol
    return 0.25 * rtol * target


@functools.partial(jax.jit, static_argnums=(0,))
def _solve(problem, theta, lower, upper, u0):
    return solvers.find_root(
        functools.partial(_residual, problem),
        theta,
        lower,
        upper,
        u0,
        ftol=_ftol(problem, theta),
        max_iter=problem.max_iter,
    )


# ---------------------------------------------------------------------------
# Validation, initial guesses and the eager driver
# ---------------------------------------------------------------------------


def _is_traced(*values):
    return any(isinstance(v, jax.core.Tracer) for v in values)


def _check_common(steps, d, adversary, threat_model, neighbouring, rtol, max_iter):
    check_range("steps", steps, lo=1.0, integer=True)
    check_range("d", d, lo=1.0, integer=True)
    check_choice("adversary", adversary, ADVERSARIES)
    check_choice("threat_model", threat_model, THREAT_MODELS)
    check_choice("neighbouring", neighbouring, NEIGHBOURINGS)
    if not (isinstance(rtol, (int, float)) and 1e-14 <= rtol <= 0.1):
        raise ValueError(f"rtol must be a number in [1e-14, 0.1], got {rtol!r}")
    if not (isinstance(max_iter, int) and 1 <= max_iter <= 10_000):
        raise ValueError(f"max_iter must be an integer in [1, 10000], got {max_iter!r}")


def _is_closed(sampling_rate, adversary, threat_model, neighbouring):
    if threat_model == "shared":
        if _is_traced(sampling_rate) or np.any(np.asarray(sampling_rate) != 1.0):
            raise ValueError(
                "threat_model='shared' (Theorem 2) covers releases without subsampling: "
                f"sampling_rate must be 1, got {sampling_rate!r}; use threat_model='per_round'"
            )
        if neighbouring != "add_remove":
            raise ValueError("threat_model='shared' supports neighbouring='add_remove' only")
        return True
    return (
        adversary == "npo"
        and neighbouring == "add_remove"
        and not _is_traced(sampling_rate)
        and np.all(np.asarray(sampling_rate) == 1.0)
    )


def _f64(x):
    return jnp.asarray(x, jnp.float64)


def _log_sigma_guess(eps, delta, steps, q):
    """Rough log σ: the analytic one-round bound, amplified by the CLT of subsampling."""
    eps = jnp.maximum(_f64(eps), 1e-3)
    dl = jnp.minimum(_f64(delta), 0.5)
    mu = eps / jnp.sqrt(2.0 * jnp.log(1.25 / dl) + 2.0 * eps)  # μ-GDP budget (approx.)
    return -0.5 * jnp.log(jnp.log1p(mu * mu / (_f64(q) ** 2 * steps)))


def _log_rate_guess(eps, delta, steps, sigma):
    """Rough −log q from the CLT relation q ≈ μ / √(N (e^{1/σ²} − 1))."""
    mu = jnp.maximum(_f64(eps), 1e-3) / jnp.sqrt(
        2.0 * jnp.log(1.25 / jnp.minimum(_f64(delta), 0.5))
    )
    q = mu / jnp.sqrt(steps * jnp.expm1(jnp.minimum(1.0 / _f64(sigma) ** 2, 700.0)))
    return -jnp.log(jnp.minimum(q, 0.5))


def _concrete_or_none(value):
    """The concrete value behind ``value`` (also under eager autodiff), else None."""
    try:
        return np.asarray(jax.extend.core.concrete_or_error(None, value, ""), np.float64)
    except jax.errors.ConcretizationTypeError:
        return None


_WHAT = {
    "sigma_for_epsilon": "noise multiplier",
    "sigma_for_delta": "noise multiplier",
    "q_for_epsilon": "sampling rate",
}


def _sizes_at(problem, theta, u, tol):
    """Engine sizes that ``tol`` asks for at ``u`` (eager)."""
    _, other, knob, steps = (float(v) for v in theta[:4])
    sigma, q = (knob, math.exp(-u)) if problem.quantity == "q_for_epsilon" else (math.exp(u), knob)
    query = "delta" if problem.quantity == "sigma_for_delta" else "epsilon"
    return composition.choose_sizes(
        _f64([1.0 / sigma]),
        _f64([q]),
        jnp.asarray([int(steps)], jnp.int64),
        _f64(other),
        _f64(tol),
        adversary=problem.adversary,
        d=problem.d,
        neighbouring=problem.neighbouring,
        query=query,
    )


def _eager(problem, theta, bounds, guess, tol, auto_sizes):
    """Solve with concrete θ: move the interval until it holds the root, match sizes.

    Returns ``(u, problem)``; ``problem`` carries the sizes the answer was certified with.
    ``bounds``: the caller's interval (then never moved), or None.
    """
    fixed = bounds is not None
    lower, upper = bounds if fixed else (guess - _HALF_WIDTH, guess + _HALF_WIDTH)
    floor = 0.0 if problem.quantity == "q_for_epsilon" else -math.inf  # q ≤ 1
    lower = max(lower, floor)
    u0 = min(max(guess, lower), upper)
    if auto_sizes:
        b, j = _sizes_at(problem, theta, u0, tol)
        problem = problem._replace(points=b, nodes=j)
    for _ in range(_MAX_MOVES):
        root = _solve(problem, theta, _f64(lower), _f64(upper), _f64(u0))
        status = int(root.status)
        if status == solvers.ROOT_BELOW and not fixed and lower > floor:
            lower, upper, u0 = max(lower - 2 * _HALF_WIDTH, floor), lower + 0.1, lower
            continue
        if status == solvers.ROOT_BELOW and lower <= floor:
            return floor, problem  # q = 1 already meets the target
        if status == solvers.NO_SAFE and not fixed:
            lower, upper, u0 = upper - 0.1, upper + 2 * _HALF_WIDTH, upper
            continue
        solvers.raise_for_status(status, what=_WHAT[problem.quantity], max_iter=problem.max_iter)
        u = float(root.x)
        if not auto_sizes:
            return u, problem
        b, j = _sizes_at(problem, theta, u, tol)
        if (b, j) == (problem.points, problem.nodes):
            return u, problem
        problem = problem._replace(points=b, nodes=j)
        lower, upper, u0 = max(u - 0.5, floor), u + 0.5, u
    raise ValueError(
        f"{_WHAT[problem.quantity]}: no root found in the intervals searched "
        f"(last log-interval [{lower:.3g}, {upper:.3g}]); check the target"
    )


def _run(problem, theta, bounds, guess, tol, auto_sizes):
    """Eager when θ is concrete (errors named), else one jitted solve (NaN on failure)."""
    concrete = [_concrete_or_none(v) for v in theta]
    traced = any(c is None for c in concrete)
    if traced:
        lo, hi = bounds if bounds is not None else (guess - _HALF_WIDTH, guess + _HALF_WIDTH)
        if problem.quantity == "q_for_epsilon":
            lo = jnp.maximum(lo, 0.0)
        root = _solve(problem, theta, _f64(lo), _f64(hi), jnp.clip(guess, lo, hi))
        if problem.quantity == "q_for_epsilon":  # q = 1 already meets the target
            return jnp.where((root.status == solvers.ROOT_BELOW) & (lo <= 0.0), 0.0, root.x)
        return root.x
    for v in concrete:
        if np.ndim(v) != 0:
            raise ValueError("eager calibration takes scalars; for arrays use jax.vmap")
    theta_c = tuple(_f64(c) for c in concrete)
    guess_c = float(_concrete_or_none(guess))
    u, problem = _eager(problem, theta_c, bounds, guess_c, tol, auto_sizes)
    if problem.quantity == "q_for_epsilon" and u <= 0.0:
        return _f64(0.0)
    if not any(isinstance(v, jax.core.Tracer) for v in theta):
        return _f64(u)
    # Under eager autodiff: one more solve from the answer attaches the implicit derivatives.
    root = _solve(problem, theta, _f64(u - 1e-3), _f64(u + 1e-3), _f64(u))
    solvers.raise_for_status(root.status, what=_WHAT[problem.quantity])
    return root.x


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------


def _sigma(
    quantity,
    target,
    other,
    steps,
    sampling_rate,
    d,
    adversary,
    threat_model,
    neighbouring,
    sigma_bounds,
    rtol,
    tol,
    points,
    nodes,
    max_iter,
):
    check_x64("glrt_jax.calibrate")
    check_range("sampling_rate", sampling_rate, lo=0.0, hi=1.0, lo_open=True)
    _check_common(steps, d, adversary, threat_model, neighbouring, rtol or 1e-9, max_iter)
    validate_sizes(tol, points, nodes)
    closed = _is_closed(sampling_rate, adversary, threat_model, neighbouring)
    if rtol is None:
        rtol = 1e-9 if closed else 1e-6
    auto = not closed and points is None and nodes is None
    jit_b, jit_j = composition.JIT_SIZES
    problem = _Problem(
        quantity,
        adversary,
        0 if closed else int(d),
        neighbouring,
        closed,
        0 if closed else (points or jit_b),
        0 if closed else (nodes or jit_j),
        int(max_iter),
    )
    theta = _theta(target, other, sampling_rate, steps, d, tol, rtol)
    if sigma_bounds is not None:
        lo, hi = sigma_bounds
        check_range("sigma_bounds[0]", lo, lo=0.0, lo_open=True)
        check_range("sigma_bounds[1]", hi, lo=0.0, lo_open=True)
        if not _is_traced(lo, hi) and not lo < hi:
            raise ValueError(f"sigma_bounds must satisfy lo < hi, got {sigma_bounds!r}")
        sigma_bounds = (jnp.log(_f64(lo)), jnp.log(_f64(hi)))
        if not _is_traced(*sigma_bounds):
            sigma_bounds = tuple(float(v) for v in sigma_bounds)
    eps, delta = (target, other) if quantity == "sigma_for_epsilon" else (other, target)
    guess = _log_sigma_guess(eps, delta, int(steps), sampling_rate)
    return jnp.exp(_run(problem, theta, sigma_bounds, guess, tol, auto))


def noise_multiplier(
    target_epsilon,
    delta,
    steps: int = 1,
    sampling_rate=1.0,
    d: int = 1,
    adversary: str = "npo",
    *,
    threat_model: str = "per_round",
    neighbouring: str = "add_remove",
    sigma_bounds: tuple | None = None,
    rtol: float | None = None,
    tol: float = 1e-3,
    points: int | None = None,
    nodes: int | None = None,
    max_iter: int = 100,
) -> jax.Array:
    """Smallest noise multiplier σ (noise std / sensitivity) with ε(σ) ≤ ``target_epsilon``.

    Solves ``ε(σ) = ε*(1 − rtol/2)`` by bracketed Newton on ``log σ`` (see the module
    docstring) and returns σ with ``ε*(1 − rtol) ≤ ε(σ) ≤ ε*``, where ε is the
    accountant's certified upper bound (never an underestimate).

    Args:
      target_epsilon: ε* > 0.
      delta: δ in (0, 1).
      steps: number of rounds N ≥ 1.
      sampling_rate: Poisson sampling rate q in (0, 1] (1: every record every round).
      d: query dimension (GLRT only; NPO does not depend on it).
      adversary: ``"npo"`` (classical Gaussian DP) or ``"glrt"``.
      threat_model: ``"per_round"`` (independent rounds; DP-SGD) or ``"shared"`` (one
        shared unknown direction, paper Theorem 2; closed form, q = 1 only).
      neighbouring: ``"add_remove"`` or ``"replace_one"``.
      sigma_bounds: ``(lo, hi)`` search interval for σ; default a factor e⁴ either
        side of a CLT guess (moved eagerly until it holds the root; fixed under jit).
      rtol: relative gap of ε(σ) below the target; default 1e-9 for the closed forms
        and 1e-6 for the composition engine (whose own accuracy is ``tol``).
      tol: relative accuracy of the engine's certified ε (as in
        :func:`glrt_jax.accountant.schedule_epsilon`).
      points, nodes: the engine's sizes (:data:`glrt_jax.accountant.POINTS`,
        :data:`~glrt_jax.accountant.NODES`); default: what ``tol`` asks for at the
        answer (eager) or :data:`~glrt_jax.accountant.JIT_SIZES` (under jit).
      max_iter: most evaluations of ε(σ).

    Returns:
      σ as a float64 array. Differentiable in ``target_epsilon``, ``delta`` and
      ``sampling_rate`` (implicit function theorem). Under jit/vmap, failures
      (σ outside ``sigma_bounds``, non-convergence, invalid input) give NaN.

    Raises:
      ValueError: invalid input (named), unreachable target, non-convergence, float32
        mode.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import calibrate, profile
      >>> s = calibrate.noise_multiplier(1.0, 1e-5, steps=10)
      >>> e = float(profile.epsilon(1e-5, 10**0.5 / s))
      >>> 1.0 - 1e-9 <= e <= 1.0
      True
    """
    check_range("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    return _sigma(
        "sigma_for_epsilon",
        target_epsilon,
        delta,
        steps,
        sampling_rate,
        d,
        adversary,
        threat_model,
        neighbouring,
        sigma_bounds,
        rtol,
        tol,
        points,
        nodes,
        max_iter,
    )


def for_delta(
    target_delta,
    epsilon,
    steps: int = 1,
    sampling_rate=1.0,
    d: int = 1,
    adversary: str = "npo",
    *,
    threat_model: str = "per_round",
    neighbouring: str = "add_remove",
    sigma_bounds: tuple | None = None,
    rtol: float | None = None,
    tol: float = 1e-3,
    points: int | None = None,
    nodes: int | None = None,
    max_iter: int = 100,
) -> jax.Array:
    """Smallest noise multiplier σ with δ(ε; σ) ≤ ``target_delta`` at a fixed ε.

    The dual of :func:`noise_multiplier`: the residual is ``log δ(ε; σ) − log δ*``
    and the returned σ has ``δ*·e^{−rtol} ≤ δ(ε; σ) ≤ δ*``.

    Args:
      target_delta: δ* in (0, 1).
      epsilon: ε ≥ 0.
      steps, sampling_rate, d, adversary, threat_model, neighbouring, sigma_bounds,
        rtol, tol, points, nodes, max_iter: as in :func:`noise_multiplier` (``rtol`` is
        the gap in ``log δ``).

    Returns:
      σ; differentiable in ``target_delta``, ``epsilon`` and ``sampling_rate``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import calibrate, profile
      >>> s = calibrate.for_delta(1e-5, 1.0, steps=10)
      >>> d = float(profile.delta(1.0, 10**0.5 / s))
      >>> 1e-5 * (1 - 1e-8) <= d <= 1e-5
      True
    """
    check_range("target_delta", target_delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    check_range("epsilon", epsilon, lo=0.0)
    return _sigma(
        "sigma_for_delta",
        target_delta,
        epsilon,
        steps,
        sampling_rate,
        d,
        adversary,
        threat_model,
        neighbouring,
        sigma_bounds,
        rtol,
        tol,
        points,
        nodes,
        max_iter,
    )


def max_sampling_rate(
    target_epsilon,
    delta,
    noise_multiplier,
    steps: int,
    d: int = 1,
    adversary: str = "npo",
    *,
    neighbouring: str = "add_remove",
    rate_bounds: tuple | None = None,
    rtol: float = 1e-6,
    tol: float = 1e-3,
    points: int | None = None,
    nodes: int | None = None,
    max_iter: int = 100,
) -> jax.Array:
    """Largest Poisson sampling rate q ≤ 1 with ε(q) ≤ ``target_epsilon`` (rounds).

    Solves on ``u = −log q`` with the composition engine. Returns 1 when q = 1 already
    meets the target.

    Args:
      target_epsilon: ε* > 0. delta: δ in (0, 1). noise_multiplier: σ > 0.
      steps: rounds N ≥ 1. d, adversary, neighbouring, rtol, tol, points, nodes,
        max_iter: as in :func:`noise_multiplier`.
      rate_bounds: ``(q_lo, q_hi)`` search interval; default a factor e⁴ either side of
        a CLT guess, capped at 1.

    Returns:
      q; differentiable in ``target_epsilon``, ``delta`` and ``noise_multiplier``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import calibrate
      >>> q = calibrate.max_sampling_rate(1.0, 1e-5, noise_multiplier=1.0, steps=100)
      >>> 0.0 < float(q) < 1.0
      True
    """
    check_x64("glrt_jax.calibrate")
    check_range("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    check_range("noise_multiplier", noise_multiplier, lo=0.0, lo_open=True)
    _check_common(steps, d, adversary, "per_round", neighbouring, rtol, max_iter)
    validate_sizes(tol, points, nodes)
    jit_b, jit_j = composition.JIT_SIZES
    problem = _Problem(
        "q_for_epsilon",
        adversary,
        int(d),
        neighbouring,
        False,
        points or jit_b,
        nodes or jit_j,
        int(max_iter),
    )
    theta = _theta(target_epsilon, delta, noise_multiplier, steps, d, tol, rtol)
    bounds = None
    if rate_bounds is not None:
        q_lo, q_hi = rate_bounds
        check_range("rate_bounds[0]", q_lo, lo=0.0, hi=1.0, lo_open=True)
        check_range("rate_bounds[1]", q_hi, lo=0.0, hi=1.0, lo_open=True)
        bounds = (-jnp.log(_f64(q_hi)), -jnp.log(_f64(q_lo)))
        if not _is_traced(*bounds):
            bounds = tuple(float(v) for v in bounds)
    guess = _log_rate_guess(target_epsilon, delta, int(steps), noise_multiplier)
    auto = points is None and nodes is None
    return jnp.exp(-_run(problem, theta, bounds, guess, tol, auto))


def _epsilon_of_steps(
    target_epsilon, delta, sigma, q, n, d, adversary, neighbouring, tol, threat_model
):
    if threat_model == "shared" or (
        adversary == "npo" and q == 1.0 and neighbouring == "add_remove"
    ):
        mu = math.sqrt(n) / sigma
        if adversary == "npo":
            return float(profile.epsilon(delta, mu))
        return float(profile.epsilon(delta, mu, d, adversary="glrt"))
    bounds = composition.schedule_epsilon(
        sigma, q, n, delta, d=d, adversary=adversary, neighbouring=neighbouring, tol=tol
    )
    return float(bounds.upper)


def max_steps(
    target_epsilon: float,
    delta: float,
    noise_multiplier: float,
    sampling_rate: float = 1.0,
    d: int = 1,
    adversary: str = "npo",
    *,
    threat_model: str = "per_round",
    neighbouring: str = "add_remove",
    limit: int = 10**7,
    tol: float = 1e-3,
) -> int:
    """The most rounds N with ε(N) ≤ ``target_epsilon`` (eager; N is an integer).

    ε is increasing in N. Closed forms (NPO without subsampling, or
    ``threat_model="shared"``) and the composition engine (whose cost does not depend
    on N) are searched by doubling and bisection over integers.

    Args:
      target_epsilon: ε* > 0. delta: δ in (0, 1). noise_multiplier: σ > 0.
      sampling_rate, d, adversary, threat_model, neighbouring, tol: as in
        :func:`noise_multiplier`. limit: the largest N considered.

    Returns:
      N ≥ 1 (an int) with ε(N) ≤ ε* < ε(N + 1), or ``limit`` if that fits.

    Raises:
      ValueError: invalid input, or a single round already exceeds the budget.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import calibrate
      >>> calibrate.max_steps(1.0, 1e-5, noise_multiplier=20.0)
      28
    """
    check_x64("glrt_jax.calibrate")
    check_range("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    check_range("noise_multiplier", noise_multiplier, lo=0.0, lo_open=True)
    check_range("sampling_rate", sampling_rate, lo=0.0, hi=1.0, lo_open=True)
    check_range("limit", limit, lo=1.0, integer=True)
    _check_common(1, d, adversary, threat_model, neighbouring, 1e-9, 1)
    validate_sizes(tol, None, None)
    _is_closed(sampling_rate, adversary, threat_model, neighbouring)
    args = (float(target_epsilon), float(delta), float(noise_multiplier), float(sampling_rate))

    def fits(n):
        eps = _epsilon_of_steps(*args, n, int(d), adversary, neighbouring, tol, threat_model)
        return eps <= float(target_epsilon)

    if not fits(1):
        raise ValueError(
            f"unreachable target: a single round with noise_multiplier={noise_multiplier!r} "
            f"already exceeds target_epsilon={target_epsilon!r}"
        )
    good, bad = 1, None
    while bad is None:  # doubling
        n = min(2 * good, int(limit))
        if n == good:
            return good
        if fits(n):
            good = n
        else:
            bad = n
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good


# ---------------------------------------------------------------------------
# Both adversaries side by side
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Noise multipliers for NPO and GLRT at the same (ε*, δ), with the ε each gives."""

    target_epsilon: float
    delta: float
    steps: int
    sampling_rate: float
    d: int
    threat_model: str
    neighbouring: str
    noise_multiplier_npo: float
    noise_multiplier_glrt: float
    epsilon_npo: float
    epsilon_glrt: float

    def table(self) -> str:
        """Markdown table of the two adversaries."""
        return "\n".join(
            [
                "| adversary | noise multiplier | epsilon at it | delta |",
                "|---|---|---|---|",
                f"| NPO (Gaussian DP) | {self.noise_multiplier_npo:.6f} "
                f"| {self.epsilon_npo:.9g} | {self.delta:.3g} |",
                f"| GLRT (d = {self.d}) | {self.noise_multiplier_glrt:.6f} "
                f"| {self.epsilon_glrt:.9g} | {self.delta:.3g} |",
            ]
        )

    def to_dict(self) -> dict:
        """Plain-dict export (JSON-serialisable)."""
        return dataclasses.asdict(self)


def _achieved_epsilon(sigma, delta, steps, q, d, adversary, threat_model, neighbouring, tol):
    return _epsilon_of_steps(
        0.0, delta, sigma, q, steps, d, adversary, neighbouring, tol, threat_model
    )


def calibrate(
    target_epsilon: float,
    delta: float,
    steps: int = 1,
    sampling_rate: float = 1.0,
    d: int = 1,
    *,
    threat_model: str = "per_round",
    neighbouring: str = "add_remove",
    rtol: float | None = None,
    tol: float = 1e-3,
) -> Calibration:
    """Calibrate σ for NPO and for GLRT at the same target, and report both (eager).

    Args: as in :func:`noise_multiplier`.

    Returns:
      A :class:`Calibration`; each ε is re-evaluated independently of the solver at
      the returned σ (the accountant's certified upper bound).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import calibrate
      >>> c = calibrate.calibrate(1.0, 1e-5, steps=10, threat_model="shared", d=10)
      >>> c.noise_multiplier_glrt < c.noise_multiplier_npo
      True
    """
    kw = dict(threat_model=threat_model, neighbouring=neighbouring, tol=tol)
    sig = {}
    eps = {}
    for adv in ADVERSARIES:
        s = float(
            noise_multiplier(target_epsilon, delta, steps, sampling_rate, d, adv, rtol=rtol, **kw)
        )
        sig[adv] = s
        eps[adv] = _achieved_epsilon(
            s,
            float(delta),
            int(steps),
            float(sampling_rate),
            int(d),
            adv,
            threat_model,
            neighbouring,
            tol,
        )
    return Calibration(
        target_epsilon=float(target_epsilon),
        delta=float(delta),
        steps=int(steps),
        sampling_rate=float(sampling_rate),
        d=int(d),
        threat_model=threat_model,
        neighbouring=neighbouring,
        noise_multiplier_npo=sig["npo"],
        noise_multiplier_glrt=sig["glrt"],
        epsilon_npo=eps["npo"],
        epsilon_glrt=eps["glrt"],
    )
