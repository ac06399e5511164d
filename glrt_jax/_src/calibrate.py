"""Noise calibration: σ ↔ ε inversion for NPO and GLRT, jittable and differentiable.

This module owns the front-ends: :func:`noise_multiplier`, :func:`for_delta`,
:func:`max_sampling_rate`, :func:`max_steps` and :func:`calibrate` (both adversaries
side by side, :class:`Calibration`). They validate their arguments, choose the
accountant and the initial guess, and hand one problem to the solve of
:mod:`glrt_jax._src.calibration_solve` (bracketed Newton on ``log σ``, implicit
derivatives, jit and vmap; its docstring describes the solver).

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
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from glrt_jax._src import composition, profile, programs, solvers
from glrt_jax._src.calibration_solve import (
    Problem,
    f64,
    glrt_log_sigma,
    make_theta,
    npo_sigma_of_glrt,
    solve,
)
from glrt_jax._src.composition import validate_sizes
from glrt_jax._src.formatting import rounded
from glrt_jax._src.validation import (
    ADVERSARIES,
    NEIGHBOURINGS,
    THREAT_MODELS,
    check_choice,
    check_range,
    check_x64,
    is_traced,
)

__all__ = [
    "Calibration",
    "calibrate",
    "for_delta",
    "max_sampling_rate",
    "max_steps",
    "noise_multiplier",
]


# ---------------------------------------------------------------------------
# Validation and initial guesses
# ---------------------------------------------------------------------------


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
        if is_traced(sampling_rate) or np.any(np.asarray(sampling_rate) != 1.0):
            raise ValueError(
                "threat_model='shared' (Theorem 2) covers releases without subsampling: "
                f"sampling_rate must be 1, got {sampling_rate!r}; use threat_model='per_round'"
            )
        if neighbouring != "add_remove":
            raise ValueError(
                "threat_model='shared' supports neighbouring='add_remove' only; "
                f"got neighbouring={neighbouring!r}"
            )
        return True
    return (
        adversary == "npo"
        and neighbouring == "add_remove"
        and not is_traced(sampling_rate)
        and np.all(np.asarray(sampling_rate) == 1.0)
    )


@jax.jit  # (one compiled program, not one per operation, on first use)
def _log_sigma_guess(eps, delta, steps, q):
    """Rough log σ: the analytic one-round bound, amplified by the CLT of subsampling."""
    eps = jnp.maximum(f64(eps), 1e-3)
    dl = jnp.minimum(f64(delta), 0.5)
    mu = eps / jnp.sqrt(2.0 * jnp.log(1.25 / dl) + 2.0 * eps)  # μ-GDP budget (approx.)
    return -0.5 * jnp.log(jnp.log1p(mu * mu / (f64(q) ** 2 * steps)))


@jax.jit
def _log_rate_guess(eps, delta, steps, sigma):
    """Rough −log q from the CLT relation q ≈ μ / √(N (e^{1/σ²} − 1))."""
    mu = jnp.maximum(f64(eps), 1e-3) / jnp.sqrt(2.0 * jnp.log(1.25 / jnp.minimum(f64(delta), 0.5)))
    q = mu / jnp.sqrt(steps * jnp.expm1(jnp.minimum(1.0 / f64(sigma) ** 2, 700.0)))
    return -jnp.log(jnp.minimum(q, 0.5))


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
    problem = Problem(
        quantity,
        adversary,
        0 if closed else int(d),
        neighbouring,
        closed,
        0 if closed else (points or jit_b),
        0 if closed else (nodes or jit_j),
        int(max_iter),
    )
    theta = make_theta(target, other, sampling_rate, steps, d, tol, rtol)
    if sigma_bounds is not None:
        lo, hi = sigma_bounds
        check_range("sigma_bounds[0]", lo, lo=0.0, lo_open=True)
        check_range("sigma_bounds[1]", hi, lo=0.0, lo_open=True)
        if not is_traced(lo, hi) and not lo < hi:
            raise ValueError(f"sigma_bounds must satisfy lo < hi, got {sigma_bounds!r}")
        sigma_bounds = (jnp.log(f64(lo)), jnp.log(f64(hi)))
        if not is_traced(*sigma_bounds):
            sigma_bounds = tuple(float(v) for v in sigma_bounds)
    eps, delta = (target, other) if quantity == "sigma_for_epsilon" else (other, target)
    guess = _log_sigma_guess(eps, delta, int(steps), sampling_rate)
    if adversary == "glrt":
        guess = glrt_log_sigma(guess, d, steps, threat_model)
    return jnp.exp(solve(problem, theta, sigma_bounds, guess, tol, auto))


@programs.query
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

    Solves ``ε(σ) = ε*(1 − rtol/2)`` by bracketed Newton on ``log σ`` (see
    :mod:`glrt_jax._src.calibration_solve`) and returns σ with
    ``ε*(1 − rtol) ≤ ε(σ) ≤ ε*``, where ε is the accountant's certified upper bound
    (never an underestimate).

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


@programs.query
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
      steps, sampling_rate, d, adversary, threat_model, neighbouring: as in
        :func:`noise_multiplier`.
      sigma_bounds, rtol, tol, points, nodes, max_iter: as in :func:`noise_multiplier`
        (``rtol`` is the gap in ``log δ``).

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


@programs.query
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
    problem = Problem(
        "q_for_epsilon",
        adversary,
        int(d),
        neighbouring,
        False,
        points or jit_b,
        nodes or jit_j,
        int(max_iter),
    )
    theta = make_theta(target_epsilon, delta, noise_multiplier, steps, d, tol, rtol)
    bounds = None
    if rate_bounds is not None:
        q_lo, q_hi = rate_bounds
        check_range("rate_bounds[0]", q_lo, lo=0.0, hi=1.0, lo_open=True)
        check_range("rate_bounds[1]", q_hi, lo=0.0, hi=1.0, lo_open=True)
        bounds = (-jnp.log(f64(q_hi)), -jnp.log(f64(q_lo)))
        if not is_traced(*bounds):
            bounds = tuple(float(v) for v in bounds)
    sigma_npo = noise_multiplier
    if adversary == "glrt":  # the NPO σ as strong as the GLRT at σ
        sigma_npo = npo_sigma_of_glrt(noise_multiplier, d)
    guess = _log_rate_guess(target_epsilon, delta, int(steps), sigma_npo)
    auto = points is None and nodes is None
    return jnp.exp(-solve(problem, theta, bounds, guess, tol, auto))


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


@programs.query
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
    return solvers.largest_fitting(fits, 1, int(limit))


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
        """Markdown table of the two adversaries.

        Printed on the safe side (:func:`glrt_jax._src.formatting.rounded`): the noise
        multipliers rounded up to six decimals (more noise, a smaller ε: the printed σ
        still meets the target) and each ε, the certified upper bound at the exact σ,
        rounded up to nine significant digits.
        """
        rows = ["| adversary | noise multiplier | epsilon at it | delta |", "|---|---|---|---|"]
        for name, sigma, eps in (
            ("NPO (Gaussian DP)", self.noise_multiplier_npo, self.epsilon_npo),
            (f"GLRT (d = {self.d})", self.noise_multiplier_glrt, self.epsilon_glrt),
        ):
            sigma = rounded(sigma, 6, direction="up", fixed=True)
            eps = rounded(eps, 9, direction="up")
            rows.append(f"| {name} | {sigma} | {eps} | {self.delta:.3g} |")
        return "\n".join(rows)

    def to_dict(self) -> dict:
        """Plain-dict export (JSON-serialisable)."""
        return dataclasses.asdict(self)


def _achieved_epsilon(sigma, delta, steps, q, d, adversary, threat_model, neighbouring, tol):
    return _epsilon_of_steps(
        0.0, delta, sigma, q, steps, d, adversary, neighbouring, tol, threat_model
    )


@programs.query
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
