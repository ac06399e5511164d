"""The paper's reference numbers and settings, read from ``glrt_jax/data/paper_numbers.json``.

This module owns the data of the reproduction and nothing else (no computation, no
JAX): every (ε, δ) the paper states with the exact value computed independently
(mpmath, 50 digits, rounded to four decimals; docs/design.md §3) and the paper's
errata; the setting of the subsampling figure with its independent reference values
(docs/design.md §2); and the settings of the two membership-inference experiments.

The numbers live in one JSON file shipped inside the package; the driver
(:mod:`glrt_jax._src.reproduce`), the tests and the notebook tour read it from there.
``tests/test_reproduce.py`` checks the file's exact values against the 40-digit
mpmath values of ``tests/reference/profile_refs.json``.

Example:
  >>> from glrt_jax._src import paper_data
  >>> len(paper_data.PAPER_NUMBERS)
  10
  >>> row = paper_data.number("teaser_npo")
  >>> row.paper, row.exact, row.mu, row.d
  ('0.95', '0.9501', 0.3, None)
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from importlib import resources
from typing import Any

__all__ = [
    "DATA_FILE",
    "EXPERIMENTS",
    "EXPERIMENT_DELTA",
    "PAPER_NUMBERS",
    "SUBSAMPLING",
    "SUBSAMPLING_DELTA",
    "SUBSAMPLING_REFERENCE",
    "PaperNumber",
    "load",
    "number",
]

#: Location of the data file inside the package (``importlib.resources``).
DATA_FILE = ("glrt_jax", "data/paper_numbers.json")


@dataclasses.dataclass(frozen=True)
class PaperNumber:
    """One (ε, δ) statement of the paper.

    Attributes:
      id: short name of the row (e.g. ``"teaser_npo"``).
      figure: the paper's figure label.
      setting: the setting in words.
      adversary: ``"npo"`` or ``"glrt"``.
      d: query dimension (``None`` for NPO).
      sensitivity, sigma2, steps: ``Δ``, ``σ²`` and the number of releases ``N``
        sharing a direction.
      delta: the δ of the statement.
      paper: ε as printed in the paper (two decimals).
      exact: ε computed independently with mpmath (four decimals, docs/design.md §3).
      note: erratum or remark.
    """

    id: str
    figure: str
    setting: str
    adversary: str
    d: int | None
    sensitivity: float
    sigma2: float
    steps: int
    delta: float
    paper: str
    exact: str
    note: str = ""

    @property
    def mu(self) -> float:
        """``μ = √(NΔ²/σ²)``, computed as ``Δ √(N/σ²)``."""
        return self.sensitivity * math.sqrt(self.steps / self.sigma2)

    @property
    def label(self) -> str:
        """The adversary in words: ``"NPO"`` or ``"GLRT d = …"``."""
        return "NPO" if self.d is None else f"GLRT d = {self.d}"


@functools.cache
def load() -> dict[str, Any]:
    """The parsed data file (cached; treat it as read-only).

    Returns:
      ``{"numbers": [...], "subsampling": {...}, "experiments": {...}, ...}`` as
      stored in ``glrt_jax/data/paper_numbers.json``.
    """
    package, name = DATA_FILE
    text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    return json.loads(text)


def _rows() -> tuple[PaperNumber, ...]:
    fields = {f.name for f in dataclasses.fields(PaperNumber)}
    rows = []
    for raw in load()["numbers"]:
        unknown = set(raw) - fields
        if unknown:
            raise ValueError(f"{DATA_FILE[1]}: unknown fields {sorted(unknown)}")
        rows.append(PaperNumber(**raw))
    return tuple(rows)


#: Every (ε, δ) stated in the paper, with the exact values of docs/design.md §3.
PAPER_NUMBERS: tuple[PaperNumber, ...] = _rows()

_BY_ID = {row.id: row for row in PAPER_NUMBERS}


def number(row_id: str) -> PaperNumber:
    """The row of :data:`PAPER_NUMBERS` with this ``id``.

    Raises:
      KeyError: for an unknown id (the message lists the known ones).
    """
    try:
        return _BY_ID[row_id]
    except KeyError:
        raise KeyError(f"unknown paper number {row_id!r}; known: {sorted(_BY_ID)}") from None


_SUB = load()["subsampling"]
#: Subsampling figure: ``sensitivity``, ``sigma``, ``sampling_rate``, ``steps``, ``d``.
SUBSAMPLING: dict[str, Any] = {
    k: _SUB[k] for k in ("sensitivity", "sigma", "sampling_rate", "steps", "d")
}
#: The δ at which the subsampling figure's ε are stated.
SUBSAMPLING_DELTA: float = _SUB["delta"]
#: Independent reference ε of the subsampling figure (docs/design.md §2), three decimals.
SUBSAMPLING_REFERENCE: dict[str, str] = dict(_SUB["reference"])

_EXP = load()["experiments"]
#: The paper's two experiments: ``{name: dict(sensitivity, sigma, steps, d)}``.
EXPERIMENTS: dict[str, dict[str, Any]] = {k: dict(v) for k, v in _EXP["settings"].items()}
#: δ of the experiments' empirical lower bounds on ε.
EXPERIMENT_DELTA: float = _EXP["delta"]
