"""The dispatcher: which method evaluates each point, with domain handling.

Owns the elementwise kernels behind ``logsf``, ``logcdf`` and ``logpdf``
(:func:`kernel_logsf`, …; jitted and chunked in :func:`logsf_impl`, …; and
:func:`kernel_logsf_mixture`, the log sf by the mixture alone) and the tiers
they try, each run only where a point of the chunk may use it: the df = 1 closed form
(:mod:`~glrt_jax._src.special.df1`), the saddle-point contour rule where it is
accurate and cheaper (:mod:`~glrt_jax._src.special.contour`), else the Poisson mixture
(:mod:`~glrt_jax._src.special.mixture`). Invalid parameters, NaN, x ≤ 0 and x = inf
are settled here and never reach the methods. :func:`eval_logsf` and
:func:`eval_logcdf` also give the density and its slope, for the quantile solver.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax

from glrt_jax._src.numerics import log1mexp, promote
from glrt_jax._src.special import batching, contour, df1, mixture

_LN2 = math.log(2.0)


# ---------------------------------------------------------------------------
# Elementwise kernels with domain handling
# ---------------------------------------------------------------------------


def bad_params(df, nc):
    """Mask of invalid parameters: df ≤ 0, nc < 0, either infinite or NaN."""
    return ~(df > 0) | ~(nc >= 0) | jnp.isinf(df) | jnp.isinf(nc)


def _safe_inputs(x, df, nc):
    """Replace points that are handled by a closed-form branch by a benign one."""
    bad = bad_params(df, nc) | jnp.isnan(x)
    interior = ~bad & (x > 0) & jnp.isfinite(x)
    xs = jnp.where(interior, x, 1.0)
    dfs = jnp.where(bad, 1.0, df)
    ncs = jnp.where(bad, 0.0, nc)
    return bad, interior, xs, dfs, ncs


def _tiers(x, a, m, tiers, n_out):
    """First usable result among several methods, each run only where it may serve.

    ``tiers`` are pairs ``(applies, f)``, tried in order: ``applies(x, a, m)`` is a
    cheap mask of the points the method may serve, ``f(x, a, m) -> (outs, usable)``
    evaluates it. A method runs (under ``lax.cond``) only if an unserved point of
    the chunk is in its mask, and then on benign inputs elsewhere, so a batch pays
    only for the methods its points need. The last method must serve every point.
    """
    need = jnp.ones(x.shape, bool)
    outs = tuple(jnp.full_like(x, jnp.nan) for _ in range(n_out))

    def keep(outs, need, *_):
        return outs, need

    def run(outs, need, mine, f):
        xb = jnp.where(mine, x, 1.0)
        ab = jnp.where(mine, a, 1.0)
        mb = jnp.where(mine, m, 0.0)
        new, usable = f(xb, ab, mb)
        take = mine & usable
        outs = tuple(jnp.where(take, n, o) for n, o in zip(new, outs, strict=True))
        return outs, need & ~take

    def attempt(outs, need, applies, f):
        mine = need & applies(x, a, m)
        return lax.cond(jnp.any(mine), functools.partial(run, f=f), keep, outs, need, mine)

    for applies, f in tiers:
        # Once every point is served, later methods are not even tested.
        outs, need = lax.cond(
            jnp.any(need), functools.partial(attempt, applies=applies, f=f), keep, outs, need
        )
    return outs


def _is_df1(x, a, m):
    return a == 0.5


def _everywhere(x, a, m):
    return jnp.ones(x.shape, bool)


def _d1_pdf_pair(x, m, with_pdf):
    """(log pdf, d log pdf/dx) for df = 1 (nc = 2m), or NaNs unless ``with_pdf``."""
    if not with_pdf:
        nan = jnp.full_like(x, jnp.nan)
        return nan, nan
    return df1.logpdf(x, 2.0 * m), df1.dlogpdf(x, 2.0 * m)


def eval_logtail(xs, dfs, ncs, upper, with_pdf=False):
    """(log tail, log pdf, d log pdf/dx) at interior points (NaN unless ``with_pdf``).

    The tail is the survival function where ``upper``, else the cdf: ``upper`` a Python
    bool (one tail for every point) or a boolean array (each point its own; one stack
    of methods serves both, and each Poisson-mixture loop runs only if a point of the
    chunk asks for its tail). Closed form for df = 1, else the saddle-point contour
    where it is accurate, else the Poisson mixture.
    """
    fixed = isinstance(upper, bool)

    def closed(x, a, m):
        lpdf, dlpdf = _d1_pdf_pair(x, m, with_pdf)
        if fixed and upper:
            return (df1.logsf(x, 2.0 * m), lpdf, dlpdf), a == 0.5
        lcdf, usable = df1.logcdf(x, 2.0 * m)
        if fixed:
            return (lcdf, lpdf, dlpdf), (a == 0.5) & usable
        lt = jnp.where(upper, df1.logsf(x, 2.0 * m), lcdf)
        return (lt, lpdf, dlpdf), (a == 0.5) & (upper | usable)

    def contour_rule(x, a, m):
        # The rule gives the tail on the side of the mean x lies on; the other by
        # complement.
        lt, on_upper, lpdf, dlpdf, ok = contour.contour(x, 2.0 * a, 2.0 * m, with_pdf)
        return (jnp.where(on_upper == upper, lt, log1mexp(lt)), lpdf, dlpdf), ok

    def mixture_sums(x, a, m):
        everywhere = jnp.ones(x.shape, bool)
        if fixed:
            sums = mixture.log_sf_sum if upper else mixture.log_cdf_sum
            return sums(x, a, m, with_pdf), everywhere

        def on(sums, mine):
            def run():
                # (benign inputs where the other tail is asked for)
                return sums(jnp.where(mine, x, 1.0), a, jnp.where(mine, m, 0.0), with_pdf)

            def skip():
                return tuple(jnp.full_like(x, jnp.nan) for _ in range(3))

            return lax.cond(jnp.any(mine), run, skip)

        on_sf, on_cdf = on(mixture.log_sf_sum, upper), on(mixture.log_cdf_sum, ~upper)
        return tuple(jnp.where(upper, u, v) for u, v in zip(on_sf, on_cdf, strict=True)), everywhere

    return _tiers(
        xs,
        0.5 * dfs,
        0.5 * ncs,
        ((_is_df1, closed), (contour.contour_applies, contour_rule), (_everywhere, mixture_sums)),
        3,
    )


def eval_logsf(xs, dfs, ncs, with_pdf=False):
    """(log sf, log pdf, d log pdf/dx) at interior points; :func:`eval_logtail`."""
    return eval_logtail(xs, dfs, ncs, True, with_pdf)


def eval_logcdf(xs, dfs, ncs, with_pdf=False):
    """(log cdf, log pdf, d log pdf/dx) at interior points; :func:`eval_logtail`."""
    return eval_logtail(xs, dfs, ncs, False, with_pdf)


def _settled_logsf(x, bad, lsf):
    """log sf at any ``x`` from its value ``lsf`` at the interior points: the domain's
    cases (x ≤ 0, x = inf, invalid parameters) settled."""
    lsf = jnp.minimum(lsf, 0.0)  # rounding (float32) must not give sf > 1
    out = jnp.where(x <= 0, 0.0, jnp.where(jnp.isposinf(x), -jnp.inf, lsf))
    return jnp.where(bad, jnp.nan, out)


def kernel_logsf(x, df, nc):
    """(log sf,) at 1-D points of any value: every domain case settled, NaN if invalid."""
    bad, interior, xs, dfs, ncs = _safe_inputs(x, df, nc)
    lsf, _, _ = eval_logsf(xs, dfs, ncs)
    return (_settled_logsf(x, bad, lsf),)


def kernel_logsf_mixture(x, df, nc):
    """(log sf,) at 1-D points by the Poisson mixture alone; as :func:`kernel_logsf`.

    The values of :func:`kernel_logsf` to its accuracy (either method serves every
    point), with one method in the compiled program instead of three tiers: about half
    the compilation. Its cost grows like √df (the incomplete gamma at the window's start),
    so at large df the dispatcher's contour rule is faster.
    """
    bad, interior, xs, dfs, ncs = _safe_inputs(x, df, nc)
    lsf, _, _ = mixture.log_sf_sum(xs, 0.5 * dfs, 0.5 * ncs)
    return (_settled_logsf(x, bad, lsf),)


def kernel_logsf_mixture_pair(x, df, nc):
    """(log sf, log sf at nc = 0) at 1-D points by the Poisson mixture, sharing the
    incomplete gamma of both (:func:`mixture.log_sf_sum_pair`); as two calls of
    :func:`kernel_logsf_mixture`. The central tail is NaN only where ``df`` or ``x``
    is invalid."""
    bad = bad_params(df, nc) | jnp.isnan(x)
    bad_central = bad_params(df, jnp.zeros_like(nc)) | jnp.isnan(x)
    xs = jnp.where(~bad_central & (x > 0) & jnp.isfinite(x), x, 1.0)
    dfs, ncs = jnp.where(bad_central, 1.0, df), jnp.where(bad, 0.0, nc)
    lsf, lsf_central = mixture.log_sf_sum_pair(xs, 0.5 * dfs, 0.5 * ncs)
    return _settled_logsf(x, bad, lsf), _settled_logsf(x, bad_central, lsf_central)


def _settled_logcdf(x, bad, lcdf):
    """log cdf at any ``x`` from its value ``lcdf`` at the interior points (as
    :func:`_settled_logsf`)."""
    lcdf = jnp.minimum(lcdf, 0.0)
    out = jnp.where(x <= 0, -jnp.inf, jnp.where(jnp.isposinf(x), 0.0, lcdf))
    return jnp.where(bad, jnp.nan, out)


def kernel_logcdf(x, df, nc):
    """(log cdf,) at 1-D points; as :func:`kernel_logsf`."""
    bad, interior, xs, dfs, ncs = _safe_inputs(x, df, nc)
    lcdf, _, _ = eval_logcdf(xs, dfs, ncs)
    return (_settled_logcdf(x, bad, lcdf),)


def kernel_logcdf_mixture(x, df, nc):
    """(log cdf,) at 1-D points by the Poisson mixture alone; as :func:`kernel_logsf_mixture`."""
    bad, interior, xs, dfs, ncs = _safe_inputs(x, df, nc)
    lcdf, _, _ = mixture.log_cdf_sum(xs, 0.5 * dfs, 0.5 * ncs)
    return (_settled_logcdf(x, bad, lcdf),)


def kernel_logpdf(x, df, nc):
    """(log pdf,) at 1-D points; as :func:`kernel_logsf`."""
    bad, interior, xs, dfs, ncs = _safe_inputs(x, df, nc)

    def closed(x, a, m):
        return (df1.logpdf(x, 2.0 * m),), a == 0.5

    def contour_rule(x, a, m):
        _, _, lpdf, _, ok = contour.contour(x, 2.0 * a, 2.0 * m, True)
        return (lpdf,), ok

    def series(x, a, m):
        return (mixture.log_pdf_sum(x, a, m),), jnp.ones(x.shape, bool)

    (lpdf,) = _tiers(
        xs,
        0.5 * dfs,
        0.5 * ncs,
        ((_is_df1, closed), (contour.contour_applies, contour_rule), (_everywhere, series)),
        1,
    )
    # At x = 0 the density is +inf (df < 2), e^{-λ/2}/2 (df = 2) or 0 (df > 2).
    at0 = jnp.where(dfs < 2, jnp.inf, jnp.where(dfs == 2, -_LN2 - 0.5 * ncs, -jnp.inf))
    out = jnp.where(x < 0, -jnp.inf, jnp.where(x == 0, at0, lpdf))
    out = jnp.where(jnp.isposinf(x), -jnp.inf, out)
    return (jnp.where(bad, jnp.nan, out),)


def logsf_df1(x, nc):
    """log sf at 1-D points for df = 1: :func:`kernel_logsf`'s closed-form tier only.

    The same values as :func:`kernel_logsf` at ``df = 1`` (the closed form serves every
    interior point there), without compiling the other tiers.
    """
    bad, interior, xs, dfs, ncs = _safe_inputs(x, jnp.ones_like(x), nc)
    return _settled_logsf(x, bad, df1.logsf(xs, ncs))


def logcdf_df1(x, nc):
    """log cdf at 1-D points for df = 1 by the closed form only; NaN where it is not usable.

    Where the closed form serves (all but a narrow deep-tail region), the values of
    :func:`kernel_logcdf` at ``df = 1``; elsewhere NaN, and the caller must use the
    general kernel (which falls back to the other tiers there).
    """
    bad, interior, xs, dfs, ncs = _safe_inputs(x, jnp.ones_like(x), nc)
    lcdf, usable = df1.logcdf(xs, ncs)
    lcdf = jnp.minimum(jnp.where(usable, lcdf, jnp.nan), 0.0)
    out = jnp.where(x <= 0, -jnp.inf, jnp.where(jnp.isposinf(x), 0.0, lcdf))
    return jnp.where(bad, jnp.nan, out)


@jax.jit
def logsf_impl(x, df, nc):
    """log sf on arrays of any shape: promoted, broadcast, chunked (:func:`kernel_logsf`)."""
    x, df, nc = promote(x, df, nc)
    return batching.chunked(kernel_logsf, x, df, nc, n_out=1)[0]


@jax.jit
def logsf_mixture_impl(x, df, nc):
    """log sf by the Poisson mixture alone (:func:`kernel_logsf_mixture`); as
    :func:`logsf_impl`."""
    x, df, nc = promote(x, df, nc)
    return batching.chunked(kernel_logsf_mixture, x, df, nc, n_out=1)[0]


@jax.jit
def logsf_mixture_pair_impl(x, df, nc):
    """(log sf, log sf at nc = 0) by the Poisson mixture (:func:`kernel_logsf_mixture_pair`);
    as :func:`logsf_impl`."""
    x, df, nc = promote(x, df, nc)
    return batching.chunked(kernel_logsf_mixture_pair, x, df, nc, n_out=2)


@jax.jit
def logcdf_impl(x, df, nc):
    """log cdf on arrays of any shape; as :func:`logsf_impl`."""
    x, df, nc = promote(x, df, nc)
    return batching.chunked(kernel_logcdf, x, df, nc, n_out=1)[0]


@jax.jit
def logcdf_mixture_impl(x, df, nc):
    """log cdf by the Poisson mixture alone (:func:`kernel_logcdf_mixture`); as
    :func:`logsf_impl`."""
    x, df, nc = promote(x, df, nc)
    return batching.chunked(kernel_logcdf_mixture, x, df, nc, n_out=1)[0]


@jax.jit
def logpdf_impl(x, df, nc):
    """log pdf on arrays of any shape; as :func:`logsf_impl`."""
    x, df, nc = promote(x, df, nc)
    return batching.chunked(kernel_logpdf, x, df, nc, n_out=1)[0]
