"""User-facing accounting: phases of the Gaussian mechanism in, (ε, δ) for NPO and GLRT out.

One composition entry point, :class:`Accountant` (:func:`epsilon` and :func:`delta` are
one-call shortcuts), one report type, :class:`PrivacyReport`, and two threat models,
chosen by ``threat_model``:

* ``"per_round"`` (default; DP-SGD): the rounds are independent and each is seen on its
  own; the GLRT adversary re-estimates the direction every round from ``‖y_i‖²``. Phases
  may be Poisson-subsampled. Composed numerically with certified bounds by the engine of
  :mod:`glrt_jax._src.composition` (whose jittable form is :func:`schedule_epsilon` /
  :func:`schedule_delta`), at a cost independent of the number of steps.
* ``"shared"`` (paper, Theorem 2): all releases y_i = f_i(D) + N(0, σ_i² I_d) move along
  the same unknown unit vector when D becomes D'. The GLRT adversary pools them with the
  weights Δ_i/σ_i² and thresholds ``‖Σ_i (Δ_i/σ_i²) y_i‖²``, non-central χ²_d with

      λ = Σ_i Δ_i² / σ_i² = Σ_k steps_k / noise_multiplier_k²

  under the alternative; the NPO adversary knows the direction and its log-likelihood
  ratio is Gaussian with μ² = λ (Gaussian-DP composition). Closed form, no subsampling.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from glrt_jax._src import composition, profile, programs, risk
from glrt_jax._src.composition import Bounds
from glrt_jax._src.formatting import rounded
from glrt_jax._src.validation import NEIGHBOURINGS, THREAT_MODELS, check_choice, check_range

_THREAT_MODEL_TEXT = {
    "per_round": (
        "per round: independent rounds, each seen on its own; the GLRT adversary "
        "re-estimates the direction every round from ||y_i||^2 (numeric composition)"
    ),
    "shared": "shared direction (Theorem 2): lambda = sum steps_k / noise_multiplier_k^2",
}


@dataclasses.dataclass(frozen=True)
class Phase:
    """``steps`` rounds of the Gaussian mechanism, optionally Poisson-subsampled.

    Attributes:
      noise_multiplier: σ/Δ > 0 (noise standard deviation over the ℓ2 sensitivity, e.g.
        the clipping norm of DP-SGD).
      sampling_rate: Poisson sampling rate q ∈ (0, 1]; 1 means no subsampling.
      steps: number of rounds N ≥ 1.
    """

    noise_multiplier: float
    sampling_rate: float = 1.0
    steps: int = 1

    def __post_init__(self):
        check_range("noise_multiplier", self.noise_multiplier, lo=0.0, lo_open=True)
        check_range("sampling_rate", self.sampling_rate, lo=0.0, hi=1.0, lo_open=True)
        check_range("steps", self.steps, lo=1.0, integer=True)


def _from_dp_event(event, repeat: int) -> list[Phase]:
    """Translate a dp_accounting ``DpEvent`` (optional dependency) into phases."""
    try:
        from dp_accounting import dp_event as dpe
    except ImportError:  # pragma: no cover - only reached with foreign objects
        dpe = None
    if dpe is None or not isinstance(event, dpe.DpEvent):
        raise ValueError(
            f"event must be a Phase or a dp_accounting DpEvent; got {type(event).__name__}"
        )
    if isinstance(event, dpe.NoOpDpEvent):
        return []
    if isinstance(event, dpe.GaussianDpEvent):
        return [Phase(event.noise_multiplier, 1.0, repeat)]
    if isinstance(event, dpe.PoissonSampledDpEvent) and isinstance(
        event.event, dpe.GaussianDpEvent
    ):
        return [Phase(event.event.noise_multiplier, event.sampling_probability, repeat)]
    if isinstance(event, dpe.SelfComposedDpEvent):
        return _flatten(event.event, repeat * int(event.count))
    if isinstance(event, dpe.ComposedDpEvent):
        out = []
        for _ in range(repeat):
            for e in event.events:
                out.extend(_flatten(e, 1))
        return out
    raise ValueError(
        f"unsupported DpEvent {type(event).__name__}: this accountant composes Gaussian "
        "mechanisms, optionally Poisson-subsampled (GaussianDpEvent, PoissonSampledDpEvent of "
        "a GaussianDpEvent, SelfComposedDpEvent, ComposedDpEvent, NoOpDpEvent)"
    )


def _flatten(event, repeat: int) -> list[Phase]:
    if isinstance(event, Phase):
        return [dataclasses.replace(event, steps=event.steps * repeat)]
    return _from_dp_event(event, repeat)


@dataclasses.dataclass(frozen=True)
class PrivacyReport:
    """NPO and GLRT guarantees side by side, with certified bounds.

    Attributes:
      quantity: ``"epsilon"`` (``npo``/``glrt`` bound ε at ``delta``), ``"delta"``
        (they bound δ at ``epsilon``), ``"tpr"`` (they bound the attack's true-positive
        rate at false-positive rate ``fpr``; the ROC curve when ``fpr`` is an array) or
        ``"advantage"`` (they bound the maximal ``tpr − fpr``).
      epsilon, delta: the fixed coordinate (``None`` when not fixed).
      npo, glrt: :class:`Bounds` ``(lower, estimate, upper)`` as floats (NumPy arrays
        for an array of ``fpr``); the true value lies in ``[lower, upper]`` and ``upper``
        is the guarantee to report (the attacker's best case). Closed forms
        (``threat_model="shared"``) give ``lower = estimate = upper``.
      d: query dimension seen by the GLRT adversary.
      steps: total number of rounds composed.
      phases: number of distinct phases K.
      threat_model: ``"per_round"`` or ``"shared"`` (see :data:`THREAT_MODELS`).
      neighbouring: ``"add_remove"`` or ``"replace_one"``.
      mu: ``√λ`` of the shared-direction composition; ``None`` per round.
      fpr: the false-positive rate(s) of a ``"tpr"`` answer (a float or a NumPy array);
        ``None`` otherwise.
    """

    quantity: str
    epsilon: float | None
    delta: float | None
    npo: Any
    glrt: Any
    d: int
    steps: int
    phases: int
    threat_model: str
    neighbouring: str
    mu: float | None = None
    fpr: Any = None

    def table(self) -> str:
        """Markdown table of both adversaries (report the upper bound).

        One row per adversary (per adversary and ``fpr`` for a ROC curve). The bounds are
        printed to six significant digits rounded outward, the upper bound up and the
        lower bound down (:func:`glrt_jax._src.formatting.rounded`), so that the printed
        bracket still contains the truth; the estimate to the nearest.

        Example:
          >>> import jax
          >>> jax.config.update("jax_enable_x64", True)
          >>> from glrt_jax import accountant
          >>> r = accountant.epsilon(1e-5, noise_multiplier=1.0, sampling_rate=0.01, steps=1000)
          >>> row = r.table().splitlines()[2].split(" | ")
          >>> float(row[1]) >= float(r.npo.upper) and float(row[2]) <= float(r.npo.lower)
          True
        """
        q = self.quantity
        rows = [
            f"| adversary | {q} (upper bound) | lower bound | estimate | at |",
            "|---|---|---|---|---|",
        ]
        for name, b in (("NPO (Gaussian DP)", self.npo), (f"GLRT (d = {self.d})", self.glrt)):
            lower, est, upper = (np.atleast_1d(np.asarray(v, dtype=float)) for v in b)
            if q == "tpr":
                at = [f"fpr = {a:g}" for a in np.atleast_1d(self.fpr)]
            elif q == "advantage":
                at = ["max over fpr"]
            else:
                at = [
                    f"delta = {self.delta:g}" if q == "epsilon" else f"epsilon = {self.epsilon:g}"
                ]
            for lo, es, up, where in zip(lower, est, upper, at, strict=True):
                up, lo = rounded(up, direction="up"), rounded(lo, direction="down")
                rows.append(f"| {name} | {up} | {lo} | {rounded(es)} | {where} |")
        return "\n".join(rows)

    def describe(self) -> str:
        """One line naming the threat model (in words) and the setting."""
        return (
            f"threat model: {_THREAT_MODEL_TEXT[self.threat_model]}; "
            f"neighbouring={self.neighbouring}, steps={self.steps}, phases={self.phases}"
        )

    def to_dict(self) -> dict:
        """Plain-dict export (floats, ints, strings and ``None``: JSON-serialisable)."""
        out = dataclasses.asdict(self)
        for name in ("npo", "glrt"):
            out[name] = dict(zip(Bounds._fields, map(_plain, getattr(self, name)), strict=True))
        out["fpr"] = None if self.fpr is None else _plain(self.fpr)
        return out


def _plain(v):
    """A float, or a list of floats for an array."""
    a = np.asarray(v, dtype=float)
    return float(a) if a.ndim == 0 else a.tolist()


class Accountant:
    """Accountant for phases of the (subsampled) Gaussian mechanism, NPO and GLRT.

    :meth:`compose` records phases; :meth:`epsilon` and :meth:`delta` answer for both
    adversaries with certified bounds (:class:`PrivacyReport`), and so do the attack-risk
    answers :meth:`tpr` (true-positive rate at a false-positive rate), :meth:`roc` (the
    whole curve) and :meth:`advantage` (the maximal ``tpr − fpr``). Accepts :class:`Phase`
    and, when the optional ``dp-accounting`` package is installed, its ``DpEvent``
    objects (Gaussian, Poisson-sampled Gaussian, self-composed, composed, no-op).

    The cost of an answer does not depend on the number of steps; it grows with the
    number of distinct phases (consecutive identical phases are merged).

    Args:
      d: query dimension seen by the GLRT adversary (ignored by NPO).
      threat_model: ``"per_round"`` (default; independent rounds, numeric composition)
        or ``"shared"`` (Theorem 2: one shared direction; closed form; no subsampling
        and ``neighbouring="add_remove"`` only).
      neighbouring: ``"add_remove"`` (the larger of the remove and add directions) or
        ``"replace_one"``.
      tol: relative accuracy of the per-round upper bounds (see
        :func:`schedule_epsilon`; a δ below 10⁻¹⁵ to ``tol·10⁻¹⁵`` absolute, see
        :func:`schedule_delta`); 1e-3 by default, down to 1e-7.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> acc = accountant.Accountant(d=1)
      >>> _ = acc.compose(accountant.Phase(6.0, 0.2, steps=100))
      >>> r = acc.epsilon(1e-5)
      >>> r.glrt.upper < r.npo.upper
      True
    """

    def __init__(
        self,
        d: int = 1,
        *,
        threat_model: str = "per_round",
        neighbouring: str = "add_remove",
        tol: float = 1e-3,
    ):
        check_range("d", d, lo=1.0, integer=True)
        check_choice("threat_model", threat_model, THREAT_MODELS)
        check_choice("neighbouring", neighbouring, NEIGHBOURINGS)
        if threat_model == "shared" and neighbouring != "add_remove":
            raise ValueError(
                "threat_model='shared' supports neighbouring='add_remove' only; "
                f"got {neighbouring!r}"
            )
        check_range("tol", tol, lo=1e-7, hi=0.5)
        self.d = int(d)
        self.threat_model = threat_model
        self.neighbouring = neighbouring
        self.tol = float(tol)
        self._phases: list[Phase] = []
        self._profiles: dict = {}
        self._sizes_used: dict = {}

    @property
    def phases(self) -> tuple[Phase, ...]:
        """The composed phases, consecutive identical ones merged."""
        return tuple(self._phases)

    def compose(self, event) -> Accountant:
        """Add a :class:`Phase` (or a dp_accounting ``DpEvent``); returns the accountant.

        Raises:
          ValueError: an unsupported event, or a subsampled phase under
            ``threat_model="shared"`` (Theorem 2 covers releases without subsampling).
        """
        for p in _flatten(event, 1):
            if self.threat_model == "shared" and p.sampling_rate != 1.0:
                raise ValueError(
                    "threat_model='shared' (Theorem 2) covers releases without subsampling: "
                    f"sampling_rate must be 1, got {p.sampling_rate!r}; use "
                    "threat_model='per_round'"
                )
            last = self._phases[-1] if self._phases else None
            if last is not None and dataclasses.replace(last, steps=p.steps) == p:
                self._phases[-1] = dataclasses.replace(last, steps=last.steps + p.steps)
            else:
                self._phases.append(p)
        return self

    def _arrays(self):
        if not self._phases:
            raise ValueError("nothing composed yet: call compose(Phase(...)) first")
        sig = np.array([float(p.noise_multiplier) for p in self._phases])
        q = np.array([float(p.sampling_rate) for p in self._phases])
        n = np.array([int(p.steps) for p in self._phases], dtype=np.int64)
        return sig, q, n

    def _report(self, quantity, value, npo, glrt, mu=None, fpr=None):
        _, _, n = self._arrays()
        return PrivacyReport(
            quantity=quantity,
            epsilon=value if quantity == "delta" else None,
            delta=value if quantity == "epsilon" else None,
            fpr=fpr,
            npo=npo,
            glrt=glrt,
            d=self.d,
            steps=int(n.sum()),
            phases=len(self._phases),
            threat_model=self.threat_model,
            neighbouring=self.neighbouring,
            mu=mu,
        )

    @programs.query
    def _answer(self, quantity, value):
        sig, q, n = self._arrays()
        if self.threat_model == "shared":
            m = math.sqrt(float(np.sum(n / sig**2)))
            if quantity == "epsilon":
                vals = (
                    profile.epsilon(value, m),
                    profile.epsilon(value, m, self.d, adversary="glrt"),
                )
            else:
                vals = profile.delta(value, m), profile.delta(value, m, self.d, adversary="glrt")
            npo, glrt = (Bounds(*([float(v)] * 3)) for v in vals)
            return self._report(quantity, value, npo, glrt, m)
        fn = composition.schedule_epsilon if quantity == "epsilon" else composition.schedule_delta
        out = {}
        for adversary in ("npo", "glrt"):
            b = fn(
                sig,
                q,
                n,
                value,
                d=self.d,
                adversary=adversary,
                neighbouring=self.neighbouring,
                tol=self.tol,
            )
            out[adversary] = Bounds(*(float(v) for v in b))
        return self._report(quantity, value, out["npo"], out["glrt"])

    def epsilon(self, delta: float) -> PrivacyReport:
        """Bounds on ε at ``delta`` ∈ (0, 1) for NPO and GLRT."""
        check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        return self._answer("epsilon", float(delta))

    def delta(self, epsilon: float) -> PrivacyReport:
        """Bounds on δ at ``epsilon`` ≥ 0 for NPO and GLRT."""
        check_range("epsilon", epsilon, lo=0.0)
        return self._answer("delta", float(epsilon))

    def _profile(self, adversary: str) -> risk.Profile:
        """The per-round engine's privacy profile, sampled once per composed schedule."""
        key = (adversary, tuple(self._phases))
        if key not in self._profiles:
            sig, q, n = self._arrays()
            self._profiles[key] = risk.engine_profile(
                sig,
                q,
                n,
                d=self.d,
                adversary=adversary,
                neighbouring=self.neighbouring,
                tol=self.tol,
                # NPO and GLRT of one schedule: sizes one compiled serve the other
                sizes_used=self._sizes_used.setdefault(tuple(self._phases), []),
            )
        return self._profiles[key]

    def _mu(self) -> float:
        sig, _, n = self._arrays()
        return math.sqrt(float(np.sum(n / sig**2)))

    @programs.query
    def tpr(self, fpr) -> PrivacyReport:
        """Bounds on the attack's true-positive rate at false-positive rate ``fpr``.

        The trade-off of the composed mechanism for NPO and GLRT: no membership test, in
        either direction of the neighbouring relation, has a higher true-positive rate
        at false-positive rate ``fpr`` than ``upper`` (the guarantee to report). Per
        round it is ``inf_ε [δ(ε) + e^ε fpr]`` over the certified profile (the
        symmetrised curve ``R_s``); see :mod:`glrt_jax._src.risk` for the bounds.

        Args:
          fpr: false-positive rate(s) in (0, 1): a scalar, or a 1-D array (the ROC
            curve; the bounds are then NumPy arrays).

        Returns:
          A :class:`PrivacyReport` with ``quantity="tpr"`` and ``fpr`` set.

        Example:
          >>> import jax
          >>> jax.config.update("jax_enable_x64", True)
          >>> from glrt_jax import accountant
          >>> acc = accountant.Accountant(d=1, threat_model="shared")
          >>> r = acc.compose(accountant.Phase(2.0, steps=4)).tpr(0.01)
          >>> f"{r.npo.upper:.4f}"  # Φ(Φ⁻¹(0.01) + 1): μ = √4 / 2 = 1
          '0.0924'
          >>> r.glrt.upper < r.npo.upper
          True
        """
        a = risk.check_fpr(fpr)
        if self.threat_model == "shared":
            m = self._mu()
            vals = [risk.closed_tpr(a, m, self.d, adv) for adv in ("npo", "glrt")]
            npo, glrt = (Bounds(*([_scalar_or_array(v)] * 3)) for v in vals)
            return self._report("tpr", None, npo, glrt, m, fpr=_scalar_or_array(a))
        out = {}
        for adversary in ("npo", "glrt"):
            prof = self._profile(adversary)
            rows = [
                risk.tpr(prof, float(x), rtol=max(risk.RTOL, 2.0 * self.tol)) for x in a.ravel()
            ]
            out[adversary] = Bounds(
                *(_scalar_or_array(np.reshape([r[i] for r in rows], a.shape)) for i in range(3))
            )
        return self._report("tpr", None, out["npo"], out["glrt"], fpr=_scalar_or_array(a))

    def roc(self, fpr=None) -> PrivacyReport:
        """The composed ROC curves: :meth:`tpr` on an array of false-positive rates.

        Args:
          fpr: 1-D array of rates in (0, 1); ``None`` for a grid from 1e-6 to 0.99
            (log-spaced below 0.1, linear above).

        Example:
          >>> import jax
          >>> jax.config.update("jax_enable_x64", True)
          >>> from glrt_jax import accountant
          >>> acc = accountant.Accountant(threat_model="shared")
          >>> r = acc.compose(accountant.Phase(1.0)).roc([0.1, 0.5])
          >>> r.npo.upper.round(4).tolist()
          [0.3891, 0.8413]
        """
        a = risk.default_fpr() if fpr is None else np.atleast_1d(np.asarray(fpr, float))
        return self.tpr(a)

    @programs.query
    def advantage(self) -> PrivacyReport:
        """Bounds on the attack's maximal advantage ``max_fpr (tpr − fpr)``.

        It equals δ(0), the total-variation distance of the composed mechanism's output
        distributions on neighbouring data sets (the same in both directions);
        ``threat_model="shared"``: ``2Φ(μ/2) − 1`` for NPO.

        Returns:
          A :class:`PrivacyReport` with ``quantity="advantage"``.

        Example:
          >>> import jax
          >>> jax.config.update("jax_enable_x64", True)
          >>> from glrt_jax import accountant
          >>> acc = accountant.Accountant(threat_model="shared")
          >>> r = acc.compose(accountant.Phase(1.0)).advantage()
          >>> f"{r.npo.upper:.4f}"  # 2Φ(1/2) − 1
          '0.3829'
        """
        if self.threat_model == "shared":
            m = self._mu()
            vals = [risk.closed_advantage(m, self.d, adv) for adv in ("npo", "glrt")]
            npo, glrt = (Bounds(*([float(v)] * 3)) for v in vals)
            return self._report("advantage", None, npo, glrt, m)
        out = {}
        for adversary in ("npo", "glrt"):
            b = risk.advantage(self._profile(adversary), rtol=max(risk.RTOL, 2.0 * self.tol))
            out[adversary] = Bounds(*(float(v) for v in b))
        return self._report("advantage", None, out["npo"], out["glrt"])


def _scalar_or_array(v):
    a = np.asarray(v, dtype=float)
    return float(a) if a.ndim == 0 else a


def _accountant(noise_multiplier, sampling_rate, steps, d, threat_model, neighbouring, tol):
    acc = Accountant(d, threat_model=threat_model, neighbouring=neighbouring, tol=tol)
    sig, q, n = (np.atleast_1d(np.asarray(v)) for v in (noise_multiplier, sampling_rate, steps))
    for name, arr in (("noise_multiplier", sig), ("sampling_rate", q), ("steps", n)):
        if arr.ndim > 1:
            raise ValueError(
                f"{name} must be a scalar or a 1-D array of phases; got shape {arr.shape}"
            )
    try:
        sig, q, n = np.broadcast_arrays(sig, q, n)
    except ValueError:
        raise ValueError(
            "noise_multiplier, sampling_rate and steps must have one length (or be scalars); "
            f"got lengths {len(sig)}, {len(q)}, {len(n)}"
        ) from None
    for s, r, k in zip(sig, q, n, strict=True):
        acc.compose(Phase(float(s), float(r), k.item()))
    return acc


def epsilon(
    delta: float,
    noise_multiplier,
    sampling_rate=1.0,
    steps=1,
    *,
    d: int = 1,
    threat_model: str = "per_round",
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
) -> PrivacyReport:
    """ε at ``delta`` for NPO and GLRT: one call of :class:`Accountant`.

    Args:
      delta: δ ∈ (0, 1).
      noise_multiplier: σ/Δ > 0, a scalar or a 1-D array with one entry per phase.
      sampling_rate: Poisson sampling rate q ∈ (0, 1] (scalar or per phase).
      steps: rounds N ≥ 1 (scalar or per phase).
      d, threat_model, neighbouring, tol: as in :class:`Accountant`.

    Returns:
      A :class:`PrivacyReport` (``quantity="epsilon"``). Not jittable (it returns
      floats); for jit/vmap/grad use :func:`schedule_epsilon`.

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> r = accountant.epsilon(1e-5, noise_multiplier=1.0, sampling_rate=0.01, steps=1000)
      >>> round(r.npo.upper, 2)
      1.83
      >>> r = accountant.epsilon(1e-2, 6.0, steps=70, threat_model="shared")
      >>> f"{r.npo.upper:.4f} {r.glrt.upper:.4f}"
      '3.6367 2.9437'
    """
    acc = _accountant(noise_multiplier, sampling_rate, steps, d, threat_model, neighbouring, tol)
    return acc.epsilon(delta)


def delta(
    epsilon: float,
    noise_multiplier,
    sampling_rate=1.0,
    steps=1,
    *,
    d: int = 1,
    threat_model: str = "per_round",
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
) -> PrivacyReport:
    """δ at ``epsilon`` ≥ 0 for NPO and GLRT (arguments as in :func:`epsilon`).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> r = accountant.delta(2.0, 1.0, 0.01, 1000)
      >>> r.glrt.upper <= r.npo.upper
      True
    """
    acc = _accountant(noise_multiplier, sampling_rate, steps, d, threat_model, neighbouring, tol)
    return acc.delta(epsilon)


def tpr(
    fpr,
    noise_multiplier,
    sampling_rate=1.0,
    steps=1,
    *,
    d: int = 1,
    threat_model: str = "per_round",
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
) -> PrivacyReport:
    """The attack's true-positive rate at ``fpr`` for NPO and GLRT (see :meth:`Accountant.tpr`;
    other arguments as in :func:`epsilon`).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> r = accountant.tpr(0.01, noise_multiplier=2.0, steps=4, threat_model="shared")
      >>> f"{r.npo.upper:.4f}"
      '0.0924'
    """
    acc = _accountant(noise_multiplier, sampling_rate, steps, d, threat_model, neighbouring, tol)
    return acc.tpr(fpr)


def advantage(
    noise_multiplier,
    sampling_rate=1.0,
    steps=1,
    *,
    d: int = 1,
    threat_model: str = "per_round",
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
) -> PrivacyReport:
    """The attack's maximal advantage ``tpr − fpr`` for NPO and GLRT (see
    :meth:`Accountant.advantage`; arguments as in :func:`epsilon`).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax import accountant
      >>> r = accountant.advantage(1.0, threat_model="shared")
      >>> r.glrt.upper < r.npo.upper
      True
    """
    acc = _accountant(noise_multiplier, sampling_rate, steps, d, threat_model, neighbouring, tol)
    return acc.advantage()


def mu(noise_multiplier, steps=1) -> float:
    """μ = √λ = √(Σ_k steps_k / noise_multiplier_k²) of the shared-direction model.

    The GLRT and NPO curves of ``threat_model="shared"`` depend on the phases only through
    μ (and d); :mod:`glrt_jax.roc` and :mod:`glrt_jax.profile` take it directly.

    Example:
      >>> from glrt_jax import accountant
      >>> accountant.mu(2.0, steps=16)
      2.0
    """
    sig = np.asarray(noise_multiplier, dtype=np.float64)
    check_range("noise_multiplier", sig, lo=0.0, lo_open=True)
    check_range("steps", steps, lo=0.0, integer=True)
    return float(np.sqrt(np.sum(np.asarray(steps, dtype=np.float64) / sig**2)))


schedule_epsilon = composition.schedule_epsilon
schedule_delta = composition.schedule_delta
