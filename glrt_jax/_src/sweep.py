"""Sharded evaluation of large sweeps across all local JAX devices.

A *sweep* evaluates one function at many parameter points: a grid of σ, sampling
rate, rounds or dimension, or many independent batches of membership-inference
games. :func:`sweep` maps a function over the leading axis of its arguments with
``jax.vmap`` and places that axis across the local devices with
``jax.sharding.NamedSharding`` over a one-dimensional :class:`jax.sharding.Mesh`
(axis name ``"batch"``). The compiled program is partitioned by XLA: every device
evaluates its own slice, and nothing is communicated for elementwise work. With
one device the same code runs unchanged (a one-device mesh).

The batch is padded to a multiple of the number of devices by repeating its last
point (so padding never introduces out-of-domain values) and the padding is
dropped from the result. ``chunk_size`` bounds memory: points are processed
``chunk_size × devices`` at a time by one compiled program (the last chunk is
padded to the same shape, so there is one compilation).

To try several devices on a CPU-only machine, start Python with
``XLA_FLAGS=--xla_force_host_platform_device_count=4``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["cartesian", "local_mesh", "sweep"]

AXIS = "batch"


def local_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A one-dimensional mesh (axis ``"batch"``) over the given or all local devices.

    Args:
      devices: devices to use; default ``jax.local_devices()``.

    Returns:
      A :class:`jax.sharding.Mesh` of shape ``(len(devices),)``.

    Raises:
      ValueError: for an empty device list.

    Example:
      >>> from glrt_jax import sweep
      >>> mesh = sweep.local_mesh()
      >>> mesh.axis_names
      ('batch',)
    """
    devices = list(jax.local_devices() if devices is None else devices)
    if not devices:
        raise ValueError(f"devices must contain at least one device; got {devices!r}")
    return Mesh(np.asarray(devices, dtype=object), (AXIS,))


def cartesian(**axes: Any) -> tuple[dict[str, np.ndarray], tuple[int, ...]]:
    """Flattened Cartesian product of named 1-D parameter axes.

    Args:
      **axes: name → 1-D sequence of values (e.g. ``sigma=[1, 2], q=[0.01, 0.1]``).

    Returns:
      ``(points, shape)``: ``points[name]`` is a 1-D NumPy array with one entry per
      grid point (the first axis varies slowest), ``shape`` the grid's shape, to
      reshape a sweep's result with ``out.reshape(shape)``.

    Raises:
      ValueError: for no axes, or an axis that is empty or not 1-D.

    Example:
      >>> from glrt_jax import sweep
      >>> points, shape = sweep.cartesian(sigma=[1.0, 2.0, 4.0], d=[1, 10])
      >>> shape, points["sigma"].tolist(), points["d"].tolist()
      ((3, 2), [1.0, 1.0, 2.0, 2.0, 4.0, 4.0], [1, 10, 1, 10, 1, 10])
    """
    if not axes:
        raise ValueError("axes must name at least one parameter axis")
    arrays = {}
    for name, values in axes.items():
        arr = np.asarray(values)
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"axis {name} must be a non-empty 1-D sequence; got shape {arr.shape}")
        arrays[name] = arr
    grids = np.meshgrid(*arrays.values(), indexing="ij")
    shape = grids[0].shape
    return {n: g.reshape(-1) for n, g in zip(arrays, grids, strict=True)}, shape


def _pad_to(x: jax.Array, size: int) -> jax.Array:
    n = x.shape[0]
    if n == size:
        return x
    tail = jnp.broadcast_to(x[-1:], (size - n, *x.shape[1:]))
    return jnp.concatenate([x, tail], axis=0)


@functools.lru_cache(maxsize=64)
def _runner(fn, axes, mesh):
    """One compiled program per (function, in_axes, mesh): repeated sweeps reuse it."""
    batch = NamedSharding(mesh, PartitionSpec(AXIS))
    whole = NamedSharding(mesh, PartitionSpec())
    in_shardings = tuple(batch if ax == 0 else whole for ax in axes)
    return jax.jit(jax.vmap(fn, in_axes=axes), in_shardings=in_shardings, out_shardings=batch)


def sweep(
    fn: Callable[..., Any],
    *args: Any,
    in_axes: int | None | Sequence[int | None] = 0,
    devices: Sequence[jax.Device] | None = None,
    chunk_size: int | None = None,
) -> Any:
    """Evaluate ``fn`` at every point of a batch, sharded across the local devices.

    Equivalent to ``jax.vmap(fn, in_axes)(*args)`` (same values), but the batch
    axis is split over a one-dimensional device mesh with ``NamedSharding``, and
    processed in chunks of ``chunk_size`` points per device when given.

    Args:
      fn: a function of one point, traceable by ``jit``/``vmap`` (e.g.
        ``lambda s: profile.epsilon(1e-5, 1.0 / s, 10, adversary="glrt")``); it may return a
        pytree of arrays. The compiled program is cached per ``(fn, in_axes,
        devices)``: pass the same function object (not a fresh ``lambda``) to reuse it.
      *args: arguments of ``fn``; those mapped (``in_axes`` 0) carry the batch on
        their leading axis (pytrees allowed; all leaves share the batch size),
        the others (``in_axes`` ``None``) are passed whole to every point.
      in_axes: ``0`` or ``None`` for all arguments, or one entry per argument.
      devices: devices to shard over; default all local devices.
      chunk_size: points per device per step (bounds memory); default: the whole
        batch in one step.

    Returns:
      ``fn``'s outputs stacked along a new leading batch axis (a pytree like
      ``fn``'s output). When the batch needed neither padding nor chunking the
      arrays stay sharded over the mesh's ``"batch"`` axis (``out.sharding``);
      otherwise they are the trimmed concatenation of the sharded chunks.

    Raises:
      ValueError: for no mapped argument, mismatched or zero batch sizes,
        ``in_axes`` entries other than 0/None, or ``chunk_size < 1``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from glrt_jax import roc, sweep
      >>> points, shape = sweep.cartesian(mu=[0.5, 1.0, 2.0], alpha=[0.01, 0.1])
      >>> tpr = sweep.sweep(roc.curve, points["alpha"], points["mu"])
      >>> tpr.reshape(shape).shape
      (3, 2)
    """
    if isinstance(in_axes, int | type(None)):
        axes = (in_axes,) * len(args)
    else:
        axes = tuple(in_axes)
    if len(axes) != len(args):
        raise ValueError(f"in_axes must have one entry per argument ({len(args)}); got {in_axes!r}")
    if any(a not in (0, None) for a in axes):
        raise ValueError(f"in_axes entries must be 0 or None; got {in_axes!r}")
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be an integer in [1, inf); got {chunk_size!r}")

    mapped = [jax.tree_util.tree_map(jnp.asarray, a) for a, ax in zip(args, axes, strict=True)
              if ax == 0]  # fmt: skip
    leaves = jax.tree_util.tree_leaves(mapped)
    if not leaves:
        raise ValueError("sweep needs at least one mapped argument (in_axes 0) with array leaves")
    sizes = {leaf.shape[0] if leaf.ndim else None for leaf in leaves}
    if len(sizes) != 1 or None in sizes or 0 in sizes:
        raise ValueError(
            "mapped arguments must share a non-zero leading batch size; got leading sizes "
            f"{sorted(str(s) for s in sizes)}"
        )
    (n,) = sizes

    mesh = local_mesh(devices)
    n_dev = mesh.devices.size
    per_dev = -(-n // n_dev) if chunk_size is None else min(chunk_size, -(-n // n_dev))
    step = per_dev * n_dev
    n_steps = -(-n // step)
    batch = NamedSharding(mesh, PartitionSpec(AXIS))
    whole = NamedSharding(mesh, PartitionSpec())

    run = _runner(fn, axes, mesh)

    args = [jax.tree_util.tree_map(jnp.asarray, a) for a in args]
    outs = []
    for k in range(n_steps):
        lo, hi = k * step, min((k + 1) * step, n)
        call = []
        for a, ax in zip(args, axes, strict=True):
            if ax == 0:
                a = jax.tree_util.tree_map(lambda x, lo=lo, hi=hi: _pad_to(x[lo:hi], step), a)
                call.append(jax.device_put(a, batch))
            else:
                call.append(jax.device_put(a, whole))
        outs.append(run(*call))
    if n_steps == 1:
        out = outs[0]
        return jax.tree_util.tree_map(lambda x: x[:n] if n < step else x, out)
    return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=0)[:n], *outs)
