"""Time to the first answer of ``glrt-jax report`` in a fresh process, cold and warm.

Usage:
    python benchmarks/startup.py [--repeat 1] [--markdown PATH] [--attack-risk]
                                 [--case shared --case per_round --case readme]
    python benchmarks/startup.py --library [--phases] [--repeat 2]

Each case runs the command line in a new Python process twice with the same, initially
empty, compilation cache (``GLRT_JAX_CACHE`` set to a temporary folder): *cold* (the
first process compiles every program and fills the cache) and *warm* (the second
process finds the compiled programs in the cache). Wall seconds are measured around the
process; the breakdown comes from inside it and from JAX's compile log
(``JAX_LOG_COMPILES=1``):

* ``import``: ``import glrt_jax.cli`` (jax included);
* ``trace``: tracing the jitted programs to jaxprs;
* ``lower``: jaxpr to MLIR (StableHLO);
* ``compile``: XLA compilation, or, warm, loading the executable from the cache;
* ``rest``: the wall time left (interpreter start-up, backend start, argument parsing,
  execution, eager dispatch, printing). The three columns before it add up every
  program's time, in whichever thread: on a first call the engine traces some programs
  while others compile (``glrt_jax._src.programs.ahead``), so they can add up to more than
  the wall time, and ``rest`` is then negative.

``CPU`` is the process's user + system time (XLA compiles on several threads; on a
busy machine it is the steadier figure).

Times are top-level programs only (a program jitted inside another is part of it).
With ``--repeat N`` each case is run N times (each with a fresh cache) and the fastest
cold and warm runs are reported. ``--markdown PATH`` writes the table to a file for the
documentation.

``--library`` times the library instead of the command line, as a script uses it (no
cache): the README's report (``accountant.epsilon``, NPO and GLRT with d = 10), P1 and
``calibrate.calibrate`` of the README, each in fresh processes with the programs' tiers
on and off (``$GLRT_JAX_TIERED``, alternating): the first call, the second query (which
starts the compilations for speed), how long they take to settle, and the steady warm
call (best of five); ``--phases`` adds the tables' K-phase schedules (K = 100 and 1000,
NPO and GLRT with d = 10).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time

CASES = {
    "shared": [
        "report",
        "--noise-multiplier",
        "6",
        "--steps",
        "70",
        "--delta",
        "1e-2",
        "--threat-model",
        "shared",
    ],
    "per_round": [
        "report",
        "--noise-multiplier",
        "1.1",
        "--sampling-rate",
        "0.01",
        "--steps",
        "10000",
        "--delta",
        "1e-5",
    ],
    # The README's first command: GLRT with d = 10 (its own programs: d is data there).
    "readme": [
        "report",
        "--noise-multiplier",
        "1",
        "--sampling-rate",
        "0.01",
        "--steps",
        "1000",
        "--d",
        "10",
        "--delta",
        "1e-5",
    ],
}

# Runs in the child: times the import and the command, reports them on stderr.
_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import glrt_jax.cli as cli
t1 = time.perf_counter()
rc = cli.main(sys.argv[1:])
t2 = time.perf_counter()
sys.stdout.flush()
print("@@startup " + json.dumps({"import": t1 - t0, "command": t2 - t1, "rc": rc}),
      file=sys.stderr)
"""

# Library cases (``--library``): the code of one query, run in a child process.
LIBRARY = {
    "report": "accountant.epsilon(1e-5, noise_multiplier=1.0, sampling_rate=0.01, "
    "steps=1000, d=10)",
    "P1": "accountant.epsilon(1e-6, noise_multiplier=0.7, sampling_rate=5e-4, steps=200000)",
    "calibrate": "calibrate.calibrate(1.0, 1e-5, steps=1000, sampling_rate=0.01, d=10)",
}
# ... and with ``--phases``: the tables' K-phase schedules (``schedule(K)``, as in device.py).
LIBRARY_PHASES = {
    "K = 100, NPO": "accountant.schedule_epsilon(*schedule(100), 1e-5)",
    "K = 1000, NPO": "accountant.schedule_epsilon(*schedule(1000), 1e-5)",
    "K = 1000, GLRT d = 10": "accountant.schedule_epsilon(*schedule(1000), 1e-5, "
    "adversary='glrt', d=10)",
}

_LIBRARY_CHILD = """
import json, sys, time
import jax
jax.config.update("jax_enable_x64", True)
from glrt_jax import accountant, calibrate
from glrt_jax._src import programs
import numpy as np

def schedule(k):
    rng = np.random.default_rng(0)
    return rng.uniform(0.8, 1.5, k), rng.uniform(0.005, 0.02, k), np.full(k, 10)

ask = lambda: jax.block_until_ready({query})
t0 = time.perf_counter(); ask(); t1 = time.perf_counter(); ask(); t2 = time.perf_counter()
programs.settle(); t3 = time.perf_counter()
warm = []
for _ in range(5):
    t = time.perf_counter(); ask(); warm.append(time.perf_counter() - t)
print("@@library " + json.dumps(dict(first=t1 - t0, second=t2 - t1, settle=t3 - t2,
                                    warm=min(warm))))
"""


def library_once(query: str, tiered: bool) -> dict:
    """One fresh process asking ``query`` (first call, second, settle, warm)."""
    env = dict(os.environ, GLRT_JAX_TIERED="1" if tiered else "0")
    proc = subprocess.run(
        [sys.executable, "-c", _LIBRARY_CHILD.format(query=query)],
        env=env,
        capture_output=True,
        text=True,
    )
    marker = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@library ")]
    if proc.returncode != 0 or not marker:
        raise RuntimeError(f"{query} failed:\n{proc.stderr[-3000:]}")
    return json.loads(marker[-1][len("@@library ") :])


def library_table(repeat: int, cases: dict) -> str:
    """Markdown table of the library ``cases``, tiers on and off in alternating processes."""
    lines = [
        "| case | tiers | first call s | second query s | settled after s | warm ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, query in cases.items():
        runs = {True: [], False: []}
        for _ in range(repeat):
            for tiered in (True, False):
                runs[tiered].append(library_once(query, tiered))
        for tiered in (True, False):
            best = min(runs[tiered], key=lambda r: r["first"])
            warm = min(r["warm"] for r in runs[tiered])
            lines.append(
                f"| {name} | {'on' if tiered else 'off'} | "
                + " | ".join(f"{best[k]:.2f}" for k in ("first", "second", "settle"))
                + f" | {warm * 1e3:.1f} |"
            )
        print(lines[-2], lines[-1], sep="\n", flush=True)
    return "\n".join(lines)


_TRACE = re.compile(r"Finished tracing \S+ for jit in ([0-9.eE+-]+) sec")
_LOWER = re.compile(r"Finished jaxpr to MLIR module conversion \S+ in ([0-9.eE+-]+) sec")
_COMPILE = re.compile(r"Finished XLA compilation of \S+ in ([0-9.eE+-]+) sec")
_HIT = re.compile(r"Persistent compilation cache hit")
_ROW = re.compile(r"^\|\s*(NPO|GLRT)[^|]*\|\s*([^|\s]+)\s*\|", re.M)


def run_once(argv: list[str], cache: str) -> dict:
    """One fresh process of ``glrt-jax <argv>`` with the compilation cache at ``cache``."""
    env = dict(os.environ, GLRT_JAX_CACHE=cache, JAX_LOG_COMPILES="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv], env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    marker = [ln for ln in proc.stderr.splitlines() if ln.startswith("@@startup ")]
    if proc.returncode != 0 or not marker:
        raise RuntimeError(f"glrt-jax {' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    inner = json.loads(marker[-1][len("@@startup ") :])

    def total(pattern):
        return sum(float(v) for v in pattern.findall(proc.stderr))

    parts = {
        "import": inner["import"],
        "trace": total(_TRACE),
        "lower": total(_LOWER),
        "compile": total(_COMPILE),
    }
    answers = {name: value for name, value in _ROW.findall(proc.stdout)}
    return dict(
        wall=wall,
        cpu=cpu,
        **parts,
        rest=wall - sum(parts.values()),
        programs=len(_COMPILE.findall(proc.stderr)),
        hits=len(_HIT.findall(proc.stderr)),
        npo=answers.get("NPO", "?"),
        glrt=answers.get("GLRT", "?"),
    )


def run_case(argv: list[str], repeat: int) -> tuple[dict, dict]:
    """(fastest cold run, fastest warm run) over ``repeat`` fresh caches."""
    colds, warms = [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="glrt-jax-cache-") as cache:
            colds.append(run_once(argv, cache))
            warms.append(run_once(argv, cache))
    return min(colds, key=lambda r: r["wall"]), min(warms, key=lambda r: r["wall"])


def table(results: dict) -> str:
    """Markdown table of the runs."""
    lines = [
        "| case | cache | wall s | CPU s | import s | trace s | lower s | compile s | rest s "
        "| programs (cache hits) | NPO | GLRT |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case, runs in results.items():
        for label, r in zip(("cold", "warm"), runs, strict=True):
            lines.append(
                f"| {case} | {label} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['import']:.2f} "
                f"| {r['trace']:.2f} "
                f"| {r['lower']:.2f} | {r['compile']:.2f} | {r['rest']:.2f} "
                f"| {r['programs']} ({r['hits']}) | {r['npo']} | {r['glrt']} |"
            )
    return "\n".join(lines)


def machine() -> str:
    """One line describing the machine and the versions."""
    import jax

    return (
        f"{os.cpu_count()} CPU cores, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, jax {jax.__version__}"
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="fresh caches per case (fastest kept)")
    ap.add_argument("--case", action="append", choices=sorted(CASES), help="default: all")
    ap.add_argument("--markdown", default=None, help="also write the table to this file")
    ap.add_argument(
        "--attack-risk",
        action="store_true",
        help="also the attack-risk rows (report --fpr: TPR at 1e-3, 1e-2, 1e-1 and advantage)",
    )
    ap.add_argument("--library", action="store_true", help="time the library's first calls instead")
    ap.add_argument("--phases", action="store_true", help="with --library: the K-phase rows too")
    args = ap.parse_args(argv)
    if args.library:
        cases = LIBRARY | (LIBRARY_PHASES if args.phases else {})
        text = (
            f"{library_table(args.repeat, cases)}\n\nEach row: the fastest first call of "
            f"{args.repeat} fresh processes (no cache), the best warm call of any. "
            f"Machine: {machine()}.\n"
        )
    else:
        results = {}
        for case in args.case or list(CASES):
            cmd = CASES[case] + (["--fpr"] if args.attack_risk else [])
            results[case] = run_case(cmd, args.repeat)
            print(f"{case}: glrt-jax {' '.join(cmd)}", flush=True)
        text = (
            f"{table(results)}\n\n"
            "cold: empty compilation cache; warm: a second process with the same cache. "
            f"Machine: {machine()}.\n"
        )
    print()
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
