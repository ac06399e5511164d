"""The reproduction driver: every figure and every (ε, δ) of the paper into one directory.

This module owns the driver behind ``glrt-jax reproduce --out DIR``
(:func:`reproduce`) and the rendering of its report (:func:`numbers_markdown`). It
writes one PNG per figure of the paper (drawn by :mod:`glrt_jax._src.plotting`, from
numbers computed by :mod:`glrt_jax._src.figure_data` and games played by
:func:`glrt_jax.audit.run_experiment`) and ``DIR/numbers.md``: every (ε, δ) the paper
states, next to the value computed here and the independently computed exact value
(mpmath, 50 digits; docs/design.md §3), with the paper's errata marked; the subsampled
composition of the paper's subsampling figure against independent reference values;
and the empirical lower bounds on ε from the membership-inference games next to the
theoretical ε. The command line's argument parsing is
:mod:`glrt_jax._src.reproduce_cli`.

The paper, exact and reference columns are data (:mod:`glrt_jax._src.paper_data`,
read from ``glrt_jax/data/paper_numbers.json``), not outputs of this library: they
were computed independently (mpmath for the profiles, a separate implementation for
the subsampled composition).

Cost: the first run compiles the kernels (most of its time: a few minutes on a
2-core CPU; the command line keeps a persistent compilation cache, so later runs
take seconds). The games are cheap: by default 500 games and 50 cut-offs per
experiment; ``full=True`` plays the paper's 1000 games at 100 cut-offs.

Requires float64 (``jax.config.update("jax_enable_x64", True)``); the command line
enables it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence

import jax
import numpy as np

from glrt_jax._src import audit, figure_data
from glrt_jax._src.paper_data import (
    EXPERIMENT_DELTA,
    EXPERIMENTS,
    PAPER_NUMBERS,
    SUBSAMPLING,
    SUBSAMPLING_DELTA,
    SUBSAMPLING_REFERENCE,
    number,
)
from glrt_jax._src.validation import check_int, check_x64

__all__ = [
    "DEFAULT_GAMES",
    "DEFAULT_THRESHOLDS",
    "FIGURES",
    "FULL_GAMES",
    "FULL_THRESHOLDS",
    "numbers_markdown",
    "paper_epsilons",
    "reproduce",
]


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

#: Games and cut-offs per experiment: by default, and with ``full=True`` (the paper's).
DEFAULT_GAMES, DEFAULT_THRESHOLDS = 500, 50
FULL_GAMES, FULL_THRESHOLDS = 1000, 100


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


def paper_epsilons() -> np.ndarray:
    """Our ε for every row of :data:`~glrt_jax._src.paper_data.PAPER_NUMBERS` (two batched calls).

    Example:
      >>> import jax
      >>> jax.config.update("jax_enable_x64", True)
      >>> from glrt_jax._src import paper_data, reproduce
      >>> ours = reproduce.paper_epsilons()
      >>> [f"{e:.4f}" for e in ours] == [row.exact for row in paper_data.PAPER_NUMBERS]
      True
    """
    rows = PAPER_NUMBERS
    out = np.empty(len(rows))
    npo = [i for i, r in enumerate(rows) if r.d is None]
    glrt = [i for i, r in enumerate(rows) if r.d is not None]
    out[npo] = figure_data.epsilons([rows[i].delta for i in npo], [rows[i].mu for i in npo])
    out[glrt] = figure_data.epsilons(
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
      ours: our ε for each row of :data:`~glrt_jax._src.paper_data.PAPER_NUMBERS`, in order.
      subsampling: ``{"npo": ε, "glrt": ε}`` upper bounds of the subsampled
        composition at δ = 1e-5, or ``None`` to leave the table out.
      experiments: ``{name: audit.EmpiricalExperiment}`` (names ``"scalar"`` and
        ``"high_dim"``), or ``None`` to leave the table out.
      games: games per experiment (for the caption).

    Returns:
      Markdown.

    Raises:
      ValueError: if ``ours`` does not have one value per paper number.

    Example:
      >>> from glrt_jax._src import paper_data, reproduce
      >>> ours = [float(row.exact) for row in paper_data.PAPER_NUMBERS]
      >>> reproduce.numbers_markdown(ours).count("| yes |")
      10
    """
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
        lines.append(
            f"| {row.figure} | {row.setting} | {row.label} | {row.delta:g} | {row.paper} | "
            f"{row.exact} | {value:.4f} | {_agree(value, row.exact)} | {row.note} |"
        )
    if subsampling is not None:
        s = SUBSAMPLING
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
            ref, value = SUBSAMPLING_REFERENCE[key], subsampling[key]
            lines.append(
                f"| {name} | {SUBSAMPLING_DELTA:g} | {ref} | {value:.4f} | {_agree(value, ref)} |"
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
            theory_g = float(figure_data.epsilons(exp.delta, exp.mu, float(exp.d))[0])
            theory_n = float(figure_data.epsilons(exp.delta, exp.mu)[0])
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
        games = FULL_GAMES if full else DEFAULT_GAMES
    if thresholds is None:
        thresholds = FULL_THRESHOLDS if full else DEFAULT_THRESHOLDS
    games = check_int("games", games, lo=2)
    thresholds = check_int("thresholds", thresholds, lo=2)
    seed = check_int("seed", seed, lo=0)
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
            sub = jax.random.fold_in(key, list(EXPERIMENTS).index(name))
            cache[name] = audit.run_experiment(
                sub, **EXPERIMENTS[name], games=games, thresholds=thresholds,
                delta=EXPERIMENT_DELTA,
            )  # fmt: skip
        return cache[name]

    def subsampling():
        if "subsampling" not in cache:
            cache["subsampling"] = figure_data.subsampled_profiles(
                **SUBSAMPLING, delta=SUBSAMPLING_DELTA, epsilon_max=3.0, tol=1e-3
            )
        return cache["subsampling"]

    def path(name: str) -> str:
        return os.path.join(out_dir, name + (".md" if name == "numbers" else ".png"))

    def draw_subsampling(p):
        prof = subsampling()
        return plotting.draw_subsampling(prof, **SUBSAMPLING, delta=SUBSAMPLING_DELTA, path=p)

    def write_numbers(p):
        text = numbers_markdown(
            paper_epsilons(),
            {k: subsampling()[k]["epsilon"] for k in ("npo", "glrt")},
            {k: experiment(k) for k in EXPERIMENTS},
            games=games,
        )
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(text)

    teaser = number("teaser_glrt")  # the corrected setting Δ/σ = 0.3
    dof = [number("dof_d1"), number("dof_d30")]
    makers: dict[str, Callable[[str], object]] = {
        "teaser": lambda p: plotting.teaser_figure(teaser.mu, teaser.d, teaser.delta, path=p),
        "roc_curves": lambda p: plotting.roc_figure(1.0, 1, p, delta=1e-4),
        "dimension_roc": lambda p: plotting.dimension_roc_figure(
            dof[0].mu, tuple(r.d for r in dof), dof[0].delta, path=p
        ),
        "epsilon_vs_dimension": lambda p: plotting.epsilon_dimension_figure(
            1.0, plotting.PAPER_DIMS, 0.1, path=p
        ),
        "clt": lambda p: plotting.clt_figure(1.0, 10.0, 1000, 300, path=p),
        "privacy_profile": lambda p: plotting.privacy_profile_figure(1.0, 1, path=p),
        "subsampling": draw_subsampling,
        "empirical_roc": lambda p: plotting.empirical_roc_figure(
            experiment("scalar"), "theory", p, delta=EXPERIMENT_DELTA
        ),
        "empirical_symmetrised": lambda p: plotting.empirical_roc_figure(
            experiment("scalar"), "symmetrised", p, delta=EXPERIMENT_DELTA
        ),
        "empirical_high_dimensional": lambda p: plotting.empirical_roc_figure(
            experiment("high_dim"), "dimension", p, delta=EXPERIMENT_DELTA
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
