"""User-facing accounting: releases of the Gaussian mechanism in, (ε, δ) for NPO and GLRT out.

Threat model of this module: **composition with a shared direction** (paper, Theorem 2).
The N releases y_i = f_i(D) + N(0, σ_i² I_d) all move along the same unknown unit vector u
when D becomes D'. The GLRT adversary combines them with the weights Δ_i/σ_i² and thresholds
‖Σ_i (Δ_i/σ_i²) y_i‖², which under H0 is σ_eff² χ²_d and under H1 non-central with

    λ = Σ_i Δ_i² / σ_i²

(the weighted sum is Gaussian with covariance λ I_d in units where its mean shift has norm λ;
dividing by √λ gives a unit-variance statistic whose mean shift has squared norm λ). For N
identical releases λ = N Δ²/σ². The NPO adversary knows u and its log-likelihood ratio is
Gaussian with μ² = λ, the usual Gaussian-DP composition. Releases of different dimension do
not share a direction: compose them per round (numerically) instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from glrt_jax._src import composition, profile
from glrt_jax._src.composition import Bounds
from glrt_jax._src.validation import check_range

THREAT_MODEL_SHARED = "shared direction (Theorem 2): lambda = sum Delta_i^2/sigma_i^2"


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class GaussianMechanism:
    """One release of ``f(D) + N(0, σ² I_d)`` with ℓ2-sensitivity ``Δ``.

    Attributes:
      sensitivity: Δ ≥ 0. sigma: σ > 0 (pytree leaves: may be traced).
      dim: query dimension d (static, positive integer).
    """

    sensitivity: float
    sigma: float
    dim: int = dataclasses.field(default=1, metadata=dict(static=True))

    def __post_init__(self):
        check_range("sensitivity", self.sensitivity, lo=0.0)
        check_range("sigma", self.sigma, lo=0.0, lo_open=True)
        check_range("dim", self.dim, lo=1.0, integer=True)

    @property
    def noncentrality(self):
        """λ = Δ²/σ² of one release."""
        return (jnp.asarray(self.sensitivity) / self.sigma) ** 2


def compose(mechanisms: Sequence[GaussianMechanism]) -> tuple[jax.Array, int]:
    """Compose releases that share a direction (Theorem 2).

    Returns:
      ``(mu, d)`` with ``mu = √(Σ Δ_i²/σ_i²)``.

    Raises:
      ValueError: empty sequence, or releases of different dimension (those do not
        share a direction; use per-round numeric composition).
    """
    if len(mechanisms) == 0:
        raise ValueError("mechanisms must contain at least one GaussianMechanism")
    dims = {m.dim for m in mechanisms}
    if len(dims) != 1:
        raise ValueError(
            f"releases of different query dimension {sorted(dims)} cannot share a direction, so "
            "Theorem 2 (lambda = sum Delta_i^2/sigma_i^2) does not apply; compose them per round "
            "with the numeric privacy-loss engine (glrt_jax.pld) instead"
        )
    lam = sum(m.noncentrality for m in mechanisms)
    return jnp.sqrt(lam), dims.pop()


@dataclasses.dataclass(frozen=True)
class PrivacyReport:
    """NPO and GLRT guarantees side by side for one setting."""

    mu: float
    dim: int
    delta_npo: float
    delta_glrt: float
    epsilon_npo: float
    epsilon_glrt: float
    threat_model: str = THREAT_MODEL_SHARED

    def table(self) -> str:
        """Markdown table of the two adversaries."""
        rows = [
            "| adversary | epsilon | delta |",
            "|---|---|---|",
            f"| NPO (Gaussian DP) | {self.epsilon_npo:.6g} | {self.delta_npo:.6g} |",
            f"| GLRT (d = {self.dim}) | {self.epsilon_glrt:.6g} | {self.delta_glrt:.6g} |",
        ]
        return "\n".join(rows)


def _mu_dim(sensitivity, sigma, steps, dim):
    check_range("steps", steps, lo=1.0, integer=True)
    mech = GaussianMechanism(sensitivity, sigma, dim)
    return math.sqrt(int(steps)) * jnp.sqrt(mech.noncentrality), dim


def epsilon(
    delta: float, *, sensitivity: float, sigma: float, steps: int = 1, dim: int = 1
) -> PrivacyReport:
    """ε at δ for ``steps`` identical releases sharing a direction, both adversaries.

    Args:
      delta: δ in (0, 1). sensitivity: Δ ≥ 0. sigma: σ > 0. steps: N ≥ 1.
      dim: query dimension d ≥ 1.

    Returns:
      A :class:`PrivacyReport` with ε for NPO and GLRT at the same δ.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> r = accountant.epsilon(1e-2, sensitivity=1.0, sigma=6.0, steps=70, dim=1)
      >>> f"{r.epsilon_npo:.4f} {r.epsilon_glrt:.4f}"
      '3.6367 2.9437'
    """
    check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    mu, d = _mu_dim(sensitivity, sigma, steps, dim)
    return PrivacyReport(
        mu=float(mu),
        dim=d,
        delta_npo=float(delta),
        delta_glrt=float(delta),
        epsilon_npo=float(profile.npo_epsilon(delta, mu)),
        epsilon_glrt=float(profile.glrt_epsilon(delta, mu, d)),
    )


def delta(
    epsilon: float, *, sensitivity: float, sigma: float, steps: int = 1, dim: int = 1
) -> PrivacyReport:
    """δ at ε for ``steps`` identical releases sharing a direction, both adversaries.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> r = accountant.delta(1.0, sensitivity=1.0, sigma=1.0)
      >>> r.delta_glrt < r.delta_npo
      True
    """
    check_range("epsilon", epsilon, lo=0.0)
    mu, d = _mu_dim(sensitivity, sigma, steps, dim)
    return PrivacyReport(
        mu=float(mu),
        dim=d,
        delta_npo=float(profile.npo_delta(epsilon, mu)),
        delta_glrt=float(profile.glrt_delta(epsilon, mu, d)),
        epsilon_npo=float(epsilon),
        epsilon_glrt=float(epsilon),
    )


# ---------------------------------------------------------------------------
# Per-round (numeric) composition: DP-SGD and sequences of events
# ---------------------------------------------------------------------------

THREAT_MODEL_PER_ROUND = (
    "per-round composition: independent rounds, each seen on its own; the GLRT adversary "
    "re-estimates the direction every round from ||y_i||^2 (numeric PLD engine)"
)


@dataclasses.dataclass(frozen=True)
class SubsampledGaussianEvent:
    """``count`` rounds of the Poisson-subsampled Gaussian mechanism (DP-SGD steps).

    Attributes:
      noise_multiplier: σ/Δ > 0 (noise standard deviation over the ℓ2 sensitivity, e.g.
        the clipping norm of DP-SGD).
      sampling_rate: Poisson sampling rate q ∈ (0, 1]; 1 means no subsampling.
      count: number of rounds N ≥ 1.
      dim: query dimension d ≥ 1 seen by the GLRT adversary (ignored by NPO). ``None``
        takes the accountant's ``dim``.
    """

    noise_multiplier: float
    sampling_rate: float = 1.0
    count: int = 1
    dim: int | None = None

    def __post_init__(self):
        check_range("noise_multiplier", self.noise_multiplier, lo=0.0, lo_open=True)
        check_range("sampling_rate", self.sampling_rate, lo=0.0, hi=1.0, lo_open=True)
        check_range("count", self.count, lo=1.0, integer=True)
        if self.dim is not None:
            check_range("dim", self.dim, lo=1.0, integer=True)


def _from_dp_event(event, count: int) -> list[SubsampledGaussianEvent]:
    """Translate a dp_accounting ``DpEvent`` (optional dependency) into our events."""
    try:
        from dp_accounting import dp_event as dpe
    except ImportError:  # pragma: no cover - only reached with foreign objects
        dpe = None
    if dpe is None or not isinstance(event, dpe.DpEvent):
        raise ValueError(
            "event must be a SubsampledGaussianEvent or a dp_accounting DpEvent; got "
            f"{type(event).__name__}"
        )
    if isinstance(event, dpe.NoOpDpEvent):
        return []
    if isinstance(event, dpe.GaussianDpEvent):
        return [SubsampledGaussianEvent(event.noise_multiplier, 1.0, count)]
    if isinstance(event, dpe.PoissonSampledDpEvent) and isinstance(
        event.event, dpe.GaussianDpEvent
    ):
        return [
            SubsampledGaussianEvent(event.event.noise_multiplier, event.sampling_probability, count)
        ]
    if isinstance(event, dpe.SelfComposedDpEvent):
        return _flatten(event.event, count * int(event.count))
    if isinstance(event, dpe.ComposedDpEvent):
        out = []
        for _ in range(count):
            for e in event.events:
                out.extend(_flatten(e, 1))
        return out
    raise ValueError(
        f"unsupported DpEvent {type(event).__name__}: this accountant composes Gaussian "
        "mechanisms, optionally Poisson-subsampled (GaussianDpEvent, PoissonSampledDpEvent of "
        "a GaussianDpEvent, SelfComposedDpEvent, ComposedDpEvent, NoOpDpEvent)"
    )


def _flatten(event, count: int) -> list[SubsampledGaussianEvent]:
    if isinstance(event, SubsampledGaussianEvent):
        return [dataclasses.replace(event, count=event.count * count)]
    return _from_dp_event(event, count)


@dataclasses.dataclass(frozen=True)
class CompositionReport:
    """NPO and GLRT bounds side by side for a per-round composition.

    Attributes:
      quantity: ``"epsilon"`` (``npo``/``glrt`` bound ε at ``delta``) or ``"delta"``
        (they bound δ at ``epsilon``).
      npo, glrt: :class:`Bounds` ``(lower, estimate, upper)`` as floats; the
        true value lies in ``[lower, upper]``; ``upper`` is the guarantee to report.
      epsilon, delta: the fixed coordinate (the other is ``None``).
      dims: the query dimensions seen by the GLRT adversary.
      neighbouring: ``"add_remove"`` or ``"replace_one"``.
    """

    quantity: str
    npo: Any
    glrt: Any
    epsilon: float | None
    delta: float | None
    dims: tuple
    neighbouring: str
    threat_model: str = THREAT_MODEL_PER_ROUND

    def table(self) -> str:
        """Markdown table: bounds for both adversaries (report the upper bound)."""
        q = self.quantity
        fixed = f"delta = {self.delta:g}" if q == "epsilon" else f"epsilon = {self.epsilon:g}"
        dims = ", ".join(str(d) for d in self.dims)
        rows = [
            f"| adversary | {q} (upper bound) | lower bound | estimate | at |",
            "|---|---|---|---|---|",
        ]
        for name, b in ((("NPO (Gaussian DP)"), self.npo), (f"GLRT (d = {dims})", self.glrt)):
            rows.append(f"| {name} | {b.upper:.6g} | {b.lower:.6g} | {b.estimate:.6g} | {fixed} |")
        return "\n".join(rows)


class PLDAccountant:
    """Accountant for a sequence of (subsampled) Gaussian releases, NPO and GLRT.

    Composes rounds **per round** (the threat model of :data:`THREAT_MODEL_PER_ROUND`)
    with the numeric privacy-loss engine :mod:`glrt_jax.pld`, and answers for both
    adversaries with certified bounds. Accepts :class:`SubsampledGaussianEvent` and,
    when the optional ``dp-accounting`` package is installed, its ``DpEvent`` objects
    (Gaussian, Poisson-sampled Gaussian, self-composed, composed, no-op).

    Args:
      dim: default query dimension d for the GLRT adversary.
      neighbouring: ``"add_remove"`` (the larger of the remove and add directions) or
        ``"replace_one"``.
      tol: relative accuracy of the upper bounds (see
        :func:`glrt_jax.accountant.schedule_epsilon`); 1e-3 by default.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> acc = accountant.PLDAccountant(dim=1)
      >>> _ = acc.compose(accountant.SubsampledGaussianEvent(6.0, 0.2), count=100)
      >>> r = acc.epsilon(1e-5)
      >>> r.glrt.upper < r.npo.upper
      True
    """

    def __init__(self, dim: int = 1, neighbouring: str = "add_remove", tol: float = 1e-3):
        check_range("dim", dim, lo=1.0, integer=True)
        if neighbouring not in ("add_remove", "replace_one"):
            raise ValueError(
                f"neighbouring must be 'add_remove' or 'replace_one'; got {neighbouring!r}"
            )
        check_range("tol", tol, lo=1e-7, hi=0.5)
        self.dim = int(dim)
        self.neighbouring = neighbouring
        self.tol = float(tol)
        self._events: list[SubsampledGaussianEvent] = []

    @property
    def events(self) -> tuple[SubsampledGaussianEvent, ...]:
        """The composed rounds, consecutive identical events merged."""
        return tuple(self._events)

    def compose(self, event, count: int = 1) -> PLDAccountant:
        """Add ``count`` repetitions of ``event``; returns the accountant (chainable)."""
        check_range("count", count, lo=1.0, integer=True)
        for e in _flatten(event, int(count)):
            e = dataclasses.replace(e, dim=self.dim if e.dim is None else e.dim)
            last = self._events[-1] if self._events else None
            if last is not None and dataclasses.replace(last, count=e.count) == e:
                self._events[-1] = dataclasses.replace(last, count=last.count + e.count)
            else:
                self._events.append(e)
        return self

    def _schedule(self):
        if not self._events:
            raise ValueError("nothing composed yet: call compose(event) first")
        dims = self._dims()
        if len(dims) > 1:
            raise ValueError(
                f"events of different query dimension {list(dims)} cannot be composed in one "
                "schedule yet; use one dim per accountant"
            )
        sig = np.array([float(e.noise_multiplier) for e in self._events])
        q = np.array([float(e.sampling_rate) for e in self._events])
        n = np.array([int(e.count) for e in self._events], dtype=np.int64)
        return sig, q, n, dims[0]

    def _query(self, fn, value):
        sig, q, n, d = self._schedule()
        out = {}
        for adversary in ("npo", "glrt"):
            b = fn(
                sig,
                q,
                n,
                value,
                d=d,
                adversary=adversary,
                neighbouring=self.neighbouring,
                tol=self.tol,
            )
            out[adversary] = Bounds(*(float(v) for v in b))
        return out

    def epsilon(self, delta: float) -> CompositionReport:
        """Bounds on ε at ``delta`` for NPO and GLRT (per-round composition)."""
        check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        out = self._query(composition.schedule_epsilon, float(delta))
        return CompositionReport(
            "epsilon",
            out["npo"],
            out["glrt"],
            None,
            float(delta),
            self._dims(),
            self.neighbouring,
        )

    def delta(self, epsilon: float) -> CompositionReport:
        """Bounds on δ at ``epsilon`` for NPO and GLRT (per-round composition)."""
        check_range("epsilon", epsilon, lo=0.0)
        out = self._query(composition.schedule_delta, float(epsilon))
        return CompositionReport(
            "delta",
            out["npo"],
            out["glrt"],
            float(epsilon),
            None,
            self._dims(),
            self.neighbouring,
        )

    def _dims(self):
        return tuple(sorted({int(e.dim) for e in self._events}))


def _dpsgd_accountant(noise_multiplier, sampling_rate, steps, d, neighbouring, tol):
    acc = PLDAccountant(dim=d, neighbouring=neighbouring, tol=tol)
    return acc.compose(SubsampledGaussianEvent(noise_multiplier, sampling_rate, steps))


def dpsgd_epsilon(
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    delta: float,
    d: int = 1,
    *,
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
) -> CompositionReport:
    """ε at δ of DP-SGD (``steps`` Poisson-subsampled Gaussian rounds), NPO and GLRT.

    Each round releases a clipped-gradient sum plus ``N(0, (noise_multiplier·C)² I_d)``
    on a Poisson sample with rate ``sampling_rate``. Threat model: per-round
    composition (:data:`THREAT_MODEL_PER_ROUND`); the NPO column is the usual DP-SGD
    guarantee (as dp_accounting's PLD accountant), the GLRT column the guarantee
    against an adversary that does not know the direction of the target's gradient.

    Args:
      noise_multiplier: σ/C > 0. sampling_rate: q ∈ (0, 1]. steps: N ≥ 1.
      delta: δ ∈ (0, 1). d: query (model) dimension seen by the GLRT adversary.
      neighbouring: ``"add_remove"`` or ``"replace_one"``.
      tol: relative accuracy of the upper bound (see :func:`schedule_epsilon`).

    Returns:
      A :class:`CompositionReport` with :class:`Bounds` on ε for both.
      Not jittable (it returns floats); for jit/vmap/grad use
      :func:`schedule_epsilon`, which takes the same arguments as arrays of phases.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> r = accountant.dpsgd_epsilon(1.0, 0.01, 1000, 1e-5)
      >>> round(r.npo.upper, 2)
      1.83
    """
    acc = _dpsgd_accountant(noise_multiplier, sampling_rate, steps, d, neighbouring, tol)
    return acc.epsilon(delta)


def dpsgd_delta(
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    epsilon: float,
    d: int = 1,
    *,
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
) -> CompositionReport:
    """δ at ε of DP-SGD, NPO and GLRT side by side (see :func:`dpsgd_epsilon`).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> r = accountant.dpsgd_delta(1.0, 0.01, 1000, 2.0)
      >>> r.glrt.upper <= r.npo.upper
      True
    """
    acc = _dpsgd_accountant(noise_multiplier, sampling_rate, steps, d, neighbouring, tol)
    return acc.delta(epsilon)


schedule_epsilon = composition.schedule_epsilon
schedule_delta = composition.schedule_delta
