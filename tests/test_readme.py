"""The README's Python code blocks run, in order, in one namespace (as a reader pastes them),
and print what the README shows after them."""

import contextlib
import io
import pathlib
import re

from printed import assert_prints

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
# A python block, and the text block right after it (its printed output), if any.
BLOCK = re.compile(r"^```python\n(.*?)^```\n(?:\s*```text\n(.*?)^```)?", re.DOTALL | re.MULTILINE)


def test_readme_python_blocks_run_and_print_what_the_readme_shows():
    blocks = BLOCK.findall(README.read_text(encoding="utf-8"))
    assert blocks, "no ```python blocks found in the README"
    namespace: dict = {}
    for i, (code, shown) in enumerate(blocks):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"README.md block {i + 1}", "exec"), namespace)
        except Exception as exc:  # name the block in the failure
            raise AssertionError(f"README python block {i + 1} failed:\n{code}") from exc
        if shown:
            assert_prints(out.getvalue(), shown, f"README python block {i + 1}")
