"""Printed bounds stay bounds: :func:`glrt_jax._src.formatting.rounded` against exact
rational arithmetic (``fractions.Fraction`` holds a float's binary value exactly)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glrt_jax._src.formatting import rounded

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True)
finite = st.floats(allow_nan=False, allow_infinity=False)
digits = st.integers(1, 17)


def _significant(text: str) -> int:
    """Significant digits of a decimal's text (``"1.25e-07"`` → 3)."""
    mantissa = text.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa)


@SETTINGS
@given(x=finite, n=digits)
def test_up_and_down_bracket_the_exact_value(x, n):
    up, down = rounded(x, n, direction="up"), rounded(x, n, direction="down")
    exact = Fraction(x)
    assert Fraction(down) <= exact <= Fraction(up), (x, down, up)
    assert _significant(up) <= n and _significant(down) <= n, (up, down)
    # the nearest decimals of n digits on either side: one unit in the last place apart
    if Fraction(up) != Fraction(down):
        ulp = Fraction(10) ** (math.floor(math.log10(abs(x))) - n + 1)
        assert Fraction(up) - Fraction(down) <= ulp, (x, down, up)
    else:
        assert Fraction(up) == exact


@SETTINGS
@given(x=finite, n=digits)
def test_nearest_is_format(x, n):
    assert rounded(x, n) == f"{x:.{n}g}"


@SETTINGS
@given(x=st.floats(-1e12, 1e12), n=st.integers(0, 12))
def test_fixed_decimals(x, n):
    up, down = (rounded(x, n, direction=s, fixed=True) for s in ("up", "down"))
    assert Fraction(down) <= Fraction(x) <= Fraction(up)
    assert Fraction(up) - Fraction(down) <= Fraction(1, 10**n)
    for text in (up, down):
        assert len(text.partition(".")[2]) == n, text
    assert rounded(x, n, fixed=True) == f"{x:.{n}f}"


def test_the_motivating_bounds():
    # a report's NPO upper bound and its GLRT one, as `f"{x:.6g}"` printed them below
    # themselves (1.82824, 0.24361)
    assert rounded(1.8282420, direction="up") == "1.82825"
    assert rounded(0.24361043, direction="up") == "0.243611"
    assert rounded(0.24361043, direction="down") == "0.24361"
    # a number already of n digits is printed as it is, either way
    assert rounded(0.5, direction="up") == rounded(0.5, direction="down") == "0.5"
    assert rounded(1e-7, 3, direction="up") == "1e-07"


@pytest.mark.parametrize("x", [np.inf, -np.inf, np.nan])
def test_non_finite(x):
    for direction in ("up", "down", "nearest"):
        assert rounded(x, direction=direction) == f"{x:.6g}"


def test_past_float64s_range():
    # rounding the largest float up leaves float64's range: the decimal is printed
    assert rounded(np.finfo(float).max, 3, direction="up") == "1.8e+308"
    assert Fraction(rounded(5e-324, 2, direction="up")) >= Fraction(5e-324)


def test_numpy_scalars_and_bad_direction():
    assert rounded(np.float32(0.1), 3, direction="up") == "0.101"
    with pytest.raises(ValueError, match="direction"):
        rounded(1.0, direction="outward")
    with pytest.raises(ValueError, match="digits"):
        rounded(1.0, 0)
