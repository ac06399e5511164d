"""Regenerate every figure and every (ε, δ) of the paper: ``glrt-jax reproduce --out DIR``.

Writes one PNG per figure of the paper (see :mod:`glrt_jax._src.plotting` for the
mapping) and ``DIR/numbers.md``: every (ε, δ) the paper states, next to the value
computed here and the independently computed exact value (mpmath, 50 digits;
docs/design.md §3), with the paper's errata marked; the subsampled composition of the
paper's subsampling figure against independent reference values; and the empirical
lower bounds on ε from the membership-inference games next to the theoretical ε.

The exact and reference columns are data recorded here, not outputs of this
library: they were computed independently (mpmath for the profiles, a separate
implementation for the subsampled composition).

Cost: the first run compiles the kernels (most of its time: a few minutes on a
2-core CPU; the command line keeps a persistent compilation cache, so later runs
take seconds). The games are cheap: by default 500 games and 50 cut-offs per
experiment; ``full=True`` plays the paper's 1000 games at 100 cut-offs.

Requires float64 (``jax.config.update("jax_enable_x64", True)``); the command line
enables it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial

import jax
import numpy as np

from glrt_jax._src.validation import check_x64

__all__ = [
    "FIGURES",
    "PAPER_NUMBERS",
    "PaperNumber",
    "add_subparser",
    "numbers_markdown",
    "reproduce",
    "run",
]


# ---------------------------------------------------------------------------
# Reference data
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PaperNumber:
    """One (ε, δ) statement of the paper.

    Attributes:
      figure: the paper's figure label.
      setting: the setting in words.
      mu: ``μ = √(NΔ²/σ²)``. d: query dimension (``None`` for NPO).
      delta: the δ of the statement.
      paper: ε as printed in the paper (two decimals).
      exact: ε computed independently with mpmath (four decimals, docs/design.md §3).
      note: erratum or remark.
    """

    figure: str
    setting: str
    mu: float
    d: int | None
    delta: float
    paper: str
    exact: str
    note: str = ""


_MU_SCALAR = math.sqrt(70.0 / 36.0)  # Δ = 1, σ² = 36, N = 70
_MU_HIGH = math.sqrt(50.0 / 12.25)  # Δ = 1, σ² = 12.25, N = 50

#: Every (ε, δ) stated in the paper, with the exact values of docs/design.md §3.
PAPER_NUMBERS: tuple[PaperNumber, ...] = (
    PaperNumber("fig:teaser", "Δ/σ = 0.3", 0.3, None, 1e-4, "0.95", "0.9501",
                "the caption says Δ/σ = 0.5; the numbers belong to 0.3"),
    PaperNumber("fig:teaser", "Δ/σ = 0.3", 0.3, 1, 1e-4, "0.37", "0.3768",
                "the paper truncates"),
    PaperNumber("fig:teaser", "Δ/σ = 0.5 (as captioned)", 0.5, None, 1e-4, "0.95", "1.6981",
                "erratum: the caption's setting gives 1.70"),
    PaperNumber("fig:dof", "Δ = σ² = 1", 1.0, 1, 1e-4, "3.11", "3.1114"),
    PaperNumber("fig:dof", "Δ = σ² = 1", 1.0, 30, 1e-4, "0.46", "0.4612"),
    PaperNumber("fig:predicted_actual", "Δ = 1, σ² = 36, N = 70", _MU_SCALAR, 1, 1e-2,
                "2.94", "2.9437"),
    PaperNumber("fig:actual_symmetric_gaussian", "Δ = 1, σ² = 36, N = 70", _MU_SCALAR, None,
                1e-2, "3.63", "3.6367", "the paper truncates"),
    PaperNumber("fig:high_dimensional", "Δ = 1, σ² = 12.25, N = 50", _MU_HIGH, 50, 1e-2,
                "0.76", "0.7599"),
    PaperNumber("fig:high_dimensional", "Δ = 1, σ² = 12.25, N = 50", _MU_HIGH, 1, 1e-2,
                "5.39", "5.3907"),
    PaperNumber("fig:high_dimensional", "Δ = 1, σ² = 12.25, N = 50", _MU_HIGH, None, 1e-2,
                "6.01", "6.0839", "erratum: the closed form gives 6.08"),
)  # fmt: skip

# Subsampling figure: Δ = 1, σ = 6, Poisson rate 0.2, 100 rounds, per-round threat model.
_SUBSAMPLING = dict(sensitivity=1.0, sigma=6.0, sampling_rate=0.2, steps=100, d=1)
_SUBSAMPLING_DELTA = 1e-5
# Independent reference values (docs/design.md §2), three decimals.
_SUBSAMPLING_REFERENCE = {"npo": "1.312", "glrt": "0.143"}

# The paper's two experiments.
_EXPERIMENTS = {
    "scalar": dict(sensitivity=1.0, sigma=6.0, steps=70, d=1),
    "high_dim": dict(sensitivity=1.0, sigma=3.5, steps=50, d=50),
}
_EXPERIMENT_DELTA = 1e-2

#: Output files, in the order they are produced.
FIGURES: tuple[str, ...] = (
    "teaser",
    "roc_curves",
    "dimension_roc",
    "epsilon_vs_dimension",
    "clt",
    "privacy_profile",
    "subsampling",
    "empirical_roc",
    "empirical_symmetrised",
    "empirical_high_dimensional",
    "numbers",
)

_DEFAULT_GAMES, _DEFAULT_THRESHOLDS = 500, 50
_FULL_GAMES, _FULL_THRESHOLDS = 1000, 100


# ---------------------------------------------------------------------------
# Progress bar (plain stderr)
# ---------------------------------------------------------------------------


class _Progress:
    """A one-line progress bar on a text stream (redrawn in place on a terminal)."""

    def __init__(self, total: int, stream=None, enabled: bool = True, width: int = 24):
        self.total, self.done, self.width = total, 0, width
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.start = time.perf_counter()
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()

    def _line(self, label: str) -> str:
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.perf_counter() - self.start
        return f"reproduce [{bar}] {self.done}/{self.total} {label} ({elapsed:.0f} s)"

    def show(self, label: str) -> None:
        """Announce the step that starts now (on a terminal only: logs get one line a step)."""
        if self.tty:
            self._write(self._line(label + " ..."))

    def advance(self, label: str) -> None:
        """Mark one step done."""
        self.done += 1
        if self.enabled:
            self._write(self._line(label))

    def _write(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K" + text)
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


# ---------------------------------------------------------------------------
# numbers.md
# ---------------------------------------------------------------------------


def _paper_epsilons() -> np.ndarray:
    """Our ε for every row of :data:`PAPER_NUMBERS` (two batched calls)."""
    from glrt_jax._src import plotting  # matplotlib: imported only when used

    rows = PAPER_NUMBERS
    out = np.empty(len(rows))
    npo = [i for i, r in enumerate(rows) if r.d is None]
    glrt = [i for i, r in enumerate(rows) if r.d is not None]
    out[npo] = plotting._epsilons([rows[i].delta for i in npo], [rows[i].mu for i in npo])
    out[glrt] = plotting._epsilons(
        [rows[i].delta for i in glrt],
        [rows[i].mu for i in glrt],
        [float(rows[i].d) for i in glrt],
    )
    return out


def _agree(ours: float, reference: str) -> str:
    decimals = len(reference.split(".")[1]) if "." in reference else 0
    return "yes" if f"{ours:.{decimals}f}" == reference else "**no**"


def numbers_markdown(
    ours: Sequence[float],
    subsampling: dict | None = None,
    experiments: dict | None = None,
    *,
    games: int | None = None,
) -> str:
    """The text of ``numbers.md``.

    Args:
      ours: our ε for each row of :data:`PAPER_NUMBERS`, in order.
      subsampling: ``{"npo": ε, "glrt": ε}`` upper bounds of the subsampled
        composition at δ = 1e-5, or ``None`` to leave the table out.
      experiments: ``{name: EmpiricalExperiment}`` (names ``"scalar"`` and
        ``"high_dim"``), or ``None`` to leave the table out.
      games: games per experiment (for the caption).

    Returns:
      Markdown.

    Raises:
      ValueError: if ``ours`` does not have one value per row of :data:`PAPER_NUMBERS`.

    Example:
      >>> from glrt_jax._src import reproduce
      >>> ours = [float(row.exact) for row in reproduce.PAPER_NUMBERS]
      >>> reproduce.numbers_markdown(ours).count("| yes |")
      10
    """
    from glrt_jax._src import plotting  # matplotlib: imported only when used

    ours = list(ours)
    if len(ours) != len(PAPER_NUMBERS):
        raise ValueError(f"ours must have {len(PAPER_NUMBERS)} values; got {len(ours)}")
    lines = [
        "# Numbers of the paper, recomputed",
        "",
        "Every (ε, δ) the paper states. *exact*: computed independently with mpmath (50 digits), "
        "rounded to four decimals. *ours*: glrt_jax (float64). *agrees*: ours rounded to the "
        "digits of *exact* equals *exact*. GLRT rows use the symmetrised ROC (its conjugate is "
        "max(δ_R, δ_R')); composition of N releases shares the direction (Theorem 2), "
        "μ = √(NΔ²/σ²).",
        "",
        "| figure | setting | adversary | δ | paper | exact | ours | agrees | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row, value in zip(PAPER_NUMBERS, ours, strict=True):
        adversary = "NPO" if row.d is None else f"GLRT d = {row.d}"
        lines.append(
            f"| {row.figure} | {row.setting} | {adversary} | {row.delta:g} | {row.paper} | "
            f"{row.exact} | {value:.4f} | {_agree(value, row.exact)} | {row.note} |"
        )
    if subsampling is not None:
        s = _SUBSAMPLING
        lines += [
            "",
            "## Subsampling (fig:subsampling)",
            "",
            f"Δ = {s['sensitivity']:g}, σ² = {s['sigma'] ** 2:g}, Poisson rate "
            f"{s['sampling_rate']:g}, N = {s['steps']} rounds composed numerically "
            "(glrt_jax.accountant.schedule_epsilon, add/remove, per-round GLRT threat model: "
            "the adversary sees ‖y_i‖² of each round). The paper states no number for this "
            "figure; *reference* was computed independently. *ours* is the certified upper "
            "bound.",
            "",
            "| adversary | δ | reference | ours (upper bound) | agrees |",
            "| --- | --- | --- | --- | --- |",
        ]
        for key, name in (("npo", "NPO"), ("glrt", "GLRT d = 1")):
            ref, value = _SUBSAMPLING_REFERENCE[key], subsampling[key]
            lines.append(
                f"| {name} | {_SUBSAMPLING_DELTA:g} | {ref} | {value:.4f} | {_agree(value, ref)} |"
            )
    if experiments:
        lines += [
            "",
            "## Membership-inference games",
            "",
            f"{games if games is not None else '?'} games per experiment (balanced coin). "
            "*empirical lower bound*: from simultaneous 95 % Clopper–Pearson bands over all "
            "cut-offs (glrt_jax.audit.empirical_epsilon_lower_bound); it must not exceed the "
            "theoretical ε. Few games give loose (small) lower bounds.",
            "",
            "| experiment | adversary | δ | theoretical ε | empirical lower bound | consistent |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for name, exp in experiments.items():
            theory_g = float(plotting._epsilons(exp.delta, exp.mu, float(exp.d))[0])
            theory_n = float(plotting._epsilons(exp.delta, exp.mu)[0])
            setting = (
                f"{name}: Δ = {exp.sensitivity:g}, σ² = {exp.sigma**2:g}, N = {exp.steps}, "
                f"d = {exp.d}"
            )
            for adv, theory, lower in (
                (f"GLRT d = {exp.d}", theory_g, exp.epsilon_lower),
                ("NPO", theory_n, exp.epsilon_lower_npo),
            ):
                ok = "yes" if lower <= theory else "**no**"
                lines.append(
                    f"| {setting} | {adv} | {exp.delta:g} | {theory:.4f} | {lower:.4f} | {ok} |"
                )
    lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------


def reproduce(
    out_dir: str | os.PathLike,
    *,
    full: bool = False,
    games: int | None = None,
    thresholds: int | None = None,
    seed: int = 0,
    only: Sequence[str] | None = None,
    progress: bool = True,
    stream=None,
) -> dict[str, str]:
    """Write every figure of the paper as PNG and ``numbers.md`` into ``out_dir``.

    Args:
      out_dir: output directory (created if needed).
      full: play the paper's 1000 games at 100 cut-offs per experiment (default:
        500 games at 50 cut-offs).
      games: games per experiment (overrides ``full``), ``≥ 2``.
      thresholds: cut-offs per experiment (overrides ``full``), ``≥ 2``.
      seed: seed of the games' PRNG key.
      only: a subset of :data:`FIGURES` to produce (default: all).
      progress: draw a progress bar on ``stream``.
      stream: text stream for the progress bar (default ``sys.stderr``).

    Returns:
      ``{name: path}`` of the files written.

    Raises:
      ValueError: for a bad argument (named), or float64 disabled.

    Example::

      import jax
      jax.config.update("jax_enable_x64", True)
      from glrt_jax._src import reproduce
      reproduce.reproduce("figs", only=["teaser", "numbers"])
    """
    from glrt_jax._src import plotting  # matplotlib: imported only when used

    check_x64("reproduce")
    if games is None:
        games = _FULL_GAMES if full else _DEFAULT_GAMES
    if thresholds is None:
        thresholds = _FULL_THRESHOLDS if full else _DEFAULT_THRESHOLDS
    games = plotting._check_positive_int("games", games, lo=2)
    thresholds = plotting._check_positive_int("thresholds", thresholds, lo=2)
    seed = plotting._check_positive_int("seed", seed, lo=0)
    names = FIGURES if only is None else tuple(only)
    unknown = [n for n in names if n not in FIGURES]
    if unknown or not names:
        raise ValueError(f"only must be a non-empty subset of {FIGURES}; got {only!r}")
    names = tuple(n for n in FIGURES if n in names)
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)

    key = jax.random.key(seed)
    cache: dict = {}

    def experiment(name: str):
        if name not in cache:
            sub = jax.random.fold_in(key, list(_EXPERIMENTS).index(name))
            cache[name] = plotting.run_experiment(
                sub, **_EXPERIMENTS[name], games=games, thresholds=thresholds,
                delta=_EXPERIMENT_DELTA,
            )  # fmt: skip
        return cache[name]

    def subsampling():
        if "subsampling" not in cache:
            cache["subsampling"] = plotting._subsampled_profiles(
                **_SUBSAMPLING, delta=_SUBSAMPLING_DELTA, epsilon_max=3.0, tol=1e-3
            )
        return cache["subsampling"]

    def path(name: str) -> str:
        return os.path.join(out_dir, name + (".md" if name == "numbers" else ".png"))

    def draw_subsampling(p):
        prof = subsampling()
        return plotting._draw_subsampling(prof, **_SUBSAMPLING, delta=_SUBSAMPLING_DELTA, path=p)

    def write_numbers(p):
        text = numbers_markdown(
            _paper_epsilons(),
            {k: subsampling()[k]["epsilon"] for k in ("npo", "glrt")},
            {k: experiment(k) for k in _EXPERIMENTS},
            games=games,
        )
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(text)

    makers: dict[str, Callable[[str], object]] = {
        "teaser": lambda p: plotting.teaser_figure(0.3, 1, 1e-4, path=p),
        "roc_curves": lambda p: plotting.roc_figure(1.0, 1, p, delta=1e-4),
        "dimension_roc": lambda p: plotting.dimension_roc_figure(1.0, (1, 30), 1e-4, path=p),
        "epsilon_vs_dimension": lambda p: plotting.epsilon_dimension_figure(
            1.0, plotting.PAPER_DIMS, 0.1, path=p
        ),
        "clt": lambda p: plotting.clt_figure(1.0, 10.0, 1000, 300, path=p),
        "privacy_profile": lambda p: plotting.privacy_profile_figure(1.0, 1, path=p),
        "subsampling": draw_subsampling,
        "empirical_roc": lambda p: plotting.empirical_roc_figure(
            experiment("scalar"), "theory", p, delta=_EXPERIMENT_DELTA
        ),
        "empirical_symmetrised": lambda p: plotting.empirical_roc_figure(
            experiment("scalar"), "symmetrised", p, delta=_EXPERIMENT_DELTA
        ),
        "empirical_high_dimensional": lambda p: plotting.empirical_roc_figure(
            experiment("high_dim"), "dimension", p, delta=_EXPERIMENT_DELTA
        ),
        "numbers": write_numbers,
    }
    bar = _Progress(len(names), stream=stream, enabled=progress)
    written = {}
    for name in names:
        p = path(name)
        bar.show(os.path.basename(p))
        makers[name](p)
        written[name] = p
        bar.advance(os.path.basename(p))
    return written


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def add_subparser(subparsers, setup: Callable[[], None] | None = None) -> argparse.ArgumentParser:
    """Add the ``reproduce`` command to an ``argparse`` sub-parser collection.

    Args:
      subparsers: the object returned by ``ArgumentParser.add_subparsers()``.
      setup: called before the command runs (the command line passes the function
        that enables float64 and the compilation cache).

    Returns:
      The new sub-parser (its ``func`` default runs :func:`run`).

    Example:
      >>> import argparse
      >>> from glrt_jax._src import reproduce
      >>> parser = argparse.ArgumentParser(prog="glrt-jax")
      >>> _ = reproduce.add_subparser(parser.add_subparsers())
      >>> args = parser.parse_args(["reproduce", "--out", "figs", "--full"])
      >>> args.out, args.full, args.games
      ('figs', True, None)
    """
    p = subparsers.add_parser(
        "reproduce",
        help="regenerate every figure of the paper (PNG) and numbers.md",
        description="Write every figure of the paper as PNG and numbers.md (every (epsilon, "
        "delta) the paper states, next to ours and the exact value) into DIR.",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument(
        "--full",
        action="store_true",
        help=f"the paper's {_FULL_GAMES} games x {_FULL_THRESHOLDS} cut-offs per experiment "
        f"(default {_DEFAULT_GAMES} x {_DEFAULT_THRESHOLDS})",
    )
    p.add_argument("--games", type=int, help="games per experiment (overrides --full)")
    p.add_argument("--thresholds", type=int, help="cut-offs per experiment (overrides --full)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed of the games (default 0)")
    p.add_argument("--only", nargs="+", choices=FIGURES, metavar="NAME",
                   help=f"produce only these outputs: {', '.join(FIGURES)}")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=partial(run, setup=setup))
    return p


def run(args: argparse.Namespace, setup: Callable[[], None] | None = None) -> int:
    """Run ``glrt-jax reproduce`` with parsed arguments; returns the exit status.

    Args:
      args: the parsed arguments of :func:`add_subparser`'s parser.
      setup: optional callable run first (e.g. enabling float64).

    Returns:
      0 on success, 2 on a bad argument (message on stderr).

    Example (writes ``figs/teaser.png``)::

      import argparse, jax
      jax.config.update("jax_enable_x64", True)
      from glrt_jax._src import reproduce
      parser = argparse.ArgumentParser(prog="glrt-jax")
      reproduce.add_subparser(parser.add_subparsers())
      args = parser.parse_args(["reproduce", "--out", "figs", "--only", "teaser"])
      assert args.func(args) == 0
    """
    if setup is not None:
        setup()
    try:
        written = reproduce(
            args.out,
            full=args.full,
            games=args.games,
            thresholds=args.thresholds,
            seed=args.seed,
            only=args.only,
            progress=not args.quiet,
        )
    except ValueError as exc:
        print(f"glrt-jax reproduce: {exc}", file=sys.stderr)
        return 2
    for name, p in written.items():
        print(f"{name}: {p}")
    return 0
