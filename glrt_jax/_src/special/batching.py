"""Batching of the elementwise kernels: sequential chunks, sized per platform.

Owns the chunked map that every ncx2 kernel runs under (:func:`chunked`) and the chunk
sizes: cache-sized on CPU, so a batch of millions of points streams through the while
loops without round-trips to main memory, and millions of points on accelerators,
where each chunk's loop iterations cost kernel launches. The size is read when a
program is traced (``jax.clear_caches()`` after changing :data:`CHUNK`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax.numpy as jnp
from jax import lax

CHUNK = 4096  # points per chunk on CPU
CHUNK_ACCEL = 1 << 22  # on GPU/TPU: ~30 MiB per float64 state array


def map_chunks(fn: Callable, chunk: int, *flat):
    """Run ``fn`` over 1-D arrays in sequential chunks of at most ``chunk`` elements.

    The chunks are balanced (their number is the least that respects ``chunk``,
    their lengths differ by padding of fewer elements than there are chunks), so
    a size just above a multiple of ``chunk`` does not pay for a nearly empty one.
    """
    size = flat[0].shape[0]
    if size <= chunk:
        return tuple(fn(*flat))
    n_chunks = -(-size // chunk)
    chunk = -(-size // n_chunks)
    pad = n_chunks * chunk - size
    # Pad with a copy of the first element: a valid, cheap point.
    padded = [jnp.concatenate([f, jnp.broadcast_to(f[:1], (pad,))]) for f in flat]
    stacked = [p.reshape(n_chunks, chunk) for p in padded]
    outs = lax.map(lambda xs: fn(*xs), stacked)
    return tuple(o.reshape(-1)[:size] for o in outs)


def chunked(fn: Callable, *args, n_out: int):
    """Apply an elementwise ``fn`` to broadcast arrays in chunks.

    ``fn`` maps 1-D arrays to a tuple of ``n_out`` 1-D arrays of the same length.
    The kernels are while loops that run until their slowest element is done, and
    the chunk size is chosen per platform when the computation is lowered
    (``lax.platform_dependent``): on CPU small chunks keep the loop state in
    cache and stop each chunk early; on accelerators large chunks keep the device
    busy, since every chunk costs a few kernel launches per loop iteration.
    """
    shape = args[0].shape
    flat = [a.reshape(-1) for a in args]
    if math.prod(shape) <= CHUNK:
        outs = fn(*flat)
    else:
        outs = lax.platform_dependent(
            *flat,
            cpu=functools.partial(map_chunks, fn, CHUNK),
            default=functools.partial(map_chunks, fn, CHUNK_ACCEL),
        )
    assert len(outs) == n_out
    return tuple(o.reshape(shape) for o in outs)
