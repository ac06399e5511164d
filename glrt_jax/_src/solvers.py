"""One root finder: safeguarded, bracketed Newton with implicit-function derivatives.

What is solved
--------------
For a residual ``g(x, θ)`` that is *decreasing* in the scalar ``x`` (after a change of
variable if needed), :func:`find_root` returns the smallest ``x`` it has seen with
``g(x, θ) ≤ 0`` — the *safe* side — once it also has ``g(x, θ) ≥ −ftol`` (tight), or
once the bracket around the sign change is narrower than ``xtol`` (a root at a jump of
``g``: the safe end is returned). Calibration uses the convention "safe = the privacy
guarantee holds", so the answer is never on the wrong side of the target.

Iteration
---------
Newton steps towards the middle of the acceptance band, ``x − (g + ftol/2)/g'`` (``g'``
by forward-mode autodiff), each clipped to ``max_step``. Every evaluated point narrows
a bracket ``[lo, hi]`` (``lo`` the largest unsafe point, ``hi`` the smallest safe one).
A step that leaves the bracket, a non-finite or non-negative slope, or a step that fails
to halve the distance to the band's middle while both sides are known is replaced by
bisection; while only one side is known the iterate moves by ``max_step`` towards the
missing side (never beyond the search bounds). So the iteration converges whatever
``g`` looks like, quadratically where Newton works.

Derivatives
-----------
The loop is not differentiated. A ``custom_jvp`` applies the implicit function theorem
at the returned point: ``dx/dθ = −(∂g/∂θ)/(∂g/∂x)``. Bounds, start and tolerances get no
derivative.

Status
------
:data:`OK` or the reason for failure; ``x`` is NaN unless ``OK``. Eager callers turn the
status into a named error (:func:`raise_for_status`), jitted code gets the NaN.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

OK = 0
MAX_ITER = 1  # no convergence within max_iter evaluations
NO_SAFE = 2  # unsafe at the upper search bound: no safe x in the range
ROOT_BELOW = 3  # safe already at the lower search bound: the root lies below it
NOT_FINITE = 4  # g was NaN at some point

_MESSAGES = {
    MAX_ITER: "did not converge in {max_iter} iterations",
    NO_SAFE: "no {what} in the search range meets the target (unreachable target)",
    ROOT_BELOW: "the {what} that meets the target lies outside the search range",
    NOT_FINITE: "the residual was NaN during the search for the {what}",
}


class _State(NamedTuple):
    it: Any
    x: Any
    lo: Any
    hi: Any
    lo_seen: Any
    hi_seen: Any
    r_prev: Any
    status: Any
    done: Any


def _iterate(fun, theta, lower, upper, x0, ftol, xtol, max_iter, max_step):
    dtype = jnp.result_type(x0, float)

    def value_and_slope(x):
        return jax.jvp(lambda v: fun(v, theta), (x,), (jnp.ones_like(x),))

    def body(st):
        g, dg = value_and_slope(st.x)
        safe = g <= 0
        lo = jnp.where(~safe & (st.x >= st.lo), st.x, st.lo)
        hi = jnp.where(safe & (st.x <= st.hi), st.x, st.hi)
        lo_seen, hi_seen = st.lo_seen | ~safe, st.hi_seen | safe
        tight = safe & (g >= -ftol)
        collapsed = lo_seen & hi_seen & (hi - lo <= xtol)
        below = safe & (st.x <= lower)
        above = ~safe & (st.x >= upper)
        bad = jnp.isnan(g)  # +inf is a legitimate "unsafe", −inf a "safe"
        it = st.it + 1
        status = jnp.select(
            [tight | collapsed, bad, below, above], [OK, NOT_FINITE, ROOT_BELOW, NO_SAFE], MAX_ITER
        )
        done = tight | collapsed | bad | below | above | (it >= max_iter)
        # Newton aims at the middle of the acceptance band [−ftol, 0], so that it lands on
        # the safe side from either side.
        r = g + 0.5 * ftol
        step = jnp.clip(-r / dg, -max_step, max_step)
        xn = st.x + step
        both = lo_seen & hi_seen
        newton_ok = jnp.isfinite(xn) & (dg < 0) & (xn > lo) & (xn < hi)
        newton_ok = newton_ok & ~(both & (jnp.abs(r) > 0.5 * jnp.abs(st.r_prev)))
        one_side = jnp.where(
            hi_seen, jnp.maximum(hi - max_step, lower), jnp.minimum(lo + max_step, upper)
        )
        fallback = jnp.where(both, 0.5 * (lo + hi), one_side)
        xn = jnp.clip(jnp.where(newton_ok, xn, fallback), lower, upper)
        x = jnp.where(done, jnp.where(status == OK, hi, st.x), xn)
        return _State(it, x, lo, hi, lo_seen, hi_seen, r, status.astype(jnp.int32), done)

    false = jnp.zeros((), bool)
    init = _State(
        jnp.zeros((), jnp.int32),
        jnp.clip(jnp.asarray(x0, dtype), lower, upper),
        jnp.asarray(lower, dtype),
        jnp.asarray(upper, dtype),
        false,
        false,
        jnp.asarray(jnp.inf, dtype),
        jnp.asarray(MAX_ITER, jnp.int32),
        false,
    )
    return lax.while_loop(lambda st: ~st.done, body, init)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 7, 8))
def _solve(fun, theta, lower, upper, x0, ftol, xtol, max_iter, max_step):
    st = _iterate(fun, theta, lower, upper, x0, ftol, xtol, max_iter, max_step)
    return jnp.where(st.status == OK, st.x, jnp.nan), st.status, st.it


@_solve.defjvp
def _solve_jvp(fun, max_iter, max_step, primals, tangents):
    theta, lower, upper, x0, ftol, xtol = primals
    x, status, it = _solve(fun, theta, lower, upper, x0, ftol, xtol, max_iter, max_step)
    dtheta = jax.tree.map(
        lambda t, d: jnp.zeros_like(t) if jnp.result_type(d) == jax.dtypes.float0 else d,
        theta,
        tangents[0],
    )
    g_theta = jax.jvp(lambda th: fun(x, th), (theta,), (dtheta,))[1]
    g_x = jax.jvp(lambda v: fun(v, theta), (x,), (jnp.ones_like(x),))[1]
    zero = np.zeros(jnp.shape(status), jax.dtypes.float0)
    return (x, status, it), (-g_theta / g_x, zero, zero)


class Root(NamedTuple):
    """Result of :func:`find_root`: ``x`` (NaN unless ``status == OK``), status, evaluations."""

    x: jax.Array
    status: jax.Array
    iterations: jax.Array


def find_root(
    fun: Callable[[jax.Array, Any], jax.Array],
    theta: Any,
    lower,
    upper,
    x0,
    *,
    ftol,
    xtol=1e-12,
    max_iter: int = 100,
    max_step: float = 2.0,
) -> Root:
    """Smallest safe ``x`` (``g(x, θ) ≤ 0``) for a decreasing residual, with ``g ≥ −ftol``.

    Args:
      fun: ``g(x, θ)``, decreasing in the scalar ``x``; traced with jax (jvp).
      theta: pytree of parameters; the returned ``x`` is differentiable in them.
      lower, upper: search interval for ``x``.
      x0: starting point (clipped to the interval).
      ftol: ``g`` in ``[−ftol, 0]`` stops the iteration.
      xtol: a bracket narrower than this stops it too (``g`` has a jump at the root).
      max_iter: most evaluations of ``g`` (static); max_step: largest step in ``x`` (static).

    Returns:
      :class:`Root`. ``x`` is safe whenever ``status == OK`` and NaN otherwise.

    Example:
      >>> import jax.numpy as jnp
      >>> r = find_root(lambda x, c: c - x**3, 2.0, 0.0, 4.0, 1.0, ftol=1e-12)
      >>> bool(abs(r.x - 2.0 ** (1 / 3)) < 1e-6), int(r.status)
      (True, 0)
    """
    theta = jax.tree.map(jnp.asarray, theta)
    lower, upper, x0, ftol, xtol = (jnp.asarray(v) for v in (lower, upper, x0, ftol, xtol))
    x, status, it = _solve(fun, theta, lower, upper, x0, ftol, xtol, int(max_iter), float(max_step))
    return Root(x, status, it)


def raise_for_status(status, *, what: str, x=None, max_iter: int | None = None) -> None:
    """Raise a ``ValueError`` naming ``what`` unless ``status`` is :data:`OK` (eager)."""
    status = int(status)
    if status == OK:
        return
    msg = _MESSAGES.get(status, "failed (status {status})")
    raise ValueError(f"{what}: " + msg.format(what=what, x=x, max_iter=max_iter, status=status))
