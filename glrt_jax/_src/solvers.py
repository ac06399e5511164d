"""The library's one root finder: bracketed, safeguarded Newton with implicit derivatives.

Every equation the library solves for a scalar unknown goes through :func:`find_root`:
calibration (σ or q for a target ε or δ), the tangent thresholds of the GLRT
(``llr.threshold``), ε(δ) of the privacy profiles, the non-central χ² quantiles and the
Clopper–Pearson bounds of the audit. One iteration, one set of stopping rules, one
status convention and one implicit derivative; what differs between the sites (a start
from an asymptotic expansion, a residual in log space, a bracket from known bounds, a
higher-order step) is fed in as start, bounds, residual or step.

What is solved
--------------
``g(x, θ) = 0`` for a scalar unknown ``x``, elementwise: ``lower``, ``upper``, ``x0``
and the tolerances broadcast to one shape, and ``fun`` maps an ``x`` of that shape to
``g`` of that shape (each element depending on its own ``x`` only). ``g`` is monotone
on the search interval: decreasing by default, increasing where ``increasing`` is True
(a bool or a bool array, so one batch may mix both). Internally an increasing element
is solved in ``v = −x``; statuses and results always refer to ``x``.

Two answers, chosen by ``side``:

* ``side="safe"``: the root approached from the side where ``g ≤ 0`` — for decreasing
  ``g`` the smallest ``x`` seen with ``g ≤ 0``, for increasing ``g`` the largest — once
  it also has ``g ≥ −tol`` (tight), or once the bracket around the sign change is
  narrower than ``xtol + xrtol·|x|`` (a root at a jump of ``g``: the safe end is
  returned), or once the step from a safe point towards the band is that short (``g``
  is at its rounding level there: a noisy residual may never be tight). The answer is
  always an evaluated point on the safe side. Calibration ("safe = the privacy
  guarantee holds") and outward-rounded confidence bounds use it.
* ``side="any"``: an ordinary root. It stops when ``|g| ≤ tol`` (and returns that ``x``
  moved by the step computed there, if that step is accepted: it is at most
  ``tol/|g'|`` and makes a smooth root exact to rounding), when the bracket is narrower
  than ``xtol + xrtol·|x|`` (its middle), when the next Newton or bisection step is that
  short (the new iterate, unevaluated: with quadratic convergence it is exact to that
  level), or when the residual certifies a step (below: ``x + step``, unevaluated).

``tol = max(ftol, noise)``: ``ftol`` is the caller's tolerance, ``noise`` the residual's
own rounding level at the point (0 unless the residual reports it).

The residual
------------
``fun(x, θ)`` returns ``g`` as an array; its slope ``∂g/∂x`` then comes from forward-mode
autodiff (one ``jvp``: value and slope from a single evaluation). With ``residual=True``
it returns a :class:`Residual` instead, for callers that know more from the same
evaluation: the slope itself (a closed form, or where ``g`` is a series that should not
be differentiated), the rounding ``noise`` of ``g``, and optionally a ``step`` better
than Newton's (Halley's, a higher-order Taylor inversion, Newton in another variable)
with a ``step_bound`` on ``|g(x + step)|``: a step whose bound is within ``tol``, or
within ``|g'|·(xtol + xrtol·|x|)`` (the step tolerance, through the slope), ends the
search without evaluating its end point (``side="any"`` only). ``llr.threshold`` gives
Halley's step (its second derivative is a closed form: 4 evaluations instead of 6), the
χ² quantiles an inverted Taylor polynomial of order 8 with an error bound (one
evaluation per point on the benchmark cases).

With ``secant=(min_gap, first_diff)`` the slope comes from values alone: the secant to
the nearest point seen at least ``min_gap`` away, and a first step of ``first_diff``
towards the root where there is none (as :class:`HostSecant` steers the eager loop).
The compiled loop then holds ``g``'s value, not its ``jvp``: calibration against the
composition engine, whose derivative in the loop made XLA's compilation of a jitted
calibration 14 s instead of 10.7 s on a 2-core CPU.

Iteration
---------
Each iteration evaluates ``g`` once. The step is the residual's own (if it gives one and
it is finite), else Newton's ``−r/g'``, with ``r = g`` (``side="any"``) or ``r = g + tol/2``
(``side="safe"``: Newton aims at the middle of the acceptance band ``[−tol, 0]`` so that
it lands on the safe side from either side); it is clipped to ``max_step``. Every
evaluated point narrows a bracket ``[lo, hi]`` (in the decreasing orientation ``lo`` is
the largest point with ``g > 0``, ``hi`` the smallest with ``g ≤ 0``). A step that
points the wrong way (a non-negative slope), leaves the bracket, is not finite, or fails
to halve ``|r|`` while both sides are known (unless, with ``side="any"``, it is already
shorter than the step tolerance) is replaced by bisection; while only one side is known
the iterate moves by ``max_step`` towards the missing side (never beyond the search
bounds). So the iteration converges whatever ``g`` looks like, quadratically (or
faster, with a higher-order step) where Newton works. All elements of a batch iterate
together until each is done (or ``max_iter`` evaluations); finished elements are frozen.

Derivatives
-----------
The loop is not differentiated. A ``custom_jvp`` applies the implicit function theorem
at the returned point: ``dx/dθ = −(∂g/∂θ)/(∂g/∂x)``, with ``∂g/∂x`` by ``jvp`` in ``x``
(or the residual's slope). Where every leaf of ``θ`` that carries a tangent is a scalar
(calibration's parameters, or any ``θ`` inside ``jax.vmap``, whose rule sees one
element), ``∂g/∂θ_i`` are computed as values, one ``jvp`` column per such leaf under one
``vmap`` (leaves without a tangent are skipped: symbolic zeros), and the tangent of ``x``
is ``−Σ_i (∂g/∂θ_i) dθ_i/(∂g/∂x)``: reverse mode then transposes that sum, not ``fun``.
For the jitted, vmapped gradient of ``calibrate.noise_multiplier`` this took XLA's
compilation from 24.9–29.8 to 21.0–23.8 s (2-core CPU, alternating processes; tracing
unchanged by it, about 14 s, then 10 s with ``_same_trace_context``).
Otherwise (array leaves: an elementwise batch without ``vmap``) ``∂g/∂θ·dθ`` is one
``jvp`` of ``fun`` in ``θ``, and for reverse mode the tangent of ``g`` in ``θ`` must be
transposable (plain jax operations or ``custom_jvp`` pieces with
closed-form partials; no ``while_loop`` on tangents). Bounds, start, tolerances and
``increasing`` get no derivative; where the solve failed the tangent is NaN (and a
cotangent that is zero there stays finite).

Status
------
:data:`OK` or the reason for failure; ``x`` is NaN unless ``OK``. Eager callers turn the
status into a named error (:func:`raise_for_status`), jitted code gets the NaN (a caller
may map a status to a boundary value, e.g. ``ROOT_BELOW`` → 0).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_derivatives import SymbolicZero

OK = 0
MAX_ITER = 1  # no convergence within max_iter evaluations
ROOT_ABOVE = 2  # the root lies above the upper search bound
NO_SAFE = ROOT_ABOVE  # decreasing g, safe side: unsafe at the upper bound, no safe x in range
ROOT_BELOW = 3  # the root lies below the lower search bound (decreasing g, safe side: safe there)
NOT_FINITE = 4  # g was NaN at some point

_MESSAGES = {
    MAX_ITER: "did not converge in {max_iter} iterations",
    ROOT_ABOVE: "no {what} in the search range meets the target (unreachable target)",
    ROOT_BELOW: "the {what} that meets the target lies outside the search range",
    NOT_FINITE: "the residual was NaN during the search for the {what}",
}

_SIDES = ("safe", "any")

# Secant slopes (``find_root(secant=...)`` and :class:`HostSecant`): the secant to the
# nearest point seen at least ``SECANT[0]`` away (a residual's rounding of about 1e-12
# relative then moves the slope by about 1e-3 at most), and where there is none a first
# step of ``SECANT[1]``. The slope only steers the step: where the residual jumps between
# two points (the certified bound's internal choices change) and the secant misleads, the
# safeguards bisect. Secants to points at least 0.01 away (before 2026-11-29) converged
# linearly near the root: one evaluation more on each of seven eager calibrations of σ
# (NPO and GLRT d = 10, N = 100 to 10⁶), the same on four of risk calibration.
SECANT = (1e-9, 0.02)


class Residual(NamedTuple):
    """One evaluation of a residual that knows more than its value (``residual=True``).

    Attributes:
      value: ``g(x, θ)``.
      slope: ``∂g/∂x`` at the same point.
      noise: rounding level of ``value``; ``|g| ≤ max(ftol, noise)`` counts as converged
        (on the safe side only, with ``side="safe"``). None: 0.
      step: a step in ``x`` towards ``g = 0`` to use instead of Newton's (NaN: Newton's).
        None: Newton's.
      step_bound: a bound on ``|g(x + step)|``; at most the tolerance (or the step
        tolerance times ``|slope|``), ``x + step`` is returned without evaluating it
        (``side="any"``). None: never.
    """

    value: Any
    slope: Any
    noise: Any = None
    step: Any = None
    step_bound: Any = None


class _State(NamedTuple):
    it: Any  # evaluations so far (the loop counter)
    x: Any  # current iterate (in v = ±x, where g is decreasing)
    lo: Any  # largest point seen with g > 0 (or the lower search bound)
    hi: Any  # smallest point seen with g ≤ 0 (or the upper search bound)
    lo_seen: Any
    hi_seen: Any
    r_prev: Any  # residual aimed at, at the previous iterate
    status: Any
    done: Any
    evals: Any  # evaluations per element
    seen_x: Any  # with a secant slope: the points evaluated so far, (max_iter, *shape)
    seen_g: Any  # and their values (NaN: not evaluated, or not finite); else (0, *shape)


def _sign_flip(status, flip):
    """Statuses found in v = −x, told in x (below ↔ above)."""
    swapped = jnp.where(
        status == ROOT_BELOW, ROOT_ABOVE, jnp.where(status == ROOT_ABOVE, ROOT_BELOW, status)
    )
    return jnp.where(flip, swapped, status)


def _materialize(tree, token):
    """``tree`` itself, computed once and stored: a fusion barrier.

    The evaluation's outputs feed many state updates; XLA (on CPU) fuses the cheap tail of
    the evaluation (e.g. the end of an ``lgamma``) into each of those consumers, which
    costs about a third of an evaluation per iteration. ``lax.optimization_barrier`` is
    removed before fusion there; nothing is fused across a conditional. Its predicate is
    always true but not foldable (``x == x`` is false for NaN), so the other branch
    never runs (under ``vmap`` the conditional becomes a select of the same values).
    Concrete values (the eager loop) are returned as they are: there is nothing to fuse,
    and an eager conditional would be dispatched (and traced) anew at every iteration.
    """
    if not any(isinstance(v, jax.core.Tracer) for v in jax.tree.leaves((tree, token))):
        return tree
    keep = jnp.all(token == token) | jnp.any(token != token)
    return lax.cond(keep, lambda t: t, lambda t: jax.tree.map(jnp.zeros_like, t), tree)


def _secant_slope(v, g, seen_v, seen_g, min_gap):
    """The secant from ``(v, g)`` to the nearest point seen at least ``min_gap`` away
    (as :class:`HostSecant` takes it); NaN where there is none."""
    dist = jnp.abs(seen_v - v)
    far = (dist >= min_gap) & jnp.isfinite(seen_g)
    j = jnp.argmin(jnp.where(far, dist, jnp.inf), axis=0)
    ref_v = jnp.take_along_axis(seen_v, j[None], axis=0)[0]
    ref_g = jnp.take_along_axis(seen_g, j[None], axis=0)[0]
    return jnp.where(jnp.any(far, axis=0), (g - ref_g) / (v - ref_v), jnp.nan)


def _advance(st, ev, consts, *, safe_side, secant, max_step):
    """One iteration's update of the state from its evaluation ``ev`` (``g``, its slope,
    the tolerance there, the residual's own step and its bound)."""
    g, dg, tol, own_step, bound = ev
    xtol, xrtol, lo_b, hi_b = consts
    x = st.x
    safe, unsafe = g <= 0, g > 0  # NaN is neither
    lo = jnp.where(unsafe & (x >= st.lo), x, st.lo)
    hi = jnp.where(safe & (x <= st.hi), x, st.hi)
    lo_seen, hi_seen = st.lo_seen | unsafe, st.hi_seen | safe
    both = lo_seen & hi_seen
    width = xtol + xrtol * jnp.maximum(jnp.abs(lo), jnp.abs(hi))
    collapsed = both & (hi - lo <= width)

    # The step: the residual's own, else Newton's; aimed at the middle of the
    # acceptance band on the safe side.
    r = g + 0.5 * tol if safe_side else g
    newton = -r / dg
    if secant is not None:
        # No slope yet (the first point, or none far enough): a probe of first_diff
        # towards the root, whose value gives the next secant.
        step = jnp.where(jnp.isfinite(dg), newton, secant[1] * jnp.sign(r))
    elif own_step is None:
        step = newton
    else:
        aimed = own_step - 0.5 * tol / dg if safe_side else own_step
        step = jnp.where(jnp.isfinite(own_step), aimed, newton)
    step = jnp.clip(step, -max_step, max_step)
    xn = x + step
    inside = (xn > lo) & (xn < hi)
    slow = both & (jnp.abs(r) > 0.5 * jnp.abs(st.r_prev))
    if not safe_side:
        # At the rounding level of g, |r| stops shrinking and x + step may round to
        # x (an end of the bracket): a step within the tolerance is final, not a
        # reason to bisect.
        tiny = jnp.abs(step) <= xtol + xrtol * jnp.abs(x)
        inside = inside | (tiny & (xn >= lo) & (xn <= hi))
        slow = slow & ~tiny
    step_ok = jnp.isfinite(xn) & (jnp.sign(step) == jnp.sign(r)) & inside & ~slow
    one_side = jnp.where(
        hi_seen, jnp.maximum(hi - max_step, lo_b), jnp.minimum(lo + max_step, hi_b)
    )
    fallback = jnp.where(both, 0.5 * (lo + hi), one_side)
    x_next = jnp.clip(jnp.where(step_ok, xn, fallback), lo_b, hi_b)

    bad = jnp.isnan(g)  # +inf is a legitimate "g > 0", −inf a "g ≤ 0"
    below = safe & (x <= lo_b)
    above = unsafe & (x >= hi_b)
    if safe_side:
        tight = safe & (g >= -tol)
        found = tight | collapsed
        x_found = hi
        # A valid step towards the band shorter than the x tolerance, from a safe
        # point: g is at its rounding level there (a noisy residual may never be
        # tight); the best safe point seen is the answer.
        short = (
            safe
            & jnp.isfinite(step)
            & (jnp.sign(step) == jnp.sign(r))
            & (jnp.abs(step) <= xtol + xrtol * jnp.abs(x))
        )
    else:
        tight = jnp.abs(g) <= tol
        certified, x_cert = jnp.zeros(jnp.shape(x), bool), x
        if own_step is not None and bound is not None:
            x_cert = x + own_step
            # Within the tolerance in g, or (through the slope) in x.
            x_room = jnp.abs(dg) * (xtol + xrtol * jnp.abs(x_cert))
            certified = (
                jnp.isfinite(x_cert)
                & (bound <= jnp.maximum(tol, x_room))
                & (x_cert >= lo)
                & (x_cert <= hi)
                & (jnp.abs(own_step) <= max_step)
            )
        found = tight | certified | collapsed
        # At a tight point the accepted step is taken as well (it is at most tol/|g'|
        # and, where g is smooth, makes the answer exact to rounding).
        x_tight = jnp.where(step_ok, xn, x)
        x_found = jnp.where(tight, x_tight, jnp.where(certified, x_cert, 0.5 * (lo + hi)))
        # A short step (Newton, or bisection of a known bracket) ends it too; a move
        # towards an unseen side does not (the bound may hold the root beyond it).
        short = (step_ok | both) & (jnp.abs(x_next - x) <= xtol + xrtol * jnp.abs(x))
        x_found = jnp.where(found, x_found, x_next)
    status = jnp.select(
        [found, bad, below, above, short],
        [OK, NOT_FINITE, ROOT_BELOW, ROOT_ABOVE, OK],
        MAX_ITER,
    ).astype(jnp.int32)
    finished = status != MAX_ITER
    x_new = jnp.where(finished, jnp.where(status == OK, x_found, x), x_next)
    if secant is not None:
        seen_x = st.seen_x.at[st.it].set(x)
        seen_g = st.seen_g.at[st.it].set(jnp.where(jnp.isfinite(g), g, jnp.nan))
    else:
        seen_x, seen_g = st.seen_x, st.seen_g
    new = _State(
        st.it + 1,
        x_new,
        lo,
        hi,
        lo_seen,
        hi_seen,
        r,
        status,
        finished,
        st.evals + 1,
        seen_x,
        seen_g,
    )
    keep = st.done
    return _State(new.it, *(jnp.where(keep, o, n) for o, n in zip(st[1:], new[1:], strict=True)))


def _initial(x0, lo_b, hi_b, *, shape, n_seen):
    """The state before the first evaluation (``x0`` and the bounds in ``v``; ``n_seen``:
    the points a secant search records)."""
    dtype = jnp.result_type(x0)

    def full(v):
        return jnp.broadcast_to(jnp.asarray(v, dtype), shape)

    false = jnp.zeros(shape, bool)
    return _State(
        jnp.zeros((), jnp.int32),
        full(jnp.clip(x0, lo_b, hi_b)),
        full(lo_b),
        full(hi_b),
        false,
        false,
        jnp.full(shape, jnp.inf, dtype),
        jnp.full(shape, MAX_ITER, jnp.int32),
        false,
        jnp.zeros(shape, jnp.int32),
        jnp.zeros((n_seen, *shape), dtype),
        jnp.full((n_seen, *shape), jnp.nan, dtype),
    )


def _more(st, *, max_iter):
    return jnp.any(~st.done) & (st.it < max_iter)


# The start, update and test compiled once per kind of search, for the eager loop: run
# operation by operation they compiled about 55 small programs in a fresh process.
_advance_eager = jax.jit(_advance, static_argnames=("safe_side", "secant", "max_step"))
_initial_eager = jax.jit(_initial, static_argnames=("shape", "n_seen"))
_more_eager = jax.jit(_more, static_argnames=("max_iter",))


def _iterate(fun, theta, lower, upper, x0, ftol, xtol, xrtol, increasing, opts):
    side, residual, max_iter, max_step, direction, eager, secant = opts
    if direction is not None:  # one static direction for the whole batch
        increasing = direction
    safe_side = side == "safe"
    dtype = jnp.result_type(x0, lower, upper, float)
    shape = jnp.broadcast_shapes(*(jnp.shape(v) for v in (lower, upper, x0, ftol, xtol, xrtol)))
    shape = jnp.broadcast_shapes(shape, jnp.shape(increasing))

    # Loop invariants keep their own (usually scalar) shapes: broadcast, XLA would carry
    # them through the loop as full arrays.
    lower, upper, x0, ftol, xtol, xrtol = (
        jnp.asarray(v, dtype) for v in (lower, upper, x0, ftol, xtol, xrtol)
    )
    if isinstance(increasing, bool):  # one direction for all: no sign arrays
        flip = increasing

        def orient(v):
            return -v if increasing else v

    else:
        flip = jnp.asarray(increasing, bool)
        sgn = jnp.where(flip, -1.0, 1.0).astype(dtype)

        def orient(v):
            return sgn * v

    lo_b = jnp.where(flip, -upper, lower)  # the search interval in v
    hi_b = jnp.where(flip, -lower, upper)

    def full(v):
        return jnp.broadcast_to(jnp.asarray(v, dtype), shape)

    def evaluate(v, st):
        x = orient(v)
        if residual:
            res = fun(x, theta)
            g, dg = res.value, res.slope
            noise, step, bound = res.noise, res.step, res.step_bound
        elif secant is not None:  # values only: the slope from the points seen
            g = full(fun(x, theta))
            dg = orient(_secant_slope(v, g, st.seen_x, st.seen_g, secant[0]))
            noise = step = bound = None
        else:
            g, dg = jax.jvp(lambda y: fun(y, theta), (x,), (jnp.ones_like(x),))
            noise = step = bound = None
        g, dg = full(g), orient(full(dg))
        tol = ftol if noise is None else jnp.maximum(ftol, noise)
        step = None if step is None else orient(full(step))
        # The barrier makes XLA compute the evaluation once, instead of fusing (copies of)
        # it into each of its many consumers below.
        return _materialize((g, dg, tol, step, bound), x)

    consts = (xtol, xrtol, lo_b, hi_b)
    static = dict(safe_side=safe_side, secant=secant, max_step=max_step)

    def body(st):
        return _advance(st, evaluate(st.x, st), consts, **static)

    start = dict(shape=shape, n_seen=max_iter if secant is not None else 0)
    if eager:  # the same iteration, driven from the host (fun is an eager program)
        st = _initial_eager(orient(x0), lo_b, hi_b, **start)
        while bool(_more_eager(st, max_iter=max_iter)):
            st = _advance_eager(st, evaluate(st.x, st), consts, **static)
    else:
        init = _initial(orient(x0), lo_b, hi_b, **start)
        st = lax.while_loop(functools.partial(_more, max_iter=max_iter), body, init)
    return orient(st.x), _sign_flip(st.status, flip), st.evals


def _same_trace_context():
    """A context in which JAX's tracing cache serves a jitted function traced again.

    JAX keys its cache of traced jitted functions on the abstract mesh in context, which
    is ``None`` where Python code is traced directly and the empty mesh where a recorded
    equation is evaluated again (the derivative rule below, under ``linearize``): a
    residual's jitted parts (the composition engine's three stages, say) were then traced
    once for the loop and again for the rule. Setting the mesh explicitly (to the one in
    context, the empty one by default) gives both traces one key: the jitted
    ``value_and_grad`` of ``calibrate.noise_multiplier`` over a batch traces each stage
    once, and traces and lowers in 10 instead of 14 s on a 2-core CPU.
    """
    return jax.sharding.use_abstract_mesh(jax.sharding.get_abstract_mesh())


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 9))
def _solve(fun, theta, lower, upper, x0, ftol, xtol, xrtol, increasing, opts):
    # The residual is traced here and again in the derivative rule: one tracing cache key
    # for both. Not in the eager loop: its residual calls the library's eager programs,
    # whose jit caches are keyed on the context too, and would miss there the programs
    # other eager calls compiled (the engine's plan compiled twice in a calibration).
    eager = opts[5]
    with contextlib.nullcontext() if eager else _same_trace_context():
        x, status, evals = _iterate(
            fun, theta, lower, upper, x0, ftol, xtol, xrtol, increasing, opts
        )
    return jnp.where(status == OK, x, jnp.nan), status, evals


def _is_zero(tangent) -> bool:
    return isinstance(tangent, SymbolicZero)


def _is_float(primal) -> bool:
    return jnp.issubdtype(jnp.result_type(primal), jnp.inexact)


def _zero_tangent(primal):
    """A zero tangent usable in ``jax.jvp``: float0 for integer/bool leaves."""
    if _is_float(primal):
        return jnp.zeros_like(primal)
    return np.zeros(jnp.shape(primal), jax.dtypes.float0)


def _tangent_in(primal, tangent):
    """A tangent usable in ``jax.jvp`` (``tangent`` may be a symbolic zero)."""
    if not _is_float(primal) or _is_zero(tangent):
        return _zero_tangent(primal)
    return tangent


def _partials(fun, x, theta, live, residual: bool):
    """``∂g/∂x`` and ``∂g/∂θ_i`` for the scalar leaves ``live`` of θ (a non-empty list
    of leaf indices), as values: one ``jvp`` of ``fun`` per column, under one ``vmap``.

    The slope in ``x`` is a column too, unless the residual gives it (``residual``: then
    from the primal output of the same ``jvp``s).
    """
    leaves, tree = jax.tree.flatten(theta)
    n_x = 0 if residual else 1
    basis = jnp.eye(n_x + len(live), dtype=jnp.result_type(x, float))

    def column(e):
        tangents = [_zero_tangent(v) for v in leaves]
        for j, i in enumerate(live):
            tangents[i] = e[n_x + j].astype(jnp.result_type(leaves[i]))
        dx = e[0] * jnp.ones_like(x) if n_x else jnp.zeros_like(x)
        out, d_out = jax.jvp(fun, (x, theta), (dx, jax.tree.unflatten(tree, tangents)))
        return (out.slope, d_out.value) if residual else (d_out, d_out)

    slopes, cols = jax.vmap(column)(basis)
    return (slopes[0], cols) if residual else (cols[0], cols[1:])


@functools.partial(_solve.defjvp, symbolic_zeros=True)
def _solve_jvp(fun, opts, primals, tangents):
    with _same_trace_context():
        return _implicit_jvp(fun, opts, primals, tangents)


def _implicit_jvp(fun, opts, primals, tangents):
    theta, lower, upper, x0, ftol, xtol, xrtol, increasing = primals
    x, status, evals = _solve(fun, theta, lower, upper, x0, ftol, xtol, xrtol, increasing, opts)
    ok = status == OK
    # Where the solve failed, evaluate at a finite point, so that a zero cotangent there
    # does not meet a NaN coefficient in reverse mode.
    x_at = jnp.where(ok, x, jnp.clip(x0, lower, upper))
    residual = opts[1]
    leaves, tree = jax.tree.flatten(theta)
    # (with symbolic zeros a tuple's tangents may come as a list: leaves in the same order)
    d_leaves = jax.tree.leaves(tangents[0], is_leaf=_is_zero)
    live = [
        i
        for i, (v, t) in enumerate(zip(leaves, d_leaves, strict=True))
        if _is_float(v) and not _is_zero(t)
    ]
    if not live:  # tangents on the bounds, start or tolerances only: no derivative
        g_x, g_theta = jnp.ones_like(x_at), jnp.zeros_like(x_at)
    elif all(jnp.ndim(leaves[i]) == 0 for i in live):
        # Scalar parameters (each element of a vmapped batch, say): their partials as
        # values, so that the tangent below is linear in dθ through a product alone, and
        # reverse mode transposes that product, not fun.
        g_x, cols = _partials(fun, x_at, theta, live, residual)
        g_theta = sum(c * d_leaves[i] for c, i in zip(cols, live, strict=True))
    else:
        dtheta = jax.tree.unflatten(tree, list(map(_tangent_in, leaves, d_leaves)))
        if residual:
            res, dres = jax.jvp(lambda th: fun(x_at, th), (theta,), (dtheta,))
            g_x, g_theta = res.slope, dres.value
        else:
            g_theta = jax.jvp(lambda th: fun(x_at, th), (theta,), (dtheta,))[1]
            g_x = jax.jvp(lambda v: fun(v, theta), (x_at,), (jnp.ones_like(x_at),))[1]
    tan = jnp.where(ok, -g_theta / jnp.where(ok, g_x, 1.0), jnp.nan)
    zero = np.zeros(jnp.shape(status), jax.dtypes.float0)
    return (x, status, evals), (tan, zero, zero)


class Root(NamedTuple):
    """Result of :func:`find_root`: ``x`` (NaN unless ``status == OK``), status, evaluations."""

    x: jax.Array
    status: jax.Array
    iterations: jax.Array


def find_root(
    fun: Callable[[jax.Array, Any], Any],
    theta: Any,
    lower,
    upper,
    x0,
    *,
    ftol,
    xtol=1e-12,
    xrtol=0.0,
    side: Literal["safe", "any"] = "safe",
    increasing=False,
    residual: bool = False,
    max_iter: int = 100,
    max_step: float = 2.0,
    eager: bool = False,
    secant: tuple[float, float] | None = None,
) -> Root:
    """Root of a monotone residual ``g(x, θ)`` in ``[lower, upper]``, elementwise.

    See the module docstring for the iteration, the stopping rules and the derivatives.

    Args:
      fun: ``g(x, θ)`` for ``x`` of the broadcast shape of the bounds, start and
        tolerances (elementwise); traced with jax. Returns an array, or a
        :class:`Residual` when ``residual`` is True. Its parameters should come in
        through ``θ``, not a closure (derivatives flow through ``θ`` only).
      theta: pytree of parameters; the returned ``x`` is differentiable in them.
      lower, upper: search interval (may be ±inf).
      x0: starting point (clipped to the interval). The batch shape is the broadcast
        shape of ``lower``, ``upper``, ``x0``, the tolerances and ``increasing``
        (``θ``'s shape does not enter it).
      ftol: tolerance on ``g``: ``side="safe"`` stops in ``[−tol, 0]``, ``"any"`` when
        ``|g| ≤ tol``, with ``tol = max(ftol, noise)``.
      xtol, xrtol: a bracket (or, with ``side="any"``, a step) shorter than
        ``xtol + xrtol·|x|`` stops it too.
      side: ``"safe"`` (the evaluated point nearest the root with ``g ≤ 0``) or
        ``"any"`` (an ordinary root); static.
      increasing: True (or a bool array) where ``g`` increases in ``x``.
      residual: ``fun`` returns a :class:`Residual` (own slope, noise, step); static.
      max_iter: most evaluations of ``g`` (static); max_step: largest step in ``x`` (static).
      eager: iterate on the host, calling ``fun`` with concrete arrays (for a residual
        that is itself a sequence of compiled programs: nothing of ``fun`` is traced
        or compiled into the loop). ``θ`` must be concrete; no derivatives.
      secant: ``(min_gap, first_diff)``, e.g. :data:`SECANT`: the Newton slope from
        values alone, as :class:`HostSecant` takes it (the secant to the nearest point
        seen at least ``min_gap`` away), and where there is none a probe step of
        ``first_diff`` towards the root (an evaluation of its own). The loop then holds
        ``fun``'s value alone, not its ``jvp``: for a residual that is costly to
        differentiate and whose slope only steers the step. Static; not with
        ``residual``. The derivative of the returned ``x`` is still exact (``∂g/∂x`` by
        ``jvp`` at the root).

    Returns:
      :class:`Root` of the broadcast shape. ``x`` is NaN unless ``status == OK``.

    Example:
      >>> import jax.numpy as jnp
      >>> r = find_root(lambda x, c: c - x**3, 2.0, 0.0, 4.0, 1.0, ftol=1e-12)
      >>> bool(abs(r.x - 2.0 ** (1 / 3)) < 1e-6), int(r.status)
      (True, 0)
      >>> c = jnp.array([0.0, 1.0])
      >>> r = find_root(lambda x, c: jnp.log(x) - c, c, 1e-3, 10.0, jnp.ones(2), ftol=0.0,
      ...               side="any", increasing=True)
      >>> [round(float(v), 6) for v in r.x]
      [1.0, 2.718282]
    """
    if side not in _SIDES:
        raise ValueError(f"side must be one of {_SIDES}, got {side!r}")
    theta = jax.tree.map(jnp.asarray, theta)
    lower, upper, x0, ftol, xtol, xrtol = (
        jnp.asarray(v) for v in (lower, upper, x0, ftol, xtol, xrtol)
    )
    if isinstance(increasing, (bool, np.bool_)):
        direction, increasing = bool(increasing), jnp.zeros((), bool)
    else:
        direction, increasing = None, jnp.asarray(increasing, bool)
    if secant is not None:
        if residual:
            raise ValueError("secant slopes are for residuals without their own slope")
        secant = (float(secant[0]), float(secant[1]))
    opts = (side, bool(residual), int(max_iter), float(max_step), direction, bool(eager), secant)
    x, status, evals = _solve(fun, theta, lower, upper, x0, ftol, xtol, xrtol, increasing, opts)
    return Root(x, status, evals)


class HostSecant:
    """A residual evaluated on the host from values alone, for ``find_root(eager=True)``.

    ``value(x)`` is a Python float function (e.g. a sequence of eager, compiled calls of a
    certified bound). The slope only steers the safeguarded Newton step (the bracket and
    the stopping rule use values alone): the secant to the nearest earlier point at least
    ``min_gap`` away, else a forward difference of length ``first_diff``
    (:data:`SECANT` by default). Use with
    ``residual=True, eager=True``.

    Example:
      >>> r = find_root(HostSecant(lambda u: 2.0 - u**3), (), 0.0, 4.0, 1.0, ftol=1e-12,
      ...               residual=True, eager=True)
      >>> round(float(r.x), 6), int(r.status)
      (1.259921, 0)
    """

    def __init__(self, value: Callable[[float], float], *, min_gap=SECANT[0], first_diff=SECANT[1]):
        self._value, self.min_gap, self.first_diff = value, min_gap, first_diff
        self.seen: list[tuple[float, float]] = []

    def value(self, x: float) -> float:
        g = float(self._value(x))
        if np.isfinite(g):
            self.seen.append((x, g))
        return g

    def __call__(self, x, theta) -> Residual:
        u = float(x)
        g = self.value(u)
        far = [(abs(v - u), v, h) for v, h in self.seen if abs(v - u) >= self.min_gap]
        if far:
            _, v, h = min(far)
        else:
            v = u + self.first_diff
            h = self.value(v)
        return Residual(jnp.asarray(g, jnp.float64), jnp.asarray((h - g) / (v - u), jnp.float64))


def raise_for_status(status, *, what: str, x=None, max_iter: int | None = None) -> None:
    """Raise a ``ValueError`` naming ``what`` unless ``status`` is :data:`OK` (eager).

    ``status`` may be an array: the first failing element is reported.
    """
    status = np.asarray(status)
    bad = status != OK
    if not np.any(bad):
        return
    code = int(status[bad].flat[0]) if status.ndim else int(status)
    msg = _MESSAGES.get(code, "failed (status {status})")
    raise ValueError(f"{what}: " + msg.format(what=what, x=x, max_iter=max_iter, status=code))


def largest_fitting(fits: Callable[[int], bool], good: int, limit: int) -> int:
    """The largest integer found in ``[good, limit]`` with ``fits``, eagerly.

    The integer counterpart of :func:`find_root` for monotone questions asked of an eager,
    certified bound ("do n steps fit the budget?"): doubling from ``good`` (which must fit)
    until a point does not fit or ``limit`` is reached, then bisection. Only evaluated
    points decide: the result was found to fit, and result + 1 was found not to (or is
    beyond ``limit``), whatever the shape of ``fits``.

    Example:
      >>> from glrt_jax._src import solvers
      >>> solvers.largest_fitting(lambda n: n * n <= 50, 1, 10**6)
      7
    """
    bad = None
    while bad is None:  # doubling
        n = min(max(2 * good, good + 1), int(limit))
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
