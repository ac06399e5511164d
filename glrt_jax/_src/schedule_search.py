"""Noise-multiplier schedules: the σ_1..σ_K of K phases that spend an (ε, δ) budget best.

What is solved
--------------
A training run has K phases; phase k is ``n_k = steps[k]`` rounds of the
Poisson-subsampled Gaussian mechanism at sampling rate ``q_k`` (both given) and noise
multiplier ``σ_k`` (to be chosen). With ``ε(σ)`` the composition engine's certified upper
bound on ε at δ (:func:`glrt_jax.accountant.schedule_epsilon`, NPO or GLRT), the search
solves

    minimise  U(σ) = Σ_k w_k n_k σ_k²   subject to   ε(σ) ≤ ε*,

a weighted total noise variance (the caller's weights ``w_k``, uniform by default) under
the privacy budget. ``U`` increases and ``ε`` decreases with every σ_k, so the constraint
is active at the optimum: ε(σ) = ε*.

When a non-constant schedule wins. Without subsampling (q = 1) the NPO ε depends on the
schedule only through ``μ² = Σ_k n_k/σ_k²`` (Gaussian DP), and the Lagrange conditions of
``min Σ w_k n_k σ_k²`` s.t. ``Σ n_k/σ_k² = μ*²`` give ``σ_k² ∝ w_k^{-1/2}``, with

    U* = (Σ_k n_k √w_k)² / μ*²   against   U_const = (Σ_k n_k)(Σ_k w_k n_k) / μ*²

for the constant schedule (Cauchy–Schwarz: ``U* ≤ U_const``, equal iff the w_k are equal).
So with uniform weights and one sampling rate the constant schedule is optimal and there
is nothing to gain; the search pays off with non-uniform weights (e.g. noise late in
training costing more: w_k increasing) or heterogeneous sampling rates. Weights can also
carry the conversion to the noise actually seen by the model, e.g. ``w_k ∝ 1/q_k²`` for
the variance of a DP-SGD gradient averaged over an expected batch of ``q_k`` times the
data set.

Method: feasible descent on the constraint surface
--------------------------------------------------
Parametrise ``σ_k = exp(v_k + s)``: a shape ``v`` (what the optimiser moves) and a common
log-scale ``s``. Because ε is decreasing in ``s``, every shape has exactly one
``s(v)`` with ``ε(e^{v + s(v)}) = ε*``; the search minimises the *reduced* objective

    F(v) = log U(e^{v + s(v)}),

so every iterate is feasible and no penalty weight or multiplier has to be tuned. Its
gradient is exact (implicit function theorem, ``ds/dv = −∇ε/(1ᵀ∇ε)`` with ``∇ = ∂/∂ log σ``):

    ∇F = ∇log U − (1ᵀ∇log U / 1ᵀ∇ε) ∇ε,      ∇_k log U = 2 w_k n_k σ_k² / U,

the Lagrangian gradient with the multiplier of the constraint; it sums to zero (``F`` does
not change when ``v`` moves along ``1``). ``∇ε`` comes from :func:`jax.value_and_grad` of the
engine's certified upper bound (its implicit derivative; no finite differences), one
compiled program at the traced sizes :data:`glrt_jax.accountant.JIT_SIZES` for the whole
search. Per iteration:

1. ``s(v)`` by safeguarded Newton in ``s`` (slope ``1ᵀ∇ε`` from the same call), warm-started
   from the first-order prediction; the last Newton step is applied to ``U`` in closed form,
   so ``F`` is exact to second order in the residual.
2. A direction from an optax optimiser fed with ``∇F`` — by default the L-BFGS direction
   (:func:`optax.lbfgs` without its own line search: quasi-Newton curvature from the
   gradient history), or any ``optax.GradientTransformation`` the caller passes (e.g.
   ``optax.adam``).
3. A backtracking (Armijo) line search on ``F`` along that direction, each trial point put
   back on the constraint surface by step 1. So ``F`` decreases monotonically.

It stops when ``max_k |∂F/∂v_k| ≤ gtol``, when no step decreases ``F`` any more, or after
``max_iter`` iterations.

The answer is certified eagerly. The final shape and the constant schedule (the baseline)
are each rescaled by a common factor, found by a bracketed secant/bisection on
``log`` scale on the *eager* certified bound at ``tol`` (what
:func:`~glrt_jax.accountant.schedule_epsilon` reports), to
``ε*(1 − rtol) ≤ ε ≤ ε*`` — or to the safe end of a bracket narrower than 1e-12 where the
bound jumps. The utility gain is reported between these two certified schedules.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from glrt_jax._src import composition, programs
from glrt_jax._src.composition import validate_sizes
from glrt_jax._src.shapes import pad_phases
from glrt_jax._src.validation import (
    ADVERSARIES,
    NEIGHBOURINGS,
    check_choice,
    check_int,
    check_range,
    check_x64,
)

__all__ = ["OptimizedSchedule", "optimize_noise_multipliers"]

_WHAT = "glrt_jax.schedules.optimize_noise_multipliers"
# Newton on the common log-scale: relative residual of ε at which it stops (the last
# step is then applied to U in closed form), most engine calls, longest step.
_SCALE_FTOL = 1e-7
_SCALE_EVALS = 60
_SCALE_STEP = 2.0
# Line search: sufficient-decrease constant, longest move of one log σ_k, halvings.
_ARMIJO = 1e-4
_MAX_MOVE = 1.0
_HALVINGS = 30
# Eager certification: most engine calls.
_CERTIFY_EVALS = 60


@dataclasses.dataclass(frozen=True)
class OptimizedSchedule:
    """The answer of :func:`optimize_noise_multipliers`.

    Attributes:
      noise_multiplier: the schedule σ_1..σ_K (float64 array of shape (K,)).
      epsilon: its certified ε at ``delta`` (eager upper bound at ``tol``; ≤ the target).
      utility: ``Σ_k w_k steps_k σ_k²`` of the schedule.
      baseline_noise_multiplier: the constant σ that meets the same target (same check).
      baseline_epsilon: the certified ε of the constant schedule.
      baseline_utility: its utility ``σ² Σ_k w_k steps_k``.
      gain: ``1 − utility / baseline_utility``, the share of the weighted noise variance
        the schedule saves (0: the constant schedule is already optimal).
      history: the utility at each iterate of the search (float64 array; entry 0 is the
        constant schedule), on the constraint surface of the traced-size engine.
      iterations: optimiser steps taken.
      engine_calls: evaluations of ε and ∇ε on the traced-size engine (scale solves and
        line-search trials included; the eager certification is not counted).
      converged: whether the reduced gradient fell below ``gtol`` (or no step could
        decrease the utility any more) within ``max_iter`` steps.
      target_epsilon, delta: the budget.
    """

    noise_multiplier: np.ndarray
    epsilon: float
    utility: float
    baseline_noise_multiplier: float
    baseline_epsilon: float
    baseline_utility: float
    gain: float
    history: np.ndarray
    iterations: int
    engine_calls: int
    converged: bool
    target_epsilon: float
    delta: float


# ---------------------------------------------------------------------------
# The engine: ε and its gradient in log σ (one compiled program per bucket of K and options)
# ---------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("adversary", "d", "neighbouring"))
def _epsilon_and_grad(log_sigma, q, n, delta, tol, *, adversary, d, neighbouring):
    """(certified ε upper bound, its gradient in log σ) at :data:`JIT_SIZES`."""

    def upper(u):
        return composition.schedule_epsilon(
            jnp.exp(u), q, n, delta, d=d, adversary=adversary, neighbouring=neighbouring, tol=tol
        ).upper

    return jax.value_and_grad(upper)(log_sigma)


@dataclasses.dataclass
class _Problem:
    target: float
    delta: float
    steps: np.ndarray  # int64 (K,)
    sampling_rate: np.ndarray  # float64 (K,)
    weights: np.ndarray  # float64 (K,)
    d: int
    adversary: str
    neighbouring: str
    tol: float
    evals: int = 0

    def probe(self, u):
        """(ε, ∇ε) at log σ = u on the traced-size engine, as Python/numpy floats."""
        self.evals += 1
        # Padded as the engine pads traced phases (copies of phase 0 composed 0 times), so
        # that every K of one bucket shares the compiled program (answers equal to rounding).
        u_p, q_p, n_p = pad_phases(np.asarray(u, np.float64), self.sampling_rate, self.steps)
        eps, grad = _epsilon_and_grad(
            jnp.asarray(u_p),
            jnp.asarray(q_p),
            jnp.asarray(n_p),
            jnp.asarray(self.delta, jnp.float64),
            jnp.asarray(self.tol, jnp.float64),
            adversary=self.adversary,
            d=self.d,
            neighbouring=self.neighbouring,
        )
        return float(eps), np.asarray(grad, np.float64)[: self.steps.shape[0]]

    def certified(self, u):
        """The eager certified upper bound at ``tol`` (what the accountant reports)."""
        return float(
            composition.schedule_epsilon(
                np.exp(u),
                self.sampling_rate,
                self.steps,
                self.delta,
                d=self.d,
                adversary=self.adversary,
                neighbouring=self.neighbouring,
                tol=self.tol,
            ).upper
        )

    def utility(self, u):
        return float(np.sum(self.weights * self.steps * np.exp(2.0 * u)))


@dataclasses.dataclass(frozen=True)
class _Feasible:
    """A shape v on the constraint surface: its scale, F, ∇F and the engine's slope."""

    v: np.ndarray
    s: float  # Newton-corrected log-scale: ε(e^{v+s}) = ε* to second order
    f: float  # log U(e^{v+s})
    grad: np.ndarray  # ∇F (sums to 0)
    eps_grad: np.ndarray  # ∇ε at the last engine call


def _feasible(prob: _Problem, v, s, g, slope) -> _Feasible:
    u = v + s
    a = prob.weights * prob.steps * np.exp(2.0 * u)
    util = float(np.sum(a))
    grad = 2.0 * a / util - 2.0 * g / slope  # ∇log U − (1ᵀ∇log U / 1ᵀ∇ε) ∇ε, 1ᵀ∇log U = 2
    return _Feasible(v, s, math.log(util), grad - grad.mean(), g)


def _solve_scale(prob: _Problem, v: np.ndarray, s0: float) -> _Feasible:
    """The log-scale s with ε(e^{v+s}) = ε* (safeguarded Newton on the traced-size engine).

    Stops at a relative residual of :data:`_SCALE_FTOL` and applies one more Newton step
    in closed form; where the bound jumps across ε* it returns the safe end of a bracket
    narrower than 1e-13.
    """
    lo, hi = -math.inf, math.inf  # lo: ε > ε* there (too little noise); hi: ε ≤ ε*
    safe = None  # (s, ∇ε, slope) at hi
    s = s0
    for _ in range(_SCALE_EVALS):
        eps, g = prob.probe(v + s)
        slope = float(np.sum(g))  # dε/ds < 0
        ok = math.isfinite(eps) and math.isfinite(slope) and slope < 0.0
        if not math.isfinite(eps) or eps > prob.target:
            lo = max(lo, s)
        elif s < hi:
            hi = s
            safe = (s, g, slope) if ok else safe
        r = eps - prob.target
        if ok and abs(r) <= _SCALE_FTOL * prob.target:
            return _feasible(prob, v, s - r / slope, g, slope)  # + one Newton step
        if hi - lo < 1e-13 and safe is not None:
            return _feasible(prob, v, *safe)
        step = -r / slope if ok else (1.0 if not math.isfinite(eps) or r > 0 else -1.0)
        s_new = s + max(-_SCALE_STEP, min(_SCALE_STEP, step))
        if not lo < s_new < hi:  # outside the bracket: bisect, or walk out of one side
            if math.isfinite(lo) and math.isfinite(hi):
                s_new = 0.5 * (lo + hi)
            else:
                s_new = lo + _SCALE_STEP if math.isfinite(lo) else hi - _SCALE_STEP
        s = s_new
    raise ValueError(
        f"{_WHAT}: no common noise scale meets target_epsilon={prob.target!r} on the "
        f"schedule shape {np.exp(v).tolist()} (the engine gave ε = {eps!r}); "
        "check the target and the weights"
    )


def _initial_log_sigma(target, delta, steps, q):
    """A constant log σ near the NPO answer: μ-GDP budget and the CLT of subsampling."""
    eps = max(target, 1e-3)
    mu = eps / math.sqrt(2.0 * math.log(1.25 / min(delta, 0.5)) + 2.0 * eps)
    return -0.5 * math.log(math.log1p(mu * mu / float(np.sum(steps * q * q))))


def _certify(prob: _Problem, v, s0, slope, rtol):
    """(s, ε): the common log-scale with ε*(1 − rtol) ≤ ε(e^{v+s}) ≤ ε* (eager bound).

    Bracketed secant/Newton on s (slope dε/ds from the traced engine to start), bisection
    when a step leaves the bracket; the safe end of a bracket narrower than 1e-12 where
    the bound jumps.
    """
    target = prob.target
    aim, floor = target * (1.0 - 0.5 * rtol), target * (1.0 - rtol)
    safe = unsafe = None  # (s, ε): smallest s seen with ε ≤ ε*, largest with ε > ε*
    s = s0
    for _ in range(_CERTIFY_EVALS):
        eps = prob.certified(v + s)
        if math.isfinite(eps) and eps <= target:
            if eps >= floor:
                return s, eps
            if safe is None or s < safe[0]:
                safe = (s, eps)
        elif unsafe is None or s > unsafe[0]:
            unsafe = (s, eps)
        if safe is not None and unsafe is not None:
            if safe[0] - unsafe[0] < 1e-12:
                return safe
            if math.isfinite(unsafe[1]):
                slope = (safe[1] - unsafe[1]) / (safe[0] - unsafe[0])
        if math.isfinite(eps) and slope < 0.0:
            s_new = s + (eps - aim) / (-slope)
        else:
            s_new = s + 1.0
        lo = unsafe[0] if unsafe is not None else -math.inf
        hi = safe[0] if safe is not None else math.inf
        if not lo < s_new < hi:
            s_new = 0.5 * (lo + hi) if math.isfinite(lo) and math.isfinite(hi) else s_new
            if not lo < s_new < hi:
                s_new = lo + 1.0 if math.isfinite(lo) else hi - 1.0
        s = s_new
    if safe is not None:
        return safe
    raise ValueError(
        f"{_WHAT}: the eager certified bound could not be brought to "
        f"target_epsilon={target!r} by a common scale"
    )


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


def _as_phases(name, value, k, *, lo, hi=None, lo_open=True):
    arr = np.asarray(value, dtype=np.float64) if _numeric(value) else None
    if arr is None or arr.ndim > 1 or (arr.ndim == 1 and arr.size != k):
        shape = None if arr is None else arr.shape
        raise ValueError(
            f"{name} must be a number or a 1-D array of one entry per phase (K = {k}); "
            f"got {value!r} (shape {shape})"
        )
    check_range(name, arr, lo=lo, hi=hi, lo_open=lo_open)
    return np.broadcast_to(arr, (k,)).astype(np.float64)


def _numeric(value):
    try:
        return np.asarray(value).dtype.kind in "biuf"
    except (TypeError, ValueError):
        return False


def _validate(target_epsilon, delta, steps, sampling_rate, d, adversary, kw):
    check_x64(_WHAT)
    check_range("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    if not _numeric(steps) or np.ndim(steps) > 1 or np.size(steps) < 1:
        raise ValueError(
            f"steps must be a 1-D array of positive integers, one per phase; got {steps!r}"
        )
    st = np.atleast_1d(np.asarray(steps, dtype=np.float64))
    check_range("steps", st, lo=1.0, integer=True)
    k = st.size
    q = _as_phases("sampling_rate", sampling_rate, k, lo=0.0, hi=1.0)
    weights = kw["weights"]
    w = np.ones(k) if weights is None else _as_phases("weights", weights, k, lo=0.0)
    d = check_int("d", d, lo=1)
    check_choice("adversary", adversary, ADVERSARIES)
    check_choice("neighbouring", kw["neighbouring"], NEIGHBOURINGS)
    validate_sizes(kw["tol"], None, None)
    rtol = kw["rtol"]
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not 1e-9 <= rtol <= 0.1:
        raise ValueError(f"rtol must be a number in [1e-09, 0.1]; got {rtol!r}")
    gtol = kw["gtol"]
    if isinstance(gtol, bool) or not isinstance(gtol, (int, float)) or not gtol > 0.0:
        raise ValueError(f"gtol must be a number > 0; got {gtol!r}")
    max_iter = check_int("max_iter", kw["max_iter"], lo=0)
    opt = kw["optimizer"]
    if opt is not None and not (
        callable(getattr(opt, "init", None)) and callable(getattr(opt, "update", None))
    ):
        raise ValueError(f"optimizer must be an optax.GradientTransformation; got {opt!r}")
    return _Problem(
        target=float(target_epsilon),
        delta=float(delta),
        steps=st.astype(np.int64),
        sampling_rate=q,
        weights=w,
        d=d if adversary == "glrt" else 1,  # NPO does not depend on d: one program
        adversary=adversary,
        neighbouring=kw["neighbouring"],
        tol=float(kw["tol"]),
    ), (float(rtol), float(gtol), max_iter)


# ---------------------------------------------------------------------------
# The search
# ---------------------------------------------------------------------------


@programs.query
def optimize_noise_multipliers(
    target_epsilon,
    delta,
    steps,
    sampling_rate=1.0,
    d: int = 1,
    adversary: str = "npo",
    *,
    weights=None,
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
    rtol: float = 1e-4,
    max_iter: int = 100,
    gtol: float = 1e-5,
    optimizer=None,
) -> OptimizedSchedule:
    """Noise multipliers σ_1..σ_K of K phases minimising ``Σ w_k steps_k σ_k²`` at ε ≤ ε*.

    Phase k is ``steps[k]`` rounds at sampling rate ``sampling_rate[k]`` (both given);
    the search chooses its noise multiplier σ_k so that the weighted total noise variance
    ``U(σ) = Σ_k w_k steps_k σ_k²`` is smallest while the certified ε at ``delta``
    (:func:`glrt_jax.accountant.schedule_epsilon`, per round, for ``adversary``) stays
    at or below ``target_epsilon``.

    Method (details in :mod:`glrt_jax._src.schedule_search`): with ``σ = exp(v + s)`` the
    common log-scale ``s(v)`` is solved so that ε = ε* exactly, and the optimiser
    descends ``log U`` on that constraint surface with its exact reduced gradient
    ``∇log U − (1ᵀ∇log U / 1ᵀ∇ε) ∇ε`` (``∇ε`` by :func:`jax.value_and_grad` of the
    engine's certified bound, implicit derivative; no finite differences). Directions
    come from optax (L-BFGS by default), steps from a backtracking line search whose
    trial points are all feasible. The answer and the constant-σ baseline are then
    rescaled by a common factor until the *eager* certified bound at ``tol`` lies in
    ``[ε*(1 − rtol), ε*]``.

    When it pays: with uniform weights and one sampling rate the constant schedule is
    optimal (for q = 1 exactly: Gaussian DP composes ``μ² = Σ steps_k/σ_k²``, and
    minimising ``Σ w_k steps_k σ_k²`` at fixed μ gives ``σ_k² ∝ w_k^{-1/2}``); a
    non-constant schedule wins with non-uniform weights (e.g. noise late in training
    costing more, ``w`` increasing) or different sampling rates per phase.

    Args:
      target_epsilon: ε* > 0.
      delta: δ in (0, 1).
      steps: rounds per phase, a 1-D array of K positive integers.
      sampling_rate: Poisson sampling rate q in (0, 1] per phase (scalar or shape (K,)).
      d: query dimension seen by the GLRT adversary (ignored by NPO).
      adversary: ``"npo"`` or ``"glrt"``.
      weights: w_k > 0 per phase (scalar or shape (K,)); ``None``: uniform.
      neighbouring: ``"add_remove"`` or ``"replace_one"``.
      tol: relative accuracy of the engine's certified bound (as in
        :func:`~glrt_jax.accountant.schedule_epsilon`); the final check uses it eagerly.
      rtol: relative gap of the final certified ε below the target (in [1e-9, 0.1]).
      max_iter: most optimiser steps (0: only the constant schedule).
      gtol: stop when every component of the reduced gradient of ``log U`` (per unit
        of ``log σ_k``) is at most this.
      optimizer: an ``optax.GradientTransformation`` proposing the steps (its update
        takes only ``(grads, state, params)``; the line search is done here on the
        constraint surface); default ``optax.lbfgs(linesearch=None)``.

    Returns:
      An :class:`OptimizedSchedule`: the schedule, its certified ε, its utility, the
      constant-σ baseline on the same budget, the gain ``1 − U/U_const`` and the utility
      history of the search.

    Raises:
      ValueError: invalid input (named), 64-bit floats off, or no common scale meets the
        target.

    Eager only (Python floats and NumPy arrays out; not jittable): each engine call is
    one compiled program per bucket of K (powers of two, at least 8: searches of up to 8
    phases share one) and options, reused by every iteration and every later search.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import schedules
      >>> r = schedules.optimize_noise_multipliers(
      ...     2.0, 1e-5, steps=[50, 50, 50], weights=[1.0, 4.0, 9.0]
      ... )
      >>> bool(2.0 * (1 - 1e-4) <= r.epsilon <= 2.0)
      True
      >>> bool(r.noise_multiplier[0] > r.noise_multiplier[1] > r.noise_multiplier[2])
      True
      >>> round(r.gain, 3)  # closed form 1 − (1 + 2 + 3)²/(3·14) = 0.143
      0.143
    """
    prob, (rtol, gtol, max_iter) = _validate(
        target_epsilon,
        delta,
        steps,
        sampling_rate,
        d,
        adversary,
        dict(
            weights=weights,
            neighbouring=neighbouring,
            tol=tol,
            rtol=rtol,
            gtol=gtol,
            max_iter=max_iter,
            optimizer=optimizer,
        ),
    )
    if optimizer is None:
        try:
            import optax
        except ImportError as exc:  # pragma: no cover - optax is a dependency
            raise ImportError(f"{_WHAT} needs optax: pip install optax") from exc
        optimizer = optax.lbfgs(linesearch=None)

    k = prob.steps.size
    s0 = _initial_log_sigma(prob.target, prob.delta, prob.steps, prob.sampling_rate)
    baseline = point = _solve_scale(prob, np.zeros(k), s0)
    history = [math.exp(point.f)]
    state = optimizer.init(jnp.asarray(point.v))
    converged, iterations = k == 1, 0
    while not converged and iterations < max_iter:
        if float(np.max(np.abs(point.grad))) <= gtol:
            converged = True
            break
        upd, state = optimizer.update(jnp.asarray(point.grad), state, jnp.asarray(point.v))
        direction = np.asarray(upd, np.float64)
        direction = direction - direction.mean()  # F is invariant along 1
        slope = float(direction @ point.grad)
        if not (math.isfinite(slope) and slope < 0.0):  # not a descent direction
            direction, slope = -point.grad, -float(point.grad @ point.grad)
        alpha = min(1.0, _MAX_MOVE / float(np.max(np.abs(direction))))
        trial = None
        for _ in range(_HALVINGS):
            step = alpha * direction
            s_pred = point.s - float(point.eps_grad @ step) / float(np.sum(point.eps_grad))
            try:
                cand = _solve_scale(prob, point.v + step, s_pred)
            except ValueError:  # a shape too extreme for the engine: shorter step
                cand = None
            if cand is not None and cand.f <= point.f + _ARMIJO * alpha * slope:
                trial = cand
                break
            alpha *= 0.5
        if trial is None:  # no decrease along a descent direction: at the noise floor
            converged = True
            break
        point = trial
        iterations += 1
        history.append(math.exp(point.f))
    converged = converged or float(np.max(np.abs(point.grad))) <= gtol

    s_opt, eps_opt = _certify(prob, point.v, point.s, float(np.sum(point.eps_grad)), rtol)
    s_con, eps_con = _certify(prob, baseline.v, baseline.s, float(np.sum(baseline.eps_grad)), rtol)
    sigma = np.exp(point.v + s_opt)
    sigma_const = math.exp(s_con)
    util = prob.utility(point.v + s_opt)
    util_const = prob.utility(baseline.v + s_con)
    return OptimizedSchedule(
        noise_multiplier=sigma,
        epsilon=eps_opt,
        utility=util,
        baseline_noise_multiplier=sigma_const,
        baseline_epsilon=eps_con,
        baseline_utility=util_const,
        gain=1.0 - util / util_const,
        history=np.asarray(history),
        iterations=iterations,
        engine_calls=prob.evals,
        converged=bool(converged),
        target_epsilon=prob.target,
        delta=prob.delta,
    )
