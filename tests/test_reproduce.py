"""Tests of ``glrt-jax reproduce``: every figure and numbers.md, on a tiny setting.

The expected numbers are docs/design.md §3 (mpmath, 50 digits) and the independent
subsampling references of docs/design.md §2, read from the package's data file
``glrt_jax/data/paper_numbers.json`` (:mod:`glrt_jax.reproduce`), not computed
by the code under test. ``test_paper_numbers_match_mpmath_references`` checks that
file's exact values against the 40-digit mpmath values of
``tests/reference/profile_refs.json``.
"""

import io
import json
import math
import pathlib
import re
from decimal import ROUND_HALF_EVEN, Decimal

import jax
import pytest

from glrt_jax import cli, reproduce

# docs/design.md §3: (setting, adversary) -> exact ε, four decimals.
EXACT = {(row.setting, row.label): float(row.exact) for row in reproduce.PAPER_NUMBERS}
# docs/design.md §2: Δ = 1, σ = 6, Poisson rate 0.2, 100 rounds, δ = 1e-5.
SUBSAMPLING = {
    "NPO": float(reproduce.SUBSAMPLING_REFERENCE["npo"]),
    "GLRT d = 1": float(reproduce.SUBSAMPLING_REFERENCE["glrt"]),
}
PROFILE_REFS = pathlib.Path(__file__).parent / "reference" / "profile_refs.json"
PNG = b"\x89PNG\r\n\x1a\n"


def test_paper_numbers_match_mpmath_references():
    """The data file's settings and exact values are those of the independent mpmath run."""
    refs = [r for r in json.loads(PROFILE_REFS.read_text())["paper"] if "design_value" in r]
    rows = reproduce.PAPER_NUMBERS
    assert len(rows) == len(refs) == 10
    assert len({row.id for row in rows}) == len(rows)

    def key(adversary, d, sensitivity, sigma2, steps, delta):
        return (adversary, d, float(sensitivity), float(sigma2), int(steps), float(delta))

    by_setting = {key(r["adversary"], r["d"], r["Delta"], r["sigma2"], r["N"], r["delta"]): r
                  for r in refs}  # fmt: skip
    assert len(by_setting) == len(refs)
    for row in rows:
        ref = by_setting.pop(
            key(row.adversary, row.d, row.sensitivity, row.sigma2, row.steps, row.delta)
        )
        assert (row.d is None) == (row.adversary == "npo"), row.id
        # The 40-digit value, rounded to the data file's four decimals, is its exact value.
        digits = Decimal(ref["eps"]).quantize(Decimal(row.exact), rounding=ROUND_HALF_EVEN)
        assert str(digits) == row.exact == ref["design_value"], row.id
        assert math.isclose(row.mu, float(ref["mu"]), rel_tol=1e-15), row.id
        # The paper's two printed decimals are within a rounding of the exact value, except
        # where the data file notes an erratum.
        off = abs(float(row.paper) - float(ref["eps"]))
        assert (off <= 0.01) != row.note.startswith("erratum"), row.id
    assert not by_setting


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


def test_cli(tmp_path, capsys):
    argv = ["reproduce", "--out", str(tmp_path), "--only", "teaser", "--quiet"]
    assert cli.main(argv) == 0
    assert (tmp_path / "teaser.png").read_bytes()[:8] == PNG
    assert "teaser" in capsys.readouterr().out
    assert cli.main(["reproduce", "--out", str(tmp_path), "--games", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(r"games must be .*got 1", err)


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
