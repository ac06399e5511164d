"""Test configuration for tests/ and the docstring examples in glrt_jax/ (float64 on)."""

import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="session", autouse=True)
def _shared_compilation_cache(tmp_path_factory):
    """One on-disk compilation cache for the whole run, shared by the xdist workers.

    The workers' base temporary directories are siblings, so their parent is common
    to the run (and fresh for every run: nothing carries over between runs).
    """
    base = tmp_path_factory.getbasetemp()
    root = base.parent if base.name.startswith("popen-gw") else base
    jax.config.update("jax_compilation_cache_dir", str(root / "jax-cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    yield
