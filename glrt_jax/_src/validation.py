"""Eager validation of user-facing arguments.

Concrete values are checked and rejected with a ``ValueError`` naming the parameter and
its allowed range. Traced values (inside ``jit``) cannot be inspected: they pass through
and out-of-domain inputs produce NaN, following the jax.scipy conventions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def is_traced(*values) -> bool:
    """Whether any leaf of ``values`` is a tracer (inside ``jit``, ``vmap`` or autodiff)."""
    return any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(values))


def _concrete(value):
    if isinstance(value, jax.core.Tracer):
        return None
    return np.asarray(value)


def check_range(
    name: str, value, *, lo=None, hi=None, lo_open=False, hi_open=False, integer=False
) -> None:
    """Raise ValueError if a concrete ``value`` is NaN/inf or outside the stated range.

    The message names the argument, the valid range and the offending value; for an array,
    the first offending entry and its index (``noise_multiplier[3] = -1.0``).

    Example:
      >>> check_range("sampling_rate", [0.5, 1.5], lo=0.0, hi=1.0, lo_open=True)
      Traceback (most recent call last):
      ...
      ValueError: sampling_rate must be in (0, 1]; got sampling_rate[1] = 1.5
    """
    arr = _concrete(value)
    if arr is None:
        return
    a = np.asarray(arr, dtype=float)
    bad = ~np.isfinite(a)
    if lo is not None:
        bad |= (a <= lo) if lo_open else (a < lo)
    if hi is not None:
        bad |= (a >= hi) if hi_open else (a > hi)
    if integer:
        bad |= np.isfinite(a) & (a != np.round(a))
    if not np.any(bad):
        return
    lo_s = "-inf" if lo is None else f"{lo:g}"
    hi_s = "inf" if hi is None else f"{hi:g}"
    left = "(" if lo_open or lo is None else "["
    right = ")" if hi_open or hi is None else "]"
    kind = "an integer in " if integer else "in "
    if a.ndim == 0:
        got = repr(value)
    else:
        index = np.unravel_index(int(np.argmax(bad)), a.shape)
        where = ", ".join(str(int(i)) for i in index)
        got = f"{name}[{where}] = {np.asarray(arr)[index].item()!r}"
    raise ValueError(f"{name} must be {kind}{left}{lo_s}, {hi_s}{right}; got {got}")


def check_alpha(alpha) -> None:
    """Raise ValueError unless a concrete false-positive rate ``alpha`` is in [0, 1]."""
    check_range("alpha", alpha, lo=0.0, hi=1.0)


def check_d(d) -> None:
    """Raise ValueError unless a concrete dimension ``d`` is an integer in [1, inf)."""
    check_range("d", d, lo=1.0, integer=True)


ADVERSARIES = ("npo", "glrt")
NEIGHBOURINGS = ("add_remove", "replace_one")
THREAT_MODELS = ("per_round", "shared")


def check_choice(name: str, value, choices: tuple) -> None:
    """Raise ValueError unless ``value`` is one of ``choices`` (a string option)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}; got {value!r}")


def check_x64(what: str) -> None:
    """Raise ValueError unless 64-bit floats are enabled (``what`` names the caller)."""
    if jnp.result_type(float) != jnp.float64:  # no array made: no compiled program
        raise ValueError(
            f"{what} needs 64-bit floats for its guarantees: enable them with "
            'jax.config.update("jax_enable_x64", True) or run inside jax.enable_x64().'
        )


def check_int(name: str, value, *, lo: int = 1) -> int:
    """Return a concrete scalar ``value`` as an int; raise ValueError unless it is in [lo, inf).

    Integral floats (``2.0``) are accepted, booleans and arrays are not. Eager only.
    """
    check_range(name, value, lo=float(lo), integer=True)
    if isinstance(value, bool) or np.ndim(value) != 0:
        raise ValueError(f"{name} must be an integer in [{lo}, inf); got {value!r}")
    return int(value)
