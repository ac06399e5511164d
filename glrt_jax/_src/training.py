"""Privacy accounting inside JAX training loops: a DP-SGD aggregation and a privacy ledger.

What it owns
------------
* :func:`dp_aggregate`: an optax gradient transformation for DP-SGD. It clips each
  example's gradient (any pytree) to L2 norm ``C`` with optax's
  ``per_example_global_norm_clip``, sums, adds ``N(0, (Cσ)²)`` noise per coordinate and
  divides by the batch size (the expected one for Poisson sampling). Unlike
  ``optax.contrib.differentially_private_aggregate`` (a fixed σ, the realised batch
  size as the divisor, no padding mask), the noise multiplier may change at every step
  (a schedule of the step count, or an argument of ``update``), padded examples of a
  Poisson-sampled batch are masked out, and the divisor can be the expected batch size
  ``q·n``, as the accounting of Poisson subsampling assumes.
* :class:`Ledger` and :func:`record`: a pytree carried in the train state that records
  the phases actually run — ``(noise_multiplier, sampling_rate, steps)`` — merging
  consecutive steps with the same ``(σ, q)`` into one phase; jittable and usable in
  ``lax.scan``/``lax.while_loop``.
* :func:`epsilon_spent`, :func:`steps_within_budget`, :func:`noise_multiplier_for_budget`:
  the budget questions, inside or outside ``jit``.

How the 64-bit work is done (float32 programs)
----------------------------------------------
Training programs run with ``jax_enable_x64`` off. The certified accountant needs
float64, so the ledger's questions are answered on the host: a ``jax.pure_callback``
hands the recorded phases to the eager accountant
(:func:`glrt_jax.accountant.schedule_epsilon`), which runs under a thread-local
``jax.enable_x64(True)`` context; the program's x64 setting is never changed. The
answer is the same number the offline accountant gives for the same history (same
sizes, same tolerance), rounded *up* to the caller's float dtype (never below the 64-bit
answer). Answers are memoised per history on the host, so asking every step costs a
dictionary lookup once the history stops changing, and a new history costs one eager
query (tens of milliseconds once compiled; the first query compiles the engine, seconds).
Ask every ``k`` steps to amortise it.

Under ``jax.vmap`` the callbacks run sequentially, one history at a time.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from glrt_jax._src import calibrate, composition, solvers
from glrt_jax._src.validation import check_int, check_range, is_traced

# ---------------------------------------------------------------------------
# DP-SGD aggregation
# ---------------------------------------------------------------------------


class DpAggregateState(NamedTuple):
    """State of :func:`dp_aggregate`: the noise key and the number of updates so far."""

    key: jax.Array
    count: jax.Array


def dp_aggregate(
    l2_norm_clip: float,
    noise_multiplier: float | Callable[[jax.Array], jax.Array] | None = None,
    *,
    key: jax.Array,
    expected_batch_size: float | None = None,
) -> optax.GradientTransformationExtraArgs:
    """DP-SGD aggregation of per-example gradients: clip, sum, add Gaussian noise, average.

    ``update(per_example_grads, state, params=None, *, noise_multiplier=None, mask=None)``
    takes gradients with a leading batch axis (from ``jax.vmap(jax.grad(loss))``) and
    returns ``(Σ_i clip_C(g_i) + N(0, (Cσ)² I)) / B``, with ``clip_C(g) = g·min(1, C/‖g‖)``
    (global norm over the pytree), ``B`` the expected batch size if given, else the
    number of unmasked examples. The noise multiplier ``σ`` is, in order of precedence,
    the ``noise_multiplier`` passed to ``update``, ``noise_multiplier(count)`` if a
    schedule was given, or the constant given. Chain any optax optimiser after it.

    Args:
      l2_norm_clip: ``C > 0``, the per-example L2 clipping norm (the sensitivity of the
        sum).
      noise_multiplier: ``σ ≥ 0`` (noise standard deviation over ``C``), a schedule
        ``count -> σ``, or None (then ``update`` must be given it).
      key: a JAX PRNG key for the noise.
      expected_batch_size: ``q·n`` for Poisson-sampled batches (padded to a fixed size
        and masked); None divides by the realised number of examples.

    Returns:
      An ``optax.GradientTransformationExtraArgs``.

    Example:
      >>> import jax, jax.numpy as jnp, optax
      >>> from glrt_jax import training
      >>> tx = optax.chain(training.dp_aggregate(1.0, 1.1, key=jax.random.key(0)),
      ...                  optax.sgd(0.1))
      >>> params = {"w": jnp.zeros(3)}
      >>> per_example = {"w": jnp.ones((8, 3))}        # 8 examples
      >>> updates, state = tx.update(per_example, tx.init(params), params)
      >>> updates["w"].shape
      (3,)
    """
    check_range("l2_norm_clip", l2_norm_clip, lo=0.0, lo_open=True)
    if noise_multiplier is not None and not callable(noise_multiplier):
        check_range("noise_multiplier", noise_multiplier, lo=0.0)
    if expected_batch_size is not None:
        check_range("expected_batch_size", expected_batch_size, lo=0.0, lo_open=True)

    def init_fn(params):
        del params
        return DpAggregateState(key=key, count=jnp.zeros((), jnp.int32))

    def update_fn(updates, state, params=None, *, noise_multiplier=noise_multiplier, mask=None):
        del params
        if noise_multiplier is None:
            raise ValueError(
                "noise_multiplier: none given to dp_aggregate or to update(); pass one"
            )
        sigma = noise_multiplier(state.count) if callable(noise_multiplier) else noise_multiplier
        leaves, treedef = jax.tree_util.tree_flatten(updates)
        batch = leaves[0].shape[0]
        if mask is not None:
            mask = jnp.asarray(mask)
            leaves = [
                g * mask.reshape((batch,) + (1,) * (g.ndim - 1)).astype(g.dtype) for g in leaves
            ]
            realised = jnp.sum(mask.astype(leaves[0].dtype))
        else:
            realised = batch
        summed, _ = optax.per_example_global_norm_clip(leaves, l2_norm_clip)
        new_key, *keys = jax.random.split(state.key, len(summed) + 1)
        divisor = expected_batch_size if expected_batch_size is not None else realised
        std = l2_norm_clip * sigma
        noised = [
            (s + std * jax.random.normal(k, s.shape, s.dtype)) / divisor
            for s, k in zip(summed, keys, strict=True)
        ]
        out = jax.tree_util.tree_unflatten(treedef, noised)
        return out, DpAggregateState(key=new_key, count=state.count + 1)

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def dp_aggregate_for_budget(
    target_epsilon: float,
    delta: float,
    *,
    steps: int,
    sampling_rate: float,
    l2_norm_clip: float,
    key: jax.Array,
    adversary: str = "npo",
    d: int = 1,
    expected_batch_size: float | None = None,
) -> tuple[optax.GradientTransformationExtraArgs, float]:
    """:func:`dp_aggregate` with the noise multiplier calibrated for a target (ε, δ).

    σ is :func:`glrt_jax.calibrate.noise_multiplier` for ``steps`` Poisson-subsampled
    rounds at ``sampling_rate`` (per-round threat model; NPO, or GLRT with dimension
    ``d``, e.g. the number of model parameters), computed in float64 under a thread-local
    ``jax.enable_x64(True)``: it works in a float32 program and leaves its x64 setting
    alone.

    Args:
      target_epsilon, delta: the budget of the whole run.
      steps, sampling_rate: the run's DP-SGD steps and Poisson sampling rate.
      l2_norm_clip, key, expected_batch_size: as in :func:`dp_aggregate`.
      adversary, d: whose ε meets the target.

    Returns:
      ``(transformation, noise_multiplier)``: record ``noise_multiplier`` in the ledger.

    Example:
      >>> import jax
      >>> from glrt_jax import training
      >>> tx, sigma = training.dp_aggregate_for_budget(
      ...     1.0, 1e-5, steps=1000, sampling_rate=0.01, l2_norm_clip=1.0,
      ...     key=jax.random.key(0))
      >>> round(sigma, 3)
      1.415
    """
    with jax.enable_x64(True):
        sigma = float(
            calibrate.noise_multiplier(
                target_epsilon, delta, steps, sampling_rate, d=d, adversary=adversary
            )
        )
    tx = dp_aggregate(l2_norm_clip, sigma, key=key, expected_batch_size=expected_batch_size)
    return tx, sigma


# ---------------------------------------------------------------------------
# The ledger
# ---------------------------------------------------------------------------


class Ledger(NamedTuple):
    """The phases of a training run so far (a pytree; carry it in the train state).

    Attributes:
      noise_multiplier, sampling_rate: float arrays of shape ``(capacity,)``.
      steps: int32 array ``(capacity,)``: the steps run in each phase.
      phases: int32 scalar: phases in use (the first ``phases`` entries).
      overflow: bool scalar: a new phase did not fit; the ledger then answers ε = inf
        (never an optimistic number).
    """

    noise_multiplier: jax.Array
    sampling_rate: jax.Array
    steps: jax.Array
    phases: jax.Array
    overflow: jax.Array


def init_ledger(capacity: int = 64, dtype=None) -> Ledger:
    """An empty :class:`Ledger` with room for ``capacity`` distinct phases.

    Args:
      capacity: most distinct ``(σ, q)`` phases recorded (consecutive steps with the
        same values share one phase).
      dtype: float dtype of σ and q (default: JAX's default float, float32 unless x64).

    Returns:
      A :class:`Ledger`.
    """
    capacity = check_int("capacity", capacity)
    dtype = jnp.result_type(float) if dtype is None else dtype
    return Ledger(
        noise_multiplier=jnp.ones((capacity,), dtype),
        sampling_rate=jnp.ones((capacity,), dtype),
        steps=jnp.zeros((capacity,), jnp.int32),
        phases=jnp.zeros((), jnp.int32),
        overflow=jnp.zeros((), bool),
    )


def record(ledger: Ledger, noise_multiplier, sampling_rate, steps=1) -> Ledger:
    """The ledger after ``steps`` more steps at ``(noise_multiplier, sampling_rate)``.

    Steps with the same ``(σ, q)`` as the last phase extend it; a change opens a new
    phase. Jittable; ``σ``, ``q`` and ``steps`` may be traced.

    Example:
      >>> import jax.numpy as jnp
      >>> from glrt_jax import training
      >>> led = training.init_ledger(4)
      >>> for sigma in (1.0, 1.0, 0.8):
      ...     led = training.record(led, sigma, 0.01)
      >>> int(led.phases), led.steps.tolist()
      (2, [2, 1, 0, 0])
    """
    cap = ledger.steps.shape[0]
    sig = jnp.asarray(noise_multiplier, ledger.noise_multiplier.dtype)
    q = jnp.asarray(sampling_rate, ledger.sampling_rate.dtype)
    n = jnp.asarray(steps, jnp.int32)
    k = ledger.phases
    last = jnp.maximum(k - 1, 0)
    same = (k > 0) & (ledger.noise_multiplier[last] == sig) & (ledger.sampling_rate[last] == q)
    same = same | (n == 0)  # recording nothing changes nothing
    full = ~same & (k >= cap)
    idx = jnp.where(same, last, jnp.minimum(k, cap - 1))
    write = ~same & ~full
    return Ledger(
        noise_multiplier=jnp.where(
            write, ledger.noise_multiplier.at[idx].set(sig), ledger.noise_multiplier
        ),
        sampling_rate=jnp.where(write, ledger.sampling_rate.at[idx].set(q), ledger.sampling_rate),
        steps=jnp.where(full, ledger.steps, ledger.steps.at[idx].add(n)),
        phases=jnp.where(write, k + 1, k),
        overflow=ledger.overflow | full,
    )


# ---------------------------------------------------------------------------
# Host side: the eager float64 accountant, memoised per history
# ---------------------------------------------------------------------------


def _history(sig, q, n, phases, extra=()):
    k = int(phases)
    sig = [float(v) for v in np.asarray(sig, np.float64)[:k]]
    q = [float(v) for v in np.asarray(q, np.float64)[:k]]
    n = [int(v) for v in np.asarray(n)[:k]]
    for s, r, m in extra:
        sig.append(float(s))
        q.append(float(r))
        n.append(int(m))
    keep = [i for i, m in enumerate(n) if m > 0]
    return tuple(sig[i] for i in keep), tuple(q[i] for i in keep), tuple(n[i] for i in keep)


@functools.lru_cache(maxsize=4096)
def _epsilon64(sig, q, n, delta, adversary, d, neighbouring, tol) -> float:
    """Certified ε upper bound of a history (float64, eager, memoised)."""
    if not n:
        return 0.0
    with jax.enable_x64(True):
        b = composition.schedule_epsilon(
            np.asarray(sig, np.float64),
            np.asarray(q, np.float64),
            np.asarray(n, np.int64),
            float(delta),
            d=d,
            adversary=adversary,
            neighbouring=neighbouring,
            tol=tol,
        )
        return float(b.upper)


def _round_up(x: float, dtype) -> np.ndarray:
    """``x`` in ``dtype``, rounded towards +inf (the pessimistic side)."""
    v = np.asarray(x, dtype)
    if np.isfinite(x) and float(v) < x:
        v = np.nextafter(v, np.asarray(np.inf, dtype))
    return v


def _check_options(adversary, d, neighbouring, tol):
    composition.validate_options(adversary, d, neighbouring)
    composition.validate_sizes(tol, None, None)


def _ledger_fields(ledger: Ledger):
    """The ledger's arrays, in the order the host functions take them."""
    return (
        ledger.noise_multiplier,
        ledger.sampling_rate,
        ledger.steps,
        ledger.phases,
        ledger.overflow,
    )


def _call_host(host, out_dtype, eager, *args):
    """Run ``host`` on concrete values now, or through ``jax.pure_callback`` when traced."""
    if eager:
        return jnp.asarray(host(*args))
    spec = jax.ShapeDtypeStruct((), out_dtype)
    return jax.pure_callback(host, spec, *args, vmap_method="sequential")


def epsilon_spent(
    ledger: Ledger,
    delta,
    *,
    adversary: str = "npo",
    d: int = 1,
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
) -> jax.Array:
    """Certified upper bound on the ε spent by the recorded phases, at ``delta``.

    The same number as the offline accountant
    (``accountant.schedule_epsilon(σ_k, q_k, steps_k, delta, …).upper`` on the recorded
    phases, per-round threat model), rounded up to the ledger's float dtype. Jittable
    (a host callback; see the module docstring), works with x64 off.

    Args:
      ledger: a :class:`Ledger`.
      delta: δ in (0, 1).
      adversary: ``"npo"`` or ``"glrt"``; d: query dimension for GLRT.
      neighbouring, tol: as in :func:`glrt_jax.accountant.schedule_epsilon`.

    Returns:
      A scalar of the ledger's float dtype: ε (0 before any step, inf after an overflow).

    Example:
      >>> import jax
      >>> from glrt_jax import training
      >>> led = training.record(training.init_ledger(), 1.0, 0.01, 1000)
      >>> eps = jax.jit(lambda l: training.epsilon_spent(l, 1e-5))(led)
      >>> round(float(eps), 3)
      1.828
    """
    _check_options(adversary, d, neighbouring, tol)
    dtype = ledger.noise_multiplier.dtype
    eager = not is_traced(ledger, delta)
    if eager:
        check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)

    def host(sig, q, n, phases, overflow, dl):
        if bool(overflow):
            return np.asarray(np.inf, dtype)
        s, r, m = _history(sig, q, n, phases)
        eps = _epsilon64(s, r, m, float(dl), adversary, int(d), neighbouring, tol)
        return _round_up(eps, dtype)

    return _call_host(
        host,
        dtype,
        eager,
        *_ledger_fields(ledger),
        jnp.asarray(delta, dtype),
    )


_MAX_STEPS = 10**9


def steps_within_budget(
    ledger: Ledger,
    target_epsilon,
    delta,
    noise_multiplier,
    sampling_rate,
    *,
    adversary: str = "npo",
    d: int = 1,
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
    max_steps: int = 10**7,
) -> jax.Array:
    """How many more steps at ``(σ, q)`` keep the certified ε within the budget.

    The largest ``n ≤ max_steps`` with ``upper-ε(history + n steps at (σ, q)) ≤ target_epsilon``,
    found by exponential search and bisection on the certified bound itself, so that
    ``n`` fits and ``n + 1`` does not (as evaluated): a loop that runs exactly ``n`` more
    steps stops at the last step within budget, never one past it. Jittable (host
    callback); int32.

    Args:
      ledger: the phases so far.
      target_epsilon: the total budget ε; delta: δ.
      noise_multiplier, sampling_rate: ``(σ, q)`` of the coming steps.
      adversary, d, neighbouring, tol: as in :func:`epsilon_spent`.
      max_steps: the search's upper end (returned when even that many fit).

    Returns:
      An int32 scalar ``n ≥ 0`` (0 when the budget is already spent).

    Example:
      >>> from glrt_jax import training
      >>> led = training.record(training.init_ledger(), 1.0, 0.01, 500)
      >>> n = int(training.steps_within_budget(led, 2.0, 1e-5, 1.0, 0.01))
      >>> n > 500
      True
    """
    _check_options(adversary, d, neighbouring, tol)
    if not isinstance(max_steps, (int, np.integer)) or not 1 <= max_steps <= _MAX_STEPS:
        raise ValueError(f"max_steps must be an integer in [1, {_MAX_STEPS}]; got {max_steps!r}")
    dtype = ledger.noise_multiplier.dtype
    eager = not is_traced(ledger, target_epsilon, delta, noise_multiplier, sampling_rate)
    if eager:
        check_range("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
        check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        check_range("noise_multiplier", noise_multiplier, lo=0.0, lo_open=True)
        check_range("sampling_rate", sampling_rate, lo=0.0, hi=1.0, lo_open=True)

    def host(sig, q, n, phases, overflow, eps, dl, s_new, q_new):
        if bool(overflow):
            return np.asarray(0, np.int32)
        s_new, q_new = float(np.asarray(s_new, dtype)), float(np.asarray(q_new, dtype))
        budget, dl = float(eps), float(dl)

        def fits(m):
            s, r, c = _history(sig, q, n, phases, extra=[(s_new, q_new, m)])
            return _epsilon64(s, r, c, dl, adversary, int(d), neighbouring, tol) <= budget

        if not fits(0):
            return np.asarray(0, np.int32)
        return np.asarray(solvers.largest_fitting(fits, 0, int(max_steps)), np.int32)

    args = (
        *_ledger_fields(ledger),
        jnp.asarray(target_epsilon, dtype),
        jnp.asarray(delta, dtype),
        jnp.asarray(noise_multiplier, dtype),
        jnp.asarray(sampling_rate, dtype),
    )
    return _call_host(host, jnp.int32, eager, *args)


def noise_multiplier_for_budget(
    ledger: Ledger,
    target_epsilon,
    delta,
    sampling_rate,
    steps,
    *,
    adversary: str = "npo",
    d: int = 1,
    neighbouring: str = "add_remove",
    tol: float = 1e-3,
    rtol: float = 1e-4,
) -> jax.Array:
    """The noise multiplier that keeps ``steps`` more steps at rate ``q`` within budget.

    Recalibration after a change of batch size or schedule: the smallest σ found (to
    relative ``rtol``) with ``upper-ε(history + steps at (σ, q)) ≤ target_epsilon``, by bisection
    in log σ on the certified bound; the σ returned was evaluated and fits (rounded up
    to the ledger's dtype). Jittable (host callback).

    Args:
      ledger: the phases so far.
      target_epsilon, delta: the total budget.
      sampling_rate, steps: the coming phase.
      adversary, d, neighbouring, tol: as in :func:`epsilon_spent`.
      rtol: relative accuracy of σ.

    Returns:
      A scalar σ; inf when the recorded phases alone exceed the budget (no σ helps),
      NaN when no σ ≤ 10⁴ fits.

    Example:
      >>> from glrt_jax import training
      >>> led = training.record(training.init_ledger(), 1.0, 0.01, 500)
      >>> sigma = float(training.noise_multiplier_for_budget(led, 2.0, 1e-5, 0.02, 500))
      >>> 0.5 < sigma < 5.0
      True
    """
    _check_options(adversary, d, neighbouring, tol)
    dtype = ledger.noise_multiplier.dtype
    eager = not is_traced(ledger, target_epsilon, delta, sampling_rate, steps)
    if eager:
        check_range("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
        check_range("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        check_range("sampling_rate", sampling_rate, lo=0.0, hi=1.0, lo_open=True)
        check_range("steps", steps, lo=1, integer=True)
    check_range("rtol", rtol, lo=1e-8, hi=0.1)

    def host(sig, q, n, phases, overflow, eps, dl, q_new, n_new):
        if bool(overflow):
            return np.asarray(np.inf, dtype)
        budget, dl, q_new, n_new = float(eps), float(dl), float(q_new), int(n_new)

        def eps_at(s):
            hist = _history(sig, q, n, phases, extra=[(s, q_new, n_new)])
            return _epsilon64(*hist, dl, adversary, int(d), neighbouring, tol)

        s, r, c = _history(sig, q, n, phases)
        if _epsilon64(s, r, c, dl, adversary, int(d), neighbouring, tol) > budget:
            return np.asarray(np.inf, dtype)
        hi = 1.0
        while eps_at(hi) > budget:  # grow until it fits
            hi *= 2.0
            if hi > 1e4:
                return np.asarray(np.nan, dtype)
        lo = hi / 2.0
        while lo > 1e-2 and eps_at(lo) <= budget:  # shrink while it fits
            hi, lo = lo, lo / 2.0
        while hi / lo - 1.0 > rtol:
            mid = math.sqrt(lo * hi)
            if eps_at(mid) <= budget:
                hi = mid
            else:
                lo = mid
        # hi fits as evaluated; in the ledger's dtype it may round down: round up, recheck.
        out = _round_up(hi, dtype)
        while eps_at(float(out)) > budget:
            out = np.nextafter(out, np.asarray(np.inf, dtype))
        return out

    args = (
        *_ledger_fields(ledger),
        jnp.asarray(target_epsilon, dtype),
        jnp.asarray(delta, dtype),
        jnp.asarray(sampling_rate, dtype),
        jnp.asarray(steps, jnp.int32),
    )
    return _call_host(host, dtype, eager, *args)
