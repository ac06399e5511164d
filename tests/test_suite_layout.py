"""The placement of the suite's tests on xdist workers (``conftest.py``) names tests that
exist: a renamed file or page would silently lose its grouping (and the time it saves)."""

import pathlib
import re

import conftest

ROOT = pathlib.Path(conftest.__file__).resolve().parent


def test_grouped_tests_exist():
    for key, unit in conftest._TOGETHER.items():
        path, _, rest = key.partition("::")
        assert (ROOT / path).is_file(), key
        assert (ROOT / unit).is_file(), unit
        if rest:
            page = re.fullmatch(r"test_page_python_blocks_run\[(.+)\]", rest)
            assert page and (ROOT / "docs" / page.group(1)).is_file(), key


def test_docstring_examples_run_with_their_tests():
    assert conftest._topic("glrt_jax/_src/profile.py::glrt_jax._src.profile.delta") == (
        "tests/test_profile.py"
    )
    # (followed once through the groups)
    assert conftest._topic("glrt_jax/_src/risk.py::x") == "tests/test_roc.py"
    assert conftest._topic("glrt_jax/_src/cli.py::x") == "glrt_jax/_src/cli.py"
    assert conftest._topic("tests/test_docs.py::test_page_python_blocks_run[index.md]") == (
        "tests/test_docs.py"
    )
