"""mkdocs hook: the notebooks under notebooks/ become the pages tutorials/<name>.ipynb.

The notebooks live in notebooks/ (where the tests run them); the site renders their stored
outputs (mkdocs-jupyter with ``execute: false``). They are staged under
build/docs-notebooks/tutorials/ (git ignores build/) and added to the site from there.
Refresh their outputs with ``python docs/_scripts/execute_notebooks.py``.
"""

from __future__ import annotations

import pathlib
import shutil

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
STAGING = ROOT / "build" / "docs-notebooks"


# Before the plugins' on_files, so that mkdocs-jupyter turns these files into pages.
@event_priority(100)
def on_files(files: Files, config) -> Files:
    target = STAGING / "tutorials"
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        uri = f"tutorials/{path.name}"
        if files.get_file_from_path(uri) is not None:
            continue
        shutil.copy2(path, target / path.name)
        files.append(
            File(
                uri,
                src_dir=str(STAGING),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def on_serve(server, config, builder):
    """``mkdocs serve`` rebuilds when a notebook changes."""
    server.watch(str(NOTEBOOKS))
    return server
