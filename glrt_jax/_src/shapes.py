"""Shape buckets: one compilation per size class instead of one per input shape.

The programs of this library (mixture sums, Newton solvers) take seconds to compile,
and ``jax.jit`` compiles once per input shape. Eager calls therefore broadcast their
inputs, flatten them and pad them to a power-of-two length, so that every input shape
of a size class shares one executable. Padding repeats the first element, which is
a valid point whenever the real inputs are (its results are discarded).

The smallest class is :data:`MIN_BUCKET` = 256 points: a size class costs one to twelve
seconds of compilation (the GLRT curves' program the most), while evaluating 256 points
instead of 16 adds a fraction of a millisecond (on a 2-core CPU, ``ncx2.logsf``
0.4 → 0.6 ms, a GLRT ROC curve 2 → 4 ms), so every small call shares one program.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from glrt_jax._src.numerics import float_dtype

MIN_BUCKET = 256


def bucket(n: int, minimum: int = MIN_BUCKET) -> int:
    """The padded length for ``n`` points: the next power of two, at least ``minimum``."""
    return max(minimum, 1 << max(0, (n - 1).bit_length()))


# The composition engine's smallest bucket of phases: schedules of up to PHASE_FLOOR phases
# share one compiled program. Buckets this small are computed one phase at a time (the
# engine's chunk and batch are then 1), so padding phases are skipped one by one and a
# single phase costs as much as it would unpadded.
PHASE_FLOOR = 8


def phase_block(phases: int, block: int) -> int:
    """Phases computed together (vmapped) per step of the engine's scans over phases.

    1 for buckets of at most :data:`PHASE_FLOOR` phases (padding skipped one by one), else
    the largest divisor of ``phases`` up to ``block`` (both powers of two: ``block``).
    """
    return 1 if phases <= PHASE_FLOOR else math.gcd(phases, block)


def vmap_block(fn: Callable, block):
    """``jax.vmap(fn)(block)`` for a block of phases (:func:`phase_block`): a block of one
    phase calls ``fn`` on it directly (its leading axis of 1 added back to the outputs).

    The engine's blocks are single phases for schedules of up to :data:`PHASE_FLOOR`
    phases; a ``vmap`` over one would still batch every operation, and turn each
    ``lax.cond`` whose predicate depends on the phase into a ``select`` that computes
    both branches (the non-central χ² tails of the GLRT with d > 1 are full of them).
    """
    size = jax.tree_util.tree_leaves(block)[0].shape[0]
    if size != 1:
        return jax.vmap(fn)(block)
    out = fn(jax.tree_util.tree_map(lambda v: v[0], block))
    return jax.tree_util.tree_map(lambda v: jnp.expand_dims(v, 0), out)


def pad_phases(sig, q, n, xp=np):
    """Phases padded to ``bucket(K, minimum=PHASE_FLOOR)``: copies of phase 0 composed 0 times.

    ``sig``, ``q``: (K,) floats; ``n``: (K,) integer counts; ``xp``: ``np`` (concrete
    inputs) or ``jnp`` (traced ones). The composition engine skips padding phases.
    """
    pad = bucket(sig.shape[0], minimum=PHASE_FLOOR) - sig.shape[0]
    if pad:
        sig = xp.concatenate([sig, xp.repeat(sig[:1], pad)])
        q = xp.concatenate([q, xp.repeat(q[:1], pad)])
        n = xp.concatenate([n, xp.zeros((pad,), n.dtype)])
    return sig, q, n


def _on_accelerator(a) -> bool:
    return isinstance(a, jax.Array) and any(d.platform != "cpu" for d in a.devices())


def bucketed(fn: Callable, *args, keep_single: bool = True):
    """``fn(*args)`` for an elementwise ``fn`` of 1-D arrays, on padded flat inputs.

    Args:
      fn: maps equal-length 1-D arrays to one array of that length (or a tuple).
      *args: broadcastable array-likes.
      keep_single: a single point keeps its own program (padding it to
        ``MIN_BUCKET`` would cost several times its latency).

    Returns:
      ``fn``'s output(s) in the broadcast shape of ``args``. Traced inputs (inside
      ``jit``, ``vmap`` or a derivative) are only flattened: their shape is already
      fixed by the enclosing transformation.
    """
    if any(isinstance(a, jax.core.Tracer) or _on_accelerator(a) for a in args):
        xp = jnp  # traced, or data that should stay on its device
    else:
        xp = np  # eager jnp ops cost tens of microseconds each
    dtype = float_dtype(*args)
    args = xp.broadcast_arrays(*[xp.asarray(a, dtype) for a in args])
    shape = args[0].shape
    n = math.prod(shape)
    traced = any(isinstance(a, jax.core.Tracer) for a in args)
    size = n if traced or n == 0 or (keep_single and n == 1) else bucket(n)
    flat = [xp.ravel(a) for a in args]
    if size > n:
        flat = [xp.concatenate([f, xp.broadcast_to(f[:1], (size - n,))]) for f in flat]
    out = fn(*flat)
    if isinstance(out, tuple):
        return tuple(o[:n].reshape(shape) for o in out)
    return out[:n].reshape(shape)
