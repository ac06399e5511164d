"""Regenerate the benchmark pages of the documentation from the scripts in benchmarks/.

Usage:
    python benchmarks/make_docs.py [--only NAME ...] [--skip NAME ...] [--list]

Runs each benchmark script with modest sizes and ``--markdown docs/benchmarks/<name>.md``
(the comparison with peer libraries, ``peers.py``, writes ``docs/comparison.md``), one
after the other, then writes ``docs/benchmarks/index.md`` linking the pages that exist.
Nothing on these pages is typed by hand: each carries the command that regenerates it.
``--only``/``--skip`` select pages by name (see ``--list``); the index is always rewritten
from the pages present.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PAGES_DIR = os.path.join("docs", "benchmarks")

# (name, script, arguments, page (repository-relative), what it measures)
PAGES = [
    (
        "comparison",
        "peers.py",
        ["--limit", "60", "--save-rows", os.path.join("build", "peers_rows.pkl")],
        os.path.join("docs", "comparison.md"),
        "glrt-jax beside dp_accounting, prv_accountant, autodp, Opacus (with the `opacus` "
        "extra), jax_privacy and riskcal on the same DP-SGD cases: features, ε, time, "
        "attack risk",
    ),
    (
        "composition",
        "composition.py",
        ["--quick", "--repeat", "5", "--plot", os.path.join(PAGES_DIR, "composition_time.png")],
        os.path.join(PAGES_DIR, "composition.md"),
        "certified ε of long runs (N up to 10⁷) and K-phase schedules against dp_accounting "
        "and prv_accountant, with the time-against-N plot",
    ),
    (
        "certify",
        "certify.py",
        [],
        os.path.join(PAGES_DIR, "certify.md"),
        "certified bounds against exact references (closed forms, 50-digit mpmath) across "
        "σ, q, N and δ, and a map of where the default tolerance is met",
    ),
    (
        "calibrate",
        "calibrate.py",
        ["--repeats", "2", "--batch", "16"],
        os.path.join(PAGES_DIR, "calibrate.md"),
        "σ for a target (ε, δ) against dp_accounting's calibration",
    ),
    (
        "profile",
        "profile.py",
        ["--n", "100000", "--n-peer", "100"],
        os.path.join(PAGES_DIR, "profile.md"),
        "one-point latency and throughput of δ(ε), ε(δ); NPO ε(δ) against dp_accounting and autodp",
    ),
    (
        "ncx2",
        "ncx2.py",
        ["--n", "100000", "--nq", "2000"],
        os.path.join(PAGES_DIR, "ncx2.md"),
        "the non-central χ² kernels against SciPy and TFP: speed and accuracy",
    ),
    (
        "schedule_search",
        "schedule_search.py",
        [],
        os.path.join(PAGES_DIR, "schedule_search.md"),
        "σ schedules found by gradient under a certified budget",
    ),
    (
        "ledger",
        "ledger.py",
        ["--steps", "1000", "--every", "100", "10"],
        os.path.join(PAGES_DIR, "ledger.md"),
        "cost of the privacy ledger in a float32 jitted DP-SGD step",
    ),
    (
        "audit",
        "audit.py",
        ["--draws", str(1 << 22), "--sufficient-games", str(1 << 20), "--repeats", "2"],
        os.path.join(PAGES_DIR, "audit.md"),
        "Monte Carlo membership-inference games against plain NumPy",
    ),
    (
        "startup",
        "startup.py",
        ["--repeat", "2"],
        os.path.join(PAGES_DIR, "startup.md"),
        "time to the first `glrt-jax report` in a fresh process, cold and warm cache",
    ),
    (
        "device",
        "device.py",
        [],
        os.path.join(PAGES_DIR, "device.md"),
        "the composition engine on a GPU: one query, many phases, jit(vmap) batches, "
        "jit(grad) and calibration (made on a GPU machine; skipped elsewhere)",
    ),
]
# Pages that describe a GPU: regenerated only where JAX's default backend is one (elsewhere
# the page present is kept).
GPU_PAGES = {"device"}


# Titles for pages whose script writes a bare table (no "# " heading of its own).
TITLES = {"startup": "Start-up: the first answer in a fresh process"}


def _add_heading(name, page, cmd, seconds):
    """Give a page written without a heading one, with the provenance block."""
    full = os.path.join(ROOT, page)
    with open(full, encoding="utf-8") as f:
        text = f.read()
    if text.lstrip().startswith("# "):
        return
    sys.path.insert(0, HERE)
    from _report import provenance

    title = TITLES.get(name, name)
    head = f"# {title}\n\n{provenance(argv=cmd[1:], seconds=seconds)}\n\n"
    with open(full, "w", encoding="utf-8") as f:
        f.write(head + text)


def _backend():
    """JAX's default backend in a fresh interpreter ("cpu", "gpu", ...)."""
    out = subprocess.run(
        [sys.executable, "-c", "import jax; print(jax.default_backend())"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return out.stdout.strip() or "unknown"


def _command(script, args, page):
    return ["python", f"benchmarks/{script}", *args, "--markdown", page]


def _title(path):
    with open(path, encoding="utf-8") as f:
        first = f.readline().strip()
    return first.lstrip("# ").strip() or os.path.basename(path)


def _took(path):
    with open(path, encoding="utf-8") as f:
        m = re.search(r"The run took (\d+) s", f.read())
    return f"{m.group(1)} s" if m else "–"


def write_index():
    rows = []
    for _name, script, args, page, what in PAGES:
        full = os.path.join(ROOT, page)
        if not os.path.exists(full):
            continue
        link = os.path.relpath(page, PAGES_DIR).replace(os.sep, "/")
        cmd = " ".join(_command(script, args, page))
        rows.append(f"| [{_title(full)}]({link}) | {what} | `{cmd}` | {_took(full)} |")
    text = "\n".join(
        [
            "# Benchmarks",
            "",
            "Every table and plot in this section is written by a script in `benchmarks/`, "
            "which runs glrt-jax and its peers side by side in one process; no number here is "
            "typed by hand. Each page starts with the exact command that regenerates it, the "
            "date, the library versions and the machine. The published pages were made on a "
            "2-core CPU shared with other work (the GPU page on one NVIDIA H100): read the "
            "ratios measured in one run, not absolute times across pages.",
            "",
            "Regenerate them all (the run times are in the table; they add up to about an hour on "
            "a busy 2-core CPU) with",
            "",
            "```",
            "pip install -e '.[bench,plot]'",
            "python benchmarks/make_docs.py",
            "```",
            "",
            "or one page with `python benchmarks/make_docs.py --only NAME`.",
            "",
            "| page | what it measures | command | run time |",
            "|---|---|---|---|",
            *rows,
            "",
        ]
    )
    path = os.path.join(ROOT, PAGES_DIR, "index.md")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(path, ROOT)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", default=None, metavar="NAME")
    ap.add_argument("--skip", nargs="+", default=[], metavar="NAME")
    ap.add_argument("--list", action="store_true", help="list the pages and exit")
    args = ap.parse_args(argv)
    names = [p[0] for p in PAGES]
    if args.list:
        for name, script, a, page, _ in PAGES:
            print(f"{name:16s} {' '.join(_command(script, a, page))}")
        return 0
    for n in (args.only or []) + args.skip:
        if n not in names:
            ap.error(f"unknown page {n!r}; one of {', '.join(names)}")
    failed = []
    t_all = time.perf_counter()
    backend = None
    for name, script, a, page, _ in PAGES:
        if (args.only and name not in args.only) or name in args.skip:
            continue
        if name in GPU_PAGES:
            backend = backend or _backend()
            if backend != "gpu":
                print(f"== {name}: needs a GPU (JAX's backend is {backend}), skipped", flush=True)
                continue
        if not os.path.exists(os.path.join(HERE, script)):
            print(f"== {name}: benchmarks/{script} not found, skipped", flush=True)
            continue
        cmd = _command(script, a, page)
        print(f"== {name}: {' '.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, *cmd[1:]], cwd=ROOT)
        seconds = time.perf_counter() - t0
        print(f"== {name}: exit {rc} after {seconds:.0f} s", flush=True)
        if rc:
            failed.append(name)
        elif os.path.exists(os.path.join(ROOT, page)):
            _add_heading(name, page, cmd, seconds)
    write_index()
    print(f"all done in {time.perf_counter() - t_all:.0f} s; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
