"""Reproduction of the paper: its numbers as data, and the driver behind ``glrt-jax reproduce``.

The paper's (ε, δ) statements with their independently computed exact values and
errata, the subsampling figure's setting and references, and the two experiments'
settings are read from the package's data file ``glrt_jax/data/paper_numbers.json``
(:data:`PAPER_NUMBERS`, :func:`number`, ...). :func:`reproduce` writes every figure and
``numbers.md`` into a directory. See :mod:`glrt_jax._src.paper_data` and
:mod:`glrt_jax._src.reproduce`.

Example:
  >>> from glrt_jax import reproduce
  >>> row = reproduce.number("teaser_npo")
  >>> row.paper, row.exact
  ('0.95', '0.9501')
"""

from glrt_jax._src.paper_data import (
    EXPERIMENT_DELTA,
    EXPERIMENTS,
    PAPER_NUMBERS,
    SUBSAMPLING,
    SUBSAMPLING_DELTA,
    SUBSAMPLING_REFERENCE,
    PaperNumber,
    number,
)
from glrt_jax._src.reproduce import (
    DEFAULT_GAMES,
    DEFAULT_THRESHOLDS,
    FIGURES,
    FULL_GAMES,
    FULL_THRESHOLDS,
    numbers_markdown,
    paper_epsilons,
    reproduce,
)

__all__ = [
    "DEFAULT_GAMES",
    "DEFAULT_THRESHOLDS",
    "EXPERIMENTS",
    "EXPERIMENT_DELTA",
    "FIGURES",
    "FULL_GAMES",
    "FULL_THRESHOLDS",
    "PAPER_NUMBERS",
    "SUBSAMPLING",
    "SUBSAMPLING_DELTA",
    "SUBSAMPLING_REFERENCE",
    "PaperNumber",
    "number",
    "numbers_markdown",
    "paper_epsilons",
    "reproduce",
]
