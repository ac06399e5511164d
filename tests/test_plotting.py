"""Tests of glrt_jax.plotting: the figures draw the right curves and validate their input.

References come from SciPy (a peer library) and from the exact values of docs/design.md §3
(mpmath; read from the package's data file, checked against the mpmath references in
tests/test_reproduce.py), never computed by glrt_jax. The curve data are read back from the
returned figures.
Every figure uses the same few array shapes, so the kernels compile once per session.
"""

import re

import numpy as np
import pytest
from matplotlib.figure import Figure
from scipy import stats

from glrt_jax import plotting, reproduce


def _exact(row_id):
    """The exact ε of a paper number (docs/design.md §3, mpmath)."""
    return float(reproduce.number(row_id).exact)


def _lines(ax):
    return {line.get_label(): (line.get_xdata(), line.get_ydata()) for line in ax.lines}


def _legend(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _eps_in(text):
    return float(re.search(r"\(ε, δ\) = \(([0-9.]+),", text).group(1))


@pytest.fixture(scope="module")
def roc_fig(tmp_path_factory):
    path = tmp_path_factory.mktemp("fig") / "roc.png"
    return plotting.roc_figure(1.0, 1, path, delta=1e-4), path


def test_roc_figure_saves_png_with_two_panels(roc_fig):
    fig, path = roc_fig
    assert isinstance(fig, Figure)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lin, log = fig.axes
    assert lin.get_xscale() == "linear" and log.get_xscale() == "log"
    assert log.get_yscale() == "log"


def test_roc_figure_curves_match_scipy(roc_fig):
    fig, _ = roc_fig
    lines = _lines(fig.axes[1])
    names = {k.split(",")[0]: v for k, v in lines.items() if not k.startswith("_")}
    alpha, npo = names[r"NPO $R_\mathcal{N}$"]
    _, r = names[r"GLRT $R$"]
    _, rp = names[r"GLRT $R'$ (swapped)"]
    _, rs = names[r"GLRT $R_s$ (symmetrised)"]
    assert alpha.min() <= 1e-6 and alpha.max() == 1.0
    pick = np.searchsorted(alpha, [1e-5, 1e-3, 0.05, 0.3, 0.7])
    a = alpha[pick]
    lam = 1.0
    np.testing.assert_allclose(npo[pick], stats.norm.sf(stats.norm.isf(a) - 1.0), rtol=1e-9)
    np.testing.assert_allclose(r[pick], stats.ncx2.sf(stats.chi2.isf(a, 1), 1, lam), rtol=1e-7)
    np.testing.assert_allclose(
        rp[pick], stats.chi2.cdf(stats.ncx2.ppf(a, 1, lam), 1), rtol=1e-6, atol=1e-12
    )
    # R_s majorises both GLRT curves and the NPO curve dominates every GLRT curve.
    assert np.all(rs >= np.maximum(r, rp) - 1e-12)
    assert np.all(npo >= rs - 1e-12)


def test_roc_figure_legend_epsilons(roc_fig):
    fig, _ = roc_fig
    texts = _legend(fig.axes[0])
    eps_npo = _eps_in(next(t for t in texts if t.startswith("NPO")))
    eps_glrt = _eps_in(next(t for t in texts if "R_s" in t))
    # NPO: closed form δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) at μ = 1, solved with SciPy.
    from scipy.optimize import brentq

    def npo_delta(e):
        return stats.norm.cdf(-e + 0.5) - np.exp(e) * stats.norm.cdf(-e - 0.5)

    assert eps_npo == pytest.approx(brentq(lambda e: npo_delta(e) - 1e-4, 0, 10), abs=6e-3)
    assert eps_glrt == pytest.approx(_exact("dof_d1"), abs=6e-3)  # docs/design.md §3 (mpmath)


def test_teaser_uses_corrected_setting():
    fig = plotting.teaser_figure()
    npo, glrt = _legend(fig.axes[0])
    assert _eps_in(npo) == pytest.approx(_exact("teaser_npo"), abs=6e-3)  # docs/design.md §3
    assert _eps_in(glrt) == pytest.approx(_exact("teaser_glrt"), abs=6e-3)
    assert "0.3" in fig.axes[0].get_title()


def test_dimension_figures():
    fig = plotting.dimension_roc_figure(d=(1, 30))
    texts = _legend(fig.axes[0])
    assert _eps_in(texts[1]) == pytest.approx(_exact("dof_d1"), abs=6e-3)
    assert _eps_in(texts[2]) == pytest.approx(_exact("dof_d30"), abs=6e-3)
    fig = plotting.epsilon_dimension_figure(d=(1, 2, 30))
    d, eps = fig.axes[0].lines[0].get_xdata(), fig.axes[0].lines[0].get_ydata()
    np.testing.assert_array_equal(d, [1, 2, 30])
    assert eps[0] > eps[1] > eps[2] >= 0.0
    npo_eps = fig.axes[0].lines[1].get_ydata()[0]
    assert npo_eps > eps[0]


def test_clt_figure_exact_curves_near_gdp_limit():
    fig = plotting.clt_figure()
    lines = [ln for ln in fig.axes[0].lines if not ln.get_label().startswith("_")]
    alpha = lines[0].get_xdata()
    r, gdp = lines[1].get_ydata(), lines[3].get_ydata()
    mu_glrt = 10.0 / np.sqrt(600.0)
    np.testing.assert_allclose(gdp, stats.norm.sf(stats.norm.isf(alpha) - mu_glrt), atol=1e-9)
    assert np.max(np.abs(r - gdp)) < 0.02  # the paper's claim: close at d = 300


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: plotting.roc_figure(-1.0, 1), "mu"),
        (lambda: plotting.roc_figure(1.0, 0), "^d must"),
        (lambda: plotting.roc_figure(1.0, 1.5), "^d must"),
        (lambda: plotting.roc_figure(1.0, 1, delta=1.5), "delta"),
        (lambda: plotting.roc_figure(1.0, 1, alpha_min=0.0), "alpha_min"),
        (lambda: plotting.dimension_roc_figure(d=()), "^d must"),
        (lambda: plotting.epsilon_dimension_figure(d=(1, 0)), "^d must"),
        (lambda: plotting.clt_figure(sigma=0.0), "sigma"),
        (lambda: plotting.clt_figure(steps=2.5), "steps"),
        (lambda: plotting.privacy_profile_figure(mu=0.0), "mu"),
        (lambda: plotting.subsampling_figure(sampling_rate=1.5), "sampling_rate"),
        (lambda: plotting.empirical_roc_figure(None), "experiment"),
    ],
)  # fmt: skip
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_empirical_figure_compare_is_validated():
    with pytest.raises(ValueError, match="compare"):
        plotting.empirical_roc_figure(None, compare="nope")
