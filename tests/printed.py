"""Numbers in printed text: the documentation's shown outputs against what its code prints
(shared by test_readme.py and test_docs.py), and the tables of reports printed on the
safe side (test_accountant.py, test_risk.py, test_calibrate.py); not a test module."""

import re
from fractions import Fraction

import numpy as np

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def numbers(text: str) -> np.ndarray:
    """Every number in ``text``, in order."""
    return np.array([float(m) for m in NUMBER.findall(text)])


def assert_prints(printed: str, shown: str, where: str) -> None:
    """``printed`` has the numbers ``shown`` has (the docs round them: 6 significant digits
    and more), so that an engine change that moves an answer also moves the example."""
    got, want = numbers(printed), numbers(shown)
    assert got.shape == want.shape, f"{where} printed:\n{printed}\nbut shows:\n{shown}"
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0, err_msg=f"{where}:\n{printed}")


def table_cells(table: str) -> list[list[str]]:
    """The body rows of a markdown table, each as its cells' text (header and rule
    dropped)."""
    rows = [line.strip("|").split("|") for line in table.splitlines()[2:]]
    return [[cell.strip() for cell in row] for row in rows]


def assert_table_brackets(report):
    """The report's table prints each upper bound at or above it and each lower bound at
    or below it (exactly: a float's binary value as a fraction), so the printed bracket
    still contains the truth."""
    rows = table_cells(report.table())
    bounds = [report.npo, report.glrt]
    per = len(rows) // 2
    for i, row in enumerate(rows):
        b = bounds[i // per]
        upper, lower = (float(np.atleast_1d(v)[i % per]) for v in (b.upper, b.lower))
        assert Fraction(row[1]) >= Fraction(upper) and Fraction(row[2]) <= Fraction(lower), (
            row,
            upper,
            lower,
        )
