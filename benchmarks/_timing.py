"""Timing helper shared by the benchmark scripts (run as ``python benchmarks/<name>.py``)."""

from __future__ import annotations

import time

import jax


def best(fn, repeat=3):
    """(fastest wall time of ``repeat`` calls of ``fn``, its last output), blocking on JAX."""
    fastest, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        fastest = min(fastest, time.perf_counter() - t0)
    return fastest, out
