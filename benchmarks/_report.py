"""Markdown pages from the benchmark scripts (``--markdown PATH``).

Each script prints its tables as Markdown. With ``--markdown PATH`` the same output is
also written to ``PATH`` as a page: a title, one paragraph saying what the script
measures, a provenance block (the command line that regenerates the page, the date, the
versions of jax/jaxlib/numpy and of the peer libraries it used, the device and the
machine in generic terms: CPU count and platform), then everything the script printed.

Usage inside a script::

    from _report import markdown_page

    with markdown_page(args.markdown, "Title", __doc__, peers=["dp-accounting"]):
        main_body()  # prints Markdown tables

``figure(path, caption)`` prints an image link relative to the page (use it for plots
saved next to the page).
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import io
import os
import platform
import shlex
import sys
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PAGE_DIR: list[str] = []


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _relative(path: str) -> str:
    """``path`` relative to the repository root when inside it, else its base name."""
    full = os.path.abspath(path)
    if full.startswith(_ROOT + os.sep):
        return os.path.relpath(full, _ROOT)
    return os.path.basename(full)


def command_line(argv: list[str] | None = None) -> str:
    """The command that reproduces this run, with repository-relative paths."""
    argv = list(sys.argv if argv is None else argv)
    script = "python " + _relative(argv[0])
    rest = [_relative(a) if os.path.isabs(a) else a for a in argv[1:]]
    return " ".join([script, *(shlex.quote(a) for a in rest)])


def machine() -> str:
    """The device and machine in generic words (no host names, no paths)."""
    import jax

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 0
    dev = jax.devices()[0]
    cpu = f"a {cores}-core CPU ({platform.system()} {platform.machine()})"
    if dev.platform == "cpu":
        return f"JAX on the CPU; {cpu}"
    return f"JAX on {dev.platform.upper()} ({dev.device_kind}); host: {cpu}"


def provenance(
    peers: list[str] | tuple[str, ...] = (),
    argv: list[str] | None = None,
    seconds: float | None = None,
    load: tuple[float, float] | None = None,
) -> str:
    """The Markdown provenance block of a page."""
    import jax
    import numpy as np

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    libs = [f"jax {jax.__version__}", f"jaxlib {_version('jaxlib')}", f"numpy {np.__version__}"]
    libs += [f"{p} {_version(p)}" for p in peers if _version(p)]
    libs.append(f"Python {platform.python_version()}")
    return "\n".join(
        [
            '!!! info "How this page was made"',
            "",
            "    Generated (not typed) by",
            "",
            "    ```",
            f"    {command_line(argv)}",
            "    ```",
            "",
            f"    on {now}; {', '.join(libs)}; {machine()}."
            + ("" if seconds is None else f" The run took {seconds:.0f} s.")
            + (
                ""
                if load is None
                else f" 1-minute load average {load[0]:.1f} at its start, {load[1]:.1f} at its end."
            ),
            "    Times are wall-clock seconds on a machine shared with other work: compare",
            "    the ratios measured side by side in one run rather than absolute times",
            "    across pages.",
        ]
    )


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover - not available
        return float("nan")


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, s):
        for st in self.streams:
            st.write(s)
        return len(s)

    def flush(self):
        for st in self.streams:
            st.flush()


@contextlib.contextmanager
def markdown_page(
    path: str | None,
    title: str,
    description: str = "",
    *,
    peers: list[str] | tuple[str, ...] = (),
):
    """Tee stdout into a Markdown page at ``path`` (no-op when ``path`` is ``None``)."""
    if not path:
        yield
        return
    buf = io.StringIO()
    old = sys.stdout
    sys.stdout = _Tee(old, buf)
    _PAGE_DIR.append(os.path.dirname(os.path.abspath(path)))
    t0 = time.perf_counter()
    load0 = _load()
    try:
        yield
    finally:
        sys.stdout = old
        _PAGE_DIR.pop()
    body = buf.getvalue().strip()
    parts = [f"# {title}", ""]
    if description:
        parts += [description.strip(), ""]
    seconds = time.perf_counter() - t0
    parts += [provenance(peers, seconds=seconds, load=(load0, _load())), "", body, ""]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    print(f"\nwrote {_relative(path)}", file=sys.stderr)


def figure(path: str, caption: str) -> None:
    """Print a Markdown image link to ``path``, relative to the page being written."""
    base = _PAGE_DIR[-1] if _PAGE_DIR else os.getcwd()
    rel = os.path.relpath(os.path.abspath(path), base)
    print(f"\n![{caption}]({rel})\n")


def add_argument(parser) -> None:
    """Add the shared ``--markdown PATH`` option to an argparse parser."""
    parser.add_argument(
        "--markdown",
        metavar="PATH",
        default=None,
        help="also write the printed tables as a Markdown page (e.g. docs/benchmarks/NAME.md)",
    )
