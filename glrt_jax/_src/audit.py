"""Monte Carlo membership-inference games against the Gaussian mechanism.

This module owns the empirical side of the paper: it plays the game of the paper's
*Numerical Experiments* section (:func:`run_game`), turns its outcome into an
empirical ROC curve with confidence bands (:func:`empirical_roc`,
:func:`clopper_pearson`) and an empirical lower bound on ε
(:func:`empirical_epsilon_lower_bound`), and runs the paper's whole experiment for
both adversaries (:func:`run_experiment` → :class:`EmpiricalExperiment`, drawn by
:func:`glrt_jax.plotting.empirical_roc_figure`).

The game
--------
A fair coin picks the hypothesis of each game:

* ``H0`` (dataset ``D``): the query's value is ``f = 0``;
* ``H1`` (dataset ``D'``): the query's value is shifted by ``Δ_i u`` in round
  ``i``, for a unit vector ``u ∈ R^d`` shared by all rounds (the setting of the
  paper's Theorem 2).

The mechanism then releases ``N`` rounds ``y_i = b Δ_i u + σ_i z_i`` with
``z_i ~ N(0, I_d)`` independent and ``b ∈ {0, 1}`` the coin. Rounds may be
heterogeneous: ``σ_i`` and ``Δ_i`` can differ from round to round.

The two adversaries
-------------------
Write ``w_i = Δ_i / σ_i²``, ``V = Σ_i w_i y_i ∈ R^d`` and
``λ = Σ_i Δ_i² / σ_i²``. Under ``H0``, ``V ~ N(0, λ I_d)``; under ``H1``,
``V ~ N(λ u, λ I_d)``, because ``Σ_i w_i Δ_i = Σ_i w_i² σ_i² = λ``.

* **NPO** knows ``u``. The log-likelihood ratio of the whole view is
  ``Σ_i (Δ_i/σ_i²) <y_i, u> − λ/2 = <V, u> − λ/2``, so ``<V, u>`` is a sufficient
  statistic. We report it standardised,
  ``S = <V, u> / √λ``: ``N(0, 1)`` under ``H0`` and ``N(√λ, 1)`` under ``H1``,
  giving the ROC ``TPR = Q(Q⁻¹(FPR) − μ)`` with ``μ = √λ``.
* **GLRT** does not know ``u``. Maximising the log-likelihood
  ``Σ_i −‖y_i − Δ_i v‖² / (2σ_i²)`` over unit vectors ``v`` gives
  ``const + sup_v <V, v> = const + ‖V‖``, so the generalised likelihood ratio test
  thresholds ``‖V‖²``. Its null law is ``σ_eff² χ²_d`` with ``σ_eff² = λ`` and
  its alternative law is ``σ_eff² · ncx2(d, λ)`` (mean ``λ u``, so the
  non-centrality is ``‖λ u‖² / σ_eff² = λ``). We report it standardised,
  ``T = ‖V‖² / λ``: ``χ²_d`` under ``H0`` and ``ncx2(d, λ)`` under ``H1``, giving
  the ROC ``TPR = Ψ_λ(Ψ_0⁻¹(FPR))`` with ``λ = Σ_i Δ_i²/σ_i²`` — this is the
  heterogeneous form of Theorem 2. Equivalently, with the weighted mean
  ``m = V / λ`` (an unbiased estimate of the shift direction ``u``), the
  statistic is ``λ ‖m‖²``.

  For homogeneous rounds (``σ_i = σ``, ``Δ_i = Δ``), ``V = (NΔ/σ²) ȳ`` with ``ȳ``
  the mean of the ``y_i``, so ``T = ‖ȳ‖² / (σ²/N)``: the paper's statistic
  ``‖ȳ‖²`` divided by its ``σ_comp² = σ²/N``, with ``λ = NΔ²/σ²``.

If every ``Δ_i`` is 0 the hypotheses coincide; the weights fall back to
``w_i = 1/σ_i²`` and ``λ = 0``, so both statistics keep their null laws.

Two samplers give the same joint law of ``(S, T)``:

* ``method="direct"`` draws the ``N × d`` Gaussian matrix of every game and forms
  ``V`` (the benchmark counts these draws);
* ``method="sufficient"`` draws ``S = Z + b√λ`` with ``Z ~ N(0, 1)`` and
  ``T = S² + χ²_{d−1}`` (the component of ``V/√λ`` orthogonal to ``u`` is an
  independent standard normal vector of dimension ``d − 1``). This is exact and
  costs ``O(min(d, 16))`` per game instead of ``O(N d)``: for ``d ≤ 16`` the
  ``χ²_{d−1}`` is a sum of ``d − 1`` squared normals, above it is a Gamma draw.

Game ``j`` draws everything from ``fold_in(key, j)`` with a single ``normal``
call, plus one Gamma draw for the sufficient sampler when ``d > 16`` (each
random-number call site costs about a second of XLA compile time on CPU). Its
coin is the sign of the first draw: fair up to the resolution of the uniform
variates behind ``jax.random.normal`` (at most ``2**-52`` in float64, ``2**-23``
in float32).

Confidence bands
----------------
Rates are estimated with threshold tests "reject ``H0`` when the statistic
exceeds ``t``". Each rate gets a two-sided Clopper–Pearson interval. The Beta
quantiles are computed in JAX (no SciPy at run time) as roots of
:func:`jax.scipy.special.betainc` with the library's root finder
(:func:`glrt_jax._src.solvers.find_root`, Newton on ``log betainc`` in ``log x`` from
a lower bound or the normal approximation, a handful of evaluations), on the safe
side: each returned bound is a point where the computed ``betainc`` does not exceed
the target, within the rounding level of ``betainc`` of it, so rounding widens the
interval. The error of ``betainc`` itself remains: in float64
the bounds agree with ``scipy.stats.beta`` to about ``2e-9`` relative at
``n = 1e6`` and ``6e-8`` at ``n = 1e8`` — below ``1e-7`` of the interval's width.

Validation
----------
Public functions validate concrete inputs eagerly and raise ``ValueError`` naming
the parameter and the allowed range. Under ``jit`` (traced inputs) the checks on
values are skipped and out-of-domain inputs give NaN; structural arguments
(``d``, ``steps``, ``games``, ``chunk_size``, ``method``) must be static.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import betainc, ndtri
from jax.typing import ArrayLike

from glrt_jax._src import solvers
from glrt_jax._src.numerics import float_dtype
from glrt_jax._src.shapes import bucket
from glrt_jax._src.validation import check_int, check_range

__all__ = [
    "EmpiricalExperiment",
    "GameResult",
    "RocEstimate",
    "clopper_pearson",
    "empirical_epsilon_lower_bound",
    "empirical_roc",
    "run_experiment",
    "run_game",
]

Adversary = Literal["npo", "glrt"]
Method = Literal["sufficient", "direct"]

# Default number of Gaussian draws held at once (one chunk of games).
_CHUNK_ELEMENTS = 1 << 23
# fold_in takes 32-bit data: game indices must fit.
_MAX_GAMES = 1 << 32
# Up to this dimension the sufficient sampler draws χ²_{d-1} as d - 1 squared normals.
_MAX_NORMAL_DIM = 16


# ---------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------


def _concrete(x) -> np.ndarray | None:
    """Return ``x`` as a NumPy array, or ``None`` if it is traced."""
    if isinstance(x, jax.core.Tracer):
        return None
    try:
        return np.asarray(x)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


def _check_positive_int(name: str, value, upper: int | None = None) -> int:
    ok = isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
    if ok:
        value = int(value)
        ok = value >= 1 and (upper is None or value <= upper)
    if not ok:
        rng = ">= 1" if upper is None else f"in [1, {upper}]"
        raise ValueError(f"{name} must be a positive integer ({rng}), got {value!r}")
    return value


def _check_values(name: str, x, *, lower: float, strict: bool, upper: float | None = None):
    """Check a (possibly array) parameter: no NaN, finite, and above ``lower``."""
    arr = _concrete(x)
    if arr is None:
        return
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be real numbers, got dtype {arr.dtype}")
    below = arr <= lower if strict else arr < lower
    above = arr >= upper if upper is not None else np.zeros_like(arr, dtype=bool)
    if np.any(np.isnan(arr)) or np.any(np.isinf(arr)) or np.any(below) or np.any(above):
        lo = "(" if strict else "["
        hi = f"{upper})" if upper is not None else "inf)"
        raise ValueError(f"{name} must be finite and in {lo}{lower}, {hi}, got {arr!r}")


def _check_probability(name: str, x, *, closed_low: bool) -> None:
    _check_values(name, x, lower=0.0, strict=not closed_low, upper=1.0)


# ---------------------------------------------------------------------------
# Games
# ---------------------------------------------------------------------------


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["member", "npo", "glrt", "noncentrality"],
    meta_fields=[],
)
@dataclasses.dataclass(frozen=True)
class GameResult:
    """Outcome of many membership-inference games.

    Attributes:
      member: ``bool[games]``, the coin: ``True`` where the game was played under
        ``H1`` (the dataset ``D'`` containing the target).
      npo: ``float[games]``, the NPO statistic ``S = <V, u>/√λ``
        (``N(0, 1)`` under ``H0``, ``N(√λ, 1)`` under ``H1``).
      glrt: ``float[games]``, the GLRT statistic ``T = ‖V‖²/λ``
        (``χ²_d`` under ``H0``, ``ncx2(d, λ)`` under ``H1``).
      noncentrality: scalar ``λ = Σ_i Δ_i²/σ_i²`` of the game.
    """

    member: jax.Array
    npo: jax.Array
    glrt: jax.Array
    noncentrality: jax.Array

    def split(self, adversary: Adversary) -> tuple[jax.Array, jax.Array]:
        """Statistics of one adversary under ``H0`` and under ``H1``.

        Uses boolean indexing on the host, so it runs eagerly (not under ``jit``).

        Args:
          adversary: ``"npo"`` or ``"glrt"``.

        Returns:
          ``(stats0, stats1)``: the statistics of the games played under ``H0`` and
          under ``H1``.

        Example:
          >>> import jax
          >>> from glrt_jax import audit
          >>> res = audit.run_game(jax.random.key(0), sigma=1.0, sensitivity=1.0,
          ...                      games=100, balanced=True)
          >>> s0, s1 = res.split("glrt")
          >>> s0.shape, s1.shape
          ((50,), (50,))
        """
        if adversary not in ("npo", "glrt"):
            raise ValueError(f"adversary must be 'npo' or 'glrt', got {adversary!r}")
        stats = self.npo if adversary == "npo" else self.glrt
        member = np.asarray(self.member)
        values = np.asarray(stats)
        return jnp.asarray(values[~member]), jnp.asarray(values[member])


def _prepare_rounds(sigma, sensitivity, steps):
    """Broadcast ``sigma``/``sensitivity`` to shape ``(steps,)``; infer ``steps``."""
    sig = jnp.asarray(sigma)
    sen = jnp.asarray(sensitivity)
    for name, arr in (("sigma", sig), ("sensitivity", sen)):
        if arr.ndim > 1:
            raise ValueError(
                f"{name} must be a scalar or a 1-D array of per-round values, got shape {arr.shape}"
            )
    lengths = {arr.shape[0] for arr in (sig, sen) if arr.ndim == 1}
    if len(lengths) > 1:
        raise ValueError(
            "sigma and sensitivity must have the same number of rounds, "
            f"got shapes {sig.shape} and {sen.shape}"
        )
    if lengths:
        (n,) = lengths
        if n < 1:
            raise ValueError("sigma and sensitivity must have at least one round (steps >= 1)")
        if steps is not None and _check_positive_int("steps", steps) != n:
            raise ValueError(
                f"steps must equal the length of the per-round arrays ({n}), got {steps!r}"
            )
        steps = n
    else:
        steps = 1 if steps is None else _check_positive_int("steps", steps)
    return sig, sen, steps


@jax.jit
def _weights(sigma, sensitivity):
    """Combination weights, H0 scale of ``V`` and standardised signal ``√λ``."""
    var = sigma * sigma
    lam = jnp.sum(sensitivity * sensitivity / var)
    w = jnp.where(lam > 0, sensitivity / var, 1.0 / var)
    scale = jnp.sqrt(jnp.sum(w * w * var))  # = √λ when λ > 0
    signal = jnp.sum(w * sensitivity) / scale  # = √λ
    # Out-of-domain parameters (only reachable under jit) give NaN statistics.
    ok = jnp.all(jnp.isfinite(sigma) & (sigma > 0))
    ok &= jnp.all(jnp.isfinite(sensitivity) & (sensitivity >= 0))
    return tuple(jnp.where(ok, x, jnp.nan) for x in (w, scale, signal, lam))


def _coin(z0, index, balanced):
    if balanced:
        return (index % 2) == 1
    return z0 > 0


def _one_game_direct(key, index, params, *, steps, d, balanced):
    sigma, sensitivity, direction, w, scale = params
    z = jax.random.normal(jax.random.fold_in(key, index), (1 + steps * d,), sigma.dtype)
    member = _coin(z[0], index, balanced)
    noise = z[1:].reshape(steps, d)
    b = member.astype(sigma.dtype)
    y = (b * sensitivity)[:, None] * direction[None, :] + sigma[:, None] * noise  # (N, d)
    # Σ_i w_i y_i as multiply-and-reduce: batched tiny matrix products are slow on CPU.
    v = jnp.sum(w[:, None] * y, axis=0)  # (d,)
    npo = jnp.sum(v * direction) / scale
    glrt = jnp.sum(v * v) / (scale * scale)
    return member, npo, glrt


def _one_game_sufficient(key, index, signal, *, d, balanced):
    dtype = signal.dtype
    key = jax.random.fold_in(key, index)
    if d <= _MAX_NORMAL_DIM:
        z = jax.random.normal(key, (1 + d,), dtype)
        perp = jnp.sum(z[2:] * z[2:])  # χ²_{d-1} as a sum of squares
    else:
        key, k_perp = jax.random.split(key)
        z = jax.random.normal(key, (2,), dtype)
        perp = jax.random.chisquare(k_perp, d - 1, (), dtype)
    member = _coin(z[0], index, balanced)
    npo = z[1] + member.astype(dtype) * signal
    return member, npo, npo * npo + perp


@partial(jax.jit, static_argnames=("steps", "d", "games", "chunk", "method", "balanced"))
def _run_game_jit(key, params, lam, *, steps, d, games, chunk, method, balanced):
    if method == "direct":
        one = partial(_one_game_direct, steps=steps, d=d, balanced=balanced)
    else:
        one = partial(_one_game_sufficient, d=d, balanced=balanced)

    def run_chunk(start):
        idx = start + jnp.arange(chunk, dtype=jnp.uint32)
        return jax.vmap(one, in_axes=(None, 0, None))(key, idx, params)

    n_chunks = -(-games // chunk)
    if n_chunks == 1:
        member, npo, glrt = run_chunk(jnp.uint32(0))
    else:
        starts = jnp.arange(n_chunks, dtype=jnp.uint32) * jnp.uint32(chunk)
        member, npo, glrt = lax.map(run_chunk, starts)
    member, npo, glrt = (a.reshape(-1)[:games] for a in (member, npo, glrt))
    bad = jnp.isnan(lam)  # out-of-domain parameters under jit
    return member, jnp.where(bad, jnp.nan, npo), jnp.where(bad, jnp.nan, glrt)


def run_game(
    key: jax.Array,
    *,
    sigma: ArrayLike,
    sensitivity: ArrayLike,
    d: int = 1,
    steps: int | None = None,
    games: int,
    method: Method = "sufficient",
    chunk_size: int | None = None,
    direction: ArrayLike | None = None,
    balanced: bool = False,
) -> GameResult:
    """Play many membership-inference games and return both adversaries' statistics.

    Each game flips a fair coin between ``H0`` (query value 0) and ``H1`` (query
    shifted by ``Δ_i u`` in round ``i``), releases ``y_i = b Δ_i u + σ_i z_i``,
    ``z_i ~ N(0, I_d)``, for ``i = 1..N`` and computes

    * the NPO statistic ``S = <V, u>/√λ`` (``N(0,1)`` vs ``N(√λ, 1)``), and
    * the GLRT statistic ``T = ‖V‖²/λ`` (``χ²_d`` vs ``ncx2(d, λ)``),

    with ``V = Σ_i (Δ_i/σ_i²) y_i`` and ``λ = Σ_i Δ_i²/σ_i²`` (see the module
    docstring for the derivation). For homogeneous rounds ``T = N‖ȳ‖²/σ²``, the
    paper's ``‖ȳ‖²`` in units of ``σ²/N``.

    Game ``j`` uses the key ``fold_in(key, j)``, so results do not depend on
    ``chunk_size``. Games are generated ``chunk_size`` at a time (``vmap`` inside
    ``lax.map``), so memory stays bounded for millions of games. Runs on the
    default device.

    Args:
      key: a ``jax.random`` key (typed or raw ``uint32[2]``).
      sigma: noise standard deviation ``σ > 0``: a scalar or one value per round.
      sensitivity: ℓ2-sensitivity ``Δ ≥ 0``: a scalar or one value per round.
      d: query dimension ``d ≥ 1`` (static).
      steps: number of steps ``N ≥ 1`` (static). Inferred from per-round arrays;
        defaults to 1 when ``sigma`` and ``sensitivity`` are scalars.
      games: number of games ``≥ 1`` (static), at most ``2**32``.
      method: ``"sufficient"`` (exact sampling of ``(S, T)``, ``O(1)`` per game) or
        ``"direct"`` (draws all ``N × d`` Gaussians of every game).
      chunk_size: games per chunk (static). Default: about ``2**23`` Gaussian
        draws per chunk.
      direction: the shift direction ``u`` (shape ``(d,)``, normalised here).
        Default ``(1, …, 1)/√d``. The laws do not depend on it.
      balanced: if ``True``, replace the coin by alternation (even games ``H0``,
        odd games ``H1``), so both hypotheses get exactly ``games // 2`` games.

    Returns:
      A :class:`GameResult` with ``member``, ``npo``, ``glrt`` of shape
      ``(games,)`` in the floating dtype of ``sigma``/``sensitivity``, and
      ``noncentrality`` ``λ``.

    Raises:
      ValueError: for ``σ ≤ 0``, ``Δ < 0``, NaN/inf, a non-positive or non-integer
        ``d``/``steps``/``games``/``chunk_size``, mismatched round counts, an
        unknown ``method`` or a zero ``direction``.

    Example:
      >>> import jax
      >>> from glrt_jax import audit
      >>> res = audit.run_game(jax.random.key(0), sigma=6.0, sensitivity=1.0,
      ...                      steps=70, games=10_000)
      >>> res.npo.shape, res.member.dtype
      ((10000,), dtype('bool'))
      >>> round(float(res.noncentrality), 4)  # 70 / 36
      1.9444
    """
    d = _check_positive_int("d", d)
    games = _check_positive_int("games", games, upper=_MAX_GAMES)
    if chunk_size is not None:
        chunk_size = _check_positive_int("chunk_size", chunk_size)
    if method not in ("sufficient", "direct"):
        raise ValueError(f"method must be 'sufficient' or 'direct', got {method!r}")
    sig, sen, steps = _prepare_rounds(sigma, sensitivity, steps)
    _check_values("sigma", sig, lower=0.0, strict=True)
    _check_values("sensitivity", sen, lower=0.0, strict=False)
    dtype = float_dtype(sig, sen)
    sig = jnp.broadcast_to(sig.astype(dtype), (steps,))
    sen = jnp.broadcast_to(sen.astype(dtype), (steps,))

    if direction is None:
        u = jnp.full((d,), 1.0 / math.sqrt(d), dtype)
    else:
        u = jnp.asarray(direction, dtype)
        if u.shape != (d,):
            raise ValueError(f"direction must have shape (d,) = ({d},), got {u.shape}")
        arr = _concrete(u)
        if arr is not None and (not np.all(np.isfinite(arr)) or not np.any(arr != 0)):
            raise ValueError(f"direction must be a finite, non-zero vector; got {arr.tolist()!r}")
        u = u / jnp.linalg.norm(u)

    if chunk_size is None:
        if method == "direct":
            per_game = 1 + steps * d
        else:
            per_game = 1 + d if d <= _MAX_NORMAL_DIM else 2
        chunk_size = max(1, _CHUNK_ELEMENTS // per_game)
    chunk = min(chunk_size, games)
    w, scale, signal, lam = _weights(sig, sen)
    params = (sig, sen, u, w, scale) if method == "direct" else signal
    member, npo, glrt = _run_game_jit(
        key,
        params,
        lam,
        steps=steps if method == "direct" else 1,
        d=d,
        games=games,
        chunk=chunk,
        method=method,
        balanced=bool(balanced),
    )
    return GameResult(member=member, npo=npo, glrt=glrt, noncentrality=lam)


# ---------------------------------------------------------------------------
# Clopper–Pearson intervals
# ---------------------------------------------------------------------------


# Beta quantiles: the residual's tolerance is the rounding level of jax's betainc
# (measured: about 0.7 (a + b) ulps relative, plus a floor of ~50 ulps), with margin, and
# never looser than _BETA_MAX_TOL; the step tolerance in log x; the evaluation cap.
_BETA_TOL_ULPS = 2.0
_BETA_TOL_FLOOR = 64.0
_BETA_MAX_TOL = 2.0**-10
_BETA_XTOL_ULPS = 256.0
_BETA_MAX_ITER = 100


def _beta_residual(u, theta):
    """``log(betainc(a, b, e^u)/p)``, increasing in u, with the exact sign of ``I − p``.

    Near the root it is ``log1p((I − p)/p)``: ``I − p`` is exact there (Sterbenz), so
    ``g ≤ 0`` exactly when the computed ``I ≤ p``; far below, ``log I − log p`` keeps
    its precision when ``I ≪ p``.
    """
    p, a, b = theta
    i = betainc(a, b, jnp.exp(u))
    return jnp.where(i < 0.5 * p, jnp.log(i) - jnp.log(p), jnp.log1p((i - p) / p))


def _beta_start(p, a, b):
    """log of a start for the Beta(a, b) quantile at p (b ≥ 1).

    The larger of a proven lower bound and the normal approximation. With b ≥ 1,
    I_x(a, b) = x^a ₂F₁(a, 1 − b; a + 1; x)/(a B(a, b)) ≤ x^a/(a B(a, b)), so
    x_L = (p a B(a, b))^(1/a) is at most the quantile (and exact as x → 0); the normal
    approximation mean + Φ⁻¹(p) sd is close when a and b are large.
    """
    log_beta = lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)
    u_low = (jnp.log(p) + jnp.log(a) + log_beta) / a
    mean = a / (a + b)
    sd = jnp.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0)))
    x_normal = mean + ndtri(p) * sd
    return jnp.maximum(u_low, jnp.log(jnp.where(x_normal > 0, x_normal, 0.0)))


def _beta_quantile_lower(p, a, b):
    """A float ``x ∈ [0, 1]`` with ``betainc(a, b, x) ≤ p``, at the quantile (elementwise).

    :func:`glrt_jax._src.solvers.find_root` on the safe side (``side="safe"``) of the
    increasing residual ``_beta_residual`` in u = log x: the returned point is an
    evaluated one with computed ``betainc ≤ p``, within the rounding level of
    ``betainc`` (in relative terms, ``_BETA_TOL_ULPS`` (``_BETA_TOL_FLOOR`` + a + b)
    ulps, at most ``_BETA_MAX_TOL``) below p, or within ``_BETA_XTOL_ULPS`` ulps of
    (1 + |log x|) in log x of the crossing. Started from ``_beta_start``; a handful of
    Newton steps (at most 5 on 8192 random counts with n up to 1e8). 0 where even the
    smallest normal float has ``betainc > p``. Requires ``0 < p < 1`` and
    ``a > 0, b ≥ 1``.
    """
    dtype = p.dtype
    finfo = jnp.finfo(dtype)
    eps = float(finfo.eps)
    lo = math.log(float(finfo.tiny))
    tol = jnp.minimum(_BETA_TOL_ULPS * eps * (_BETA_TOL_FLOOR + a + b), _BETA_MAX_TOL)
    root = solvers.find_root(
        _beta_residual,
        (p, a, b),
        lo,
        0.0,
        jnp.clip(_beta_start(p, a, b), lo, 0.0),
        ftol=tol,
        xtol=_BETA_XTOL_ULPS * eps,
        xrtol=_BETA_XTOL_ULPS * eps,
        side="safe",
        increasing=True,
        max_iter=_BETA_MAX_ITER,
    )
    return jnp.where(root.status == solvers.ROOT_BELOW, 0.0, jnp.exp(root.x))


def _clopper_pearson(k, n, alpha):
    """Two-sided Clopper–Pearson interval at level ``1 − alpha`` (arrays, jittable)."""
    dtype = alpha.dtype
    k = jnp.asarray(k, dtype)
    n = jnp.asarray(n, dtype)
    k, n = jnp.broadcast_arrays(k, n)
    one = jnp.ones_like(k)
    # Lower: Beta(α/2; k, n − k + 1) quantile, 0 when k = 0.
    # Upper: Beta(1 − α/2; k + 1, n − k) quantile = 1 − Beta(α/2; n − k, k + 1)
    # quantile; rounded up by one ulp, 1 when k = n.
    # Both quantiles come from one solve over the stacked parameters.
    a = jnp.stack([jnp.maximum(k, one), jnp.maximum(n - k, one)])
    b = jnp.stack([n - k + 1, k + 1])
    q = _beta_quantile_lower(jnp.broadcast_to(alpha / 2, a.shape).astype(dtype), a, b)
    lower = jnp.where(k <= 0, 0.0, q[0])
    upper = jnp.minimum(jnp.nextafter(1 - q[1], jnp.asarray(2.0, dtype)), 1.0)
    upper = jnp.where(k >= n, 1.0, upper)
    # Invalid level or counts (only reachable under jit): NaN.
    ok = (alpha > 0) & (alpha < 1) & (k >= 0) & (k <= n) & (n >= 1)
    return jnp.where(ok, lower, jnp.nan), jnp.where(ok, upper, jnp.nan)


def clopper_pearson(
    successes: ArrayLike, trials: ArrayLike, confidence: float = 0.95
) -> tuple[jax.Array, jax.Array]:
    """Exact (Clopper–Pearson) two-sided confidence interval for a binomial rate.

    With ``α = 1 − confidence`` the interval for ``k`` successes in ``n`` trials is

        lower = B⁻¹(α/2; k, n − k + 1)      (0 if k = 0)
        upper = B⁻¹(1 − α/2; k + 1, n − k)  (1 if k = n)

    with ``B⁻¹(p; a, b)`` the Beta quantile. Each one-sided bound holds with
    probability at least ``1 − α/2``. Quantiles are computed in JAX as roots of
    :func:`jax.scipy.special.betainc` (Newton in log x), rounded outwards.

    Args:
      successes: ``k``, integers in ``[0, n]`` (any shape, broadcast with ``trials``).
      trials: ``n ≥ 1``.
      confidence: level of the two-sided interval, in ``(0, 1)``.

    Returns:
      ``(lower, upper)`` arrays of the broadcast shape (float64 under x64, else
      float32).

    Example:
      >>> from glrt_jax import audit
      >>> lo, hi = audit.clopper_pearson(0, 10, 0.95)
      >>> float(lo), round(float(hi), 4)  # upper = 1 - 0.025**(1/10)
      (0.0, 0.3085)
    """
    _check_probability("confidence", confidence, closed_low=False)
    _check_values("trials", trials, lower=1.0, strict=False)
    k_arr, n_arr = _concrete(successes), _concrete(trials)
    if n_arr is not None and np.any(n_arr != np.floor(n_arr)):
        raise ValueError(f"trials must be integers >= 1, got {n_arr!r}")
    if k_arr is not None:
        _check_values("successes", k_arr, lower=0.0, strict=False)
        if np.any(k_arr != np.floor(k_arr)) or (n_arr is not None and np.any(k_arr > n_arr)):
            raise ValueError(f"successes must be integers in [0, trials], got {k_arr!r}")
    dtype = jnp.result_type(float)
    alpha = 1 - jnp.asarray(confidence, dtype)
    return _clopper_pearson_bucketed(jnp.asarray(successes), jnp.asarray(trials), alpha)


_clopper_pearson_jit = jax.jit(_clopper_pearson)


def _clopper_pearson_bucketed(k, n, alpha):
    """:func:`_clopper_pearson` on inputs padded to a power-of-two length (at least
    128), so that its costly compilation is shared between calls of different sizes."""
    dtype = alpha.dtype
    k, n = jnp.broadcast_arrays(jnp.asarray(k, dtype), jnp.asarray(n, dtype))
    shape = k.shape
    m = max(1, k.size)
    padded = bucket(m, minimum=128)
    kp = jnp.pad(k.reshape(-1), (0, padded - k.size))
    np_ = jnp.pad(n.reshape(-1), (0, padded - n.size), constant_values=1)
    lo, hi = _clopper_pearson_jit(kp, np_, alpha)
    return lo[: k.size].reshape(shape), hi[: k.size].reshape(shape)


# ---------------------------------------------------------------------------
# Empirical ROC
# ---------------------------------------------------------------------------


@partial(
    jax.tree_util.register_dataclass,
    data_fields=[
        "thresholds",
        "fpr",
        "tpr",
        "fpr_lower",
        "fpr_upper",
        "tpr_lower",
        "tpr_upper",
        "n0",
        "n1",
        "confidence",
    ],
    meta_fields=[],
)
@dataclasses.dataclass(frozen=True)
class RocEstimate:
    """Empirical ROC points with Clopper–Pearson bands.

    For the test "reject ``H0`` when the statistic is ``> t``" at each threshold
    ``t``: ``fpr = #{stats0 > t}/n0`` and ``tpr = #{stats1 > t}/n1``.

    Attributes:
      thresholds: ``float[K]``.
      fpr, tpr: ``float[K]`` point estimates.
      fpr_lower, fpr_upper, tpr_lower, tpr_upper: ``float[K]`` interval ends.
      n0, n1: numbers of games under ``H0`` and ``H1``.
      confidence: the level each two-sided interval was built for (after the
        Bonferroni correction if ``simultaneous`` was requested).
    """

    thresholds: jax.Array
    fpr: jax.Array
    tpr: jax.Array
    fpr_lower: jax.Array
    fpr_upper: jax.Array
    tpr_lower: jax.Array
    tpr_upper: jax.Array
    n0: jax.Array
    n1: jax.Array
    confidence: jax.Array

    def swap(self) -> RocEstimate:
        """The ROC with the hypotheses' roles exchanged (the paper's ``R'``).

        The swapped test declares ``H0`` the positive class and rejects when the
        statistic is ``≤ t``: its false-positive rate is ``1 − tpr`` and its
        true-positive rate is ``1 − fpr``; the bands are mapped accordingly.

        Returns:
          A :class:`RocEstimate` for the swapped test.

        Example:
          >>> import jax.numpy as jnp
          >>> from glrt_jax import audit
          >>> roc = audit.empirical_roc(jnp.array([0.0, 1.0]), jnp.array([2.0, 3.0]),
          ...                           jnp.array([1.5]))
          >>> float(roc.swap().fpr[0]), float(roc.swap().tpr[0])
          (0.0, 1.0)
        """
        return RocEstimate(
            thresholds=self.thresholds,
            fpr=1 - self.tpr,
            tpr=1 - self.fpr,
            fpr_lower=1 - self.tpr_upper,
            fpr_upper=1 - self.tpr_lower,
            tpr_lower=1 - self.fpr_upper,
            tpr_upper=1 - self.fpr_lower,
            n0=self.n1,
            n1=self.n0,
            confidence=self.confidence,
        )


def empirical_roc(
    stats0: ArrayLike,
    stats1: ArrayLike,
    thresholds: ArrayLike,
    *,
    confidence: float = 0.95,
    simultaneous: bool = False,
) -> RocEstimate:
    """Empirical ROC of a threshold test, with Clopper–Pearson confidence bands.

    At each threshold ``t`` the test rejects ``H0`` when the statistic exceeds
    ``t``; ``FPR(t) = P0(stat > t)``, ``TPR(t) = P1(stat > t)`` are estimated by the
    fractions of ``stats0``/``stats1`` above ``t`` and given two-sided exact
    binomial intervals (:func:`clopper_pearson`, JAX implementation). The bands
    are conditional on the observed ``n0``, ``n1`` (the coin's outcome).

    With ``simultaneous=False`` each interval has the requested level on its own.
    With ``simultaneous=True`` each uses level ``1 − α/(2K)`` (Bonferroni over the
    ``2K`` intervals), so all FPR and TPR intervals hold together with probability
    at least ``confidence`` — use this when a maximum over thresholds is taken,
    as in :func:`empirical_epsilon_lower_bound`.

    Args:
      stats0: statistics of the games played under ``H0`` (1-D, ``n0 ≥ 1``).
      stats1: statistics of the games played under ``H1`` (1-D, ``n1 ≥ 1``).
      thresholds: 1-D array of ``K`` thresholds.
      confidence: level in ``(0, 1)``.
      simultaneous: Bonferroni-correct over all thresholds and both rates.

    Returns:
      A :class:`RocEstimate`.

    Raises:
      ValueError: for an empty or non-1-D input, NaN statistics or thresholds,
        ``confidence`` outside ``(0, 1)``, or more than ``2**24`` games per class
        in float32 (counts would be rounded: enable x64).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from glrt_jax import audit
      >>> res = audit.run_game(jax.random.key(1), sigma=1.0, sensitivity=2.0,
      ...                      games=20_000)
      >>> s0, s1 = res.split("npo")
      >>> roc = audit.empirical_roc(s0, s1, jnp.linspace(-1.0, 3.0, 9), confidence=0.99)
      >>> bool(jnp.all((roc.fpr_lower <= roc.fpr) & (roc.fpr <= roc.fpr_upper)))
      True
    """
    _check_probability("confidence", confidence, closed_low=False)
    arrays = {}
    for name, x in (("stats0", stats0), ("stats1", stats1), ("thresholds", thresholds)):
        arr = jnp.asarray(x)
        if arr.ndim != 1 or arr.shape[0] < 1:
            raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
        c = _concrete(arr)
        if c is not None and np.any(np.isnan(c)):
            raise ValueError(
                f"{name} must not contain NaN; got {name}[{int(np.argmax(np.isnan(c)))}] = nan"
            )
        arrays[name] = arr
    stats0, stats1, thresholds = arrays["stats0"], arrays["stats1"], arrays["thresholds"]
    dtype = float_dtype(stats0, stats1, thresholds)
    thresholds = thresholds.astype(dtype)
    num = thresholds.shape[0]
    # Pad the thresholds to a power of two (at least 64): fewer recompilations.
    padded = max(64, 1 << (num - 1).bit_length())
    t_pad = jnp.pad(thresholds, (0, padded - num), mode="edge")
    k0, k1 = _exceed_counts(stats0.astype(dtype), stats1.astype(dtype), t_pad)
    n0, n1 = stats0.shape[0], stats1.shape[0]
    if max(n0, n1) > 2 ** (jnp.finfo(dtype).nmant + 1):
        raise ValueError(
            f"stats0/stats1 have more games ({max(n0, n1)}) than {jnp.dtype(dtype).name} "
            "counts exactly; enable float64 with jax.config.update('jax_enable_x64', True) "
            "or the jax.enable_x64() context"
        )
    conf = jnp.asarray(confidence, dtype)
    alpha = jnp.where((conf > 0) & (conf < 1), 1 - conf, jnp.nan)
    if simultaneous:
        alpha = alpha / (2 * num)
    k = jnp.concatenate([k0[:num], k1[:num]]).astype(dtype)
    n = jnp.repeat(jnp.asarray([n0, n1], dtype), num)
    lo, hi = _clopper_pearson_bucketed(k, n, alpha)
    rate = k / n
    return RocEstimate(
        thresholds=thresholds,
        fpr=rate[:num],
        tpr=rate[num:],
        fpr_lower=lo[:num],
        fpr_upper=hi[:num],
        tpr_lower=lo[num:],
        tpr_upper=hi[num:],
        n0=jnp.asarray(n0),
        n1=jnp.asarray(n1),
        confidence=1 - alpha,
    )


@jax.jit
def _exceed_counts(stats0, stats1, thresholds):
    """``#{stats > t}`` for every threshold, by sorting (O((n + K) log n))."""

    def count(stats):
        return stats.shape[0] - jnp.searchsorted(jnp.sort(stats), thresholds, side="right")

    return count(stats0), count(stats1)


# ---------------------------------------------------------------------------
# Empirical ε
# ---------------------------------------------------------------------------


def empirical_epsilon_lower_bound(roc: RocEstimate, delta: ArrayLike) -> jax.Array:
    """Empirical lower bound on ε at a given δ from an ROC's confidence bands.

    An ``(ε, δ)``-DP mechanism satisfies, for every test with rates ``(FPR, TPR)``,
    ``TPR ≤ e^ε FPR + δ`` and ``1 − FPR ≤ e^ε (1 − TPR) + δ``. Replacing the rates
    by the pessimistic ends of their bands,

        ε_lb = max_t max( log((TPR_lower − δ) / FPR_upper),
                          log((1 − FPR_upper − δ) / (1 − TPR_lower)) ),

    clipped at 0 and rounded down. If the bands hold (for all thresholds at once:
    build ``roc`` with ``simultaneous=True``), the true ε at this δ is at least
    ``ε_lb``: the bound then holds with probability at least ``roc.confidence``
    (per-interval level; with ``simultaneous=True`` the overall level is the
    ``confidence`` passed to :func:`empirical_roc`).

    Args:
      roc: an :class:`RocEstimate` from :func:`empirical_roc`.
      delta: ``δ ∈ [0, 1)``.

    Returns:
      Scalar ``ε_lb ≥ 0``.

    Raises:
      ValueError: for ``delta`` outside ``[0, 1)`` or NaN.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from glrt_jax import audit
      >>> res = audit.run_game(jax.random.key(2), sigma=1.0, sensitivity=3.0,
      ...                      games=100_000)
      >>> roc = audit.empirical_roc(*res.split("npo"), jnp.linspace(0.0, 5.0, 21),
      ...                           confidence=0.95, simultaneous=True)
      >>> eps_lb = audit.empirical_epsilon_lower_bound(roc, 1e-5)
      >>> bool(0.0 < eps_lb < 16.67)  # true ε(1e-5) of 3-GDP: 16.675
      True
    """
    _check_probability("delta", delta, closed_low=True)
    return _eps_lb_jit(roc, delta)


@jax.jit
def _eps_lb_jit(roc, delta):
    dtype = roc.tpr_lower.dtype
    delta = jnp.asarray(delta, dtype)

    def one_direction(r):
        num = r.tpr_lower - delta
        ok = (num > 0) & (r.fpr_upper > 0)
        ratio = jnp.where(ok, num / jnp.where(ok, r.fpr_upper, 1.0), 1.0)
        return jnp.max(jnp.where(ok, jnp.log(ratio), -jnp.inf))

    eps = jnp.maximum(one_direction(roc), one_direction(roc.swap()))
    eps = jnp.where((delta >= 0) & (delta < 1), jnp.maximum(eps, 0.0), jnp.nan)
    # Round down: a few ulps of the log and of the ratio.
    tiny = 4 * jnp.finfo(dtype).eps * (1 + eps)
    return jnp.maximum(eps - tiny, 0.0)


# ---------------------------------------------------------------------------
# The paper's experiment: games, both adversaries' ROC and ε lower bounds
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EmpiricalExperiment:
    """Outcome of the paper's membership-inference experiment (see :func:`run_experiment`).

    Attributes:
      sensitivity, sigma, steps, d, games: the setting.
      mu: ``√λ`` with ``λ = steps Δ²/σ²``, the signal-to-noise of the composed game.
      roc: empirical ROC of the GLRT adversary's test ``‖ȳ‖² > c²``
        (:class:`RocEstimate`, pointwise Clopper–Pearson bands); ``roc.swap()`` is
        the empirical ``R'``.
      roc_npo: the same for the NPO adversary's statistic.
      delta: the δ of the empirical lower bounds.
      epsilon_lower, epsilon_lower_npo: empirical lower bounds on ε at ``delta``
        for the GLRT and NPO adversaries, from simultaneous (Bonferroni)
        Clopper–Pearson bands at the experiment's confidence level
        (:func:`empirical_epsilon_lower_bound`). If the theory is right they lie
        below the theoretical ε with that probability.
    """

    sensitivity: float
    sigma: float
    steps: int
    d: int
    games: int
    mu: float
    roc: RocEstimate
    roc_npo: RocEstimate
    delta: float
    epsilon_lower: float
    epsilon_lower_npo: float


def _quantile_thresholds(stats0, stats1, count: int) -> np.ndarray:
    pooled = np.concatenate([np.asarray(stats0), np.asarray(stats1)])
    levels = (np.arange(count) + 0.5) / count
    return np.quantile(pooled, levels)


def run_experiment(
    key: jax.Array,
    *,
    sensitivity: float,
    sigma: float,
    steps: int,
    d: int = 1,
    games: int = 1000,
    thresholds: int = 100,
    confidence: float = 0.95,
    method: Method = "direct",
    delta: float = 1e-2,
) -> EmpiricalExperiment:
    """Play the paper's membership-inference game and estimate both adversaries' ROC.

    A fair coin picks ``D`` or ``D'`` in each game; the mechanism releases ``steps``
    outputs ``y_i ~ N(b Δ u, σ² I_d)`` and the GLRT adversary thresholds
    ``‖ȳ‖²`` (in units of ``σ²/N``, :func:`run_game`) at ``thresholds`` cut-offs
    (quantiles of the pooled statistics). The paper uses 1000 games and 100
    cut-offs. Eager (not jittable).

    Args:
      key: a ``jax.random`` key.
      sensitivity: ``Δ ≥ 0``. sigma: ``σ > 0``. steps: ``N ≥ 1``. d: ``d ≥ 1``.
      games: number of games (``≥ 2``). thresholds: number of cut-offs (``≥ 2``).
      confidence: level of the pointwise Clopper–Pearson bands, in ``(0, 1)``.
      method: ``"direct"`` (draw every ``y_i``, as the paper) or ``"sufficient"``
        (exact sampling of the statistics; see :func:`run_game`).
      delta: δ in ``[0, 1)`` of the empirical lower bounds on ε.

    Returns:
      An :class:`EmpiricalExperiment`.

    Raises:
      ValueError: for out-of-range arguments (named), or all games on one side of
        the coin (increase ``games``).

    Example:
      >>> import jax
      >>> from glrt_jax import audit
      >>> exp = audit.run_experiment(jax.random.key(0), sensitivity=1.0, sigma=6.0,
      ...                            steps=70, games=200, thresholds=20)
      >>> exp.roc.fpr.shape
      (20,)
    """
    check_range("sensitivity", sensitivity, lo=0.0)
    check_range("sigma", sigma, lo=0.0, lo_open=True)
    steps = check_int("steps", steps)
    d = check_int("d", d)
    games = check_int("games", games, lo=2)
    thresholds = check_int("thresholds", thresholds, lo=2)
    check_range("confidence", confidence, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    check_range("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    sensitivity, sigma = float(np.asarray(sensitivity)), float(np.asarray(sigma))
    result = run_game(
        key,
        sigma=sigma,
        sensitivity=sensitivity,
        steps=steps,
        d=d,
        games=games,
        method=method,
        balanced=True,
    )
    rocs, lower = [], []
    for adversary in ("glrt", "npo"):
        s0, s1 = result.split(adversary)
        t = _quantile_thresholds(s0, s1, thresholds)
        rocs.append(empirical_roc(s0, s1, t, confidence=confidence))
        simultaneous = empirical_roc(s0, s1, t, confidence=confidence, simultaneous=True)
        lower.append(float(empirical_epsilon_lower_bound(simultaneous, delta)))
    return EmpiricalExperiment(
        sensitivity=sensitivity,
        sigma=sigma,
        steps=steps,
        d=d,
        games=games,
        mu=math.sqrt(float(result.noncentrality)),
        roc=rocs[0],
        roc_npo=rocs[1],
        delta=float(delta),
        epsilon_lower=lower[0],
        epsilon_lower_npo=lower[1],
    )
