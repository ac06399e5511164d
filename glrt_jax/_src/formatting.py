"""Numbers for people: a bound printed to a few digits stays a bound.

A certified upper bound ε ≤ 1.8282420 printed with ``f"{x:.6g}"`` reads ``1.82824``, which is
not an upper bound any more; a reader who copies it into a privacy statement claims a little
more privacy than was proved. :func:`rounded` rounds to the pessimistic side instead: upper
bounds (and noise multipliers, whose safe side is more noise) up, lower bounds down.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Context, Decimal

__all__ = ["rounded"]

_MODES = {"up": ROUND_CEILING, "down": ROUND_FLOOR, "nearest": ROUND_HALF_EVEN}


def rounded(x: float, digits: int = 6, *, direction: str = "nearest", fixed: bool = False) -> str:
    """``x`` as text with ``digits`` digits, rounded ``"up"``, ``"down"`` or to ``"nearest"``.

    The decimal is formed from the exact binary value of ``x`` (no double rounding), so
    ``direction="up"`` never prints a number below ``x`` and ``"down"`` never one above it.

    Args:
      x: the number (a Python or NumPy float; non-finite values print as Python prints them).
      digits: significant digits, or with ``fixed=True`` digits after the decimal point.
      direction: ``"up"`` (toward +∞), ``"down"`` (toward −∞) or ``"nearest"`` (ties to
        even, as ``format`` does).
      fixed: ``False``: the style of ``f"{x:.{digits}g}"`` (trailing zeros dropped);
        ``True``: that of ``f"{x:.{digits}f}"``.

    Returns:
      The text.

    Raises:
      ValueError: an unknown ``direction``, or ``digits < 1`` without ``fixed``.

    Example:
      >>> rounded(1.8282419955687268, direction="up"), rounded(1.8282324642, direction="down")
      ('1.82825', '1.82823')
      >>> rounded(0.5687301, 6, direction="up", fixed=True)
      '0.568731'
    """
    if direction not in _MODES:
        raise ValueError(f"direction must be one of {sorted(_MODES)}, got {direction!r}")
    mode = _MODES[direction]
    x = float(x)
    if not math.isfinite(x):
        return f"{x:.{digits}{'f' if fixed else 'g'}}"
    if fixed:
        d = Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=mode)
        return f"{d:f}"
    if digits < 1:
        raise ValueError(f"digits must be at least 1 without fixed=True, got {digits}")
    return _general(Context(prec=digits, rounding=mode).create_decimal(Decimal(x)), digits)


def _general(d: Decimal, digits: int) -> str:
    """A decimal of at most ``digits`` significant digits in the style of ``format``'s
    ``g``: positional for decimal exponents −4 to ``digits − 1``, scientific (an exponent
    of at least two digits) otherwise, trailing zeros dropped."""
    sign = "-" if d.is_signed() else ""
    if d.is_zero():
        return sign + "0"
    e = d.adjusted()  # the value is 0.m… × 10^(e + 1), m the significant digits
    m = "".join(map(str, d.as_tuple().digits)).rstrip("0")
    if -4 <= e < digits:
        if e >= 0:
            whole, frac = m[: e + 1].ljust(e + 1, "0"), m[e + 1 :]
        else:
            whole, frac = "0", "0" * (-e - 1) + m
        return sign + whole + ("." + frac if frac else "")
    return sign + m[0] + ("." + m[1:] if m[1:] else "") + f"e{e:+03d}"
