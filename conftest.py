"""Test configuration for tests/ and the docstring examples in glrt_jax/ (float64 on).

``GLRT_JAX_TEST_X64=0`` leaves 64-bit floats off (JAX's default) for the float32 run:
``pytest -m float32`` then checks what is documented to work in float32.

The suite compiles for its own speed: XLA's CPU compiler without LLVM's optimisation and
without its fusion emitters (:data:`QUICK_XLA_FLAGS`, the options of the command line's
``programs.quick_compile``), which compiles about 3× faster; the suite spends most of its
time compiling. The operations are the same, the machine code differs; the answers agree
to rounding (``tests/test_programs.py`` compares them). ``GLRT_JAX_TEST_XLA=defaults``
keeps XLA's defaults, as a user's program compiles: ``.ci/run`` runs the float32 tests so,
and the tests marked ``xla_defaults`` (those that compare against XLA's defaults), which
the quick suite skips.
"""

import os
from pathlib import Path

import pytest

X64 = os.environ.get("GLRT_JAX_TEST_X64", "1") != "0"
QUICK_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
_CODEGEN = os.environ.get("GLRT_JAX_TEST_XLA", "quick")
if _CODEGEN not in ("quick", "defaults"):
    raise ValueError(f"GLRT_JAX_TEST_XLA must be 'quick' or 'defaults', not {_CODEGEN!r}")
XLA_DEFAULTS = _CODEGEN == "defaults"


def _without_quick_flags(flags: str) -> list[str]:
    return [f for f in flags.split() if f not in QUICK_XLA_FLAGS]


# Before JAX starts its backend, which reads XLA_FLAGS once (the xdist workers inherit the
# variable and load this file again: the flags are set once).
if not XLA_DEFAULTS:
    os.environ["XLA_FLAGS"] = " ".join(
        [*_without_quick_flags(os.environ.get("XLA_FLAGS", "")), *QUICK_XLA_FLAGS]
    )
    # Under the quick flags a small program's two tiers (programs._Tiered) compile to the
    # same machine code: compiling it again for speed would only cost the suite time. The
    # tests of the tiers turn them on themselves; the XLA-defaults run keeps them.
    os.environ["GLRT_JAX_TIERED"] = "0"

import jax  # noqa: E402

jax.config.update("jax_enable_x64", X64)


def other_codegen_env() -> dict[str, str]:
    """The environment for a subprocess that compiles the same programs into other
    machine code than this process: XLA's defaults under the quick flags, LLVM's
    optimisation off under XLA's defaults."""
    flags = _without_quick_flags(os.environ.get("XLA_FLAGS", ""))
    if XLA_DEFAULTS:
        flags.append("--xla_backend_optimization_level=0")
    env = dict(os.environ, XLA_FLAGS=" ".join(flags))
    # The child compiles by its own flags, not those of this suite's run.
    env.pop("GLRT_JAX_TEST_XLA", None)
    return env


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


@pytest.fixture
def engine_one_round(monkeypatch):
    """Eager NPO queries of one round go through the composition engine, not the exact
    one-round path (``composition.EXACT_ONE_ROUND``): for the tests of the engine's own
    answers there, where one round is its hardest case (heavy tails, a near-atom)."""
    from glrt_jax._src import composition

    monkeypatch.setattr(composition, "EXACT_ONE_ROUND", False)


def pytest_collection_modifyitems(config, items):
    """With x64 off, only the tests marked ``float32`` run (the rest assume float64).
    Under the quick flags, the tests marked ``xla_defaults`` are skipped."""
    float64 = pytest.mark.skip(reason="float64 test: GLRT_JAX_TEST_X64=0 runs the float32 tests")
    defaults = pytest.mark.skip(reason="needs XLA's defaults: GLRT_JAX_TEST_XLA=defaults")
    for item in items:
        if not X64 and "float32" not in item.keywords:
            item.add_marker(float64)
        elif not XLA_DEFAULTS and "xla_defaults" in item.keywords:
            item.add_marker(defaults)


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
