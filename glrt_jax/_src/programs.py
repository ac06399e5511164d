"""A store of exported engine programs, so that a second process skips tracing them.

JAX's persistent compilation cache saves XLA's work, but every process still traces and
lowers each program before it can look the compiled executable up: for the engine's
three programs (plan, phase sums, bounds) that is about a second, most of a warm
``glrt-jax report``. :func:`stored` wraps a jitted function so that its *eager* calls
are served from ``jax.export``: the first call with given static arguments and argument
shapes exports the program (StableHLO) and writes it to the store; a later process
reads it back and calls it, with no tracing of the engine's Python code. Compilation of
the exported module still goes through JAX (and its persistent cache, when one is set).

The store is off until :func:`set_store` names a folder; :func:`enable_cache` (public as
``glrt_jax.enable_cache``, called by the command line) puts it beside JAX's persistent
compilation cache. Calls with tracers (under ``jit``, ``grad``, ``vmap``) always go
to the jitted function itself. An entry is keyed on everything that could change the
program: the function, its static arguments, the arguments' tree, shapes and dtypes,
the backend, the jax version and a digest of this package's source files, so an edit
or an upgrade never reads a stale program. A file that cannot be read is exported again.

Compiler options. On the CPU, eager calls of *small* programs (few phases, the usual grid
and node counts: their run takes milliseconds, their compilation seconds) are compiled
without XLA's MLIR fusion emitters (:data:`SMALL_PROGRAMS`): the engine's three programs
compile about 35 % faster (one-phase query 4.4 → 2.9 s on a 2-core CPU; GLRT with
d = 10 8.2 → 6.5 s; a first ``schedule_epsilon`` in a fresh process 4.9–5.4 → 3.4–3.9 s)
and run about 1 ms slower (a warm one-phase query 5.2 → 5.9–6.4 ms).
Such programs are *tiered* (:class:`_Tiered`): their first compilation also turns LLVM's
optimisation off (:data:`QUICK_COMPILE`), and a later query (:func:`query`, a public entry
point's call) that uses the program again has it compiled with the options above in a
background thread, from the same lowered module; the calls after that run the faster one.
A first ``accountant.epsilon`` report (NPO and GLRT with d = 10) in a fresh process went
5.3–5.7 → 2.6–3.5 s, P1 3.3–3.4 → 1.5–1.6 s, ``calibrate.calibrate`` 7.4–7.5 →
4.6–4.8 s, with the warm calls as fast as before once the second query's compilations are
done (a few seconds; meanwhile 2–4× slower). Large programs up to :data:`_TIER_MAX` (about
a thousand phases) are tiered too, their first compilation without the fusion emitters and
the later one with XLA's defaults: K = 1000 distinct phases, GLRT with d = 10, first call
9.0–9.8 → 6.8–7.9 s, NPO 5.9 → 4.8 s (the second call 1–2 s slower, the steady state the
same). A large program may ask for LLVM's optimisation off in its first tier instead
(``stored(latency_first=...)``): the composition's double-double phase sums, whose
optimisation takes seconds beside a run of under one. ``$GLRT_JAX_TIERED=0`` compiles
each program once, with its own options.
Inside :func:`quick_compile` (the command line's commands run there: a process that
answers a few queries and exits) LLVM's optimisation is off as well
(:data:`QUICK_COMPILE`): 3–4× faster compilation (1.2 s; d = 10: 3.0 s), while a run
takes 22–62 ms instead of 6–16 ms. Large programs (many phases, many nodes), whose run
is what costs, keep XLA's defaults; the composition engine compiles the bounds of a query
of many phases (milliseconds of run beside its phase sums') under :func:`quick_compile`
too (``composition.QUICK_BOUNDS_FROM``). The options change the machine code, not the
operations: the answers agree to rounding (ε to about 2e-13 relative; the tests compare
them), each certified by its own error terms.

Programs prepared ahead. A first call spends as long tracing its programs (Python, one
core) as compiling them (XLA, which releases Python's lock). :func:`preparing` and
:func:`ahead` let a caller trace, lower and start compiling programs before it can run
them, from their inputs' shapes: the composition engine prepares a query's plan, then
traces its phase sums and bounds in a background thread while the plan compiles, and the
three compile side by side. With the shared-direction model's programs (``profile``)
stored too, a first ``glrt-jax report`` went, on a 2-core CPU with the old and new code in
turn: shared 2.2–2.4 → 1.7 s, DP-SGD 3.4–3.5 → 2.9–3.0 s, GLRT with d = 10 7.1–7.3 →
5.4–5.5 s, with the same output; later calls are unchanged.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import contextvars
import functools
import hashlib
import itertools
import os
import queue
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
from jax import export

_STORE: Path | None = None
_SERIALIZABLE: set[type] = set()
_ALL: list[_Stored] = []

# XLA's options for small programs on the CPU, and for the command line's (see the module's
# docstring). A program is small when its size (what its ``size`` function says, from its
# arguments and static arguments: about the numbers it computes per step, e.g. phases ×
# (grid points + nodes); else the numbers in its inputs) is at most _SMALL_MAX: the usual
# queries of up to about 16 phases; not K = 1000 phases nor the re-plans of 2¹⁸ nodes.
SMALL_PROGRAMS = {"xla_cpu_use_fusion_emitters": False}
# Under quick_compile the programs of a first call compile side by side (see ahead): each
# on one thread (README command 5.5-5.8 -> 5.3-5.5 s, less CPU; without LLVM's optimisation
# a module's code generation gains little from being split).
QUICK_COMPILE = SMALL_PROGRAMS | {
    "xla_backend_optimization_level": 0,
    "xla_cpu_parallel_codegen_split_count": 1,
}
_SMALL_MAX = 1 << 17
_QUICK = contextvars.ContextVar("glrt_jax_quick_compile", default=False)
_DEFAULTS = contextvars.ContextVar("glrt_jax_xla_defaults", default=False)
# Programs prepared in the background (see ahead): one thread, started on first use.
_AHEAD = contextvars.ContextVar("glrt_jax_ahead", default=False)
_LOCK = threading.Lock()
_POOLS: dict[str, concurrent.futures.ThreadPoolExecutor] = {}


def set_store(folder: str | os.PathLike | None) -> None:
    """Keep exported programs in ``folder`` (created on first write); ``None``: no store."""
    global _STORE
    _STORE = None if folder is None else Path(folder)


def enable_cache(folder: str | os.PathLike | None = None) -> Path | None:
    """Keep compiled programs on disk, so that later processes answer in about a second.

    Sets JAX's persistent compilation cache (XLA's executables, every one kept however
    fast it compiled) to ``folder`` and this package's store of exported programs (which
    spares a later process the tracing) to ``folder/programs``. The command line calls
    it on start; a script or notebook that asks the accountant eagerly can call it once,
    before its first query. Calls under ``jit`` are unaffected (the caller's program is
    traced and cached as a whole).

    Args:
      folder: where to keep them. ``None``: ``$GLRT_JAX_CACHE`` if set (an empty value
        turns the cache off and returns ``None``), else ``~/.cache/glrt-jax``.

    Returns:
      The folder used, or ``None`` when the cache is off.

    Example:
      A script calls ``glrt_jax.enable_cache()`` once at its start. An empty
      ``$GLRT_JAX_CACHE`` turns the cache off:

      >>> import os
      >>> from unittest import mock
      >>> import glrt_jax
      >>> with mock.patch.dict(os.environ, {"GLRT_JAX_CACHE": ""}):
      ...     print(glrt_jax.enable_cache())
      None
    """
    if folder is None:
        folder = os.environ.get(
            "GLRT_JAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "glrt-jax")
        )
        if not folder:
            return None
    folder = Path(folder).expanduser()
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    set_store(folder / "programs")
    return folder


@contextlib.contextmanager
def _setting(var: contextvars.ContextVar):
    token = var.set(True)
    try:
        yield
    finally:
        var.reset(token)


def quick_compile():
    """Context: compile the stored programs' small eager calls for latency.

    :data:`QUICK_COMPILE` instead of :data:`SMALL_PROGRAMS`; only on the CPU and where this
    XLA knows the options. The programs are kept apart from those compiled otherwise (in
    memory, and in JAX's persistent cache, whose key includes the options).
    """
    return _setting(_QUICK)


def xla_defaults():
    """Context: compile every eager call with XLA's default options (for comparisons)."""
    return _setting(_DEFAULTS)


@functools.cache
def _checked(options: tuple) -> tuple | None:
    """``options`` where this backend takes them, else None (XLA's defaults)."""
    if jax.default_backend() != "cpu":
        return None
    try:
        jax.jit(lambda x: x + 1.0, compiler_options=dict(options)).lower(1.0).compile()
    except Exception:  # an XLA without these options: compile with its defaults
        return None
    return options


def _options_for(size: int) -> tuple | None:
    """Compiler options (a sorted tuple; None: XLA's defaults) for a program of ``size``."""
    if _DEFAULTS.get() or size > _SMALL_MAX:
        return None
    return _checked(tuple(sorted((QUICK_COMPILE if _QUICK.get() else SMALL_PROGRAMS).items())))


def _in_context(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` to run in another thread as in this one: in a copy of this context
    (:func:`quick_compile`, :func:`xla_defaults`, :func:`preparing`) and with this
    thread's x64 setting."""
    context, x64 = contextvars.copy_context(), bool(jax.config.jax_enable_x64)

    def run():
        with jax.enable_x64(x64):
            return fn()

    return functools.partial(context.run, run)


def _pool(name: str, threads: int) -> concurrent.futures.ThreadPoolExecutor:
    """The thread pool ``name``, started on first use."""
    with _LOCK:
        if name not in _POOLS:
            _POOLS[name] = concurrent.futures.ThreadPoolExecutor(threads, f"glrt-jax-{name}")
        return _POOLS[name]


def side_by_side(*fns: Callable[[], object]) -> list:
    """``[fn() for fn in fns]`` in two background threads (two calls at a time), each in
    this thread's context.

    XLA releases Python's lock while it runs a program, and the CPU backend runs a
    program's scan on about one core, so programs called this way run side by side on
    the cores (the composition engine's plan and phase sums of a large schedule, in two
    halves). Each call's outputs are waited for in its thread: returned as dispatched (not
    yet computed), the halves sometimes ran one after the other (K = 10⁴ distinct phases,
    GLRT d = 10, 2-core CPU: 4 of 9 warm calls took 6.1–8.5 s instead of 5.4 s; waited for,
    none of 21). An error in any ``fn`` is raised here. Tracers must not be among the
    calls' inputs: they belong to this thread's transformation.
    """
    pool = _pool("side", 2)
    futures = [pool.submit(_in_context(lambda fn=fn: jax.block_until_ready(fn()))) for fn in fns]
    return [f.result() for f in futures]


def _compiler() -> concurrent.futures.ThreadPoolExecutor:
    """Threads that compile the programs :func:`ahead` prepares (XLA releases Python's
    lock while it compiles, and a small program compiles on about one core)."""
    return _pool("compile", 2)


def preparing():
    """Context: stored programs called here are *prepared*, not run.

    A stored program's call then traces and lowers it (exporting it when the store is
    on) for its arguments' shapes, hands its compilation to a background thread, and
    returns the shapes of its outputs (``jax.ShapeDtypeStruct``), so that programs whose
    inputs are earlier ones' outputs can be prepared in a chain, as the eager calls will
    run them. An eager call that finds its program prepared waits for its compilation;
    one that finds it being prepared (by :func:`ahead`) waits for that.
    """
    return _setting(_AHEAD)


def preparing_now() -> bool:
    """Whether this thread is in :func:`preparing` (stored programs prepared, not run)."""
    return _AHEAD.get()


def _worker() -> concurrent.futures.ThreadPoolExecutor:
    """The thread that runs :func:`ahead`'s work, one at a time."""
    return _pool("ahead", 1)


def ahead(fn: Callable[[], object]) -> concurrent.futures.Future:
    """Run ``fn`` in a background thread, in :func:`preparing`.

    Meanwhile the calling thread compiles and runs: XLA's compilation releases Python's
    lock, and tracing a program is Python's work, so the two overlap. Preparing shapes
    that no call asks for costs the threads' time only; an error in ``fn`` is kept in
    the returned future (the eager calls prepare their programs themselves). The thread
    sees the caller's context (:func:`quick_compile`, :func:`xla_defaults`) and x64
    setting.

    The composition engine uses both on a query's first call: it prepares the plan, then
    traces the phase sums and bounds in the background while the plan compiles (the
    plan's outputs decide their sizes, guessed as the smallest, which most queries of a
    few phases use), so that the three compile side by side.
    """

    def prepare():
        _AHEAD.set(True)  # in this call's copy of the caller's context only
        return fn()

    try:
        return _worker().submit(_in_context(prepare))
    except RuntimeError as err:  # the interpreter is shutting down: nothing is prepared
        return _failed(err)


def _failed(err: BaseException) -> concurrent.futures.Future:
    """A future that holds ``err`` (work that could not be started)."""
    done = concurrent.futures.Future()
    done.set_exception(err)
    return done


def forget() -> None:
    """Drop the programs this process has loaded (the next calls read the store again)."""
    for fn in _ALL:
        fn._loaded.clear()


def register_tuple(cls: type, name: str) -> None:
    """Let a NamedTuple be an argument or a result of a stored program."""
    if cls not in _SERIALIZABLE:
        export.register_namedtuple_serialization(cls, serialized_name=name)
        _SERIALIZABLE.add(cls)


@functools.cache
def _source_digest() -> str:
    """Digest of the package's Python sources (any edit gives new store entries)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@functools.cache
def _warn_once(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _describe(leaf) -> tuple:
    """(dtype, shape, weak type) of an argument, as the program sees it."""
    if isinstance(leaf, np.ndarray | np.generic):  # (jax.typeof is slower on these)
        return jax.dtypes.canonicalize_dtype(leaf.dtype), leaf.shape, False
    aval = jax.typeof(leaf)  # jax arrays, jax.ShapeDtypeStruct, Python scalars
    return aval.dtype, aval.shape, getattr(aval, "weak_type", False)


class _Stored:
    """Eager calls of a jitted function, served by stored exported programs."""

    def __init__(
        self,
        fn: Callable,
        static_argnames: tuple[str, ...],
        size: Callable[..., int] | None,
        latency_first: Callable[..., bool] | None = None,
    ):
        self._fn = fn
        self._size = size
        self._latency_first = latency_first
        self._jitted = jax.jit(fn, static_argnames=static_argnames)
        self._static_argnames = static_argnames
        self._name = f"{fn.__module__}.{fn.__qualname__}"
        # (key, options) -> Future of (call, output shapes or None): pending while a
        # thread prepares it (see ahead).
        self._loaded: dict = {}
        self._jits: dict = {}
        functools.update_wrapper(self, fn)
        _ALL.append(self)

    def __call__(self, *args, **static):
        leaves, tree = jax.tree_util.tree_flatten(args)
        if jax.config.jax_disable_jit or any(isinstance(x, jax.core.Tracer) for x in leaves):
            return self._jitted(*args, **static)
        ahead = _AHEAD.get()
        entry = self._key(leaves, tree, args, static)
        while True:
            with _LOCK:
                fut = self._loaded.get(entry)
                mine = fut is None
                if mine:
                    fut = self._loaded[entry] = concurrent.futures.Future()
            if mine:
                try:
                    fut.set_result(self._prepare(*entry, args, static, ahead))
                except BaseException as err:
                    with _LOCK:
                        self._loaded.pop(entry, None)
                    fut.set_exception(err)
                    raise
            try:
                call, out = fut.result()
                break
            except Exception:  # another thread's preparation failed: this call prepares it
                continue
        if not ahead:
            return call(*args)
        if out is None:  # prepared by an eager call, which traced it: cached
            out = self._traced(entry[1], args, static).out_info
        return out

    def loaded(self, *args, **static) -> bool:
        """Whether an eager call with these arguments is prepared (or being prepared)."""
        leaves, tree = jax.tree_util.tree_flatten(args)
        return self._key(leaves, tree, args, static) in self._loaded

    def _program_size(self, args, static) -> int:
        """The program's size (its ``size`` function's, else the numbers in its inputs)."""
        if self._size is not None:
            return self._size(*args, **static)
        return sum(int(np.prod(np.shape(x))) for x in jax.tree_util.tree_leaves(args))

    def _key(self, leaves, tree, args, static) -> tuple:
        """(key, options): what identifies the program of an eager call."""
        size = self._program_size(args, static)
        key = (
            self._name,
            tuple(sorted(static.items())),
            str(tree),
            tuple(_describe(x) for x in leaves),
            jax.default_backend(),
            str(jax.dtypes.canonicalize_dtype(np.float64)),
        )
        return key, _options_for(size)

    def _prepare(self, key, options, args, static, ahead: bool):
        """(call, output shapes): exported (or traced) and, ahead, lowered. Without the
        store the shapes are known ahead only (an eager call does not trace it twice).
        Tiered programs (:func:`_tiers`) are lowered once and compiled for latency first."""
        quick = self._latency_first is not None and self._latency_first(**static)
        tiers = _tiers(options, self._program_size(args, static), quick)
        if _STORE is not None:
            try:
                exp = self._exported(key, args, static)
                shapes = [
                    jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                    for a in exp.out_avals
                ]
                out = jax.tree_util.tree_unflatten(exp.out_tree, shapes)
                if tiers is not None:
                    plain = jax.jit(exp.call)
                    first = jax.jit(exp.call, compiler_options=dict(tiers[0]))
                    return _Tiered(first, plain.lower(*args), tiers, ahead), out
                opts = None if options is None else dict(options)
                call = jax.jit(exp.call, compiler_options=opts)
                if ahead:
                    call = _Compiling(call, call.lower(*args))
                return call, out
            except Exception as err:  # whatever went wrong, the jitted function is right
                _warn_once(f"glrt-jax: {self._name} is not stored ({err!r}); it is traced")
        if tiers is not None:
            traced = self._jitted.trace(*args, **static)
            first = functools.partial(self._with_options(tiers[0]), **static)
            return _Tiered(first, traced.lower(), tiers, ahead), traced.out_info
        call = functools.partial(self._with_options(options), **static)
        if not ahead:
            return call, None
        traced = self._traced(options, args, static)
        return _Compiling(call, traced.lower()), traced.out_info

    def _traced(self, options, args, static):
        return self._with_options(options).trace(*args, **static)

    def _with_options(self, options: tuple | None) -> Callable:
        """The jitted function, compiled with ``options`` (None: XLA's defaults)."""
        if options is None:
            return self._jitted
        with _LOCK:  # one per options, shared by the threads (its traces are cached on it)
            if options not in self._jits:
                self._jits[options] = jax.jit(
                    self._fn, static_argnames=self._static_argnames, compiler_options=dict(options)
                )
            return self._jits[options]

    def _exported(self, key, args, static) -> export.Exported:
        text = repr((key, jax.__version__, _source_digest()))
        path = _STORE / f"{hashlib.sha256(text.encode()).hexdigest()}.jaxexport"
        with contextlib.suppress(Exception):  # absent, unreadable, older jax: export again
            return export.deserialize(bytearray(path.read_bytes()))
        exp = export.export(jax.jit(functools.partial(self._fn, **static)))(*args)
        data = exp.serialize()
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)  # atomic: a concurrent reader sees all or nothing
        except OSError:  # a read-only or full store still serves this process
            if tmp is not None and os.path.exists(tmp):
                os.remove(tmp)
        return exp


class _Compiling:
    """A program compiled in the background (see :func:`preparing`): a call waits for it,
    and one whose arguments it does not take runs ``call`` (the jitted function) instead.
    (It is lowered before: lowering is Python's work, which would wait for the preparing
    thread's tracing and hold the compilation back.)"""

    def __init__(self, call: Callable, lowered: jax.stages.Lowered):
        self._call = call
        try:
            self._compiled = _compiler().submit(lowered.compile)
        except RuntimeError as err:  # the interpreter is shutting down: the call compiles it
            self._compiled = _failed(err)

    def __call__(self, *args):
        try:
            compiled = self._compiled.result()
        except Exception:  # compiled again (or the error raised) by the jitted function
            return self._call(*args)
        try:
            return compiled(*args)
        except (TypeError, ValueError):  # arguments other than those it was compiled for
            return self._call(*args)


# Large programs (XLA's defaults) are tiered up to this size: beyond it the first tier's
# run (20–45 % slower) and the compilation for speed, which shares the cores with it, cost
# the next call more than the first call gains (K = 10⁴ phases, 2-core CPU: GLRT d = 10
# first call 15.1 → 12.3 s but the second 5.6 → 16.5 s; NPO 9.5 → 9.2 s, 4.3 → 9.9 s).
_TIER_MAX = 1 << 21


def _tiers(
    options: tuple | None, size: int, quick: bool = False
) -> tuple[tuple, tuple | None] | None:
    """``(first, later)`` compiler options (later ``None``: XLA's defaults) of a tiered
    program of ``size`` whose options are ``options``, or None: on a CPU, small programs
    (:data:`SMALL_PROGRAMS`) compile first with :data:`QUICK_COMPILE`, and large ones up
    to :data:`_TIER_MAX` (XLA's defaults) first with :data:`SMALL_PROGRAMS`, or with
    :data:`QUICK_COMPILE` where ``quick`` (the program's ``latency_first``, see
    :func:`stored`); not under :func:`quick_compile` or :func:`xla_defaults`, nor where
    ``$GLRT_JAX_TIERED`` is ``0``."""
    if _QUICK.get() or _DEFAULTS.get() or os.environ.get("GLRT_JAX_TIERED", "1") == "0":
        return None
    if options is None and size > _TIER_MAX:
        return None
    if _mappings_near_limit():
        return None
    first = QUICK_COMPILE if options is not None or quick else SMALL_PROGRAMS
    first = _checked(tuple(sorted(first.items())))  # (None off the CPU)
    return None if first is None or first == options else (first, options)


# Memory mappings. XLA keeps the machine code of every program it compiles on the CPU
# mapped until the process exits (freeing a compiled executable does not unmap it), a
# few pages per kernel: an engine query of a new shape (phases bucket, sizes, tolerance)
# adds about 400–900 mappings, and a process past the kernel's limit
# (``vm.max_map_count``, 65530 by default on Linux) fails to compile ("LLVM compilation
# error: Cannot allocate memory") and crashes. Measured on a 2-core CPU: a sweep of
# random schedules in one process crashed after about 40 of them; the second, tiered
# compilations were about a third of its mappings (GLRT_JAX_TIERED=0: 5118 → 3352 after
# eight queries of new shapes). Past _MAPPINGS_SHARE of the limit, programs compile once
# (no tiers) and a warning names the limit.
_MAPPINGS_SHARE = 0.75


def _mapping_counts() -> tuple[int, int] | None:
    """(memory mappings of this process, the kernel's limit), or None where unknown."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
        with open("/proc/self/maps", "rb") as f:
            count = sum(1 for _ in f)
    except (OSError, ValueError):
        return None
    return count, limit


def _mappings_near_limit() -> bool:
    """Whether this process's memory mappings passed :data:`_MAPPINGS_SHARE` of the limit
    (asked where a program is compiled); warns once.

    Reading ``/proc/self/maps`` takes about 4 ms at a few thousand mappings and 50 ms at
    40000, so the count is read again only after as many further programs as could add
    the mappings left below the share (at most :data:`_MAPPINGS_PER_PROGRAM` each)."""
    with _LOCK:
        if _MAPPINGS_SKIP[0] > 0:
            _MAPPINGS_SKIP[0] -= 1
            return False
    counts = _mapping_counts()
    if counts is None:
        return False
    room = _MAPPINGS_SHARE * counts[1] - counts[0]
    if room > 0:
        with _LOCK:
            _MAPPINGS_SKIP[0] = int(room // _MAPPINGS_PER_PROGRAM)
        return False
    _warn_once(
        "glrt_jax: this process holds more than three quarters of the memory mappings the "
        f"kernel allows it (vm.max_map_count = {counts[1]}): XLA keeps the machine code of "
        "every compiled program mapped, and a process past the limit crashes when it "
        "compiles again. Programs are no longer compiled a second time for speed. Raise the "
        "limit (e.g. `sysctl -w vm.max_map_count=262144`), or run sweeps over many schedule "
        "shapes in separate processes."
    )
    return True


# Programs compiled before the count is read again, and the most mappings one adds (the
# engine's largest seen here: a few hundred; a query of a new shape compiles several).
_MAPPINGS_SKIP = [0]
_MAPPINGS_PER_PROGRAM = 1000


# The query an eager call belongs to (see query); None outside any.
_QUERY = contextvars.ContextVar("glrt_jax_query", default=None)
_QUERIES = itertools.count(1)
# Compilations for speed (see _Tiered): futures in the order started, and their queue.
_LATER: list[concurrent.futures.Future] = []
_LATER_QUEUE: queue.SimpleQueue = queue.SimpleQueue()
_LATER_THREAD: list[threading.Thread] = []


def _later_worker() -> None:
    """Runs the compilations for speed one at a time (a daemon thread: see _at_exit)."""
    while True:
        fut, fn = _LATER_QUEUE.get()
        if not fut.set_running_or_notify_cancel():  # cancelled at exit
            continue
        try:
            fut.set_result(fn())
        except BaseException as err:  # kept in the future: the program keeps its first tier
            fut.set_exception(err)


def _start_later(fut: concurrent.futures.Future, fn: Callable[[], object]) -> None:
    """``fn()`` (a compilation for speed) in the background thread, its outcome in ``fut``."""
    with _LOCK:
        if not _LATER_THREAD:
            worker = threading.Thread(target=_later_worker, name="glrt-jax-later", daemon=True)
            worker.start()
            _LATER_THREAD.append(worker)
        _LATER.append(fut)
    _LATER_QUEUE.put((fut, fn))


@atexit.register
def _at_exit() -> None:
    """At exit no compilation for speed starts, and the one running (XLA's, with Python's
    lock released) is waited for: JAX's own exit handler, which runs after this one
    (registered before it), clears the backends it compiles for. A process that exits
    after two queries waits at most for one program's compilation."""
    with _LOCK:
        pending = list(_LATER)
    for fut in pending:
        fut.cancel()
    concurrent.futures.wait(pending)


def query(fn: Callable) -> Callable:
    """Decorator: the calls of ``fn`` are queries (a public entry point's eager call).

    A tiered program (see :class:`_Tiered`) compiled in one query is compiled for speed
    when a later query calls it; the stored programs' calls inside one query, however
    many (a calibration's search, the re-plans of an ε), count as that one. Nested
    queries are the outermost one; a stored program called outside any query is its own.
    The background threads of a query (:func:`side_by_side`, :func:`ahead`) see its
    context, and with it the query.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _QUERY.get() is not None:
            return fn(*args, **kwargs)
        token = _QUERY.set(next(_QUERIES))
        try:
            return fn(*args, **kwargs)
        finally:
            _QUERY.reset(token)

    return wrapper


def settle() -> None:
    """Wait for the compilations for speed started so far (see :class:`_Tiered`): the
    calls after it run the programs compiled for speed. For benchmarks of warm calls."""
    while True:
        with _LOCK:
            pending = [f for f in _LATER if not f.done()]
            _LATER[:] = pending
        if not pending:
            return
        concurrent.futures.wait(pending)


class _Tiered:
    """An eager program compiled twice: for latency now, for speed when used again.

    The first compilation takes the first options of :func:`_tiers` (a small program
    :data:`QUICK_COMPILE`, LLVM's optimisation off: 3–4× faster to compile, 2–3× slower
    to run; a large one :data:`SMALL_PROGRAMS`); a call from a later query
    (:func:`query`) than the one that compiled it starts the compilation with the
    program's own options in a background thread, from the same lowered module, and the
    calls after it is done run that one. A process that asks once pays only the
    quick compilation; one that keeps asking (a training loop, a sweep) gets the fast
    program a few seconds after its second query. Both are the same operations: the
    answers agree to rounding (each certified by its own error terms).

    Compilations for speed run one at a time, and none starts once the interpreter is
    shutting down (a process that exits waits only for one already running, :func:`_at_exit`).
    """

    def __init__(self, fallback: Callable, lowered: jax.stages.Lowered, tiers, background):
        self._fallback = fallback  # the jitted function with the first options
        self._lowered = lowered
        self._later_options = None if tiers[1] is None else dict(tiers[1])
        self._query = _QUERY.get()  # the query that compiles it (None: outside any)
        self._calls = 0
        self._later: concurrent.futures.Future | None = None
        if background:  # prepared ahead (see preparing)
            try:
                self._first = _compiler().submit(lowered.compile, dict(tiers[0]))
            except RuntimeError as err:  # shutting down: the call compiles it
                self._first = _failed(err)
        else:
            self._first = concurrent.futures.Future()
            self._first.set_result(lowered.compile(dict(tiers[0])))

    def _compile_later(self):
        lowered, self._lowered = self._lowered, None  # (compiled once: not kept after)
        return lowered.compile(self._later_options)

    def _executable(self):
        later = self._later
        if later is not None and later.done() and later.exception() is None:
            return later.result()
        if later is None:
            number = _QUERY.get()
            start = None
            with _LOCK:
                self._calls += 1
                # (outside any query each call is its own: the second is a later one)
                again = self._calls > 1 if number is None else number != self._query
                if again and self._later is None:
                    start = self._later = concurrent.futures.Future()
            if start is not None:
                if _mappings_near_limit():  # the first tier stays (see _MAPPINGS_SHARE)
                    start.set_exception(RuntimeError("memory mappings near the limit"))
                else:
                    _start_later(start, self._compile_later)
        return self._first.result()

    def __call__(self, *args):
        try:
            executable = self._executable()
        except Exception:  # its compilation failed: the jitted function compiles it again
            return self._fallback(*args)
        try:
            return executable(*args)
        except (TypeError, ValueError):  # arguments other than those it was compiled for
            return self._fallback(*args)


def stored(
    *,
    static_argnames: tuple[str, ...] = (),
    size: Callable[..., int] | None = None,
    latency_first: Callable[..., bool] | None = None,
) -> Callable[[Callable], _Stored]:
    """Decorator: ``jax.jit(fn, static_argnames=...)`` whose eager calls use the store.

    ``size(*args, **static)``: the program's size for the choice of compiler options
    (about the numbers it computes per step); default: the numbers in its inputs.
    ``latency_first(**static)``: whether a large tiered program (see :func:`_tiers`)
    compiles first with :data:`QUICK_COMPILE` rather than :data:`SMALL_PROGRAMS`: for code
    whose optimisation takes seconds beside a run of a fraction of one.
    """
    return lambda fn: _Stored(fn, tuple(static_argnames), size, latency_first)
