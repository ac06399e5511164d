"""Execute the notebooks under notebooks/ in place, so that the site renders real outputs.

Usage::

    python docs/_scripts/execute_notebooks.py                 # every notebook
    python docs/_scripts/execute_notebooks.py batch_evaluation  # the names given

Each notebook runs top to bottom in a fresh Jupyter kernel (nbclient, from the ``[test]``
extra), in its full setting (the quick settings of the tests are switched off), with
notebooks/ as the working directory, and is written back with its outputs. The site
(``mkdocs build``) renders these stored outputs and never executes code.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

import nbclient
import nbformat

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
# Environment variables that select a notebook's quick setting (used by the tests).
QUICK = ("DPSGD_DIGITS_QUICK", "DPSGD_ACCOUNTING_QUICK", "BATCH_EVALUATION_QUICK")


def execute(path: pathlib.Path, timeout: int) -> float:
    """Runs one notebook in a fresh kernel and stores its outputs; returns the seconds taken."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    client = nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook names (default: all)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    args = parser.parse_args()
    for name in QUICK:
        os.environ.pop(name, None)
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.names:
        wanted = {n.removesuffix(".ipynb") for n in args.names}
        paths = [p for p in paths if p.stem in wanted]
        missing = wanted - {p.stem for p in paths}
        if missing:
            raise SystemExit(f"no such notebook: {', '.join(sorted(missing))}")
    for path in paths:
        seconds = execute(path, args.timeout)
        print(f"{path.name}: executed in {seconds:.0f} s", flush=True)


if __name__ == "__main__":
    main()
