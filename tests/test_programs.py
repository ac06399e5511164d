"""The store of exported engine programs (glrt_jax.enable_cache): a later process loads
them instead of tracing, and gets the same answers; and the programs' tiers (compiled
for latency first, for speed when a later query uses them)."""

import concurrent.futures
import contextlib
import math
import os
import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest
from backends import assert_same_query, on_cpu
from closed_forms import gaussian_epsilon
from jax import export

from glrt_jax import accountant
from glrt_jax._src import composition, programs


@pytest.fixture
def store(tmp_path):
    programs.forget()
    programs.set_store(tmp_path)
    yield tmp_path
    programs.set_store(None)
    programs.forget()


def _query():
    return accountant.schedule_epsilon(2.0, 1.0, 100, 1e-6, points=512, nodes=4096)


def test_stored_programs_are_loaded_back_and_answer_the_same(store, monkeypatch):
    ref = gaussian_epsilon(1e-6, math.sqrt(100) / 2.0)
    first = _query()
    assert float(first.lower) <= ref <= float(first.upper)
    files = sorted(store.glob("*.jaxexport"))
    assert len(files) == 3  # plan, phase sums, bounds

    # A later process: nothing in memory, and exporting (tracing) is not allowed.
    programs.forget()

    def no_export(*args, **kwargs):
        raise AssertionError("a stored program was traced again")

    monkeypatch.setattr(export, "export", no_export)
    again = _query()
    assert_same_query(np.asarray(again), np.asarray(first))


def test_unreadable_entries_are_exported_again(store):
    first = _query()
    for path in store.glob("*.jaxexport"):
        path.write_bytes(b"not a program")
    programs.forget()
    again = _query()
    assert_same_query(np.asarray(again), np.asarray(first))
    assert all(p.stat().st_size > 100 for p in store.glob("*.jaxexport"))


def test_traced_calls_bypass_the_store(store):
    b = jax.jit(lambda s: accountant.schedule_epsilon(s, 1.0, 100, 1e-6).upper)(2.0)
    assert np.isfinite(float(b))
    assert not list(store.glob("*.jaxexport"))


def test_report_rows_with_d_above_one_share_one_program_per_stage(store):
    """NPO does not depend on d: asked with d > 1 (a report's NPO row beside GLRT's), it
    runs in the non-central χ² program's closed-form branch, so the two rows compile
    three programs (plan, phase sums, bounds), not five, and NPO keeps its answer (q = 1:
    the closed-form Gaussian)."""
    ref = gaussian_epsilon(1e-6, math.sqrt(100) / 2.0)
    sizes = dict(points=512, nodes=4096)
    npo = accountant.schedule_epsilon(2.0, 1.0, 100, 1e-6, d=10, **sizes)
    glrt = accountant.schedule_epsilon(2.0, 1.0, 100, 1e-6, d=10, adversary="glrt", **sizes)
    assert len(list(store.glob("*.jaxexport"))) == 3
    assert float(npo.lower) <= ref <= float(npo.upper)
    assert 0.0 < float(glrt.upper) < float(npo.lower)
    assert_same_query(
        np.asarray(npo),
        np.asarray(accountant.schedule_epsilon(2.0, 1.0, 100, 1e-6, **sizes)),
        rtol=1e-12,
    )


def test_enable_cache_honours_the_environment(monkeypatch, tmp_path):
    old = jax.config.jax_compilation_cache_dir
    try:
        monkeypatch.setenv("GLRT_JAX_CACHE", "")
        assert programs.enable_cache() is None
        monkeypatch.setenv("GLRT_JAX_CACHE", str(tmp_path))
        assert programs.enable_cache() == tmp_path
        assert jax.config.jax_compilation_cache_dir == str(tmp_path)
        assert programs._STORE == tmp_path / "programs"
    finally:
        jax.config.update("jax_compilation_cache_dir", old)
        programs.set_store(None)


@pytest.mark.xla_defaults
def test_compiler_options_give_the_same_answers(store):
    """The options for small programs (no fusion emitters) and the command line's (also no
    LLVM optimisation) change the machine code, not the operations: the same bounds as
    XLA's defaults to rounding (ε to about 2e-13 relative, δ ≈ 2e-6 to 1.4e-11: sums in
    another order), ε and δ queries, NPO and GLRT."""
    sizes = dict(points=512, nodes=4096)
    queries = [
        lambda adv: accountant.schedule_epsilon(1.0, 0.01, 100, 1e-5, adversary=adv, **sizes),
        lambda adv: accountant.schedule_delta(1.0, 0.01, 100, 0.5, adversary=adv, **sizes),
    ]

    def answers():
        programs.forget()
        return [np.asarray(q(adv)) for q in queries for adv in ("npo", "glrt")]

    with programs.xla_defaults():
        reference = answers()
    assert {opts for _, opts in _loaded_keys()} == {None}
    for context, options in (
        (programs.quick_compile, programs.QUICK_COMPILE),
        (contextlib.nullcontext, programs.SMALL_PROGRAMS),
    ):
        with context():
            got = answers()
        used = programs._checked(tuple(sorted(options.items())))
        assert {opts for _, opts in _loaded_keys()} == {used}
        for a, b in zip(got, reference, strict=True):
            assert np.all(np.isfinite(a))
            np.testing.assert_allclose(a, b, rtol=1e-9)


def _loaded_keys():
    return [key for fn in programs._ALL for key in fn._loaded]


def test_compiler_options_by_program_size_and_context():
    small = programs._checked(tuple(sorted(programs.SMALL_PROGRAMS.items())))
    quick = programs._checked(tuple(sorted(programs.QUICK_COMPILE.items())))
    assert programs._options_for(100) == small
    assert programs._options_for(programs._SMALL_MAX + 1) is None
    with programs.quick_compile():
        assert programs._options_for(100) == quick
        assert programs._options_for(programs._SMALL_MAX + 1) is None
        with programs.xla_defaults():
            assert programs._options_for(100) is None
    assert programs._options_for(100) == small


def _dp_sgd():
    # Sizes chosen by the engine: the first pass's phase sums and bounds are prepared ahead.
    return accountant.schedule_epsilon(1.1, 0.01, 1000, 1e-5)


@pytest.mark.parametrize("with_store", [True, False], ids=["store", "no-store"])
def test_first_pass_is_prepared_in_the_background(with_store, tmp_path, monkeypatch):
    """A query's first eager call traces its phase sums and bounds in the background while
    the plan compiles (programs.ahead), each program once, compiled with the caller's
    options, and answers as the calls would alone (bit for bit on a CPU)."""
    programs.forget()
    programs.set_store(tmp_path if with_store else None)
    monkeypatch.setattr(composition, "_prepare_first_pass", lambda *a, **k: None)
    try:
        with programs.quick_compile():
            alone = np.asarray(_dp_sgd())
        monkeypatch.undo()
        programs.forget()
        prepared = []
        original = programs._Stored._prepare

        def recording(self, key, options, args, static, ahead):
            prepared.append((self._name.rsplit(".", 1)[-1], ahead, options))
            return original(self, key, options, args, static, ahead)

        monkeypatch.setattr(programs._Stored, "_prepare", recording)
        # The eager calls wait for the background work to register its programs: where the
        # plan is already compiled in this process (the no-store case's first run), the
        # calling thread could otherwise reach the phase sums before the background thread
        # has begun to prepare them, and prepare them itself (a race of the test, not of
        # the engine: either thread's program is the same).
        ahead = programs.ahead

        def settled(fn):
            fut = ahead(fn)
            concurrent.futures.wait([fut])
            return fut

        monkeypatch.setattr(programs, "ahead", settled)
        with programs.quick_compile():
            got = np.asarray(_dp_sgd())
    finally:
        programs.set_store(None)
    quick = programs._checked(tuple(sorted(programs.QUICK_COMPILE.items())))
    assert sorted(prepared) == [
        ("_bounds_stage", True, quick),
        ("_plan_program", True, quick),
        ("_sums_program", True, quick),
    ]
    assert all(
        isinstance(fut.result()[0], programs._Compiling)
        for fn in programs._ALL
        for fut in fn._loaded.values()
    )
    assert_same_query(got, alone)
    programs.forget()


def test_many_phases_prepare_their_first_pass_after_the_plan(monkeypatch):
    """A schedule of many phases (K = 100 here, in two halves) cannot guess its sizes
    before the plan, but once the plan has chosen them its phase sums (the one program of
    both halves) and bounds are traced in the background, so that they compile side by
    side; the answer is the same."""
    rng = np.random.default_rng(2)
    sig, q = rng.uniform(0.8, 1.5, 100), rng.uniform(0.005, 0.02, 100)
    programs.forget()
    monkeypatch.setattr(composition, "_prepare_pass", lambda *a, **k: None)
    alone = np.asarray(accountant.schedule_epsilon(sig, q, 10, 1e-5))
    monkeypatch.undo()
    programs.forget()
    prepared = []
    original = programs._Stored._prepare

    def recording(self, key, options, args, static, ahead):
        prepared.append((self._name.rsplit(".", 1)[-1], ahead))
        return original(self, key, options, args, static, ahead)

    monkeypatch.setattr(programs._Stored, "_prepare", recording)
    ahead = programs.ahead

    def settled(fn):  # (see test_first_pass_is_prepared_in_the_background)
        fut = ahead(fn)
        concurrent.futures.wait([fut])
        return fut

    monkeypatch.setattr(programs, "ahead", settled)
    got = np.asarray(accountant.schedule_epsilon(sig, q, 10, 1e-5))
    # (the plan is compiled by the eager call: its sizes are not known before it; on a
    # CPU the plan's per-phase part and the sums run in halves, one program for both)
    plan = [("_plan_part_program", False), ("_plan_joined_program", False)]
    sums = "_part_sums_program"
    if not on_cpu():
        plan, sums = [("_plan_program", False)], "_sums_program"
    assert prepared[: len(plan) + 2] == [*plan, (sums, True), ("_bounds_stage", True)]
    assert_same_query(got, alone)
    programs.forget()


def test_replans_are_prepared_in_the_background(monkeypatch):
    """N = 10, q = 1e-3, δ = 1e-10: the first pass (4096 nodes) re-plans (one direction,
    more nodes). That pass's phase sums and bounds are prepared in the background too,
    each once, and the answer equals the one of calls that prepare nothing ahead (bit for
    bit on a CPU)."""
    programs.forget()
    monkeypatch.setattr(composition, "_prepare_first_pass", lambda *a, **k: None)
    monkeypatch.setattr(composition, "_prepare_pass", lambda *a, **k: None)
    alone = np.asarray(accountant.schedule_epsilon(1.0, 1e-3, 10, 1e-10))
    monkeypatch.undo()
    programs.forget()
    prepared = []
    original = programs._Stored._prepare

    def recording(self, key, options, args, static, ahead):
        prepared.append((self._name.rsplit(".", 1)[-1], ahead, static.get("J")))
        return original(self, key, options, args, static, ahead)

    monkeypatch.setattr(programs._Stored, "_prepare", recording)
    ahead = programs.ahead

    def settled(fn):  # see test_first_pass_is_prepared_in_the_background
        fut = ahead(fn)
        concurrent.futures.wait([fut])
        return fut

    monkeypatch.setattr(programs, "ahead", settled)
    got = np.asarray(accountant.schedule_epsilon(1.0, 1e-3, 10, 1e-10))
    replan = [(name, on) for name, on, j in prepared if j is not None and j > 4096]
    assert sorted(replan) == [("_bounds_stage", True), ("_sums_program", True)]
    assert_same_query(got, alone)
    programs.forget()


def test_failed_preparations_are_left_to_the_calls(monkeypatch):
    """An error while preparing ahead stays in the background: the eager calls prepare their
    programs themselves and answer."""
    failed = programs.ahead(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failed.result()
    programs.forget()
    original = programs._Stored._prepare

    def failing_ahead(self, key, options, args, static, ahead):
        if ahead:
            raise RuntimeError("no preparation")
        return original(self, key, options, args, static, ahead)

    monkeypatch.setattr(programs._Stored, "_prepare", failing_ahead)
    b = _dp_sgd()
    monkeypatch.undo()
    programs.forget()
    assert_same_query(np.asarray(b), np.asarray(_dp_sgd()))
    programs.forget()


def test_programs_side_by_side_finish_in_their_threads(monkeypatch):
    """``programs.side_by_side`` returns the calls' outputs computed, each waited for in
    its own thread. Returned as dispatched (not yet computed), the halves of a large
    schedule's plan and phase sums sometimes ran one after the other: K = 10⁴ distinct
    phases, GLRT d = 10, 4 of 9 warm calls took 6.1–8.5 s instead of 5.4 s (see
    docs/measurements.md)."""
    if not on_cpu():
        pytest.skip("schedules run in halves on a CPU only")
    ready = []
    side_by_side = programs.side_by_side

    def recording(*fns):
        out = side_by_side(*fns)
        ready.extend(x.is_ready() for x in jax.tree_util.tree_leaves(out))
        return out

    monkeypatch.setattr(programs, "side_by_side", recording)
    rng = np.random.default_rng(0)
    sig, q = rng.uniform(0.8, 1.5, 64), rng.uniform(0.005, 0.02, 64)
    b = accountant.schedule_epsilon(sig, q, np.full(64, 10), 1e-5)
    assert float(b.lower) <= float(b.upper)
    assert len(ready) > 20 and all(ready)  # (the plan's halves, then the phase sums')


def test_queries_from_several_threads():
    """Eager queries from several threads at once, each first call preparing its programs in
    the background and the others waiting for them, give the answers of the same queries
    asked one by one."""
    programs.forget()
    cases = [
        ((1.1, 0.01, 1000, 1e-5), "npo"),
        ((1.1, 0.01, 1000, 1e-5), "glrt"),
        ((0.7, 5e-4, 2000, 1e-6), "npo"),
        ((1.0, 1e-3, 10, 1e-5), "glrt"),
    ] * 2

    def ask(case):
        args, adversary = case
        return np.asarray(accountant.schedule_epsilon(*args, adversary=adversary))

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        together = list(pool.map(ask, cases))
    for got, case in zip(together, cases, strict=True):
        assert_same_query(got, ask(case))
    programs.forget()


@programs.stored()
def _twice(x):
    return 2.0 * x + 1.0


# The same program, said to be large (XLA's defaults; tiered below programs._TIER_MAX).
@programs.stored(size=lambda x: programs._SMALL_MAX + 1)
def _twice_large(x):
    return 2.0 * x + 1.0


@pytest.fixture
def tiered(monkeypatch):
    """Tiered compilation on (the quick suite turns it off, conftest.py); CPU only (the
    tiers are two sets of the CPU compiler's options)."""
    if not on_cpu():
        pytest.skip("tiered compilation is for the CPU's compiler options")
    monkeypatch.setenv("GLRT_JAX_TIERED", "1")
    programs.forget()
    yield
    programs.settle()
    programs.forget()


def _tiers_of(fn):
    """The loaded programs of a stored function, as :class:`programs._Tiered` (asserted)."""
    loaded = [fut.result()[0] for fut in fn._loaded.values()]
    assert loaded and all(isinstance(call, programs._Tiered) for call in loaded)
    return loaded


def test_a_program_is_compiled_for_speed_when_a_later_query_uses_it(tiered):
    """A small program's first call runs its quick compilation; calls inside the same
    query, however many, do not start the compilation for speed; the first call of a
    later query does, in the background, and once it is done the calls run it."""
    quick = programs._checked(tuple(sorted(programs.QUICK_COMPILE.items())))
    small = programs._checked(tuple(sorted(programs.SMALL_PROGRAMS.items())))
    assert programs._tiers(small, 100) == (quick, small)

    @programs.query
    def one_query(x):
        return [float(_twice(np.float64(x))) for _ in range(3)]

    assert one_query(2.0) == [5.0] * 3
    (call,) = _tiers_of(_twice)
    assert call._later is None
    assert one_query(3.0) == [7.0] * 3
    assert call._later is not None
    programs.settle()
    assert call._executable() is call._later.result()
    assert float(_twice(np.float64(4.0))) == 9.0
    # Outside any query each call is its own: the second starts the compilation for speed.
    # (A large program's tiers: without the fusion emitters, then XLA's defaults.)
    programs.forget()
    for fn in (_twice, _twice_large):
        fn(np.float64(1.0))
        (call,) = _tiers_of(fn)
        assert call._later is None
        fn(np.float64(1.0))
        assert call._later is not None
    programs.settle()
    (call,) = _tiers_of(_twice_large)
    assert call._later_options is None and call._executable() is call._later.result()
    assert float(_twice_large(np.float64(4.0))) == 9.0


# A large program that compiles first for latency where its static ``fine`` says so (as the
# composition's double-double phase sums do).
@programs.stored(
    static_argnames=("fine",),
    size=lambda x, **_: programs._SMALL_MAX + 1,
    latency_first=lambda *, fine: fine,
)
def _twice_fine(x, *, fine):
    return 2.0 * x + (1.0 if fine else 2.0)


def test_a_large_program_may_ask_to_compile_first_for_latency(tiered, monkeypatch):
    """``latency_first``: a large program's first tier is QUICK_COMPILE instead of
    SMALL_PROGRAMS (its later one XLA's defaults still), per static argument; not beyond
    programs._TIER_MAX, where nothing is tiered."""
    quick = programs._checked(tuple(sorted(programs.QUICK_COMPILE.items())))
    small = programs._checked(tuple(sorted(programs.SMALL_PROGRAMS.items())))
    large = programs._SMALL_MAX + 1
    assert programs._tiers(None, large, quick=True) == (quick, None)
    assert programs._tiers(None, large) == (small, None)
    assert programs._tiers(None, programs._TIER_MAX + 1, quick=True) is None
    seen = []
    tiers = programs._tiers
    monkeypatch.setattr(programs, "_tiers", lambda *a, **k: seen.append(tiers(*a, **k)) or seen[-1])
    assert float(_twice_fine(np.float64(1.0), fine=True)) == 3.0
    assert float(_twice_fine(np.float64(1.0), fine=False)) == 4.0
    assert seen == [(quick, None), (small, None)]


def test_tiers_by_program_size_and_where_they_are_off(tiered, monkeypatch):
    """Small programs compile first for latency, large ones (XLA's defaults) first without
    the fusion emitters up to programs._TIER_MAX, the largest not tiered; no tiers under
    quick_compile (compiled for latency only), xla_defaults, or with GLRT_JAX_TIERED=0."""
    quick = programs._checked(tuple(sorted(programs.QUICK_COMPILE.items())))
    small = programs._checked(tuple(sorted(programs.SMALL_PROGRAMS.items())))
    large = programs._SMALL_MAX + 1
    assert programs._tiers(programs._options_for(100), 100) == (quick, small)
    assert programs._tiers(programs._options_for(large), large) == (small, None)
    assert programs._tiers(None, programs._TIER_MAX + 1) is None
    with programs.quick_compile():
        assert programs._tiers(programs._options_for(100), 100) is None
        assert programs._tiers(programs._options_for(large), large) is None
    with programs.xla_defaults():
        assert programs._tiers(programs._options_for(100), 100) is None
        assert programs._tiers(programs._options_for(large), large) is None
    monkeypatch.setenv("GLRT_JAX_TIERED", "0")
    assert programs._tiers(small, 100) is None
    assert programs._tiers(None, large) is None
    _twice(np.float64(1.0))
    assert not any(isinstance(f.result()[0], programs._Tiered) for f in _twice._loaded.values())


def test_no_second_compilation_near_the_memory_mapping_limit(tiered, monkeypatch):
    """XLA keeps every compiled program's machine code mapped until the process exits: past
    three quarters of the kernel's limit on a process's mappings, programs compile once (no
    tiers, and no compilation for speed of those already tiered), with a warning that names
    the limit; the answers stay."""
    counts = programs._mapping_counts()
    if counts is None:
        pytest.skip("no /proc counts of memory mappings here")
    assert 0 < counts[0] < programs._MAPPINGS_SHARE * counts[1]
    # Far below the limit the count is read again only after the programs that could
    # fill the room left (here: none of them near it).
    monkeypatch.setattr(programs, "_MAPPINGS_SKIP", [0])
    assert not programs._mappings_near_limit()
    room = programs._MAPPINGS_SHARE * counts[1] - counts[0]
    assert programs._MAPPINGS_SKIP[0] == pytest.approx(room / programs._MAPPINGS_PER_PROGRAM, abs=2)
    small = programs._checked(tuple(sorted(programs.SMALL_PROGRAMS.items())))
    assert float(_twice(np.float64(1.0))) == 3.0  # tiered, far from the limit
    (call,) = _tiers_of(_twice)
    monkeypatch.setattr(programs, "_mapping_counts", lambda: (60000, 65530))
    monkeypatch.setattr(programs, "_MAPPINGS_SKIP", [0])
    programs._warn_once.cache_clear()
    with pytest.warns(RuntimeWarning, match="vm.max_map_count"):
        assert programs._tiers(small, 100) is None
    with warnings.catch_warnings():  # (warned once per process)
        warnings.simplefilter("error")
        assert float(_twice(np.float64(2.0))) == 5.0  # a later call: no compilation for speed
    assert call._later is not None and call._later.exception() is not None
    assert call._executable() is call._first.result()


@pytest.mark.xla_defaults
def test_both_tiers_of_a_query_answer_alike(tiered):
    """One phase's ε before and after its programs are compiled for speed: other machine
    code for the same operations, so the same bounds to rounding, and both contain the
    closed form (q = 1). (Under the quick suite's flags both tiers would compile alike.)"""
    ref = gaussian_epsilon(1e-6, math.sqrt(100) / 2.0)

    def ask():
        return np.asarray(accountant.schedule_epsilon(2.0, 1.0, 100, 1e-6))

    first = ask()
    second = ask()  # (the calls of this query start the compilations for speed)
    programs.settle()
    faster = ask()
    calls = [f.result()[0] for fn in programs._ALL for f in fn._loaded.values()]
    tiers = [c for c in calls if isinstance(c, programs._Tiered)]
    assert tiers and all(c._executable() is c._later.result() for c in tiers)
    assert_same_query(second, first)
    assert_same_query(faster, first, rtol=1e-10)
    for b in (first, faster):
        assert b[0] <= ref <= b[2]


_EXIT_SCRIPT = """
import atexit, concurrent.futures, time, jax, numpy as np
jax.config.update("jax_enable_x64", True)

def report():  # registered before the library's handler, so it runs after it
    from glrt_jax._src import programs
    states = [f.cancelled() or f.done() for f in programs._LATER]
    print("cancelled", sum(f.cancelled() for f in programs._LATER), "settled", all(states))

atexit.register(report)
from glrt_jax._src import programs

# Work that keeps the background thread busy for a second: the compilations queue behind it.
busy = concurrent.futures.Future()
programs._start_later(busy, lambda: time.sleep(1.0))
fns = [programs.stored()(lambda x, k=k: x * k + 1.0) for k in range(4)]
for fn in fns:
    for _ in range(2):  # outside any query, the second call starts the compilation for speed
        fn(np.float64(2.0))
print("asked", len(programs._LATER) - 1)
"""


def test_exit_waits_only_for_the_compilation_running(tmp_path):
    """A process that exits with compilations for speed pending cancels those not yet
    started and waits for the work running (JAX's exit handler clears the backends they
    compile for): it exits cleanly, the four compilations queued behind a second's work
    cancelled."""
    if not on_cpu():
        pytest.skip("tiered compilation is for the CPU's compiler options")
    script = tmp_path / "exit.py"
    script.write_text(_EXIT_SCRIPT)
    env = dict(os.environ, GLRT_JAX_TIERED="1", JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert "asked 4" in lines
    (summary,) = [line for line in lines if line.startswith("cancelled")]
    cancelled, settled = summary.split()[1], summary.split()[3]
    assert settled == "True" and int(cancelled) == 4
