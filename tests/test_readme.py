"""The README's Python code blocks run, in order, in one namespace (as a reader pastes them)."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_readme_python_blocks_run():
    blocks = BLOCK.findall(README.read_text(encoding="utf-8"))
    assert blocks, "no ```python blocks found in the README"
    namespace: dict = {}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"README.md block {i + 1}", "exec"), namespace)
        except Exception as exc:  # name the block in the failure
            raise AssertionError(f"README python block {i + 1} failed:\n{code}") from exc
