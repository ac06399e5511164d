"""The README's Python code blocks run, in order, in one namespace (as a reader pastes them),
and print what the README shows after them."""

import contextlib
import io
import pathlib
import re

import numpy as np

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
# A python block, and the text block right after it (its printed output), if any.
BLOCK = re.compile(r"^```python\n(.*?)^```\n(?:\s*```text\n(.*?)^```)?", re.DOTALL | re.MULTILINE)
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _numbers(text):
    return np.array([float(m) for m in NUMBER.findall(text)])


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
            # The same numbers (the README rounds them: 6 significant digits and more), so
            # that an engine change that moves an answer also moves the README's example.
            got, want = _numbers(out.getvalue()), _numbers(shown)
            assert got.shape == want.shape, f"block {i + 1} printed:\n{out.getvalue()}"
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=0, err_msg=out.getvalue())
