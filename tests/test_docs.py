"""The ```python blocks of the documentation pages (docs/**/*.md) run, and print the tables
they show.

Each page's blocks run in order in one namespace of their own (as a reader pastes them into
a fresh session). A block that shows its printed table as comment lines (``# | ... |``)
must print those numbers (see tests/printed.py). A page whose blocks import matplotlib is
skipped only when matplotlib is not installed (it is, with the ``[test]`` extra). Pages
without Python blocks are not collected.
"""

import contextlib
import importlib.util
import io
import pathlib
import re

import pytest
from printed import assert_prints

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
SHOWN = re.compile(r"^# (\|.*)$", re.MULTILINE)  # a printed table, shown as comments


def _blocks(path: pathlib.Path) -> list[str]:
    return BLOCK.findall(path.read_text(encoding="utf-8"))


PAGES = sorted(p for p in DOCS.rglob("*.md") if _blocks(p))


def test_there_are_documented_examples():
    assert PAGES, "no ```python blocks found under docs/"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_python_blocks_run(path):
    blocks = _blocks(path)
    if any("matplotlib" in code for code in blocks):
        if importlib.util.find_spec("matplotlib") is None:
            pytest.skip("matplotlib is not installed")
    namespace: dict = {"__name__": "__docs__"}
    for i, code in enumerate(blocks):
        name = f"{path.relative_to(DOCS)} block {i + 1}"
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, name, "exec"), namespace)
        except Exception as exc:  # name the block in the failure
            raise AssertionError(f"{name} failed:\n{code}") from exc
        shown = SHOWN.findall(code)
        if shown:
            assert_prints(out.getvalue(), "\n".join(shown), name)
