"""Where a warm composition query spends its time: the engine's programs, and XLA's operations.

Usage:
    python benchmarks/stages.py [--phases 1000] [--adversary npo] [--d 1] [--repeat 3]
                                [--top 12]

One schedule of ``--phases`` distinct phases (as in the tables: σ_k ∈ U[0.8, 1.5],
q_k ∈ U[0.005, 0.02], 10 steps each, δ = 1e-5, seed 0) is asked through
``accountant.schedule_epsilon`` until it is warm, then ``--repeat`` more times with each of
the engine's compiled programs timed where it is called (blocking on its output: the
plan, or its per-phase part in halves and the program that joins them; the phase sums,
whole or in halves; the bounds). Programs that run side by side (the halves, in two
threads) overlap: their spans are wall times, not shares of one. Then one more call runs
under ``jax.profiler`` and the XLA operations with the largest total time over it are
listed (fusions, scatters and FFTs as XLA names them, summed over threads; loops and
branches are left out, their spans hold the operations inside them).

No peer: a tool for finding where to work, not a check of a target. The figures quoted
in ``docs/measurements.md`` ("Where the time of many phases goes") come from it and from
removing pieces one at a time.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys
import tempfile
import threading
import time

import jax

jax.config.update("jax_enable_x64", True)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import steady  # noqa: E402
from device import _schedule  # noqa: E402  (the tables' K-phase schedule)

from glrt_jax import accountant  # noqa: E402
from glrt_jax._src import composition  # noqa: E402

_PROGRAMS = (
    "_plan_program",
    "_plan_part_program",
    "_plan_joined_program",
    "_sums_program",
    "_part_sums_program",
    "_bounds_stage",
)


# XLA's control-flow thunks (while loops, scans, branches, calls).
_CONTROL = re.compile(r"^(while|cond|call|conditional)(\.\d+)*(\.clone)?$")


class _Timed:
    """A stored program whose calls are timed (output blocked on); other attributes pass."""

    def __init__(self, name, program, log, lock):
        self._name, self._program, self._log, self._lock = name, program, log, lock

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        out = jax.block_until_ready(self._program(*args, **kwargs))
        t1 = time.perf_counter()
        with self._lock:
            self._log.append((self._name.strip("_"), t0, t1))
        return out

    def __getattr__(self, attr):
        return getattr(self._program, attr)


def _top_operations(fn, top):
    """The XLA operations with the largest total time over one call of ``fn``."""
    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder, create_perfetto_trace=True):
            jax.block_until_ready(fn())
        (path,) = glob.glob(f"{folder}/**/*perfetto_trace.json.gz", recursive=True)
        with gzip.open(path) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    total, count = collections.Counter(), collections.Counter()
    for e in events:
        name = e.get("name", "")
        # Spans of XLA's thunks: not the executor's own, Python's frames, nor the loops
        # and branches (their spans contain the operations inside them).
        if e.get("ph") != "X" or name.startswith(("ThunkExecutor", "$", "Pjit")):
            continue
        if _CONTROL.match(name):
            continue
        total[name] += e.get("dur", 0)
        count[name] += 1
    return [(name, total[name] / 1e6, count[name]) for name, _ in total.most_common(top)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", type=int, default=1000)
    ap.add_argument("--adversary", choices=("npo", "glrt"), default="npo")
    ap.add_argument("--d", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args(argv)

    sig, q, n = _schedule(args.phases)

    def query():
        return accountant.schedule_epsilon(sig, q, n, 1e-5, adversary=args.adversary, d=args.d)

    t0 = time.perf_counter()
    bounds = jax.block_until_ready(query())
    first = time.perf_counter() - t0
    steady(query)
    print(
        f"K = {args.phases} phases, {args.adversary}"
        + (f" d = {args.d}" if args.adversary == "glrt" else "")
        + f": ε in [{float(bounds.lower):.8g}, {float(bounds.upper):.8g}], "
        f"first call {first:.2f} s (this process)"
    )

    log, lock = [], threading.Lock()
    originals = {name: getattr(composition, name) for name in _PROGRAMS}
    runs = []
    try:
        for name, program in originals.items():
            setattr(composition, name, _Timed(name, program, log, lock))
        for _ in range(args.repeat):
            log.clear()
            t0 = time.perf_counter()
            jax.block_until_ready(query())
            runs.append((time.perf_counter() - t0, t0, list(log)))
    finally:
        for name, program in originals.items():
            setattr(composition, name, program)

    wall, start, calls = min(runs, key=lambda r: r[0])
    print(f"\nwarm call: {wall * 1e3:.1f} ms (fastest of {args.repeat}); its programs:\n")
    print("| program | starts at ms | takes ms |")
    print("|---|---|---|")
    for name, t0, t1 in sorted(calls, key=lambda c: c[1]):
        print(f"| {name} | {(t0 - start) * 1e3:.1f} | {(t1 - t0) * 1e3:.1f} |")

    print(f"\nXLA's operations over one more warm call (top {args.top}, all threads):\n")
    print("| operation | total ms | calls |")
    print("|---|---|---|")
    for name, seconds, calls in _top_operations(query, args.top):
        print(f"| {name} | {seconds * 1e3:.1f} | {calls} |")


if __name__ == "__main__":
    main()
