"""What is documented to work in float32, checked in float32 against float64 references.

These tests carry the ``float32`` marker: ``.ci/run`` runs them a second time in a
process with 64-bit floats off (``GLRT_JAX_TEST_X64=0 pytest -m float32``), JAX's
default in training programs. In the main run (x64 on) they pass float32 arrays
explicitly, which the library computes in float32 as documented. References are
scipy's float64 values (closed forms of the same quantities).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from glrt_jax import audit, ncx2, roc

pytestmark = pytest.mark.float32

F32 = jnp.float32
# (df, nc) of the special-function benchmark cases.
CASES = [(1.0, 1.0), (10.0, 36.0), (300.0, 1000.0)]


def _grid(df, nc):
    mean, sd = df + nc, np.sqrt(2 * (df + 2 * nc))
    return np.maximum(mean + sd * np.linspace(-3.0, 7.0, 41), 1e-3)


def _rel(a, b):
    return np.abs(a - b) / np.abs(b)


@pytest.mark.parametrize("df,nc", CASES)
def test_ncx2_tails_in_float32(df, nc):
    """Documented: float32 inputs compute in float32, relative error ~1e-5 on sf."""
    x = _grid(df, nc).astype(np.float32)
    # The reference at the float32 inputs, so that only the computation is compared.
    x64 = x.astype(np.float64)
    ref_sf, ref_cdf = stats.ncx2.sf(x64, df, nc), stats.ncx2.cdf(x64, df, nc)
    sf = ncx2.sf(jnp.asarray(x, F32), F32(df), F32(nc))
    cdf = ncx2.cdf(jnp.asarray(x, F32), F32(df), F32(nc))
    logsf = ncx2.logsf(jnp.asarray(x, F32), F32(df), F32(nc))
    assert sf.dtype == cdf.dtype == logsf.dtype == jnp.float32
    # scipy is accurate to ~1e-13 relative on these ranges where the value is above 1e-30.
    ok = ref_sf > 1e-30
    assert np.max(_rel(np.asarray(sf, np.float64)[ok], ref_sf[ok])) < 1e-4
    ok = ref_cdf > 1e-30
    assert np.max(_rel(np.asarray(cdf, np.float64)[ok], ref_cdf[ok])) < 1e-4
    ok = ref_sf > 1e-300
    assert np.max(np.abs(np.asarray(logsf, np.float64)[ok] - np.log(ref_sf[ok]))) < 1e-4 * np.max(
        np.maximum(1.0, np.abs(np.log(ref_sf[ok])))
    )


@pytest.mark.parametrize("df,nc", CASES)
def test_ncx2_quantiles_in_float32(df, nc):
    """Documented: relative error ~1e-4 on quantiles in float32."""
    p = np.geomspace(1e-12, 0.5, 25).astype(np.float32)
    isf = ncx2.isf(jnp.asarray(p, F32), F32(df), F32(nc))
    ppf = ncx2.ppf(jnp.asarray(p, F32), F32(df), F32(nc))
    assert isf.dtype == ppf.dtype == jnp.float32
    p64 = p.astype(np.float64)
    ref_isf, ref_ppf = stats.ncx2.isf(p64, df, nc), stats.ncx2.ppf(p64, df, nc)
    assert np.max(_rel(np.asarray(isf, np.float64), ref_isf)) < 1e-3
    ok = ref_ppf > 1e-20
    assert np.max(_rel(np.asarray(ppf, np.float64)[ok], ref_ppf[ok])) < 1e-3


@pytest.mark.parametrize("adversary,d", [("npo", 1), ("glrt", 1), ("glrt", 5)])
def test_roc_curves_in_float32(adversary, d):
    """NPO: TPR = Φ(μ − Φ⁻¹(1 − α)); GLRT: TPR = sf(χ²_d isf(α), d, μ²) (scipy, float64)."""
    alpha = np.geomspace(1e-6, 0.9, 31).astype(np.float32)
    mu = 1.3
    tpr = roc.curve(jnp.asarray(alpha, F32), F32(mu), d, adversary=adversary)
    assert tpr.dtype == jnp.float32
    a64 = alpha.astype(np.float64)
    mu64 = float(np.float32(mu))
    if adversary == "npo":
        ref = stats.norm.cdf(mu64 - stats.norm.isf(a64))
    else:
        ref = stats.ncx2.sf(stats.chi2.isf(a64, d), d, mu64**2)
    np.testing.assert_allclose(np.asarray(tpr, np.float64), ref, rtol=1e-4, atol=1e-6)


def test_audit_in_float32():
    """Games, the empirical ROC and Clopper–Pearson bounds in float32."""
    k = np.array([0, 3, 50, 97, 100])
    lo, hi = audit.clopper_pearson(jnp.asarray(k), 100, 0.95)
    if not jax.config.jax_enable_x64:
        assert lo.dtype == hi.dtype == jnp.float32
    ref_lo = np.where(k > 0, stats.beta.ppf(0.025, np.maximum(k, 1), 100 - k + 1), 0.0)
    ref_hi = np.where(k < 100, stats.beta.ppf(0.975, k + 1, np.maximum(100 - k, 1)), 1.0)
    np.testing.assert_allclose(np.asarray(lo, np.float64), ref_lo, atol=1e-5)
    np.testing.assert_allclose(np.asarray(hi, np.float64), ref_hi, atol=1e-5)
    # A game's statistics are float32 arrays; the NPO test statistic of a Gaussian
    # mechanism separates the classes as the closed form says (AUC = Φ(μ/√2)).
    res = audit.run_game(
        jax.random.key(0), sigma=F32(1.0), sensitivity=F32(1.0), d=1, steps=1, games=4000
    )
    s0, s1 = res.split("npo")
    assert s0.dtype == s1.dtype == jnp.float32
    auc = np.mean(np.asarray(s1)[:, None] > np.asarray(s0)[None, :])
    assert abs(auc - stats.norm.cdf(1.0 / np.sqrt(2.0))) < 0.03
