"""Timing helpers shared by the benchmark scripts (run as ``python benchmarks/<name>.py``)."""

from __future__ import annotations

import time

import jax

from glrt_jax._src import programs


def steady(fn):
    """``fn()`` once more, then wait for the library's compilations for speed; its output.

    A small program's first call is compiled for latency, and compiled again for speed in
    the background when a later query uses it (``programs._Tiered``): the calls after
    this one time the steady state a process that keeps asking reaches a few seconds
    after its second query.
    """
    out = jax.block_until_ready(fn())
    programs.settle()
    return out


def best(fn, repeat=3):
    """(fastest wall time of ``repeat`` calls of ``fn``, its last output), blocking on JAX,
    in the steady state (:func:`steady` first)."""
    steady(fn)
    fastest, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        fastest = min(fastest, time.perf_counter() - t0)
    return fastest, out
