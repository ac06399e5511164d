"""The quantile layer: isf, ppf, logisf and logppf by one solver on the smaller tail.

Owns the inversion of the tails: the start (:func:`initial_guess`: Sankaran's
approximation, a small-x expansion in the lower tail (:func:`lower_asymptote`) and
Newton steps on the Lugannani–Rice saddle-point approximation), the step (the
inverted Taylor polynomial of the log tail, :func:`taylor_step`) and the solve by
:func:`glrt_jax._src.solvers.find_root`, all four quantile functions in one jitted
program (:func:`quantile`). Tails, densities and slopes come from
:mod:`~glrt_jax._src.special.dispatch`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from glrt_jax._src import solvers
from glrt_jax._src.numerics import log1mexp, machine_eps, once_if_uniform, promote
from glrt_jax._src.shapes import bucketed
from glrt_jax._src.special import batching, contour, df1, dispatch

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LN2 = math.log(2.0)


# ---------------------------------------------------------------------------
# Quantiles: Taylor steps on the smaller tail, in solvers.find_root
# ---------------------------------------------------------------------------

NEWTON_ITERS = 60  # evaluations, at most (read when tracing; tests lower it)
# Largest step in log x (the start is within 0.6 of the root; see initial_guess).
_MAX_LOG_STEP = 2.0
# Residual of the log tail at which the iteration stops, in ulps of max(1, |log p|).
_RESID_ULPS = 4.0
# Newton steps of the start on the saddle-point approximation, at most; a step
# below _LR_SETTLED (in log x) is left to the solver.
_LR_STEPS = 2
_LR_SETTLED = 3e-3
# Order of the Taylor polynomial of the log tail that each solver step inverts.
_TAYLOR_ORDER = 8
# Newton iterations on that polynomial, from its second-order reversion.
_TAYLOR_NEWTON = 2


def _z_from_logq(logq):
    """Standard normal upper quantile z with Q_N(z) ≈ e^{logq}, any logq ≤ log ½.

    Abramowitz & Stegun 26.2.23 in t = √(−2 logq): absolute error below 4.5e-4,
    ample for a start (Sankaran's approximation is itself coarser), and no
    exp/log, so it holds for probabilities far below the smallest double.
    """
    t = jnp.sqrt(-2.0 * logq)
    num = 2.515517 + t * (0.802853 + t * 0.010328)
    den = 1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))
    return t - num / den


def lower_asymptote(logq, k, lam):
    """log x with log cdf(x) ≈ logq from the small-x expansion, and a validity measure.

    With y = x/2, a = k/2, m = λ/2 and A = e^{−m} y^a / Γ(a + 1), expanding
    P(b, y) = y^b / Γ(b + 1) · Σ_n b (−y)^n / ((b + n) n!) inside the mixture gives
    cdf = A (1 + c₁ y + d₂ y² + O(y³)) with c₁ = (m − a)/(a + 1) and
    d₂ = [a(a + 1) − 2m(a + 1) + m²] / (2(a + 1)(a + 2)). The equation
    a v + c₁ e^v + e₂ e^{2v} = logq + m + log Γ(a + 1) in v = log y, with
    e₂ = d₂ − c₁²/2 (the expansion of the log), is solved by four damped Newton
    steps from the one-term root. Returns (log x, size of the neglected terms'
    scale): the guess is good where that measure is small. In log space, so a
    root far below the smallest double is still located.
    """
    a = 0.5 * k
    m = 0.5 * lam
    c1 = (m - a) / (a + 1.0)
    d2 = (a * (a + 1.0) - 2.0 * m * (a + 1.0) + m * m) / (2.0 * (a + 1.0) * (a + 2.0))
    e2 = d2 - 0.5 * c1 * c1
    rhs = logq + m + once_if_uniform(lambda a: lax.lgamma(a + 1.0), a)
    v = rhs / a
    for _ in range(4):
        y = jnp.exp(v)
        g = a * v + y * (c1 + e2 * y) - rhs
        slope = a + y * (c1 + 2.0 * e2 * y)
        v = v - g / jnp.maximum(slope, 0.5 * a)
    y = jnp.exp(v)
    return _LN2 + v, jnp.maximum(0.2 * jnp.abs(c1) * y, jnp.abs(e2) * y * y)


def _lr_logtail(x, k, lam, upper):
    """Lugannani–Rice saddle-point approximation of log sf (``upper``) or log cdf.

    With the saddle point c (``contour.saddle``; r = v − 1, c = r/(2v)),
    w = sign(c) √(2(c x − K(c))), w² = k (r − log(1 + r)) + λ r², and
    ũ = c √K''(c) = r √((k + 2 λ v)/2):
    sf ≈ Q(w) + φ(w)(1/ũ − 1/w) above the mean, cdf ≈ Φ(w) + φ(w)(1/w − 1/ũ)
    below it; on the smaller tail both read Q(|w|)(1 + M(|w|)(1/|ũ| − 1/|w|))
    with the Mills ratio M = φ/Q. Returns (log tail, d log tail/d log x ≈
    ∓ x |c| M(|w|)/|w|, |w| where x is on the requested tail's side of the
    mean, else 0); a start for the solver, not a value to return.
    """
    r = contour.saddle(x, k, lam)
    v = 1.0 + r
    w = jnp.sqrt(k * contour.r_minus_log1p(r) + lam * r * r)
    ut = jnp.abs(r) * jnp.sqrt(0.5 * (k + 2.0 * lam * v))
    lq, ell = df1.log_q_normal(w)  # log Q(|w|) and log Q(|w|) + w²/2
    mills = jnp.exp(-_HALF_LOG_2PI - ell)
    wp = jnp.where(w > 0, w, 1.0)
    log_tail = lq + jnp.log1p(mills * (1.0 / jnp.where(ut > 0, ut, 1.0) - 1.0 / wp))
    slope = jnp.where(upper, -x, x) * mills * (jnp.abs(r) / (2.0 * v)) / wp
    # The approximation is of the tail on the saddle point's side of the mean.
    right_side = jnp.where(upper, r > 0, r < 0)
    return log_tail, slope, jnp.where(right_side, w, 0.0)


def initial_guess(logq, upper, k, lam):
    """Start of the quantile solver, as log x.

    In the lower tail, the two-term small-x expansion (``lower_asymptote``)
    where its neglected terms are at most 0.2: measured over df ≤ 10, nc ≤ 36,
    p ≥ 1e-12 it is within 4 % in x there, where Sankaran's cube-root normal
    approximation can be off by factors up to e^90 (df = 1/2). Elsewhere
    Sankaran's approximation (off by up to e^{±0.7} at (10, 36), p = 1e-12),
    refined by up to ``_LR_STEPS`` Newton steps in log x on the Lugannani–Rice
    approximation (``_lr_logtail``), each taken only if a point of the batch
    still moves by more than ``_LR_SETTLED``. Measured on df ∈ {0.5, 1, 3, 10,
    50, 300, 1e4} × nc ∈ {0, 0.25, 1, 36, 1e3, 1e5}, both tails: for p in
    [1e-12, 0.5] within 1e-2 in log x except at df ≤ 1 (up to 0.15) and small df
    with nc = 36 (up to 0.11), and within 3e-5 wherever df + 2 nc ≥ 100, so the
    solver's first step is usually final; for p down to 1e-300, up to 0.33
    (upper tail, df ≤ 3) and 0.6 (lower tail, (50, 1e3)): a second step.

    ``upper``: solve sf(x) = e^{logq}; else cdf(x) = e^{logq}.
    """
    mu = k + lam
    h = 1.0 - (2.0 / 3.0) * (k + lam) * (k + 3.0 * lam) / (k + 2.0 * lam) ** 2
    p = (k + 2.0 * lam) / mu**2
    mm = (h - 1.0) * (1.0 - 3.0 * h)
    mean = 1.0 + h * p * (h - 1.0 - 0.5 * (2.0 - h) * mm * p)
    sd = h * jnp.sqrt(2.0 * p * (1.0 + 0.5 * mm * p))
    z = _z_from_logq(logq)
    z = jnp.where(upper, z, -z)
    base = mean + sd * z
    u_sank = jnp.log(mu) + jnp.log(jnp.maximum(base, 1e-3)) / h
    lower = ~upper

    def small_x_expansion(u):
        u_low, neglected = lower_asymptote(logq, k, lam)
        use = lower & jnp.isfinite(u_low) & ((neglected <= 0.2) | (base <= 1e-3))
        return jnp.where(use, u_low, u), use

    u0, use_low = lax.cond(
        jnp.any(lower), small_x_expansion, lambda u: (u, jnp.zeros(u.shape, bool)), u_sank
    )

    def lugannani_rice(u0, moving):
        log_tail, slope, w = _lr_logtail(jnp.exp(u0), k, lam, upper)
        step = jnp.clip((log_tail - logq) / slope, -2.0, 2.0)
        sloped = jnp.where(upper, slope < 0, slope > 0)
        ok = moving & (w > 0.1) & sloped & jnp.isfinite(step)
        return jnp.where(ok, u0 - step, u0), ok & (jnp.abs(step) > _LR_SETTLED)

    # Newton steps on the approximation while a point still moves by more than
    # the solver's first step absorbs (each step only if one does).
    moving = ~use_low
    for _ in range(_LR_STEPS):
        u0, moving = lax.cond(
            jnp.any(moving), lugannani_rice, lambda u, mv: (u, jnp.zeros_like(mv)), u0, moving
        )
    return u0


def taylor_step(c, lval, lpdf, dlpdf, x, upper, k, lam):
    """Step t in u = log x with log tail(x e^t) = lval + c, from one evaluation.

    With ν = k/2 − 1, z = √(λx) and q = z I_{ν+1}(z)/I_ν(z), the density obeys
    2 x ℓ' = 2ν − x + q (ℓ = log pdf), and Bessel's recurrence gives the Riccati
    equation D q = (λx − 2ν q − q²)/2 in D = d/du. The log tail F = log sf or
    log cdf has D F = g with g = ∓x pdf/tail, and D g = g (1 + xℓ' − g)
    = g ((k − x + q)/2 − g). So the Taylor coefficients of F in t, to any order,
    follow by recursion from (F, g, q) at one point: F from the evaluation, g
    from the density, q from d log pdf/dx (O(order²) operations, no further
    evaluation). The polynomial of order ``_TAYLOR_ORDER`` is inverted by
    Newton iterations from its second-order reversion. Halley's method is the
    order-2 case of this step.

    Returns (t, an error bound in units of F, the Newton step c / F₁). The
    bound is the polynomial's residual plus twice the last two kept terms and
    the first neglected one at t: the terms decay geometrically inside the
    radius of convergence, but complex singularities make them oscillate, so
    one small term alone proves nothing.
    """
    order = _TAYLOR_ORDER
    g = [jnp.where(upper, -x, x) * jnp.exp(lpdf - lval)]
    q = [2.0 * x * dlpdf + x - k + 2.0]
    a = []  # (k − x + q)/2 − g
    for n in range(order):
        x_n = x * (1.0 / math.factorial(n))
        a.append(0.5 * (q[n] - x_n + (k if n == 0 else 0.0)) - g[n])
        g.append(sum(g[i] * a[n - i] for i in range(n + 1)) * (1.0 / (n + 1)))
        if n + 1 < order:
            qq = sum(q[i] * q[n - i] for i in range(n + 1))
            q.append((lam * x_n - (k - 2.0) * q[n] - qq) * (0.5 / (n + 1)))
    f = [g[n - 1] * (1.0 / n) for n in range(1, order + 2)]  # F_1 .. F_{order+1}

    def poly(t):
        """(Σ_{n≤order} F_n t^n, its derivative), by Horner."""
        p, dp = f[order - 1], order * f[order - 1]
        for n in range(order - 1, 0, -1):
            p, dp = p * t + f[n - 1], dp * t + n * f[n - 1]
        return p * t, dp

    newton = c / f[0]
    # Second-order reversion, then Newton on the polynomial (quadratic from an
    # error of O(t³)).
    t = newton * (1.0 - newton * f[1] / f[0])
    for _ in range(_TAYLOR_NEWTON):
        p, dp = poly(t)
        t = t - (p - c) / dp
    p, _ = poly(t)
    at = jnp.abs(t)
    tail = sum(jnp.abs(f[n - 1]) * at**n for n in (order - 1, order, order + 1))
    return t, jnp.abs(p - c) + 2.0 * tail, newton


def _quantile_residual(u, theta):
    """log tail(e^u) − logq, its slope in u and the Taylor step (``taylor_step``).

    The step is the inverted Taylor polynomial where its higher terms are a correction
    to Newton's, with its error bound (within the tolerance, the solver takes it without
    a confirming evaluation); else Newton's step, in x for the upper tail (where log sf
    is nearly linear in x), in u for the lower one.
    """
    logq, upper, k, lam = theta
    x = jnp.exp(u)
    lval, lpdf, dlpdf = dispatch.eval_logtail(x, k, lam, upper, True)
    f = lval - logq
    # The barrier keeps XLA from recomputing the step in each consumer.
    t, t_err, t_newton = lax.optimization_barrier(
        taylor_step(-f, lval, lpdf, dlpdf, x, upper, k, lam)
    )
    use_taylor = jnp.isfinite(t) & (jnp.abs(t - t_newton) <= 0.5 * jnp.abs(t_newton))
    x_newton = x * (1.0 + t_newton)
    newton = jnp.where(upper, jnp.log(jnp.where(x_newton > 0, x_newton, 0.5 * x)) - u, t_newton)
    slope = jnp.where(upper, -x, x) * jnp.exp(lpdf - lval)
    return solvers.Residual(
        f,
        slope,
        step=jnp.where(use_taylor, t, newton),
        step_bound=jnp.where(use_taylor, t_err, jnp.inf),
    )


def _solve_tail(logq, upper, k, lam):
    """x with log sf(x) = logq (upper) or log cdf(x) = logq (lower). 1-D arrays.

    :func:`glrt_jax._src.solvers.find_root` (``side="any"``) in u = log x, on the log
    tail (decreasing in u for the upper tail, increasing for the lower), with the steps
    of ``_quantile_residual``: each evaluates the tail, the density and its slope once
    and inverts the Taylor polynomial of the log tail, whose error bound says when to
    stop; from ``initial_guess``, which is close enough that one step is usually
    final. It also stops when the residual is at the rounding level of the tail
    (``_RESID_ULPS`` ulps of max(1, |log p|)) or the step at that of u. Searched
    between the logs of the smallest normal double (times e) and of the largest
    (over e): a root below is returned as 0, one above as inf; NaN if not converged in
    ``NEWTON_ITERS`` evaluations.
    """
    dtype = logq.dtype
    eps = machine_eps(dtype)
    finfo = jnp.finfo(dtype)
    lo = math.log(float(finfo.tiny)) + 1.0
    hi = math.log(float(finfo.max)) - 1.0
    # A start beyond the doubles (a lower-tail root below the smallest one) is
    # clipped into the interval; the first evaluation then ends such a point.
    u0 = jnp.clip(initial_guess(logq, upper, k, lam), lo, hi)
    root = solvers.find_root(
        _quantile_residual,
        (logq, upper, k, lam),
        lo,
        hi,
        u0,
        ftol=_RESID_ULPS * eps * jnp.maximum(1.0, jnp.abs(logq)),
        xtol=64.0 * eps,
        xrtol=64.0 * eps,
        side="any",
        increasing=~upper,
        residual=True,
        max_iter=NEWTON_ITERS,
        max_step=_MAX_LOG_STEP,
    )
    x = jnp.where(root.status == solvers.ROOT_BELOW, 0.0, jnp.exp(root.x))
    return jnp.where(root.status == solvers.ROOT_ABOVE, jnp.inf, x)


def _kernel_quantile(logq, upper, df, nc):
    """Quantile for a probability given in log space on the stated tail."""
    bad = dispatch.bad_params(df, nc) | jnp.isnan(logq) | (logq > 0)
    dfs = jnp.where(bad, 1.0, df)
    ncs = jnp.where(bad, 0.0, nc)
    interior = ~bad & (logq < 0) & jnp.isfinite(logq)
    lq = jnp.where(interior, logq, -1.0)
    x = _solve_tail(lq, upper, dfs, ncs)
    # Boundaries: probability 1 on the tail -> x = 0 (upper) / inf (lower);
    # probability 0 on the tail -> x = inf (upper) / 0 (lower).
    at_one = jnp.where(upper, 0.0, jnp.inf)
    at_zero = jnp.where(upper, jnp.inf, 0.0)
    x = jnp.where(logq == 0, at_one, jnp.where(jnp.isneginf(logq), at_zero, x))
    return (jnp.where(bad, jnp.nan, x),)


def _quantile_impl(logq, upper, df, nc):
    logq, df, nc = promote(logq, df, nc)
    upper = jnp.broadcast_to(upper, logq.shape)
    return batching.chunked(_kernel_quantile, logq, upper, df, nc, n_out=1)[0]


@jax.jit
def _quantile_any(v, log_input, lower_tail, df, nc):
    """The four quantile functions in one program (one compilation serves all four).

    ``v`` is a probability, or a log-probability where ``log_input``; the quantile
    is of the survival function, or of the cdf where ``lower_tail``. The solver
    works on whichever tail is smaller.
    """
    v, df, nc = promote(v, df, nc)
    log_input = jnp.broadcast_to(log_input, v.shape)
    lower_tail = jnp.broadcast_to(lower_tail, v.shape)
    small = jnp.where(log_input, v <= -_LN2, v <= 0.5)
    logv = jnp.where(log_input, v, jnp.log(v))

    def other_tail(logq):
        log_other = jnp.where(log_input, log1mexp(jnp.minimum(v, 0.0)), jnp.log1p(-v))
        return jnp.where(small, logq, log_other)

    # log(1 − p) only where a point of the batch asks for the larger tail.
    logq = lax.cond(jnp.all(small), lambda q: q, other_tail, logv)
    out = _quantile_impl(logq, small != lower_tail, df, nc)
    invalid = jnp.where(log_input, v > 0, (v < 0) | (v > 1))
    return jnp.where(invalid, jnp.nan, out)


def quantile(v, df, nc, *, log_input, lower_tail):
    """The quantile of ``v`` (see :func:`_quantile_any`) on arrays of any shape, bucketed."""
    return bucketed(lambda *a: _quantile_any(a[0], log_input, lower_tail, *a[1:]), v, df, nc)
