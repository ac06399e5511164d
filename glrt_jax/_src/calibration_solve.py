"""The calibration solve: one root of ε(σ) (or δ(σ), ε(q)) for every front-end.

This module owns the problem description (:class:`Problem`), its residual, the
jitted bracketed-Newton solve and the eager driver around it (:func:`solve`: moving
the search interval until it holds the root and matching the composition engine's
sizes to ``tol``). The front-ends that validate arguments, pick the accountant and the
initial guess (:func:`glrt_jax.calibrate.noise_multiplier`, ``for_delta``,
``max_sampling_rate``) live in :mod:`glrt_jax._src.calibrate`.

Solver
------
With ``u = log σ`` (``u = −log q`` for the sampling rate) the residual
``g(u) = ε(e^u) − ε*(1 − rtol/2)`` is decreasing; :func:`glrt_jax._src.solvers.find_root`
(bracketed, safeguarded Newton; the composition engine's slope is a secant, eagerly and
under jit, the closed forms' a forward-mode derivative under jit)
returns the smallest ``u`` found with ``g ≤ 0`` once ``g ≥ −rtol·ε*/4``. The engine's
certified bound can jump by up to about its ``tol`` where its internal choices (tilt,
window) change with σ; a root at such a jump ends with a bracket narrower than 1e-12 in
``u`` and the safe end returned (then the gap to the target is the jump, at most about
``tol·ε*``). This is a one-dimensional root, so no optimiser library is involved.

Derivatives of the returned σ do not flow through the loop: the solver's ``custom_jvp``
applies the implicit function theorem to ``g(u, θ) = 0``,
``du/dθ = −(∂g/∂θ)/(∂g/∂u)``, for θ = target ε (or δ), δ (or ε) and ``q`` (or σ). θ's
leaves are scalars, so the partials are computed as values (forward mode, one column per
differentiated leaf) and reverse mode does not transpose the composition engine
(:mod:`glrt_jax._src.solvers`, "Derivatives").

jit and vmap
------------
Everything is jittable and vmappable. Eagerly, the engine's sizes (per-round points and
frequency nodes) are chosen for ``tol`` at the solution (re-solved if the solution asks
for other sizes than the guess did) and the search interval is widened until it holds
the root. The eager search is the same iteration driven from the host
(``find_root(..., eager=True)``): each ``g(u)`` is one call of the library's eager
programs (:func:`glrt_jax.profile.epsilon` and ``log_delta`` for the closed forms, the
composition engine's stages at fixed sizes), which are compiled once per size class and
shared with every other eager query, and the Newton slope is a secant (the bracket and
the stopping rule use values only). The root is then checked against the accountant's
eager answer (its own sizes, with its re-plans: what ``accountant.epsilon`` gives), and
where that lies above the target or more than ``tol`` below it, the search goes on from
there on that answer (:func:`_polished`), so that the promise holds for it. Only traced
inputs (``jit``, ``vmap``, autodiff)
compile the solve as one program. Under jit the sizes are
:data:`glrt_jax.accountant.JIT_SIZES` unless ``points``/``nodes`` are given, the
interval is ``sigma_bounds`` (default: a factor 55 either side of a CLT guess), and
failures (no σ in the interval, non-convergence, invalid input) give NaN instead of an
error.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np

from glrt_jax._src import composition, profile, solvers
from glrt_jax._src.shapes import pad_phases

__all__ = ["Problem", "f64", "glrt_log_sigma", "make_theta", "npo_sigma_of_glrt", "solve"]

# Half-width of the default search interval in log σ (or −log q), and how often an eager
# search moves it before giving up.
_HALF_WIDTH = 4.0
_MAX_MOVES = 6


# ---------------------------------------------------------------------------
# Problems: residual g(u, θ) for each quantity and accountant
# ---------------------------------------------------------------------------


class Problem(NamedTuple):
    """Static description of one calibration problem (hashable: shapes the program).

    ``points`` and ``nodes`` are the composition engine's sizes (0 for the closed forms).
    """

    quantity: str  # "sigma_for_epsilon", "sigma_for_delta", "q_for_epsilon"
    adversary: str
    d: int  # static for the engine (0 for the closed forms, where d is data)
    neighbouring: str
    closed: bool  # closed forms vs the composition engine
    points: int
    nodes: int
    max_iter: int


def _residual(problem: Problem, u, theta):
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
    aim = _aim(problem, target, rtol)
    if problem.quantity == "sigma_for_delta":
        if problem.closed:
            if problem.adversary == "npo":
                val = profile.npo_log_delta_kernel(other, mu)
            else:
                val = profile.glrt_log_delta_kernel(other, mu * mu, d)
        else:
            bounds, _ = composition.compose_query(*phases, other, tol, query="delta", **kw)
            val = jnp.log(bounds.upper)
        return val - aim
    if problem.closed:
        log_delta = jnp.log(other)
        if problem.adversary == "npo":
            val = profile.npo_epsilon_kernel(log_delta, mu)
        else:
            val = profile.glrt_epsilon_kernel(log_delta, mu, d)
    else:
        val = composition.compose_query(*phases, other, tol, query="epsilon", **kw)[0].upper
    return val - aim


def _aim(problem, target, rtol):
    """The value the residual's quantity aims at: ε*(1 − rtol/2), or log δ* − rtol/2."""
    if problem.quantity == "sigma_for_delta":
        return jnp.log(target) - 0.5 * rtol
    return target * (1.0 - 0.5 * rtol)


def _eager_value(problem, u, theta):
    """g(u) for concrete θ, through the library's eager (compiled once, shared) programs.

    The same quantity as :func:`_residual`: the closed forms by :func:`profile.epsilon` /
    :func:`profile.log_delta`, the engine's certified bound by one query through
    :func:`composition.schedule_epsilon` / ``schedule_delta``: at the problem's sizes (no
    re-plans), whose stages are compiled once per size class and shared with every other
    eager query, or, for sizes 0, the accountant's answer (its own sizes, with its
    re-plans: what ``accountant.epsilon`` gives).
    """
    target, other, knob, steps, d, tol, rtol = (float(v) for v in theta)
    sigma, q = (knob, math.exp(-u)) if problem.quantity == "q_for_epsilon" else (math.exp(u), knob)
    for_delta = problem.quantity == "sigma_for_delta"
    if problem.closed:
        mu = math.sqrt(steps) / sigma
        if for_delta:
            val = profile.log_delta(other, mu, int(d), adversary=problem.adversary)
        else:
            val = profile.epsilon(other, mu, int(d), adversary=problem.adversary)
    else:
        query = composition.schedule_delta if for_delta else composition.schedule_epsilon
        upper = query(
            sigma,
            q,
            int(steps),
            other,
            d=problem.d,
            adversary=problem.adversary,
            neighbouring=problem.neighbouring,
            tol=tol,
            points=problem.points or None,
            nodes=problem.nodes or None,
        ).upper
        val = jnp.log(upper) if for_delta else upper
    return float(val - _aim(problem, f64(target), f64(rtol)))


# Most eager queries of the accountant's answer in one polish (_polished). Where that answer
# is smooth in σ the secant needs 3–6, and a one-sided approach from above the target up
# to about 20 (GLRT d = 10 at ε* = 0.00029, δ = 4.41e-12, q = 1.34e-6, N = 244: 12 left
# it 5 % below ε*, 24 end 1.8e-6 below); where its bracket is wider than tol it can jump
# across the target between neighbouring σ (GLRT d = 10 at ε* = 0.009588, δ = 3.47e-13,
# q = 3.77e-5, N = 2831: ε ≤ 0.0081 or 0.0148 at σ 1e-12 apart, each query 1–10 s), and
# a bisection to the jump took 42 queries, 246 s (24: 75 s).
_POLISH_QUERIES = 24


def _floor(problem):
    """The lowest ``u`` of the problem: 0 for the sampling rate (``u = −log q``, q ≤ 1),
    else −inf."""
    return 0.0 if problem.quantity == "q_for_epsilon" else -math.inf


def _polished(problem, theta, u, tol, interval=(-math.inf, math.inf)):
    """The root against the accountant's answer, where the pass at fixed sizes differs.

    The solve runs the engine at fixed sizes, one pass each (:func:`_eager_value`); its
    root ``u`` (sizes of ``problem``) is certified by that pass. The accountant's eager
    answer at ``u`` (its own sizes and re-plans, what ``accountant.epsilon`` gives) can
    differ: far below the target where the fixed pass is loose (few sampled rounds at a
    tiny δ: ε* = 0.0318, δ = 1.5e-11, q = 4.9e-5, N = 192, the pass at (2048, 4096)
    gives ε ≤ 0.0318 at σ = 0.9500, where the answer is 0.03064, 3.6 % below), or just
    above it where the solve ended at larger sizes than the accountant's (ε* = 0.1507,
    δ = 7.35e-11, q = 1.45e-4, N = 1374: the root at (8192, 16384), σ = 0.912867, has the
    answer 0.150718). Where the answer lies above the target, or more than ``tol``
    below it (relative in ε; ``log(1 + tol)`` in log δ), the root is searched again on
    the answer (the same safeguarded secant, its first step along the fixed pass's
    slope, within half a unit of ``u`` and the caller's ``interval``, in at most
    ``_POLISH_QUERIES`` queries) and returned where found; else the safe point seen
    nearest the target, or ``u`` where none is (certified at its sizes either way).
    """
    slack = math.log1p(tol) if problem.quantity == "sigma_for_delta" else tol * float(theta[0])
    full = problem._replace(points=0, nodes=0)
    g = _eager_value(full, u, theta)
    if -slack <= g <= 0.0:
        return u
    floor = _floor(problem)
    # The first step along the slope of the fixed sizes' bound (a pass of milliseconds;
    # the answer's own slope would cost another eager query, seconds where this is
    # needed), the secant from there on: σ for δ* = 1.5e-11 at ε = 0.0318 (q = 4.9e-5,
    # N = 192) in 6 eager queries instead of 8. g decreases in u: the root lies below u
    # where g < 0, above where g > 0.
    step = 0.01 if g > 0.0 else -0.01
    slope = (_eager_value(problem, u + step, theta) - _eager_value(problem, u, theta)) / step
    if g > 0.0:
        lower, upper = u, min(u + 0.5, interval[1])
    else:
        lower, upper = max(u - 0.5, floor, interval[0]), u
    start = u - g / slope if slope < 0.0 else u + step
    residual = solvers.HostSecant(lambda x: _eager_value(full, x, theta))
    residual.seen.append((u, g))
    first = min(max(start, lower), upper)
    root = _solve_eager(full, theta, lower, upper, first, residual, _POLISH_QUERIES)
    status = int(root.status)
    if status == solvers.OK:
        return float(root.x)
    if status == solvers.ROOT_BELOW and lower == floor:
        return floor  # q = 1 already meets the target
    # Out of queries (an answer whose bracket is wider than tol can jump across the
    # target between neighbouring σ), or no root in reach: the safe point seen closest to
    # the target (certified by the answer; of equals, the smallest u: the least noise, or
    # the largest q), else u (certified at its sizes).
    safe = [(gx, -x) for x, gx in residual.seen if gx <= 0.0 and lower <= x <= upper]
    return -max(safe)[1] if safe else u


def _solve_eager(problem, theta, lower, upper, u0, residual=None, max_iter=None):
    """:func:`_solve_jit`'s search for concrete θ, driven from the host (``residual``: a
    :class:`solvers.HostSecant` of the problem's values, e.g. one that has seen some;
    ``max_iter``: the problem's unless given)."""
    return solvers.find_root(
        residual or solvers.HostSecant(lambda u: _eager_value(problem, u, theta)),
        (),
        f64(lower),
        f64(upper),
        f64(u0),
        ftol=_ftol(problem, theta),
        max_iter=max_iter or problem.max_iter,
        residual=True,
        eager=True,
    )


@functools.partial(jax.jit, static_argnames=("threat_model",))
def glrt_log_sigma(log_sigma_npo, d, steps, threat_model):
    """Rough log σ at which the GLRT adversary (dimension ``d``) is as strong as the NPO
    adversary at ``exp(log_sigma_npo)``.

    By the Gaussian-DP limit of Theorem 3 (at small signal ``λ = 1/σ²`` the GLRT's μ is
    ``λ/√(2d)`` per release, NPO's ``1/σ``): ``σ² = σ_NPO/√(2d)`` per round, and
    ``σ² = √N·σ_NPO/√(2d)`` with one direction shared by ``N`` releases; never above
    ``σ_NPO`` (the GLRT adversary is the weaker one). A start, not a bound: for
    ε* ∈ {1, 8, 0.2} over d = 1…10⁷ (per round; q = 0.01, 0.05, 0.001; N = 1000, 100,
    10⁵) it is 0.3–22 % above the calibrated σ, where σ_NPO was up to 227 times above it
    (beyond the factor e⁴ of the default search interval under ``jit``); shared, for
    ε* ∈ {1, 8, 0.5} over d = 1…10⁵, within a factor 0.78–1.36.
    """
    shared = 0.5 * jnp.log(f64(steps)) if threat_model == "shared" else 0.0
    glrt = 0.5 * (log_sigma_npo + shared - 0.5 * jnp.log(2.0 * f64(d)))
    return jnp.minimum(log_sigma_npo, glrt)


@jax.jit
def npo_sigma_of_glrt(sigma, d):
    """The NPO σ as strong as the GLRT adversary (dimension ``d``, per round) at ``sigma``:
    the inverse of :func:`glrt_log_sigma`, ``σ_NPO = max(σ, σ²·√(2d))``."""
    sigma = f64(sigma)
    return jnp.maximum(sigma, sigma**2 * jnp.sqrt(2.0 * f64(d)))


def make_theta(target, other, knob, steps, d, tol, rtol):
    """The data of :func:`_residual`, as float64 scalars (``steps``, ``d``: integers)."""
    return tuple(f64(v) for v in (target, other, knob, int(steps), int(d), tol, rtol))


def _ftol(problem, theta):
    """Stopping tolerance in units of g: rtol·ε*/4 (ε targets), rtol/4 (log δ targets)."""
    target, rtol = theta[0], theta[-1]
    if problem.quantity == "sigma_for_delta":
        return 0.25 * rtol
    return 0.25 * rtol * target


@functools.partial(jax.jit, static_argnums=(0,))
def _solve_jit(problem, theta, lower, upper, u0):
    return solvers.find_root(
        functools.partial(_residual, problem),
        theta,
        lower,
        upper,
        u0,
        ftol=_ftol(problem, theta),
        max_iter=problem.max_iter,
        # The engine's slope by secants, as eagerly: the loop then holds no derivative of
        # the engine (whose compilation that is), only its value; the closed forms keep
        # their exact forward-mode slope (cheap, and quadratic convergence for rtol 1e-9).
        secant=None if problem.closed else solvers.SECANT,
    )


# ---------------------------------------------------------------------------
# The eager driver (concrete θ) and the traced path
# ---------------------------------------------------------------------------


def f64(x):
    """``x`` as a float64 JAX array."""
    return jnp.asarray(x, jnp.float64)


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
    # Padded to the engine's bucket of phase counts, as the query at these sizes pads
    # them: one compiled plan serves both (unpadded, the plan of one phase compiled apart,
    # 5 of the 27 s of a GLRT d = 10 calibration's first call).
    sig_p, q_p, n_p = pad_phases(np.array([sigma]), np.array([q]), np.array([int(steps)]))
    return composition.choose_sizes(
        f64(1.0 / sig_p),
        f64(q_p),
        jnp.asarray(n_p, jnp.int64),
        f64(other),
        f64(tol),
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
    floor = _floor(problem)
    lower = max(lower, floor)
    u0 = min(max(guess, lower), upper)
    if auto_sizes:
        b, j = _sizes_at(problem, theta, u0, tol)
        problem = problem._replace(points=b, nodes=j)
    roots = {}  # (points, nodes) -> the root found with them
    for _ in range(_MAX_MOVES):
        root = _solve_eager(problem, theta, lower, upper, u0)
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
        roots[(problem.points, problem.nodes)] = u
        b, j = _sizes_at(problem, theta, u, tol)
        if (b, j) in roots:
            # These sizes again (the answer), or a cycle: the root found with one size
            # class lies where the plan asks for another, whose root lies where it asks
            # for the first. Both are certified at their own sizes; the larger sizes (each
            # the larger of the two) resolve the bound better, and their root is the
            # answer. σ for ε* = 0.1693 at δ = 2.06e-11, q = 1.75e-5, N = 125089: the root
            # with (2048, 4096) points and nodes is σ = 0.7922, where the plan asks for
            # (8192, 16384), whose root is σ = 0.7694 (ε ≤ 0.169328 there), where it asks
            # for (2048, 4096), until the moves ran out ("no root found"); now σ = 0.7694.
            # (At (2048, 4096) the bound is far looser than tol here: [0.135, 0.191] at
            # σ = 0.7694.)
            b, j = max(b, problem.points), max(j, problem.nodes)
            if (b, j) in roots:
                return roots[(b, j)], problem._replace(points=b, nodes=j)
        problem = problem._replace(points=b, nodes=j)
        lower, upper, u0 = max(u - 0.5, floor), u + 0.5, u
    raise ValueError(
        f"{_WHAT[problem.quantity]}: no root found in the intervals searched "
        f"(last log-interval [{lower:.3g}, {upper:.3g}]); check the target"
    )


def solve(problem, theta, bounds, guess, tol, auto_sizes):
    """The root ``u`` of ``problem`` (``log σ``, or ``−log q`` for the sampling rate).

    Eager when θ is concrete (errors named), else one jitted solve (NaN on failure).

    Args:
      problem: a :class:`Problem`; its ``points``/``nodes`` are the sizes used under
        jit and when ``auto_sizes`` is false.
      theta: from :func:`make_theta`.
      bounds: ``(lower, upper)`` search interval in ``u`` (never moved), or ``None``
        for ``guess ± 4`` (moved eagerly until it holds the root).
      guess: initial ``u``.
      tol: relative accuracy of the composition engine.
      auto_sizes: choose the engine's sizes for ``tol`` at the answer (eager only).

    Returns:
      ``u`` as a float64 array, differentiable in θ (implicit function theorem); 0
      for the sampling rate when ``q = 1`` already meets the target.

    Raises:
      ValueError: (eager) unreachable target, non-convergence, non-scalar θ.
    """
    concrete = [_concrete_or_none(v) for v in theta]
    traced = any(c is None for c in concrete)
    if traced:
        lo, hi = bounds if bounds is not None else (guess - _HALF_WIDTH, guess + _HALF_WIDTH)
        if problem.quantity == "q_for_epsilon":
            lo = jnp.maximum(lo, 0.0)
        root = _solve_jit(problem, theta, f64(lo), f64(hi), jnp.clip(guess, lo, hi))
        if problem.quantity == "q_for_epsilon":  # q = 1 already meets the target
            return jnp.where((root.status == solvers.ROOT_BELOW) & (lo <= 0.0), 0.0, root.x)
        return root.x
    for v in concrete:
        if np.ndim(v) != 0:
            raise ValueError("eager calibration takes scalars; for arrays use jax.vmap")
    theta_c = tuple(f64(c) for c in concrete)
    guess_c = float(_concrete_or_none(guess))
    u, problem = _eager(problem, theta_c, bounds, guess_c, tol, auto_sizes)
    answer = u
    if auto_sizes and u > _floor(problem):  # (at the floor: q = 1 meets the target)
        interval = (-math.inf, math.inf) if bounds is None else tuple(map(float, bounds))
        answer = _polished(problem, theta_c, u, tol, interval)
    if answer <= _floor(problem):
        return f64(0.0)
    if not any(isinstance(v, jax.core.Tracer) for v in theta):
        return f64(answer)
    # Under eager autodiff: one more solve from the fixed sizes' root attaches the implicit
    # derivatives (of that root: the engine's eager answer, with its re-plans, has no
    # traced form), to the answer's value.
    root = _solve_jit(problem, theta, f64(u - 1e-3), f64(u + 1e-3), f64(u))
    solvers.raise_for_status(root.status, what=_WHAT[problem.quantity])
    return root.x - jax.lax.stop_gradient(root.x) + answer
