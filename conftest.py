"""Test configuration for tests/ and the docstring examples in glrt_jax/ (float64 on).

``GLRT_JAX_TEST_X64=0`` leaves 64-bit floats off (JAX's default) for the float32 run:
``pytest -m float32`` then checks what is documented to work in float32.
"""

import os
from pathlib import Path

import jax
import pytest

X64 = os.environ.get("GLRT_JAX_TEST_X64", "1") != "0"
jax.config.update("jax_enable_x64", X64)


@pytest.fixture(scope="session", autouse=True)
def _shared_compilation_cache(tmp_path_factory):
    """One on-disk compilation cache for the whole run, shared by the xdist workers.

    The workers' base temporary directories are siblings, so their parent is common
    to the run (and fresh for every run: nothing carries over between runs).
    ``GLRT_JAX_TEST_CACHE`` names a directory instead: ``.ci/run`` gives its two pytest
    runs (float64, then float32) one fresh directory, so the second loads the engine
    programs the first compiled.
    """
    cache = os.environ.get("GLRT_JAX_TEST_CACHE", "")
    if not cache:
        base = tmp_path_factory.getbasetemp()
        root = base.parent if base.name.startswith("popen-gw") else base
        cache = str(root / "jax-cache")
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    # The command line, run in-process by the tests, points JAX at its own cache
    # ($GLRT_JAX_CACHE, default in the home directory): the same fresh one here, so that no
    # test reads programs compiled by an earlier run or leaves any behind.
    os.environ["GLRT_JAX_CACHE"] = cache
    yield


@pytest.fixture(autouse=True)
def _no_program_store_after_the_test():
    """The command line, run in-process, turns on the store of exported programs
    (glrt_jax.enable_cache); later tests in the worker go back to plain jit, the
    library's default, whose compiled programs the workers share."""
    yield
    from glrt_jax._src import programs

    programs.set_store(None)


def pytest_collection_modifyitems(config, items):
    """With x64 off, only the tests marked ``float32`` run (the rest assume float64)."""
    if X64:
        return
    skip = pytest.mark.skip(reason="float64 test: GLRT_JAX_TEST_X64=0 runs the float32 tests")
    for item in items:
        if "float32" not in item.keywords:
            item.add_marker(skip)


# Tests that compile the same programs run on one xdist worker. Each worker traces a
# program again (and compiles it again, where the other worker has not yet put it in the
# shared cache), so a program that two workers need costs twice. The suite runs with
# ``--dist loadfile``; the scheduler below groups by "topic" instead of by file: the
# docstring examples of ``glrt_jax/**/<name>.py`` with ``tests/test_<name>.py``, and
# the files (or pages of the documentation) named in _TOGETHER with the file they share
# programs with. Only the order and placement of the tests change, never what they run.
_ROOT = Path(__file__).parent
_TOGETHER = {
    # the GLRT curves' core (256 and 512 points) and the report's engine programs
    "tests/test_accountant.py": "tests/test_roc.py",
    "tests/test_asymptotics.py": "tests/test_roc.py",
    "tests/test_reproduce.py": "tests/test_roc.py",
    "tests/test_risk.py": "tests/test_roc.py",
    "tests/test_docs.py::test_page_python_blocks_run[getting-started.md]": "tests/test_roc.py",
    # calibration's programs
    "tests/test_docs.py::test_page_python_blocks_run[how-it-works/calibration.md]": (
        "tests/test_calibrate.py"
    ),
    # the non-central χ² programs in float32
    "tests/test_float32.py": "tests/test_ncx2.py",
    # the GLRT privacy profile (ε and δ on 256 points)
    "tests/test_plotting.py": "tests/test_profile.py",
    "tests/test_docs.py::test_page_python_blocks_run[how-it-works/conjugate.md]": (
        "tests/test_profile.py"
    ),
}


def _topic(nodeid: str) -> str:
    """The work unit of a test: the file it shares programs with (see _TOGETHER)."""
    if nodeid in _TOGETHER:
        return _TOGETHER[nodeid]
    path = nodeid.split("::", 1)[0]
    if path.startswith("glrt_jax/"):
        tests = f"tests/test_{path.rsplit('/', 1)[-1]}"
        if (_ROOT / tests).is_file():
            path = tests
    return _TOGETHER.get(path, path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (the suite's default) with work units by :func:`_topic`."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class _ByTopic(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _topic(nodeid)

    return _ByTopic(config, log)
