r"""Double-double arithmetic: a value as an unevaluated sum ``hi + lo`` of two float64s.

For the precise non-uniform Fourier sums (:func:`glrt_jax._src.nufft.sums` with
``precise=True``), whose result must be accurate to a few units of float64's last place
where an ordinary float64 computation loses hundreds of them. A double-double carries
about 106 bits; the operations below (Dekker 1971; Joldes, Muller & Popescu, "Tight and
rigorous error bounds for basic building blocks of double-word arithmetic", 2017) round
by at most a few ``u²`` (``u = 2⁻⁵³``) relative to their operands' sizes:

* :func:`add`: the accurate sum of two double-doubles, within ``3u²|a + b|``;
* :func:`product` of two float64s within ``20u²|ab|``; :func:`mul` and :func:`mul_d` (by
  a float64) within ``24u²|ab|``;
* :func:`div_d`, :func:`div` and :func:`sqrt`: within ``48u²`` relative (one correction
  step of float64's quotient or root);
* :func:`cmul`: within ``64u²|a||b|`` per component.

Every function works on NumPy and on ``jax.numpy`` arrays alike. They rely on float64
operations rounding to nearest and on no reassociation. XLA on the CPU does contract
``a·b + c`` into fused multiply-adds (and may recompute a product in each of its
consumers, contracted in some and not in others), so the products here are formed from
halves whose products are exact (:func:`product`), where a contraction changes nothing;
``tests/test_double_double.py`` checks every operation under ``jit`` against mpmath.

:func:`exp` and :func:`expi` evaluate ``e^x`` and ``e^{iθ}`` by Taylor series in
double-double: within ``5·10⁻²⁷`` relative (``e^x``) and ``10⁻²⁷`` absolute (``e^{iθ}``),
bounds far above what they reach (about ``10⁻³⁰``).

Example:
  >>> import numpy as np
  >>> hi, lo = exp((np.array([1.0]), np.array([0.0])))
  >>> float(hi[0]), abs(float(lo[0])) < 2.0**-52 * float(hi[0])
  (2.718281828459045, True)
"""

from __future__ import annotations

from fractions import Fraction
from math import factorial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# π as a double-double (the float64 nearest π and the float64 nearest the rest).
PI = (3.141592653589793, 1.2246467991473532e-16)
_SPLIT = 134217729.0  # 2^27 + 1


def two_sum(x, y):
    """Knuth's exact sum ``x + y = s + e`` (no branch)."""
    s = x + y
    yy = s - x
    e = (x - (s - yy)) + (y - yy)
    return s, e


def quick_two_sum(x, y):
    """Dekker's exact sum ``x + y = s + e`` for ``|x| ≥ |y|`` (or x = 0)."""
    s = x + y
    return s, y - (s - x)


def two_product(x, y):
    """Dekker's exact product ``x·y = p + e`` (no fused multiply-add needed)."""
    p = x * y
    cx = _SPLIT * x
    xh = cx - (cx - x)
    xl = x - xh
    cy = _SPLIT * y
    yh = cy - (cy - y)
    yl = y - yh
    e = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl
    return p, e


# Clears the low 27 bits of a float64's significand (its bit pattern as an int64).
_LOW_BITS = np.int64(-(1 << 27))


def split(x):
    """``x = hi + lo`` exactly, ``hi`` with at most 26 significant bits and ``|lo| <
    2⁻²⁵|x|`` with at most 27: ``hi`` is ``x`` with the low 27 bits of its significand
    cleared (integer operations on its bit pattern, which no compiler turns into a
    fused multiply-add, unlike Veltkamp's splitting ``(2²⁷ + 1)x − ((2²⁷ + 1)x − x)``)."""
    if isinstance(x, jax.Array):
        bits = lax.bitcast_convert_type(x, jnp.int64) & _LOW_BITS
        hi = lax.bitcast_convert_type(bits, jnp.float64)
    else:
        hi = (np.asarray(x, np.float64).view(np.int64) & _LOW_BITS).view(np.float64)
    return hi, x - hi


def product(x, y):
    """``x·y`` as a double-double within ``20u²|xy|``, robust to fused multiply-adds.

    XLA on the CPU contracts ``a·b + c`` into a fused multiply-add, and may recompute a
    product inside each consumer, contracted in some and not in others, which breaks
    Dekker's :func:`two_product` where its rounded product meets an addition. Here every
    product that is added is exact: with :func:`split` halves, ``x_h y_h``, ``x_h y_l``
    and ``x_l y_h`` have at most 53 bits, so contracted or not they add the same; they are
    summed by :func:`two_sum`, and only ``x_l y_l`` (below ``2⁻⁵⁰|xy|``) rounds, by at
    most ``8u²|xy|``, as do the two additions of the low parts (``8u²`` and ``2u²``).
    """
    xh, xl = split(x)
    yh, yl = split(y)
    s1, e1 = two_sum(xh * yl, xl * yh)
    p, e2 = two_sum(xh * yh, s1)
    return quick_two_sum(p, e2 + (e1 + xl * yl))


def constant(value: Fraction | int) -> tuple[float, float]:
    """The double-double nearest (to about 2⁻¹⁰⁶ relative) an exact rational."""
    value = Fraction(value)
    hi = float(value)
    return hi, float(value - Fraction(hi))


def add(a, b):
    """``a + b`` of two double-doubles (the accurate algorithm: within 3u²|a + b|)."""
    s, t = two_sum(a[0], b[0])
    p, q = two_sum(a[1], b[1])
    s, t = quick_two_sum(s, t + p)
    return quick_two_sum(s, t + q)


def neg(a):
    return -a[0], -a[1]


def sub(a, b):
    return add(a, neg(b))


def mul(a, b):
    """``a·b`` of two double-doubles (within 24u²|ab|)."""
    p, e = product(a[0], b[0])
    e = e + (a[0] * b[1] + a[1] * b[0])
    return quick_two_sum(p, e)


def mul_d(a, b):
    """``a·b`` of a double-double and a float64 (within 24u²|ab|)."""
    p, e = product(a[0], b)
    return quick_two_sum(p, e + a[1] * b)


def div(a, b):
    """``a/b`` of two double-doubles (b ≠ 0; within 48u²|a/b|)."""
    q1 = a[0] / b[0]
    r = sub(a, mul_d(b, q1))
    return quick_two_sum(q1, r[0] / b[0])


def div_d(a, b):
    """``a/b`` of a double-double and a float64 (b ≠ 0)."""
    return div(a, (b, 0.0 * b))


def sqrt(a):
    """``√a`` of a double-double ``a > 0`` (one Newton correction of float64's root)."""
    s = a[0] ** 0.5
    r = sub(a, product(s, s))
    return quick_two_sum(s, r[0] / (2.0 * s))


def to_float(a):
    """The float64 nearest ``a`` (within u of it, relative)."""
    return a[0] + a[1]


# Complex double-doubles: pairs (real, imaginary) of double-doubles.


def cadd(a, b):
    return add(a[0], b[0]), add(a[1], b[1])


def csub(a, b):
    return sub(a[0], b[0]), sub(a[1], b[1])


def cmul(a, b):
    """``a·b`` of two complex double-doubles (within 64u²|a||b| per component)."""
    return (
        sub(mul(a[0], b[0]), mul(a[1], b[1])),
        add(mul(a[0], b[1]), mul(a[1], b[0])),
    )


def cmul_r(a, b):
    """``a·b`` of a complex double-double and a real one."""
    return mul(a[0], b), mul(a[1], b)


# Taylor coefficients: 1/n! for n ≤ 30 (e^x on |x| ≤ 1 to 1/31! < 10⁻³³ relative), and
# (−1)^n/(2n)!, (−1)^n/(2n + 1)! for n ≤ 23 (cos and sin on |θ| ≤ π: π⁴⁸/48! < 10⁻³⁶).
_EXP_TERMS = [constant(Fraction(1, factorial(n))) for n in range(31)]
_COS_TERMS = [constant(Fraction((-1) ** n, factorial(2 * n))) for n in range(24)]
_SIN_TERMS = [constant(Fraction((-1) ** n, factorial(2 * n + 1))) for n in range(24)]
_EXP_HALVINGS = 6


def _horner(coefs, x):
    """``Σ_n c_n x^n`` by Horner's rule: a loop under ``jax`` (one copy of its body in a
    compiled program), plain Python on NumPy arrays."""
    hi = np.array([c[0] for c in coefs])
    lo = np.array([c[1] for c in coefs])
    start = (hi[-1] + 0.0 * x[0], lo[-1] + 0.0 * x[0])
    if not isinstance(x[0], jax.Array):
        p = start
        for i in range(len(coefs) - 2, -1, -1):
            p = add(mul(p, x), (hi[i], lo[i]))
        return p
    c_hi, c_lo = jnp.asarray(hi), jnp.asarray(lo)
    last = len(coefs) - 2

    def step(j, p):
        i = last - j
        return add(mul(p, x), (c_hi[i], c_lo[i]))

    return lax.fori_loop(0, len(coefs) - 1, step, start)


def power(a, n: int):
    """``a^n`` (n ≥ 0, static) by ``n`` products (a loop under ``jax``)."""
    one = (1.0 + 0.0 * a[0], 0.0 * a[0])
    if not isinstance(a[0], jax.Array):
        p = one
        for _ in range(n):
            p = mul(p, a)
        return p
    return lax.fori_loop(0, n, lambda _, p: mul(p, a), one)


def exp(x):
    """``e^x`` of a double-double with ``|x| ≤ 64``.

    Taylor's series of ``e^{x/64}`` to 1/30! (its remainder below 10⁻³² relative), then
    six squarings. Each of the 30 steps of the series (a product and a sum) rounds within
    27u² of its operands, whose sizes are at most ``e^{|x|/64} ≤ e`` while the result is
    at least ``1/e``: 7.4·10⁻²⁹ relative; the squarings double it six times and add
    24u² each: within 5·10⁻²⁷ relative in all.
    """
    y = (x[0] * 2.0**-_EXP_HALVINGS, x[1] * 2.0**-_EXP_HALVINGS)  # (exact)
    p = _horner(_EXP_TERMS, y)
    if not isinstance(p[0], jax.Array):
        for _ in range(_EXP_HALVINGS):
            p = mul(p, p)
        return p
    return lax.fori_loop(0, _EXP_HALVINGS, lambda _, p: mul(p, p), p)


def expi(theta):
    """``(cos θ, sin θ)`` of a double-double ``|θ| ≤ π``, each within 10⁻²⁷ absolute.

    Taylor's series in ``θ²`` to 1/47! (remainder below 10⁻³⁶); its 96 operations round
    within 27u² of their operands, whose sizes sum to at most ``cosh π < 12``.
    """
    x = mul(theta, theta)
    return _horner(_COS_TERMS, x), mul(theta, _horner(_SIN_TERMS, x))
