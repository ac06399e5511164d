"""Test configuration for tests/ and the docstring examples in glrt_jax/ (float64 on).

``GLRT_JAX_TEST_X64=0`` leaves 64-bit floats off (JAX's default) for the float32 run:
``pytest -m float32`` then checks what is documented to work in float32.
"""

import os

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
