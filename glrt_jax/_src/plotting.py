"""Figures of the paper, drawn with matplotlib (Agg canvas, no pyplot).

This module only draws. Every number it draws comes from
:mod:`glrt_jax._src.figure_data`, which evaluates :mod:`glrt_jax.roc`,
:mod:`glrt_jax.profile`, :mod:`glrt_jax.asymptotics` and the composition engine at
fixed array shapes; the membership-inference games are played by
:func:`glrt_jax.audit.run_experiment`, whose result :func:`empirical_roc_figure` draws.

Every function draws on a fresh :class:`matplotlib.figure.Figure` attached to an Agg
canvas; nothing touches pyplot's global state or the interactive backend, so the
functions are safe in scripts, servers, tests and notebooks (display a returned figure with
``IPython.display.display(fig)``). Each function returns the Figure and, when ``path``
is given, also writes it there (format from the file name's extension).

Colours follow the paper: NPO red, GLRT ``R`` blue, ``R'`` green, the symmetrised
``R_s`` dashed black, empirical curves purple and orange. A GLRT curve is never drawn
without the NPO curve of the same mechanism next to it.

Figures (paper label → function):

* ``fig:teaser`` → :func:`teaser_figure` (corrected setting ``Δ/σ = 0.3``),
* ``fig:roc_curves`` → :func:`roc_figure` (also on a log-scale ``α`` axis),
* ``fig:dof`` → :func:`dimension_roc_figure`,
* ``fig:dimension_epsilon`` → :func:`epsilon_dimension_figure`,
* ``fig:clt`` → :func:`clt_figure`,
* ``fig:priv_profile`` → :func:`privacy_profile_figure`,
* ``fig:subsampling`` → :func:`subsampling_figure` (numeric composition,
  :func:`glrt_jax.accountant.schedule_delta`),
* ``fig:predicted_actual``, ``fig:actual_symmetric_gaussian``, ``fig:high_dimensional``
  → :func:`glrt_jax.audit.run_experiment` + :func:`empirical_roc_figure`.

Precision: the curves are computed in the default JAX float type. Enable float64
(``jax.config.update("jax_enable_x64", True)``) for accurate tails on the log-scale
panels and for the ε values in the legends; :func:`subsampling_figure` requires it
(the composition engine does). These functions are eager (not jittable): they validate
their arguments and raise ``ValueError`` naming the parameter.

Compilation: all curve evaluations go through a few fixed array shapes (512 points
per ROC curve, 256 per batch of ε or δ values; :mod:`glrt_jax._src.figure_data`), so a
session compiles each kernel once, whatever figures it draws.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

try:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
except ImportError as err:  # pragma: no cover - depends on the installation
    raise ImportError("glrt_jax.plotting needs matplotlib: pip install 'glrt-jax[plot]'") from err

from glrt_jax._src import audit, figure_data
from glrt_jax._src.figure_data import (
    alpha_grid,
    deltas,
    epsilons,
    gdp_limit_curve,
    glrt_curves,
    npo_curve,
    symmetrised_curve,
)
from glrt_jax._src.validation import check_int, check_range

__all__ = [
    "PAPER_DIMS",
    "clt_figure",
    "dimension_roc_figure",
    "empirical_roc_figure",
    "epsilon_dimension_figure",
    "privacy_profile_figure",
    "roc_figure",
    "subsampling_figure",
    "teaser_figure",
]

NPO_COLOR = "tab:red"
R_COLOR = "tab:blue"
RP_COLOR = "tab:green"
RS_STYLE = dict(color="black", linestyle="--")
EMP_COLORS = ("tab:purple", "tab:orange")

#: Dimensions of the paper's "ε versus d" figure.
PAPER_DIMS = (1, 2, 5, 10, 20, 50, 100, 200, 300, 500)


# ---------------------------------------------------------------------------
# Validation and small helpers
# ---------------------------------------------------------------------------


def _check_dims(name: str, d) -> tuple[int, ...]:
    arr = np.asarray(d)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty sequence of integers in [1, inf); got {d!r}")
    check_range(name, arr, lo=1.0, integer=True)
    return tuple(int(d) for d in arr)


def _scalar(x) -> float:
    return float(np.asarray(x))


def _new_figure(ncols: int = 1, width: float = 5.2, height: float = 4.4):
    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, axes


def _finish(fig: Figure, path) -> Figure:
    if path is not None:
        path = os.fspath(path)
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        fig.savefig(path, dpi=150)
    return fig


def _eps_label(eps: float, delta: float) -> str:
    return f"(ε, δ) = ({eps:.3g}, {delta:g})"


def _diagonal(ax, log: bool = False, lo: float = 0.0) -> None:
    grid = np.geomspace(lo, 1.0, 50) if log else np.array([0.0, 1.0])
    ax.plot(grid, grid, color="0.6", linewidth=0.8, linestyle=":", label="_nolegend_")


def _roc_axes(ax, log: bool = False, alpha_min: float = 1e-6) -> None:
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(alpha_min, 1.0)
        ax.set_ylim(alpha_min, 1.05)
    else:
        ax.set_xlim(0.0, 1.0)
        ax.set_ylim(0.0, 1.0)
        ax.set_aspect("equal")
    ax.set_xlabel(r"$P_f$ (false-positive rate $\alpha$)")
    ax.set_ylabel(r"$P_d$ (true-positive rate)")
    ax.grid(True, alpha=0.3, which="both" if log else "major")


# ---------------------------------------------------------------------------
# ROC curves
# ---------------------------------------------------------------------------


def roc_figure(mu, d, path=None, *, delta: float | None = None, alpha_min: float = 1e-6) -> Figure:
    """ROC curves of one Gaussian mechanism: NPO, GLRT ``R``, ``R'`` and ``R_s``.

    Two panels: linear axes (the paper's ``fig:roc_curves``) and log–log axes, where
    the small false-positive rates that determine small δ become visible. The
    curves are (``λ = μ²``, ``Q`` the normal survival function, ``Ψ``/``Φ`` the
    survival function/CDF of ``ncx2(d, ·)``)::

        NPO  R_N(α) = Q(Q⁻¹(α) − μ)          R(α)  = Ψ_λ(Ψ_0⁻¹(α))
        R'(α) = Φ_0(Φ_λ⁻¹(α))               R_s   = concave majorant of max(R, R')

    computed by :mod:`glrt_jax.roc`.

    Args:
      mu: signal-to-noise ratio ``μ = Δ/σ ≥ 0`` (after composition with a shared
        direction, ``μ = √(Σ Δ_i²/σ_i²)``), finite.
      d: query dimension ``d``, a positive integer.
      path: optional file name; the figure is saved there (e.g. ``"roc.png"``).
      delta: if given (in ``(0, 1)``), the legend shows ε at this δ for NPO and for
        the GLRT adversary (the conjugate of ``R_s``).
      alpha_min: smallest false-positive rate on the log-scale panel, in ``(0, 1)``.

    Returns:
      The :class:`matplotlib.figure.Figure` (Agg canvas, two axes).

    Raises:
      ValueError: for ``mu < 0`` or non-finite, ``d`` not a positive integer,
        ``delta`` or ``alpha_min`` outside ``(0, 1)``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import plotting
      >>> fig = plotting.roc_figure(1.0, 1)
      >>> len(fig.axes)
      2
    """
    check_range("mu", mu, lo=0.0)
    d = check_int("d", d)
    check_range("alpha_min", alpha_min, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    if delta is not None:
        check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    mu = _scalar(mu)
    alpha = alpha_grid(alpha_min)
    c = glrt_curves(alpha, mu, d)
    npo_label, rs_label = r"NPO $R_\mathcal{N}$", r"GLRT $R_s$ (symmetrised)"
    if delta is not None:
        eps_n = epsilons(delta, mu)[0]
        eps_g = epsilons(delta, mu, d)[0]
        npo_label += f", {_eps_label(eps_n, delta)}"
        rs_label += f", {_eps_label(eps_g, delta)}"
    fig, axes = _new_figure(2)
    for ax, log in zip(axes, (False, True), strict=True):
        _diagonal(ax, log, alpha_min if log else 0.0)
        ax.plot(alpha, c["npo"], color=NPO_COLOR, label=npo_label)
        ax.plot(alpha, c["R"], color=R_COLOR, label=r"GLRT $R$")
        ax.plot(alpha, c["R_prime"], color=RP_COLOR, label=r"GLRT $R'$ (swapped)")
        ax.plot(alpha, c["R_s"], **RS_STYLE, label=rs_label)
        _roc_axes(ax, log, alpha_min)
    axes[0].legend(loc="lower right", fontsize="small")
    axes[0].set_title(f"ROC, μ = Δ/σ = {mu:g}, d = {d}")
    axes[1].set_title("log–log axes")
    return _finish(fig, path)


def teaser_figure(mu: float = 0.3, d: int = 1, delta: float = 1e-4, path=None) -> Figure:
    """The paper's teaser (``fig:teaser``): NPO versus GLRT ROC at one setting.

    Corrected setting: the paper's caption says ``Δ/σ = 0.5`` but its numbers
    ``(0.95, 1e-4)`` (NPO) and ``(0.37, 1e-4)`` (GLRT, ``d = 1``) belong to
    ``Δ/σ = 0.3`` (at 0.5 the NPO ε is 1.70). The GLRT curve is the symmetrised
    ``R_s``, whose conjugate is the GLRT privacy profile.

    Args:
      mu: ``μ = Δ/σ ≥ 0``. d: query dimension ``d ≥ 1``.
      delta: δ in ``(0, 1)`` at which ε is shown in the legend.
      path: optional file name to save the figure to.

    Returns:
      The Figure.

    Raises:
      ValueError: for out-of-range arguments (named).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import plotting
      >>> fig = plotting.teaser_figure()
      >>> "0.95" in fig.axes[0].get_legend().get_texts()[0].get_text()
      True
    """
    check_range("mu", mu, lo=0.0)
    d = check_int("d", d)
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    mu = _scalar(mu)
    alpha = alpha_grid(1e-6)
    c = glrt_curves(alpha, mu, d)
    eps_n = epsilons(delta, mu)[0]
    eps_g = epsilons(delta, mu, d)[0]
    fig, (ax,) = _new_figure(1)
    _diagonal(ax)
    ax.plot(alpha, c["npo"], color=NPO_COLOR, label=f"NPO adversary, {_eps_label(eps_n, delta)}")
    ax.plot(alpha, c["R_s"], color=R_COLOR, label=f"GLRT adversary, {_eps_label(eps_g, delta)}")
    _roc_axes(ax)
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title(f"Δ/σ = {mu:g}, d = {d}")
    return _finish(fig, path)


def dimension_roc_figure(
    mu: float = 1.0, d: Sequence[int] = (1, 30), delta: float = 1e-4, path=None
) -> Figure:
    """Effect of the query dimension on the GLRT ROC curve (``fig:dof``).

    Draws the symmetrised GLRT curve ``R_s`` for each dimension in ``d`` (the paper:
    ``Δ = σ² = 1``, ``d = 1`` gives ``(3.11, 1e-4)``, ``d = 30`` gives ``(0.46, 1e-4)``)
    and the NPO curve, which does not depend on ``d``.

    Args:
      mu: ``μ = Δ/σ ≥ 0``. d: query dimensions (positive integers).
      delta: δ in ``(0, 1)`` for the ε values in the legend.
      path: optional file name.

    Returns:
      The Figure.

    Raises:
      ValueError: for out-of-range arguments (named).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import plotting
      >>> fig = plotting.dimension_roc_figure(d=(1, 30))
      >>> len(fig.axes[0].get_legend().get_texts())
      3
    """
    check_range("mu", mu, lo=0.0)
    d = _check_dims("d", d)
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    mu = _scalar(mu)
    alpha = alpha_grid(1e-6)
    eps_g = epsilons(delta, mu, np.asarray(d, np.float64))
    eps_n = epsilons(delta, mu)[0]
    fig, (ax,) = _new_figure(1)
    _diagonal(ax)
    ax.plot(
        alpha,
        npo_curve(alpha, mu),
        color=NPO_COLOR,
        label=f"NPO (any d), {_eps_label(eps_n, delta)}",
    )
    colours = _sequential_colours(len(d))
    for dk, e, col in zip(d, eps_g, colours, strict=True):
        r_s = symmetrised_curve(alpha, mu, dk)
        ax.plot(alpha, r_s, color=col, label=f"GLRT d = {dk}, {_eps_label(e, delta)}")
    _roc_axes(ax)
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title(f"Query dimension, μ = Δ/σ = {mu:g}")
    return _finish(fig, path)


_PALETTE = ("tab:blue", "tab:purple", "tab:brown", "tab:cyan", "tab:olive", "tab:pink", "tab:gray")


def _sequential_colours(n: int):
    if n <= len(_PALETTE):
        return list(_PALETTE[:n])
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(0.85 * i / (n - 1)) for i in range(n)]


def epsilon_dimension_figure(
    mu: float = 1.0, d: Sequence[int] = PAPER_DIMS, delta: float = 0.1, path=None
) -> Figure:
    """GLRT ε at fixed δ against the query dimension (``fig:dimension_epsilon``).

    The paper: ``Δ = σ² = 1``, ``δ = 0.1``, ``d ∈ {1, 2, 5, …, 500}``. The NPO ε,
    which does not depend on ``d``, is drawn as a horizontal line.

    Args:
      mu: ``μ = Δ/σ ≥ 0``. d: query dimensions (positive integers).
      delta: δ in ``(0, 1)``. path: optional file name.

    Returns:
      The Figure; ``fig.axes[0].lines[0].get_ydata()`` holds the GLRT ε values.

    Raises:
      ValueError: for out-of-range arguments (named).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import plotting
      >>> fig = plotting.epsilon_dimension_figure(d=(1, 2, 5))
      >>> eps = fig.axes[0].lines[0].get_ydata()
      >>> bool(eps[0] > eps[1] > eps[2])
      True
    """
    check_range("mu", mu, lo=0.0)
    d = _check_dims("d", d)
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    mu = _scalar(mu)
    dk = np.asarray(d, np.float64)
    eps_g = epsilons(delta, mu, dk)
    eps_n = epsilons(delta, mu)[0]
    fig, (ax,) = _new_figure(1)
    ax.plot(dk, eps_g, "o-", color=R_COLOR, label="GLRT adversary")
    ax.axhline(eps_n, color=NPO_COLOR, label=f"NPO adversary (any d): ε = {eps_n:.3g}")
    ax.set_xscale("log")
    ax.set_xlabel("query dimension d")
    ax.set_ylabel(f"ε at δ = {delta:g}")
    ax.set_ylim(bottom=0.0)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize="small")
    ax.set_title(f"ε versus d, μ = Δ/σ = {mu:g}")
    return _finish(fig, path)


def clt_figure(
    sensitivity: float = 1.0,
    sigma: float = 10.0,
    steps: int = 1000,
    d: int = 300,
    path=None,
) -> Figure:
    """Convergence of ``R`` and ``R'`` to the μ-GDP curve of Theorem 3 (``fig:clt``).

    ``N`` releases sharing a direction: ``λ = NΔ²/σ²``. Exact ``R`` and ``R'``
    (:mod:`glrt_jax.roc` at ``μ = √λ``) against the μ-GDP limit
    ``Q(Q⁻¹(α) − μ_GLRT)``, ``μ_GLRT = λ/√(2d)`` (:mod:`glrt_jax.asymptotics`), and
    the NPO curve ``Q(Q⁻¹(α) − √λ)``. The paper: ``Δ = 1, σ² = 100, d = 300,
    N = 1000``.

    Args:
      sensitivity: ``Δ ≥ 0``. sigma: ``σ > 0``. steps: ``N ≥ 1``. d: ``d ≥ 1``.
      path: optional file name.

    Returns:
      The Figure.

    Raises:
      ValueError: for out-of-range arguments (named).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import plotting
      >>> fig = plotting.clt_figure()
      >>> len(fig.axes[0].get_legend().get_texts())
      4
    """
    check_range("sensitivity", sensitivity, lo=0.0)
    check_range("sigma", sigma, lo=0.0, lo_open=True)
    steps = check_int("steps", steps)
    d = check_int("d", d)
    lam = steps * (_scalar(sensitivity) / _scalar(sigma)) ** 2
    mu = math.sqrt(lam)
    alpha = alpha_grid(1e-6)
    c = glrt_curves(alpha, mu, d)
    gdp = gdp_limit_curve(alpha, sensitivity, sigma, steps, d)
    mu_glrt = lam / math.sqrt(2.0 * d)
    fig, (ax,) = _new_figure(1)
    _diagonal(ax)
    ax.plot(alpha, c["npo"], color=NPO_COLOR, alpha=0.7, label=f"NPO, μ = √λ = {mu:.3g}")
    ax.plot(alpha, c["R"], color=R_COLOR, label=r"GLRT $R$ (exact)")
    ax.plot(alpha, c["R_prime"], color=RP_COLOR, label=r"GLRT $R'$ (exact)")
    ax.plot(alpha, gdp, **RS_STYLE, label=f"μ-GDP limit, μ = λ/√(2d) = {mu_glrt:.3g}")
    _roc_axes(ax)
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title(
        f"CLT: Δ = {_scalar(sensitivity):g}, σ² = {_scalar(sigma) ** 2:g}, d = {d}, N = {steps}"
    )
    return _finish(fig, path)


# ---------------------------------------------------------------------------
# Privacy profiles
# ---------------------------------------------------------------------------


def privacy_profile_figure(
    mu: float = 1.0, d: int = 1, path=None, *, epsilon_max: float = 6.0, delta_min: float = 1e-12
) -> Figure:
    """Privacy profiles δ(ε) of the NPO and GLRT adversaries (``fig:priv_profile``).

    NPO: ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``. GLRT: the conjugate of the
    symmetrised ROC, ``max(δ_R(ε), δ_R'(ε))`` (:mod:`glrt_jax.profile`). The paper:
    ``Δ = σ² = 1``, ``d = 1``.

    Args:
      mu: ``μ = Δ/σ > 0``. d: query dimension ``d ≥ 1``.
      path: optional file name.
      epsilon_max: right end of the ε axis (``> 0``).
      delta_min: lower end of the (logarithmic) δ axis, in ``(0, 1)``.

    Returns:
      The Figure; its first axes has the NPO line then the GLRT line.

    Raises:
      ValueError: for out-of-range arguments (named).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import plotting
      >>> fig = plotting.privacy_profile_figure()
      >>> npo, glrt = (line.get_ydata() for line in fig.axes[0].lines[:2])
      >>> bool((glrt <= npo).all())
      True
    """
    check_range("mu", mu, lo=0.0, lo_open=True)
    d = check_int("d", d)
    check_range("epsilon_max", epsilon_max, lo=0.0, lo_open=True)
    check_range("delta_min", delta_min, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    mu = _scalar(mu)
    eps = np.linspace(0.0, float(epsilon_max), figure_data.BATCH)
    d_n = deltas(eps, mu)
    d_g = deltas(eps, mu, d)
    fig, (ax,) = _new_figure(1)
    ax.plot(eps, d_n, color=NPO_COLOR, label="NPO adversary")
    ax.plot(eps, d_g, color=R_COLOR, label=f"GLRT adversary (d = {d})")
    ax.set_yscale("log")
    ax.set_ylim(delta_min, 1.0)
    ax.set_xlim(0.0, float(epsilon_max))
    ax.set_xlabel("ε")
    ax.set_ylabel("δ(ε)")
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize="small")
    ax.set_title(f"Privacy profiles, μ = Δ/σ = {mu:g}")
    return _finish(fig, path)


def subsampling_figure(
    sensitivity: float = 1.0,
    sigma: float = 6.0,
    sampling_rate: float = 0.2,
    steps: int = 100,
    d: int = 1,
    path=None,
    *,
    delta: float = 1e-5,
    epsilon_max: float = 3.0,
    tol: float = 1e-3,
) -> Figure:
    """Poisson-subsampled, composed privacy profiles of NPO and GLRT (``fig:subsampling``).

    ``steps`` independent steps of the Gaussian mechanism, each on a Poisson
    subsample with rate ``q`` (add/remove neighbours), composed numerically by the
    engine of :func:`glrt_jax.accountant.schedule_delta`. Threat model: per-round
    GLRT (the adversary sees ``‖y_i‖²`` of each round), not the shared direction of
    Theorem 2. The curves
    are the certified upper bounds on δ(ε); the legend gives ε at ``delta``. The
    paper: ``Δ = 1, σ² = 36, γ = 0.2, N = 100``.

    Requires float64 (``jax.config.update("jax_enable_x64", True)``).

    Args:
      sensitivity: ``Δ > 0``. sigma: ``σ > 0``. sampling_rate: ``q ∈ (0, 1]``.
      steps: ``N ≥ 1``. d: ``d ≥ 1``. path: optional file name.
      delta: δ in ``(0, 1)`` for the ε values in the legend.
      epsilon_max: right end of the ε axis. tol: relative accuracy of the certified
        ε in the legend (see :func:`glrt_jax.accountant.schedule_epsilon`).

    Returns:
      The Figure; the first two lines are NPO then GLRT.

    Raises:
      ValueError: for out-of-range arguments (named), or float64 disabled.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import plotting
      >>> fig = plotting.subsampling_figure(steps=10)
      >>> len(fig.axes[0].lines) >= 2
      True
    """
    check_range("sensitivity", sensitivity, lo=0.0, lo_open=True)
    check_range("sigma", sigma, lo=0.0, lo_open=True)
    check_range("sampling_rate", sampling_rate, lo=0.0, hi=1.0, lo_open=True)
    steps = check_int("steps", steps)
    d = check_int("d", d)
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    check_range("epsilon_max", epsilon_max, lo=0.0, lo_open=True)
    check_range("tol", tol, lo=1e-7, hi=0.5)
    prof = figure_data.subsampled_profiles(
        sensitivity,
        sigma,
        sampling_rate,
        steps,
        d,
        delta=delta,
        epsilon_max=epsilon_max,
        tol=tol,
    )
    return draw_subsampling(
        prof,
        sensitivity=sensitivity,
        sigma=sigma,
        sampling_rate=sampling_rate,
        steps=steps,
        d=d,
        delta=delta,
        path=path,
    )


def draw_subsampling(
    prof, *, sensitivity, sigma, sampling_rate, steps, d, delta, path=None
) -> Figure:
    """Draw the subsampling figure from computed profiles (see :func:`subsampling_figure`).

    Args:
      prof: the output of :func:`glrt_jax._src.figure_data.subsampled_profiles`.
      sensitivity, sigma, sampling_rate, steps, d, delta: the setting it was
        computed for (for the legend and the title).
      path: optional file name.

    Returns:
      The Figure; the first two lines are NPO then GLRT.
    """
    epsilon_max = float(prof["eps"][-1])
    fig, (ax,) = _new_figure(1)
    for adversary, colour, name in (("npo", NPO_COLOR, "NPO"), ("glrt", R_COLOR, "GLRT")):
        label = f"{name} adversary" + (f" (d = {d})" if adversary == "glrt" else "")
        e_up = prof[adversary]["epsilon"]
        ax.plot(
            prof["eps"],
            prof[adversary]["delta"],
            color=colour,
            label=f"{label}: ε({delta:g}) ≤ {e_up:.3f}",
        )
    ax.axhline(delta, color="0.5", linewidth=0.8, linestyle=":")
    ax.set_yscale("log")
    ax.set_ylim(max(1e-12, delta * 1e-4), 1.0)
    ax.set_xlim(0.0, float(epsilon_max))
    ax.set_xlabel("ε")
    ax.set_ylabel("δ(ε) (upper bound)")
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize="small")
    ax.set_title(
        f"Subsampling q = {_scalar(sampling_rate):g}, N = {steps}, "
        f"Δ = {_scalar(sensitivity):g}, σ² = {_scalar(sigma) ** 2:g}"
    )
    return _finish(fig, path)


# ---------------------------------------------------------------------------
# Empirical membership-inference games
# ---------------------------------------------------------------------------


def _draw_empirical(ax, est, colour, label) -> None:
    fpr, tpr = np.asarray(est.fpr), np.asarray(est.tpr)
    xerr = np.stack([fpr - np.asarray(est.fpr_lower), np.asarray(est.fpr_upper) - fpr])
    yerr = np.stack([tpr - np.asarray(est.tpr_lower), np.asarray(est.tpr_upper) - tpr])
    order = np.argsort(fpr, kind="stable")
    x = np.concatenate([[0.0], fpr[order], [1.0]])
    y = np.concatenate([[0.0], tpr[order], [1.0]])
    ax.plot(x, y, color=colour, marker=".", markersize=3, linewidth=1.0, label=label)
    ax.errorbar(
        fpr, tpr, xerr=xerr, yerr=yerr, fmt="none", ecolor=colour, alpha=0.25, linewidth=0.6
    )


_COMPARE = ("theory", "symmetrised", "dimension")


def empirical_roc_figure(
    experiment: audit.EmpiricalExperiment,
    compare: str = "theory",
    path=None,
    *,
    delta: float = 1e-2,
) -> Figure:
    """Empirical ROC curves of a game against theory (the paper's three empirical figures).

    The empirical ``R`` (purple) and ``R'`` (orange, the swapped test) with their
    pointwise Clopper–Pearson bands, against

    * ``compare="theory"`` — the theoretical ``R`` (blue) and ``R'`` (green),
      ``fig:predicted_actual``;
    * ``compare="symmetrised"`` — the symmetrised ``R_s`` (dashed black) and the NPO
      curve (red), ``fig:actual_symmetric_gaussian``;
    * ``compare="dimension"`` — ``R_s`` at the game's dimension (dashed black), at
      ``d = 1`` (solid black) and the NPO curve (red), ``fig:high_dimensional``.

    The NPO curve is drawn in every variant; the legend gives theoretical ε at
    ``delta`` for the curves shown.

    Args:
      experiment: from :func:`glrt_jax.audit.run_experiment`.
      compare: ``"theory"``, ``"symmetrised"`` or ``"dimension"``.
      path: optional file name. delta: δ in ``(0, 1)`` for the legend.

    Returns:
      The Figure.

    Raises:
      ValueError: for an unknown ``compare`` or ``delta`` outside ``(0, 1)``.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import audit, plotting
      >>> exp = audit.run_experiment(jax.random.key(0), sensitivity=1.0, sigma=6.0,
      ...                            steps=70, games=200, thresholds=20)
      >>> fig = plotting.empirical_roc_figure(exp, "symmetrised")
      >>> len(fig.axes)
      1
    """
    if compare not in _COMPARE:
        raise ValueError(f"compare must be one of {_COMPARE}; got {compare!r}")
    if not isinstance(experiment, audit.EmpiricalExperiment):
        raise ValueError(
            f"experiment must be an EmpiricalExperiment from audit.run_experiment; got "
            f"{type(experiment).__name__}"
        )
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    mu, d = experiment.mu, experiment.d
    alpha = alpha_grid(1e-6)
    c = glrt_curves(alpha, mu, d)
    eps_g, eps_g1 = epsilons(delta, mu, np.array([float(d), 1.0]))
    eps_n = epsilons(delta, mu)[0]
    fig, (ax,) = _new_figure(1)
    _diagonal(ax)
    if compare == "theory":
        ax.plot(alpha, c["R"], color=R_COLOR, label=r"theory $R$")
        ax.plot(alpha, c["R_prime"], color=RP_COLOR, label=r"theory $R'$")
    else:
        ax.plot(
            alpha,
            c["R_s"],
            **RS_STYLE,
            label=rf"theory $R_s$, d = {d}, {_eps_label(eps_g, delta)}",
        )
    if compare == "dimension":
        r_s1 = symmetrised_curve(alpha, mu, 1)
        ax.plot(
            alpha, r_s1, color="black", label=rf"theory $R_s$, d = 1, {_eps_label(eps_g1, delta)}"
        )
    ax.plot(
        alpha,
        c["npo"],
        color=NPO_COLOR,
        alpha=1.0 if compare != "theory" else 0.5,
        label=f"NPO, {_eps_label(eps_n, delta)}",
    )
    _draw_empirical(ax, experiment.roc, EMP_COLORS[0], r"empirical $R$")
    _draw_empirical(ax, experiment.roc.swap(), EMP_COLORS[1], r"empirical $R'$")
    _roc_axes(ax)
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title(
        f"Δ = {experiment.sensitivity:g}, σ² = {experiment.sigma**2:g}, N = {experiment.steps}, "
        f"d = {d}\n{experiment.games} games, {int(experiment.roc.fpr.shape[0])} cut-offs"
    )
    return _finish(fig, path)
