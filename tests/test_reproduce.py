"""Tests of ``glrt-jax reproduce``: every figure and numbers.md, on a tiny setting.

The expected numbers are docs/design.md §3 (mpmath, 50 digits) and the independent
subsampling references of docs/design.md §2, copied here from the design notes, not
from the code under test.
"""

import argparse
import io
import re

import jax
import pytest

from glrt_jax._src import reproduce

# docs/design.md §3: (setting, adversary) -> exact ε, four decimals.
EXACT = {
    ("Δ/σ = 0.3", "NPO"): 0.9501,
    ("Δ/σ = 0.3", "GLRT d = 1"): 0.3768,
    ("Δ/σ = 0.5 (as captioned)", "NPO"): 1.6981,
    ("Δ = σ² = 1", "GLRT d = 1"): 3.1114,
    ("Δ = σ² = 1", "GLRT d = 30"): 0.4612,
    ("Δ = 1, σ² = 36, N = 70", "GLRT d = 1"): 2.9437,
    ("Δ = 1, σ² = 36, N = 70", "NPO"): 3.6367,
    ("Δ = 1, σ² = 12.25, N = 50", "GLRT d = 50"): 0.7599,
    ("Δ = 1, σ² = 12.25, N = 50", "GLRT d = 1"): 5.3907,
    ("Δ = 1, σ² = 12.25, N = 50", "NPO"): 6.0839,
}
# docs/design.md §2: Δ = 1, σ = 6, Poisson rate 0.2, 100 rounds, δ = 1e-5.
SUBSAMPLING = {"NPO": 1.312, "GLRT d = 1": 0.143}
PNG = b"\x89PNG\r\n\x1a\n"


def _table(text, header):
    """Rows (lists of cells) of the markdown table whose header row starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    out = tmp_path_factory.mktemp("figs")
    stream = io.StringIO()
    # 200 games, as the notebook tour (tests/test_notebooks.py): one compilation for both.
    written = reproduce.reproduce(out, games=200, thresholds=20, stream=stream)
    return out, written, stream.getvalue()


def test_every_figure_is_written(outputs):
    out, written, _ = outputs
    assert set(written) == set(reproduce.FIGURES)
    for name, path in written.items():
        data = open(path, "rb").read()
        if name == "numbers":
            assert path.endswith("numbers.md")
        else:
            assert data[:8] == PNG and len(data) > 10_000, name


def test_numbers_match_design(outputs):
    out, _, _ = outputs
    text = (out / "numbers.md").read_text(encoding="utf-8")
    rows = _table(text, "| figure |")
    seen = {(row[1], row[2]): float(row[6]) for row in rows}
    assert set(seen) == set(EXACT)
    for key, value in EXACT.items():
        assert round(seen[key], 4) == value, key
    sub = {r[0]: float(r[3]) for r in _table(text, "| adversary | δ | reference")}
    for adversary, ref in SUBSAMPLING.items():
        # The upper bound lies above the truth and within the grid tolerance of it.
        assert ref - 5e-4 <= sub[adversary] <= ref + 2e-3, adversary
    games = _table(text, "| experiment |")
    assert len(games) == 4
    for *_, theory, lower, consistent in games:
        assert 0.0 <= float(lower) <= float(theory) and consistent == "yes"


def test_progress_bar(outputs):
    _, _, log = outputs
    n = len(reproduce.FIGURES)
    assert f"{n}/{n} numbers.md" in log
    assert "[" + "#" * 24 + "]" in log


def test_numbers_markdown_flags_disagreement():
    ours = [r_exact + 0.01 for r_exact in (float(r.exact) for r in reproduce.PAPER_NUMBERS)]
    text = reproduce.numbers_markdown(ours)
    assert text.count("**no**") == len(reproduce.PAPER_NUMBERS)
    with pytest.raises(ValueError, match="ours"):
        reproduce.numbers_markdown(ours[:-1])


def _parser():
    parser = argparse.ArgumentParser(prog="glrt-jax")
    reproduce.add_subparser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_cli(tmp_path, capsys):
    args = _parser().parse_args(
        ["reproduce", "--out", str(tmp_path), "--only", "teaser", "--quiet"]
    )
    assert args.func(args) == 0
    assert (tmp_path / "teaser.png").read_bytes()[:8] == PNG
    assert "teaser" in capsys.readouterr().out
    args = _parser().parse_args(["reproduce", "--out", str(tmp_path), "--games", "1"])
    assert args.func(args) == 2
    assert re.search(r"games must be", capsys.readouterr().err)


def test_cli_setup_hook_runs_first(tmp_path):
    calls = []
    parser = argparse.ArgumentParser(prog="glrt-jax")
    reproduce.add_subparser(parser.add_subparsers(), setup=lambda: calls.append("setup"))
    args = parser.parse_args(["reproduce", "--out", str(tmp_path), "--only", "teaser", "--quiet"])
    assert args.func(args) == 0 and calls == ["setup"]


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(games=1), "games"),
        (dict(thresholds=0), "thresholds"),
        (dict(seed=-1), "seed"),
        (dict(only=["nope"]), "only"),
        (dict(only=[]), "only"),
    ],
)
def test_bad_arguments(tmp_path, kwargs, name):
    with pytest.raises(ValueError, match=name):
        reproduce.reproduce(tmp_path, progress=False, **kwargs)


def test_requires_float64(tmp_path):
    with jax.enable_x64(False):
        with pytest.raises(ValueError, match="64-bit"):
            reproduce.reproduce(tmp_path, only=["teaser"], progress=False)
