"""Noise calibration: σ ↔ ε inversion for NPO and GLRT, jittable and differentiable.

What is solved
--------------
For a training run of ``N = steps`` rounds of the (Poisson-subsampled, rate ``q``)
Gaussian mechanism with sensitivity 1, the privacy guarantee ``ε(σ)`` at a fixed ``δ``
is decreasing in the noise multiplier ``σ`` (noise standard deviation divided by the
sensitivity, e.g. by the clipping norm in DP-SGD). :func:`noise_multiplier` returns
the smallest ``σ`` it can certify with

    ε(σ) ≤ ε*   and   ε(σ) ≥ ε*(1 − rtol)

(the gap to the target is below ``rtol·ε*``; the solver aims at ``ε*(1 − rtol/2)``).
:func:`for_delta` does the same for a target ``δ*`` at fixed ``ε`` (gap ``rtol`` in
``log δ``), :func:`max_sampling_rate` finds the largest ``q`` and :func:`max_steps`
the most rounds that fit a budget.

Accountants (which ``ε(σ)``):

* ``composition="rounds"`` (default): independent rounds, each seen on its own
  (DP-SGD). NPO is classical Gaussian DP; GLRT is the per-round adversary that sees
  ``‖y_i‖²``. Without subsampling the NPO case has the closed form ``μ = √N/σ``
  (:func:`glrt_jax.profile.npo_epsilon`); everything else uses the certified upper
  bound of the numeric composition :func:`glrt_jax.pld.epsilon_for_delta`.
* ``composition="shared"``: the ``N`` releases share one unknown direction (paper,
  Theorem 2): ``λ = N/σ²`` in the closed forms of :mod:`glrt_jax.profile`. No
  subsampling.

Solver
------
With ``u = log σ`` (``u = −log q`` for the sampling rate) the residual
``g(u) = ε(e^u) − ε*(1 − rtol/2)`` is decreasing. Each iteration evaluates ``g`` and
its exact derivative ``g'(u)`` (forward mode through the closed forms' implicit
derivatives, or through the numeric composition on a fixed grid) and proposes the
Gauss–Newton step for ``½g²`` — preconditioned gradient ``g g'/g'² = g/g'`` — applied
by an optax transformation chain (Gauss–Newton scaling, step clipping at
``max_log_step`` in log space, descent). A bracket safeguards it: every evaluated
point is classified as safe (``ε ≤ ε*``) or unsafe, a proposal outside the current
bracket is replaced by its midpoint (or by the bound of the search interval while
no point on one side is known), so the iteration always converges. It stops at a
point with ``|g| ≤ rtol·ε*/4``, which lies on the safe side by construction and is
returned; the iteration count is bounded by ``max_iter`` (a ``lax.while_loop``).

Derivatives of the returned σ do not flow through the loop: a ``custom_jvp`` applies
the implicit function theorem to ``g(u, θ) = 0``,
``du/dθ = −(∂g/∂θ)/(∂g/∂u)``, for θ = target ε (or δ), δ (or ε) and ``q``.

jit and vmap
------------
The closed forms need nothing more. The numeric composition needs a fixed grid: pass
``grid=pld.make_grid(pld.GaussianBlock(sigma=np.array(sigma_bounds), ...))`` and the
same ``sigma_bounds``; the search stays inside those bounds. Called eagerly without
a grid, the functions build grids themselves (a coarse grid first to locate σ, then
a fine one around it, moving the bounds if σ lies outside). Under jit, failures (no
σ in the bounds, non-convergence, invalid input) give NaN instead of an error.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from glrt_jax._src import pld, profile
from glrt_jax._src.validation import check_range

__all__ = [
    "Calibration",
    "calibrate",
    "for_delta",
    "max_sampling_rate",
    "max_steps",
    "noise_multiplier",
]

_ADVERSARIES = ("npo", "glrt")
_COMPOSITIONS = ("rounds", "shared")
# Status codes of the bracketed solver.
_OK, _NO_SAFE, _ROOT_BELOW, _MAX_ITER = 0, 1, 2, 3
_COARSE_EPS_TOL = 0.1
_MAX_RETRIES = 8


# ---------------------------------------------------------------------------
# The solver: bracketed Gauss–Newton on a decreasing residual, driven by optax
# ---------------------------------------------------------------------------


def _scale_by_gauss_newton() -> optax.GradientTransformationExtraArgs:
    """Precondition ∇(½g²) = g·g' by the Gauss–Newton curvature g'² (extra arg ``slope``)."""

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None, *, slope, **extra):
        del params, extra
        return jax.tree.map(lambda gr: gr / (slope * slope), updates), state

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _newton_optimizer(max_log_step: float) -> optax.GradientTransformationExtraArgs:
    return optax.chain(_scale_by_gauss_newton(), optax.clip(max_log_step), optax.scale(-1.0))


class _SolverState(NamedTuple):
    it: Any
    u: Any
    lo: Any  # largest u known unsafe (or the lower search bound)
    hi: Any  # smallest u known safe (or the upper search bound)
    lo_seen: Any
    hi_seen: Any
    status: Any
    done: Any


def _bracketed_newton(fun, u0, lower, upper, slack, max_iter, max_log_step):
    """Find u in [lower, upper] with |g(u)| ≤ slack/4 for a decreasing g (safe: g ≤ slack/2).

    ``fun(u) -> (g, g')``. Returns ``(u, status)``; ``u`` is the last evaluated point,
    which satisfies the stopping rule when ``status == _OK``.
    """
    opt = _newton_optimizer(max_log_step)
    dtype = u0.dtype

    def cond(st):
        return ~st.done

    def body(st):
        g, dg = fun(st.u)
        # Bracket of the aim (g = 0): every point with g ≤ 0 lies below the target.
        safe = g <= 0
        lo = jnp.where(~safe & (st.u >= st.lo), st.u, st.lo)
        hi = jnp.where(safe & (st.u <= st.hi), st.u, st.hi)
        lo_seen = st.lo_seen | ~safe
        hi_seen = st.hi_seen | safe
        conv = jnp.abs(g) <= 0.25 * slack
        below = safe & (st.u <= lower)  # safe at the lower bound: the root lies below
        above = ~safe & (st.u >= upper)  # unsafe at the upper bound: no safe point
        it = st.it + 1
        status = jnp.where(
            conv,
            _OK,
            jnp.where(below, _ROOT_BELOW, jnp.where(above, _NO_SAFE, _MAX_ITER)),
        ).astype(jnp.int32)
        done = conv | below | above | (it >= max_iter) | jnp.isnan(g)
        # Gauss–Newton step through optax; the bracket keeps it honest.
        step, _ = opt.update(g * dg, opt.init(st.u), st.u, slope=dg)
        un = optax.apply_updates(st.u, step)
        inside = jnp.isfinite(un) & (un > lo) & (un < hi)
        mid = 0.5 * (lo + hi)
        # Outside the bracket: bisect when both sides are known, otherwise go to the
        # search bound on the missing side (which settles whether a root exists there).
        fallback = jnp.where(
            lo_seen & hi_seen, mid, jnp.where(hi_seen, jnp.maximum(un, lower), upper)
        )
        fallback = jnp.where(jnp.isfinite(fallback), fallback, mid)
        un = jnp.clip(jnp.where(inside, un, fallback), lower, upper)
        # A bisection that no longer moves u means the bracket is exhausted.
        u = jnp.where(done, st.u, un)
        return _SolverState(it, u, lo, hi, lo_seen, hi_seen, status, done)

    false = jnp.zeros((), bool)
    init = _SolverState(
        jnp.zeros((), jnp.int32),
        jnp.clip(u0, lower, upper),
        jnp.asarray(lower, dtype),
        jnp.asarray(upper, dtype),
        false,
        false,
        jnp.asarray(_MAX_ITER, jnp.int32),
        false,
    )
    st = lax.while_loop(cond, body, init)
    return st.u, st.status, st.it


# ---------------------------------------------------------------------------
# Problems: residual g(u, θ) for each quantity and accountant
# ---------------------------------------------------------------------------


class _Problem(NamedTuple):
    """Static description of one calibration problem (hashable)."""

    quantity: str  # "sigma_for_epsilon", "sigma_for_delta", "q_for_epsilon"
    adversary: str
    steps: int
    dim: int
    neighbouring: str
    closed: bool  # closed forms (no grid) vs numeric composition
    rtol: float
    max_iter: int
    max_log_step: float

    def key(self) -> _Problem:
        """The part that shapes the program (rtol, max_iter, max_log_step are data)."""
        return self._replace(rtol=0.0, max_iter=0, max_log_step=0.0)

    def settings(self):
        return (_f64(self.rtol), jnp.asarray(self.max_iter, jnp.int32), _f64(self.max_log_step))


def _residual(problem: _Problem, u, theta, grid, rtol):
    """g(u, θ): decreasing in u; the solution is its root. θ = (target, other, knob).

    ``grid`` is the numeric accountant's grid, or for the closed forms the pair
    ``(√N, d)`` (data, so that one compilation serves every N and d).
    """
    target, other, knob = theta
    if problem.quantity == "q_for_epsilon":
        sigma, q = knob, jnp.exp(-u)
    else:
        sigma, q = jnp.exp(u), knob
    if problem.quantity == "sigma_for_delta":
        aim = jnp.log(target) - 0.5 * rtol
        eps = other
        if problem.closed:
            mu = grid[0] / sigma
            if problem.adversary == "npo":
                val = profile._npo_log_delta(eps, mu)
            else:
                val = profile._glrt_log_delta(eps, mu * mu, grid[1])
        else:
            val = jnp.log(_pld_dist(problem, sigma, q, grid).delta(eps).upper)
        return val - aim
    aim = target * (1.0 - 0.5 * rtol)
    log_delta = jnp.log(other)
    if problem.closed:
        mu = grid[0] / sigma
        if problem.adversary == "npo":
            val = profile._npo_epsilon(log_delta, mu)
        else:
            val = profile._glrt_epsilon(log_delta, mu, grid[1])
    else:
        val = _pld_dist(problem, sigma, q, grid).epsilon(other).upper
    return val - aim


def _pld_dist(problem, sigma, q, grid):
    block = pld.GaussianBlock(
        sigma=sigma,
        sampling_rate=q,
        steps=problem.steps,
        adversary=problem.adversary,
        dim=problem.dim,
    )
    return pld.compose(block, neighbouring=problem.neighbouring, grid=grid)


def _slack(problem, theta, rtol):
    # In units of g (measured from the aim, half a slack below the target): rtol·ε* for
    # ε targets, rtol for log δ targets.
    if problem.quantity == "sigma_for_delta":
        return jnp.asarray(rtol, jnp.result_type(theta[0]))
    return rtol * theta[0]


def _solve_raw(problem, theta, grid, bounds, u0, settings):
    rtol, max_iter, max_log_step = settings

    def fun(u):
        return jax.jvp(
            lambda v: _residual(problem, v, theta, grid, rtol), (u,), (jnp.ones_like(u),)
        )

    slack = _slack(problem, theta, rtol)
    return _bracketed_newton(fun, u0, bounds[0], bounds[1], slack, max_iter, max_log_step)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _solve(problem, theta, grid, bounds, u0, settings):
    """(u, status): u is NaN unless status is _OK; derivatives of u are implicit.

    ``settings = (rtol, max_iter, max_log_step)`` are data, so one compilation serves
    every tolerance.
    """
    u, status, _ = _solve_raw(problem, theta, grid, bounds, u0, settings)
    return jnp.where(status == _OK, u, jnp.nan), status


@_solve.defjvp
def _solve_jvp(problem, primals, tangents):
    theta, grid, bounds, u0, settings = primals
    rtol = settings[0]
    dtheta = tangents[0]
    u, status = _solve(problem, theta, grid, bounds, u0, settings)
    dtheta = tuple(
        jnp.zeros_like(t) if d is None or d.dtype == jax.dtypes.float0 else d
        for t, d in zip(theta, dtheta, strict=True)
    )
    # Implicit function theorem on g(u, θ) = 0 (the aim offset is part of g).
    g_theta = jax.jvp(lambda th: _residual(problem, u, th, grid, rtol), (theta,), (dtheta,))[1]
    g_u = jax.jvp(lambda v: _residual(problem, v, theta, grid, rtol), (u,), (jnp.ones_like(u),))[1]
    status_dot = np.zeros(status.shape, dtype=jax.dtypes.float0)
    return (u, status), (-g_theta / g_u, status_dot)


_solve_compiled = jax.jit(_solve, static_argnums=(0,))


def _solve_jit(problem, theta, grid, bounds, u0):
    return _solve_compiled(problem.key(), theta, grid, bounds, u0, problem.settings())


# ---------------------------------------------------------------------------
# Validation, initial guesses and the eager driver
# ---------------------------------------------------------------------------


def _check_x64():
    if jnp.asarray(1.0).dtype != jnp.float64:
        raise ValueError(
            "glrt_jax.calibrate needs 64-bit floats for its guarantees: enable them with "
            'jax.config.update("jax_enable_x64", True) or run inside jax.enable_x64().'
        )


def _is_traced(*values):
    return any(isinstance(v, jax.core.Tracer) for v in values)


def _check_common(steps, d, adversary, composition, neighbouring, rtol, max_iter):
    check_range("steps", steps, lo=1.0, integer=True)
    check_range("d", d, lo=1.0, integer=True)
    if adversary not in _ADVERSARIES:
        raise ValueError(f"adversary must be one of {_ADVERSARIES}, got {adversary!r}")
    if composition not in _COMPOSITIONS:
        raise ValueError(f"composition must be one of {_COMPOSITIONS}, got {composition!r}")
    if neighbouring not in ("add_remove", "replace_one"):
        raise ValueError(
            f"neighbouring must be 'add_remove' or 'replace_one', got {neighbouring!r}"
        )
    if not (isinstance(rtol, (int, float)) and 1e-14 <= rtol <= 0.1):
        raise ValueError(f"rtol must be a number in [1e-14, 0.1], got {rtol!r}")
    if not (isinstance(max_iter, int) and 1 <= max_iter <= 10_000):
        raise ValueError(f"max_iter must be an integer in [1, 10000], got {max_iter!r}")


def _is_closed(sampling_rate, adversary, composition, neighbouring):
    if composition == "shared":
        if _is_traced(sampling_rate) or np.any(np.asarray(sampling_rate) != 1.0):
            raise ValueError(
                "composition='shared' (Theorem 2) covers releases without subsampling: "
                f"sampling_rate must be 1, got {sampling_rate!r}; use composition='rounds'"
            )
        if neighbouring != "add_remove":
            raise ValueError("composition='shared' supports neighbouring='add_remove' only")
        return True
    return (
        adversary == "npo"
        and neighbouring == "add_remove"
        and not _is_traced(sampling_rate)
        and np.all(np.asarray(sampling_rate) == 1.0)
    )


def _f64(x):
    return jnp.asarray(x, jnp.float64)


def _npo_guess(target_epsilon, delta, steps, q):
    """Rough σ: the analytic one-round bound, amplified by the CLT of subsampling."""
    eps = np.asarray(target_epsilon, np.float64)
    dl = np.asarray(delta, np.float64)
    mu = eps / np.sqrt(2.0 * np.log(1.25 / dl) + 2.0 * eps)  # μ-GDP budget (approx.)
    q = np.asarray(q, np.float64)
    return 1.0 / np.sqrt(np.log1p(mu * mu / (q * q * steps)))


def _describe(problem):
    names = {
        "sigma_for_epsilon": "noise multiplier",
        "sigma_for_delta": "noise multiplier",
        "q_for_epsilon": "sampling rate",
    }
    return names[problem.quantity]


def _raise_for_status(problem, status):
    status = int(status)
    if status == _OK:
        return
    if status == _NO_SAFE:
        raise ValueError(
            f"unreachable target: no {_describe(problem)} in the search range meets it "
            "(widen sigma_bounds / rate_bounds, or check that delta is above the "
            "accountant's certified slack)"
        )
    if status == _ROOT_BELOW:
        raise ValueError(
            f"the {_describe(problem)} that meets the target lies outside the search range "
            "(below sigma_bounds[0] / above rate_bounds[1]); widen it"
        )
    raise ValueError(
        f"the {_describe(problem)} calibration did not converge in {problem.max_iter} "
        "iterations; raise max_iter or rtol"
    )


def _concrete_or_none(value):
    """The concrete value behind ``value`` (also under eager autodiff), else None."""
    try:
        return np.asarray(jax.extend.core.concrete_or_error(None, value, ""), np.float64)
    except jax.errors.ConcretizationTypeError:
        return None


def _checked_solve(problem, theta, grid, bounds, u0):
    """``_solve`` under jit; when the inputs are concrete, failures raise (named)."""
    u, status = _solve_jit(problem, theta, grid, bounds, u0)
    primal = _concrete_or_none(u)
    if primal is not None and np.isnan(primal):
        _raise_for_status(problem, status)
        raise ValueError(f"the {_describe(problem)} calibration failed (invalid input)")
    return u


def _same_grid(a, b):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    return ta == tb and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb, strict=True)
    )


def _eager_pld(problem, theta, block_at, eps_tol, tail_mass, guess):
    """Locate the solution on coarse grids, then solve on the accountant's own grid.

    ``block_at(lo, hi)`` makes a block covering the log-interval ``[lo, hi]`` of the
    knob (``block_at(u, u)``: the block at one point). Coarse stage: a grid with
    ``eps_tol = 0.1`` over an interval around ``guess``, moved until it contains the
    solution. Fine stage: the grid :func:`glrt_jax.pld.make_grid` builds by default
    at the point found, re-solved until the grid built at the solution is the one it
    was solved on, so that evaluating the returned value with the default accountant
    gives exactly the ε the solver certified. Returns ``(u, grid)``.
    """
    # The guess is the NPO one; the GLRT needs less noise (for d > 1 often several times).
    lo, hi = (
        (guess - 1.0, guess + 0.5) if problem.adversary == "npo" else (guess - 1.6, guess + 0.1)
    )
    u = 0.5 * (lo + hi) if problem.adversary == "glrt" else guess

    def run(grid, lo, hi, u):
        if problem.quantity == "q_for_epsilon":
            lo = max(lo, 0.0)  # q ≤ 1
        bounds = (_f64(lo), _f64(hi))
        u_new, status = _solve_jit(problem, theta, grid, bounds, _f64(u))
        return float(u_new), int(status), lo

    def not_converged():
        return ValueError(
            f"the {_describe(problem)} calibration did not converge in {problem.max_iter} "
            "iterations; raise max_iter or rtol"
        )

    for _ in range(_MAX_RETRIES):
        if problem.quantity == "q_for_epsilon":
            lo = max(lo, 0.0)
        grid = pld.make_grid(
            block_at(lo, hi),
            neighbouring=problem.neighbouring,
            eps_tol=_COARSE_EPS_TOL,
            tail_mass=tail_mass,
        )
        u_new, status, lo = run(grid, lo, hi, u)
        if status == _OK:
            u = u_new
            break
        if status == _ROOT_BELOW:
            if problem.quantity == "q_for_epsilon" and lo <= 0.0:
                break  # q = 1 may already meet the target: settled on the fine grid
            lo, hi = lo - 1.5 * (hi - lo) - 1.0, lo + 0.05
            u = lo + 0.75 * (hi - lo)
        elif status == _NO_SAFE:
            lo, hi = hi - 0.05, hi + 1.5 * (hi - lo) + 1.0
            u = lo + 0.25 * (hi - lo)
        else:
            raise not_converged()
    else:
        raise ValueError(
            f"unreachable target: no {_describe(problem)} found in the ranges searched "
            f"(last log-range [{lo:.3g}, {hi:.3g}])"
        )
    if problem.quantity == "q_for_epsilon" and u <= 0.0:
        u = 0.0
    grid = None
    for _ in range(_MAX_RETRIES):
        new_grid = pld.make_grid(
            block_at(u, u), neighbouring=problem.neighbouring, eps_tol=eps_tol, tail_mass=tail_mass
        )
        if grid is not None and _same_grid(grid, new_grid):
            return u, grid
        grid = new_grid
        width = 0.05
        for _ in range(_MAX_RETRIES):
            u_new, status, lo_used = run(grid, u - width, u + width, u)
            if status == _OK:
                u = u_new
                break
            if status == _ROOT_BELOW and problem.quantity == "q_for_epsilon" and lo_used <= 0:
                return 0.0, grid  # q = 1 meets the target
            if status not in (_ROOT_BELOW, _NO_SAFE):
                raise not_converged()
            width *= 4.0
        else:
            raise not_converged()
    return u, grid


def _check_pld_target(delta, tail_mass):
    if not _is_traced(delta) and np.any(np.asarray(delta) <= 10.0 * tail_mass):
        raise ValueError(
            f"unreachable target: delta={delta!r} is below the certified slack of the "
            f"numeric accountant (10 * tail_mass = {10 * tail_mass:g}); lower tail_mass"
        )


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
    composition,
    neighbouring,
    grid,
    sigma_bounds,
    rtol,
    eps_tol,
    tail_mass,
    max_iter,
    max_log_step,
):
    _check_x64()
    check_range("sampling_rate", sampling_rate, lo=0.0, hi=1.0, lo_open=True)
    _check_common(steps, d, adversary, composition, neighbouring, rtol or 1e-9, max_iter)
    closed = _is_closed(sampling_rate, adversary, composition, neighbouring)
    if rtol is None:
        rtol = 1e-9 if closed else 1e-8
    problem = _Problem(
        quantity,
        adversary,
        0 if closed else int(steps),
        0 if closed else int(d),
        neighbouring,
        closed,
        float(rtol),
        int(max_iter),
        float(max_log_step),
    )
    theta = (_f64(target), _f64(other), _f64(sampling_rate))
    if closed:
        grid = (_f64(math.sqrt(int(steps))), _f64(int(d)))
    concrete = [_concrete_or_none(v) for v in (target, other, sampling_rate)]
    if grid is not None or closed:
        if not closed and sigma_bounds is None:
            raise ValueError("with grid= pass the sigma_bounds=(lo, hi) it was built for")
        if sigma_bounds is None:
            eps = target if quantity == "sigma_for_epsilon" else other
            eps_c = concrete[0 if quantity == "sigma_for_epsilon" else 1]
            scale = 5.0 * math.sqrt(steps)
            if eps_c is None:
                centre = jnp.log(scale / jnp.maximum(_f64(eps), 1e-3))
            else:
                centre = _f64(math.log(scale / max(float(np.min(eps_c)), 1e-3)))
            bounds = (centre - 30.0, centre + 30.0)
            u0 = centre
        else:
            lo, hi = sigma_bounds
            check_range("sigma_bounds[0]", lo, lo=0.0, lo_open=True)
            check_range("sigma_bounds[1]", hi, lo=0.0, lo_open=True)
            if not _is_traced(lo, hi) and not lo < hi:
                raise ValueError(f"sigma_bounds must satisfy lo < hi, got {sigma_bounds!r}")
            bounds = (jnp.log(_f64(lo)), jnp.log(_f64(hi)))
            u0 = 0.5 * (bounds[0] + bounds[1])
        return jnp.exp(_checked_solve(problem, theta, grid, bounds, u0))
    if any(c is None for c in concrete):
        raise ValueError(
            "inside jit/vmap (traced inputs) the numeric accountant needs a fixed grid: "
            "pass grid=pld.make_grid(pld.GaussianBlock(sigma=np.array(sigma_bounds), "
            "sampling_rate=..., steps=..., adversary=..., dim=...)) and the same "
            "sigma_bounds=(lo, hi)"
        )
    # Eager, numeric accountant, grids built here.
    for name, v in zip(("target", "other", "sampling_rate"), concrete, strict=True):
        if np.ndim(v) != 0:
            raise ValueError(
                f"eager calibration takes scalars; for arrays use jax.vmap with grid= and "
                f"sigma_bounds= (got an array for {name})"
            )
    target_c, other_c, q_c = (float(c) for c in concrete)
    delta = other_c if quantity == "sigma_for_epsilon" else target_c
    _check_pld_target(delta, tail_mass)
    eps_for_guess = target_c if quantity == "sigma_for_epsilon" else other_c
    guess = float(np.log(_npo_guess(max(eps_for_guess, 1e-3), min(delta, 0.5), steps, q_c)))

    def block_range(lo, hi):
        return pld.GaussianBlock(
            sigma=np.asarray(jnp.exp(_f64([lo, hi]))),
            sampling_rate=q_c,
            steps=int(steps),
            adversary=adversary,
            dim=int(d),
        )

    theta_c = (_f64(target_c), _f64(other_c), _f64(q_c))
    u, grid = _eager_pld(problem, theta_c, block_range, eps_tol, tail_mass, guess)
    bounds = (_f64(u - 1e-3), _f64(u + 1e-3))
    # Converged at the first evaluation; attaches the implicit derivatives.
    return jnp.exp(_checked_solve(problem, theta, grid, bounds, _f64(u)))


def noise_multiplier(
    target_epsilon,
    delta,
    steps: int = 1,
    sampling_rate=1.0,
    d: int = 1,
    adversary: str = "npo",
    *,
    composition: str = "rounds",
    neighbouring: str = "add_remove",
    grid: pld.Grid | None = None,
    sigma_bounds: tuple | None = None,
    rtol: float | None = None,
    eps_tol: float = 1e-2,
    tail_mass: float = 1e-14,
    max_iter: int = 100,
    max_log_step: float = 2.0,
) -> jax.Array:
    """Smallest noise multiplier σ (noise std / sensitivity) with ε(σ) ≤ ``target_epsilon``.

    Solves ``ε(σ) = ε*(1 − rtol/2)`` by bracketed Gauss–Newton on ``log σ`` (see the
    module docstring) and returns σ with ``ε*(1 − rtol) ≤ ε(σ) ≤ ε*``, where ε is the
    accountant's certified value (never an underestimate).

    Args:
      target_epsilon: ε* > 0.
      delta: δ in (0, 1).
      steps: number of rounds N ≥ 1.
      sampling_rate: Poisson sampling rate q in (0, 1] (1: every record every round).
      d: query dimension (GLRT only; NPO does not depend on it).
      adversary: ``"npo"`` (classical Gaussian DP) or ``"glrt"``.
      composition: ``"rounds"`` (independent rounds; DP-SGD) or ``"shared"`` (one
        shared unknown direction, paper Theorem 2; closed form, q = 1 only).
      neighbouring: ``"add_remove"`` or ``"replace_one"`` (see :mod:`glrt_jax.pld`).
      grid: fixed :class:`glrt_jax.pld.Grid` for the numeric accountant; required under
        jit/vmap (with ``sigma_bounds``). Not used by the closed forms.
      sigma_bounds: ``(lo, hi)`` search interval for σ (required with ``grid``).
      rtol: relative gap tolerance of ε(σ) below the target; default 1e-9 for the
        closed forms and 1e-8 for the numeric accountant, whose ε carries floating-point
        noise up to ~1e-9 between compilations (keep rtol ≥ 1e-8 there so that the
        margin of rtol/4 kept below the target covers it).
      eps_tol, tail_mass: accuracy of the grids built when ``grid`` is None.
      max_iter: iteration bound of the solver; max_log_step: largest step in log σ.

    Returns:
      σ as a float64 array. Differentiable in ``target_epsilon``, ``delta`` and
      ``sampling_rate`` (implicit function theorem). Under jit/vmap, failures
      (σ outside ``sigma_bounds``, non-convergence, invalid input) give NaN.

    Raises:
      ValueError: invalid input (named), unreachable target (e.g. δ below the numeric
        accountant's certified slack, or no σ in ``sigma_bounds``), non-convergence,
        float32 mode.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import calibrate, profile
      >>> s = calibrate.noise_multiplier(1.0, 1e-5, steps=10)
      >>> e = float(profile.npo_epsilon(1e-5, 10**0.5 / s))
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
        composition,
        neighbouring,
        grid,
        sigma_bounds,
        rtol,
        eps_tol,
        tail_mass,
        max_iter,
        max_log_step,
    )


def for_delta(
    target_delta,
    epsilon,
    steps: int = 1,
    sampling_rate=1.0,
    d: int = 1,
    adversary: str = "npo",
    *,
    composition: str = "rounds",
    neighbouring: str = "add_remove",
    grid: pld.Grid | None = None,
    sigma_bounds: tuple | None = None,
    rtol: float | None = None,
    eps_tol: float = 1e-2,
    tail_mass: float = 1e-14,
    max_iter: int = 100,
    max_log_step: float = 2.0,
) -> jax.Array:
    """Smallest noise multiplier σ with δ(ε; σ) ≤ ``target_delta`` at a fixed ε.

    The dual of :func:`noise_multiplier`: the residual is ``log δ(ε; σ) − log δ*``
    and the returned σ has ``δ*·e^{−rtol} ≤ δ(ε; σ) ≤ δ*``.

    Args:
      target_delta: δ* in (0, 1).
      epsilon: ε ≥ 0.
      steps, sampling_rate, d, adversary, composition, neighbouring, grid, sigma_bounds,
        rtol, eps_tol, tail_mass, max_iter, max_log_step: as in :func:`noise_multiplier`
        (``rtol`` is the gap in ``log δ``).

    Returns:
      σ; differentiable in ``target_delta``, ``epsilon`` and ``sampling_rate``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import calibrate, profile
      >>> s = calibrate.for_delta(1e-5, 1.0, steps=10)
      >>> d = float(profile.npo_delta(1.0, 10**0.5 / s))
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
        composition,
        neighbouring,
        grid,
        sigma_bounds,
        rtol,
        eps_tol,
        tail_mass,
        max_iter,
        max_log_step,
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
    grid: pld.Grid | None = None,
    rate_bounds: tuple | None = None,
    rtol: float | None = None,
    eps_tol: float = 1e-2,
    tail_mass: float = 1e-14,
    max_iter: int = 100,
    max_log_step: float = 2.0,
) -> jax.Array:
    """Largest Poisson sampling rate q ≤ 1 with ε(q) ≤ ``target_epsilon`` (rounds).

    Solves on ``u = −log q`` with the numeric accountant. Returns 1 when q = 1 already
    meets the target (eagerly; under jit the search stays in ``rate_bounds``).

    Args:
      target_epsilon: ε* > 0. delta: δ in (0, 1). noise_multiplier: σ > 0.
      steps: rounds N ≥ 1. d, adversary, neighbouring, rtol, eps_tol, tail_mass,
        max_iter, max_log_step: as in :func:`noise_multiplier`.
      grid: fixed grid (from ``pld.make_grid`` with ``sampling_rate=np.array(rate_bounds)``);
        required under jit/vmap, with ``rate_bounds=(q_lo, q_hi)``.

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
    _check_x64()
    check_range("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    check_range("noise_multiplier", noise_multiplier, lo=0.0, lo_open=True)
    rtol = 1e-8 if rtol is None else rtol
    _check_common(steps, d, adversary, "rounds", neighbouring, rtol, max_iter)
    problem = _Problem(
        "q_for_epsilon",
        adversary,
        int(steps),
        int(d),
        neighbouring,
        False,
        float(rtol),
        int(max_iter),
        float(max_log_step),
    )
    theta = (_f64(target_epsilon), _f64(delta), _f64(noise_multiplier))
    concrete = [_concrete_or_none(v) for v in (target_epsilon, delta, noise_multiplier)]
    if grid is not None or any(c is None for c in concrete):
        if grid is None or rate_bounds is None:
            raise ValueError(
                "inside jit/vmap the numeric accountant needs grid= (pld.make_grid with "
                "sampling_rate=np.array(rate_bounds)) and rate_bounds=(q_lo, q_hi)"
            )
        q_lo, q_hi = rate_bounds
        check_range("rate_bounds[0]", q_lo, lo=0.0, hi=1.0, lo_open=True)
        check_range("rate_bounds[1]", q_hi, lo=0.0, hi=1.0, lo_open=True)
        bounds = (-jnp.log(_f64(q_hi)), -jnp.log(_f64(q_lo)))
        u0 = 0.5 * (bounds[0] + bounds[1])
        return jnp.exp(-_checked_solve(problem, theta, grid, bounds, u0))
    for name, v in zip(("target_epsilon", "delta", "noise_multiplier"), concrete, strict=True):
        if np.ndim(v) != 0:
            raise ValueError(f"eager calibration takes scalars (got an array for {name})")
    eps_c, delta_c, sigma = (float(c) for c in concrete)
    _check_pld_target(delta_c, tail_mass)
    # Guess from the CLT relation q ≈ μ / √(N (e^{1/σ²} − 1)).
    mu = eps_c / math.sqrt(2.0 * math.log(1.25 / delta_c))
    q_guess = min(mu / math.sqrt(steps * math.expm1(min(1.0 / sigma**2, 700.0))), 0.5)
    guess = -math.log(q_guess)

    def block_range(lo, hi):
        return pld.GaussianBlock(
            sigma=sigma,
            sampling_rate=np.asarray(jnp.exp(-_f64([hi, lo]))),
            steps=int(steps),
            adversary=adversary,
            dim=int(d),
        )

    theta_c = (_f64(eps_c), _f64(delta_c), _f64(sigma))
    u, grid = _eager_pld(problem, theta_c, block_range, eps_tol, tail_mass, guess)
    if u == 0.0:
        return jnp.asarray(1.0, jnp.float64)
    bounds = (_f64(max(u - 1e-3, 0.0)), _f64(u + 1e-3))
    return jnp.exp(-_checked_solve(problem, theta, grid, bounds, _f64(u)))


def _epsilon_of_steps(
    target_epsilon, delta, sigma, q, n, d, adversary, neighbouring, eps_tol, tail_mass, composition
):
    if composition == "shared" or (
        adversary == "npo" and q == 1.0 and neighbouring == "add_remove"
    ):
        mu = math.sqrt(n) / sigma
        if adversary == "npo":
            return float(profile.npo_epsilon(delta, mu))
        return float(profile.glrt_epsilon(delta, mu, d))
    block = pld.GaussianBlock(sigma=sigma, sampling_rate=q, steps=n, adversary=adversary, dim=d)
    return float(
        pld.epsilon_for_delta(
            block, delta, neighbouring=neighbouring, eps_tol=eps_tol, tail_mass=tail_mass
        ).upper
    )


def max_steps(
    target_epsilon: float,
    delta: float,
    noise_multiplier: float,
    sampling_rate: float = 1.0,
    d: int = 1,
    adversary: str = "npo",
    *,
    composition: str = "rounds",
    neighbouring: str = "add_remove",
    max_rounds: int = 10**7,
    eps_tol: float = 1e-2,
    tail_mass: float = 1e-14,
) -> int:
    """The most rounds N with ε(N) ≤ ``target_epsilon`` (eager; N is a shape parameter).

    ε is increasing in N. Closed forms (NPO without subsampling, or
    ``composition="shared"``) are inverted directly; the numeric accountant is
    searched by doubling and bisection over integers (each distinct N composes anew,
    so expect a compilation per probe on first use).

    Args:
      target_epsilon: ε* > 0. delta: δ in (0, 1). noise_multiplier: σ > 0.
      sampling_rate, d, adversary, composition, neighbouring, eps_tol, tail_mass: as in
        :func:`noise_multiplier`. max_rounds: the largest N considered.

    Returns:
      N ≥ 1 (an int) with ε(N) ≤ ε* < ε(N + 1), or ``max_rounds`` if that fits.

    Raises:
      ValueError: invalid input, or a single round already exceeds the budget.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import calibrate
      >>> calibrate.max_steps(1.0, 1e-5, noise_multiplier=20.0)
      72
    """
    _check_x64()
    check_range("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    check_range("noise_multiplier", noise_multiplier, lo=0.0, lo_open=True)
    check_range("sampling_rate", sampling_rate, lo=0.0, hi=1.0, lo_open=True)
    check_range("max_rounds", max_rounds, lo=1.0, integer=True)
    _check_common(1, d, adversary, composition, neighbouring, 1e-9, 1)
    _is_closed(sampling_rate, adversary, composition, neighbouring)
    args = (float(target_epsilon), float(delta), float(noise_multiplier), float(sampling_rate))

    def fits(n):
        eps = _epsilon_of_steps(
            *args, n, int(d), adversary, neighbouring, eps_tol, tail_mass, composition
        )
        return eps <= float(target_epsilon)

    if not fits(1):
        raise ValueError(
            f"unreachable target: a single round with noise_multiplier={noise_multiplier!r} "
            f"already exceeds target_epsilon={target_epsilon!r}"
        )
    good, bad = 1, None
    while bad is None:  # doubling
        n = min(2 * good, int(max_rounds))
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
    dim: int
    composition: str
    sigma_npo: float
    sigma_glrt: float
    epsilon_npo: float
    epsilon_glrt: float

    def table(self) -> str:
        """Markdown table of the two adversaries."""
        return "\n".join(
            [
                "| adversary | noise multiplier | epsilon at it | delta |",
                "|---|---|---|---|",
                f"| NPO (Gaussian DP) | {self.sigma_npo:.6f} | {self.epsilon_npo:.9g} "
                f"| {self.delta:.3g} |",
                f"| GLRT (d = {self.dim}) | {self.sigma_glrt:.6f} | {self.epsilon_glrt:.9g} "
                f"| {self.delta:.3g} |",
            ]
        )


def _achieved_epsilon(
    sigma, delta, steps, q, d, adversary, composition, neighbouring, eps_tol, tail_mass
):
    return _epsilon_of_steps(
        0.0, delta, sigma, q, steps, d, adversary, neighbouring, eps_tol, tail_mass, composition
    )


def calibrate(
    target_epsilon: float,
    delta: float,
    steps: int = 1,
    sampling_rate: float = 1.0,
    d: int = 1,
    *,
    composition: str = "rounds",
    neighbouring: str = "add_remove",
    rtol: float | None = None,
    eps_tol: float = 1e-2,
    tail_mass: float = 1e-14,
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
      >>> c = calibrate.calibrate(1.0, 1e-5, steps=10, composition="shared", d=10)
      >>> c.sigma_glrt < c.sigma_npo
      True
    """
    kw = dict(
        composition=composition, neighbouring=neighbouring, eps_tol=eps_tol, tail_mass=tail_mass
    )
    sig = {}
    eps = {}
    for adv in _ADVERSARIES:
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
            composition,
            neighbouring,
            eps_tol,
            tail_mass,
        )
    return Calibration(
        target_epsilon=float(target_epsilon),
        delta=float(delta),
        steps=int(steps),
        sampling_rate=float(sampling_rate),
        dim=int(d),
        composition=composition,
        sigma_npo=sig["npo"],
        sigma_glrt=sig["glrt"],
        epsilon_npo=eps["npo"],
        epsilon_glrt=eps["glrt"],
    )
