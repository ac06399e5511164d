"""Non-central chi-squared distribution: accurate, jittable, differentiable.

Notation: ``df = k > 0``, ``nc = λ ≥ 0``, ``a = k/2``, ``m = λ/2``, ``y = x/2``.
The distribution is the Poisson mixture

    sf(x)  = Σ_j w_j Q(a + j, y),      cdf(x) = Σ_j w_j P(a + j, y),
    pdf(x) = Σ_j w_j g(a + j - 1, y) / 2,

with ``w_j = e^{-m} m^j / j!``, ``P``/``Q`` the regularised incomplete gamma
functions and ``g(b, y) = y^b e^{-y} / Γ(b + 1)``.

How it is evaluated:

* Every sum is taken over a window of ``j`` placed around the peak of its summand
  (the posterior mode of the Poisson index given the observation, which in the
  deep upper tail lies many Poisson standard deviations above ``m``), not around
  the Poisson mode.
* Only one incomplete gamma function is evaluated per point, at the end of the
  window; the others follow from the recurrences ``Q(b+1, y) = Q(b, y) + g(b, y)``
  (upwards, for the survival function) and ``P(b, y) = P(b+1, y) + g(b, y)``
  (downwards, for the cdf). Both add positive terms, so they are stable.
* All terms are carried relative to a log-scale offset, so ``logsf``/``logcdf``/
  ``logpdf`` stay finite and accurate far beyond the range of doubles.
* ``log g`` and the Poisson weights use Loader's saddle-point formulas
  (``stirlerr`` and ``bd0``), which keep full relative accuracy for large
  arguments.

* For ``df = 1`` the distribution is that of ``(Z + √nc)²`` and everything is in
  closed form: ``sf = Q(b − a) + Q(b + a)``, ``cdf = Q(a − b) − Q(a + b)``,
  ``pdf = [φ(b − a) + φ(b + a)]/(2b)`` with ``a = √nc``, ``b = √x``, evaluated in
  log space (``b − a = (x − nc)/(b + a)``; ``log Q`` from ``erfc`` up to z = 20 and
  from its asymptotic series beyond). The cdf difference is used only where it
  loses at most a few digits; very small ``x`` falls back to the mixture.

* Where ``df + 2 nc v`` is large (``v`` at the saddle point), the saddle-point
  contour integral replaces the mixture: O(1) work per point, whatever nc.

The sums run in ``lax.while_loop`` over chunks of the flattened input whose size
is chosen per platform when the program is lowered: cache-sized on CPU, so a
batch of millions of points streams through the loop without round-trips to main
memory, and millions of points on accelerators, where each chunk's loop
iterations cost kernel launches.

Layout. This module is the face: the ten public functions, their custom JVPs and the
derivative rules; the algorithms live in :mod:`glrt_jax._src.special`, one module per
method:

* ``special/batching.py``: chunked map of the kernels, chunk sizes per platform;
* ``special/incomplete_gamma.py``: log P and log Q of the incomplete gamma function;
* ``special/mixture.py``: the peak-centred Poisson-mixture sums (sf, cdf, pdf);
* ``special/df1.py``: the df = 1 closed forms;
* ``special/contour.py``: the saddle-point contour integral;
* ``special/dispatch.py``: the dispatcher (which method serves each point) and the
  jitted, chunked kernels of logsf, logcdf and logpdf;
* ``special/quantile.py``: the quantile layer (start, Taylor step, solver).

Shared helpers (``log1mexp``, Loader's ``log_poisson``, dtype promotion) are in
:mod:`glrt_jax._src.numerics`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

from glrt_jax._src.numerics import promote
from glrt_jax._src.shapes import bucketed
from glrt_jax._src.special import dispatch, quantile

# ---------------------------------------------------------------------------
# Public functions with custom JVPs
# ---------------------------------------------------------------------------


def _no_df_tangent(t_df, name):
    if not isinstance(t_df, SymbolicZero):
        raise NotImplementedError(
            f"glrt_jax.ncx2.{name}: the derivative with respect to df is not implemented; "
            "differentiate with respect to x (or p) and nc only, or wrap df in "
            "jax.lax.stop_gradient."
        )


def _tangent(t, like):
    if isinstance(t, SymbolicZero):
        return jnp.zeros_like(like)
    return jnp.broadcast_to(t, like.shape).astype(like.dtype)


@jax.custom_jvp
def logsf(x, df, nc):
    """Log of the survival function of the non-central χ² distribution.

    ``logsf(x, df, nc) = log P[X > x]`` for ``X ~ ncx2(df, nc)``. Finite and
    accurate even when the survival function is far below the smallest double.

    Args:
      x: quantile (broadcasts with ``df`` and ``nc``).
      df: degrees of freedom, real ``> 0``.
      nc: non-centrality ``λ ≥ 0``; ``nc = 0`` is the central χ².

    Returns:
      ``log sf`` in the promoted floating dtype. ``x < 0`` gives 0; invalid
      ``df``/``nc`` or NaN give NaN.

    Derivatives: ``∂/∂x = −pdf/sf``, ``∂/∂nc = pdf(x; df + 2, nc)/sf``; the
    derivative in ``df`` raises ``NotImplementedError``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> float(ncx2.logsf(4000.0, 10.0, 36.0)) < -1500
      True
    """
    return bucketed(dispatch.logsf_impl, x, df, nc)


def _log_tail_tangent(out, x, df, nc, tx, tnc, sign):
    """The tangent of a log tail ``out`` at ``(x, df, nc)``: ``∂/∂x = sign·pdf/tail`` and
    ``∂/∂nc = −sign·pdf(x; df + 2, nc)/tail`` (sign −1: the upper tail); ``tnc=None``: nc
    is a constant."""
    lpdf = logpdf(x, df, nc)
    xb, dfb, ncb = promote(x, df, nc)
    dx = sign * jnp.exp(lpdf - out) * _tangent(tx, out)
    if tnc is None:
        return jnp.where(jnp.isfinite(out), dx, 0.0)
    dnc = -sign * jnp.exp(logpdf(xb, dfb + 2.0, ncb) - out) * _tangent(tnc, out)
    return jnp.where(jnp.isfinite(out), dx + dnc, 0.0)


def _log_tail_jvp_of(fn, upper: bool, name: str):
    """The JVP rule of a log tail ``fn`` (the upper tail if ``upper``, else the lower):
    ``∂/∂x = ∓pdf/tail`` and ``∂/∂nc = ±pdf(x; df + 2, nc)/tail``."""
    sign = -1.0 if upper else 1.0

    def rule(primals, tangents):
        x, df, nc = primals
        tx, tdf, tnc = tangents
        _no_df_tangent(tdf, name)
        out = fn(x, df, nc)
        return out, _log_tail_tangent(out, x, df, nc, tx, tnc, sign)

    return rule


logsf.defjvp(_log_tail_jvp_of(logsf, True, "logsf"), symbolic_zeros=True)


@jax.custom_jvp
def logsf_mixture(x, df, nc):
    """:func:`logsf` by the Poisson mixture alone (not public; for the composition engine).

    The same values and derivatives as :func:`logsf` (both methods are accurate on both
    tails; ``tests/test_ncx2.py`` checks this one on the committed mpmath grid), with one
    method in the compiled program instead of the dispatcher's three tiers: about half
    the compilation (its own program at 1024 points, 2-core CPU, this one against the
    dispatcher: 1.4–1.7 against 2.7–3.5 s; the plan's per-phase part of GLRT's engine at
    K = 1000 phases 3.8 against 4.6 s). Its cost grows like √df, so for large df
    :func:`logsf`, whose contour rule costs the same at any df, is faster (the engine
    switches at ``losses.MIXTURE_MAX_D``).
    """
    return bucketed(dispatch.logsf_mixture_impl, x, df, nc)


logsf_mixture.defjvp(_log_tail_jvp_of(logsf_mixture, True, "logsf"), symbolic_zeros=True)


@jax.custom_jvp
def logcdf_mixture(x, df, nc):
    """:func:`logcdf` by the Poisson mixture alone (not public; for one round's lower tails,
    :mod:`glrt_jax._src.one_round`): the same values and derivatives, one method in the
    compiled program instead of the dispatcher's three tiers (``tests/test_ncx2.py``
    checks it on the committed mpmath grid)."""
    return bucketed(dispatch.logcdf_mixture_impl, x, df, nc)


logcdf_mixture.defjvp(_log_tail_jvp_of(logcdf_mixture, False, "logcdf"), symbolic_zeros=True)


@jax.custom_jvp
def logsf_mixture_pair(x, df, nc):
    """``(logsf_mixture(x, df, nc), logsf_mixture(x, df, 0))`` (not public; for the GLRT's
    tails under both hypotheses at the same points).

    One incomplete gamma serves both where the mixture's window starts at its first term
    (a small non-centrality: the GLRT levels of a round), instead of one per tail (GLRT
    d = 10, a round's 1026 levels: both tails in 0.45 ms stacked in one call, the
    incomplete gamma alone 0.15 ms). The same values and derivatives as the two calls.
    """
    return bucketed(dispatch.logsf_mixture_pair_impl, x, df, nc)


def _logsf_mixture_pair_jvp(primals, tangents):
    x, df, nc = primals
    tx, tdf, tnc = tangents
    _no_df_tangent(tdf, "logsf")
    out, out_central = logsf_mixture_pair(x, df, nc)
    zero = jnp.zeros_like(out_central)
    return (out, out_central), (
        _log_tail_tangent(out, x, df, nc, tx, tnc, -1.0),
        _log_tail_tangent(out_central, x, df, zero, tx, None, -1.0),
    )


logsf_mixture_pair.defjvp(_logsf_mixture_pair_jvp, symbolic_zeros=True)


@jax.custom_jvp
def logcdf(x, df, nc):
    """Log of the cumulative distribution function of the non-central χ².

    Args:
      x: quantile. df: degrees of freedom ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``log P[X ≤ x]``; ``−inf`` for ``x ≤ 0``, NaN for invalid parameters.
      Accurate far below the double range (e.g. ``log cdf ≈ −5000``).

    Derivatives: ``∂/∂x = pdf/cdf``, ``∂/∂nc = −pdf(x; df + 2, nc)/cdf``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> float(ncx2.logcdf(1e-3, 10.0, 36.0)) < -50
      True
    """
    return bucketed(dispatch.logcdf_impl, x, df, nc)


logcdf.defjvp(_log_tail_jvp_of(logcdf, False, "logcdf"), symbolic_zeros=True)


@jax.custom_jvp
def logpdf(x, df, nc):
    """Log of the density of the non-central χ² distribution.

    Args:
      x: point. df: degrees of freedom ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``log pdf``; ``−inf`` for ``x < 0``, NaN for invalid parameters.

    Derivatives (closed form, so higher orders work too):
    ``∂pdf/∂x = ((df/2 − 1)/x − 1/2) pdf_df + nc/(2x) pdf_{df+2}`` and
    ``∂pdf/∂nc = (pdf_{df+2} − pdf_df)/2``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> round(float(jax.numpy.exp(ncx2.logpdf(2.0, 2.0, 0.0))), 12)  # e^{-1}/2
      0.183939720586
    """
    return bucketed(dispatch.logpdf_impl, x, df, nc)


def _logpdf_jvp(primals, tangents):
    x, df, nc = primals
    tx, tdf, tnc = tangents
    _no_df_tangent(tdf, "logpdf")
    out = logpdf(x, df, nc)
    xb, dfb, ncb = promote(x, df, nc)
    r = jnp.exp(logpdf(xb, dfb + 2.0, ncb) - out)
    dldx = (0.5 * dfb - 1.0) / xb - 0.5 + 0.5 * ncb / xb * r
    dldnc = 0.5 * (r - 1.0)
    tan = dldx * _tangent(tx, out) + dldnc * _tangent(tnc, out)
    return out, jnp.where(jnp.isfinite(out), tan, 0.0)


logpdf.defjvp(_logpdf_jvp, symbolic_zeros=True)


def sf(x, df, nc):
    """Survival function ``P[X > x]`` of the non-central χ² distribution.

    Computed as ``exp(logsf)``, so its relative accuracy holds down to the
    smallest normal double; below that it underflows to 0 (use :func:`logsf`).

    Args:
      x: quantile. df: degrees of freedom ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``sf``; 1 for ``x < 0`` (jax.scipy convention), NaN for invalid parameters.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.sf(1.0, 1.0, 0.0)):.12f}"  # 2 Q_N(1)
      '0.317310507863'
    """
    return jnp.exp(logsf(x, df, nc))


def cdf(x, df, nc):
    """Cumulative distribution function ``P[X ≤ x]`` (``exp(logcdf)``).

    Args:
      x: quantile. df: degrees of freedom ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``cdf``; 0 for ``x < 0``, NaN for invalid parameters.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.cdf(2.0, 2.0, 0.0)):.12f}"  # 1 - e^{-1}
      '0.632120558829'
    """
    return jnp.exp(logcdf(x, df, nc))


def pdf(x, df, nc):
    """Density of the non-central χ² distribution (``exp(logpdf)``).

    Args:
      x: point. df: degrees of freedom ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``pdf``; 0 for ``x < 0``, NaN for invalid parameters.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.pdf(2.0, 2.0, 0.0)):.12f}"
      '0.183939720586'
    """
    return jnp.exp(logpdf(x, df, nc))


def _quantile_tangent(x, df, nc, t_nc, dprob_over_pdf):
    """Shared implicit-function tangent of a quantile x(p, nc)."""
    lpdf = logpdf(x, df, nc)
    r = jnp.exp(logpdf(x, df + 2.0, nc) - lpdf)
    return dprob_over_pdf(lpdf) + r * _tangent(t_nc, x)


@jax.custom_jvp
def isf(p, df, nc):
    """Inverse survival function: ``x`` with ``sf(x, df, nc) = p``.

    Solved on the smaller tail by safeguarded steps that invert the log tail's
    Taylor polynomial (usually one evaluation per point), started from
    Sankaran's approximation refined on the Lugannani–Rice saddle-point
    approximation (in the lower tail, where it holds, a small-x expansion);
    relative accuracy ~1e-13 in float64 for ``p`` down to the smallest normal
    double (use :func:`logisf` below that).

    Args:
      p: probability in ``[0, 1]``. df: degrees of freedom ``> 0``.
      nc: non-centrality ``≥ 0``.

    Returns:
      ``x``; ``isf(0) = inf``, ``isf(1) = 0``, NaN outside ``[0, 1]`` or for
      invalid parameters.

    Derivatives: ``∂x/∂p = −1/pdf(x)``, ``∂x/∂nc = pdf(x; df + 2, nc)/pdf(x)``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.isf(0.5, 2.0, 0.0)):.12f}"  # 2 log 2
      '1.386294361120'
    """
    return quantile.quantile(p, df, nc, log_input=False, lower_tail=False)


def _isf_jvp(primals, tangents):
    p, df, nc = primals
    tp, tdf, tnc = tangents
    _no_df_tangent(tdf, "isf")
    x = isf(p, df, nc)
    _, dfb, ncb = promote(x, df, nc)
    tan = _quantile_tangent(x, dfb, ncb, tnc, lambda lpdf: -jnp.exp(-lpdf) * _tangent(tp, x))
    return x, jnp.where(jnp.isfinite(x) & (x > 0), tan, 0.0)


isf.defjvp(_isf_jvp, symbolic_zeros=True)


@jax.custom_jvp
def ppf(p, df, nc):
    """Percent point function: ``x`` with ``cdf(x, df, nc) = p``.

    Args:
      p: probability in ``[0, 1]``. df: degrees of freedom ``> 0``.
      nc: non-centrality ``≥ 0``.

    Returns:
      ``x``; ``ppf(0) = 0``, ``ppf(1) = inf``, NaN outside ``[0, 1]``.

    Derivatives: ``∂x/∂p = 1/pdf(x)``, ``∂x/∂nc = pdf(x; df + 2, nc)/pdf(x)``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.ppf(0.5, 2.0, 0.0)):.12f}"
      '1.386294361120'
    """
    return quantile.quantile(p, df, nc, log_input=False, lower_tail=True)


def _ppf_jvp(primals, tangents):
    p, df, nc = primals
    tp, tdf, tnc = tangents
    _no_df_tangent(tdf, "ppf")
    x = ppf(p, df, nc)
    _, dfb, ncb = promote(x, df, nc)
    tan = _quantile_tangent(x, dfb, ncb, tnc, lambda lpdf: jnp.exp(-lpdf) * _tangent(tp, x))
    return x, jnp.where(jnp.isfinite(x) & (x > 0), tan, 0.0)


ppf.defjvp(_ppf_jvp, symbolic_zeros=True)


@jax.custom_jvp
def logisf(logp, df, nc):
    """``x`` with ``logsf(x, df, nc) = logp``: inverts probabilities below 1e-308.

    Args:
      logp: log-probability ``≤ 0`` (e.g. ``-10000``). df: degrees of freedom
        ``> 0``. nc: non-centrality ``≥ 0``.

    Returns:
      ``x``; ``logisf(0) = 0``, ``logisf(-inf) = inf``, NaN for ``logp > 0``.

    Derivatives: ``∂x/∂logp = −sf/pdf``, ``∂x/∂nc = pdf(x; df + 2, nc)/pdf(x)``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> f"{float(ncx2.logisf(-1000.0, 2.0, 0.0)):.6f}"  # sf = e^{-x/2}
      '2000.000000'
    """
    return quantile.quantile(logp, df, nc, log_input=True, lower_tail=False)


def _logisf_jvp(primals, tangents):
    lp, df, nc = primals
    tlp, tdf, tnc = tangents
    _no_df_tangent(tdf, "logisf")
    x = logisf(lp, df, nc)
    lpb, dfb, ncb = promote(lp, df, nc)
    tan = _quantile_tangent(x, dfb, ncb, tnc, lambda lpdf: -jnp.exp(lpb - lpdf) * _tangent(tlp, x))
    return x, jnp.where(jnp.isfinite(x) & (x > 0), tan, 0.0)


logisf.defjvp(_logisf_jvp, symbolic_zeros=True)


@jax.custom_jvp
def logppf(logp, df, nc):
    """``x`` with ``logcdf(x, df, nc) = logp``: the lower-tail twin of :func:`logisf`.

    Args:
      logp: log-probability ``≤ 0``. df: degrees of freedom ``> 0``.
      nc: non-centrality ``≥ 0``.

    Returns:
      ``x``; ``logppf(0) = inf``, ``logppf(-inf) = 0``, NaN for ``logp > 0``.

    Derivatives: ``∂x/∂logp = cdf/pdf``, ``∂x/∂nc = pdf(x; df + 2, nc)/pdf(x)``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import ncx2
      >>> x = float(ncx2.logppf(-600.0, 2.0, 0.0))  # cdf = 1 − e^{−x/2}: x ≈ 2e^{−600}
      >>> f"{x:.10e}"
      '5.3007931060e-261'
    """
    return quantile.quantile(logp, df, nc, log_input=True, lower_tail=True)


def _logppf_jvp(primals, tangents):
    lp, df, nc = primals
    tlp, tdf, tnc = tangents
    _no_df_tangent(tdf, "logppf")
    x = logppf(lp, df, nc)
    lpb, dfb, ncb = promote(lp, df, nc)
    tan = _quantile_tangent(x, dfb, ncb, tnc, lambda lpdf: jnp.exp(lpb - lpdf) * _tangent(tlp, x))
    return x, jnp.where(jnp.isfinite(x) & (x > 0), tan, 0.0)


logppf.defjvp(_logppf_jvp, symbolic_zeros=True)
