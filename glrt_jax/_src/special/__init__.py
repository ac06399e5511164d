"""The algorithms behind :mod:`glrt_jax._src.ncx2`, one module per method.

Import the functions from :mod:`glrt_jax._src.ncx2` (or the public
:mod:`glrt_jax.ncx2`); these modules are its parts, in dependency order:

* :mod:`.batching`: the chunked map every kernel runs under, chunk sizes per platform.
* :mod:`.incomplete_gamma`: log P(b, y) and log Q(b, y) (series / continued fraction).
* :mod:`.mixture`: the peak-centred Poisson-mixture sums (the general method).
* :mod:`.df1`: the df = 1 closed forms and the log normal tail.
* :mod:`.contour`: the saddle-point contour integral (large df + 2 nc).
* :mod:`.dispatch`: which method serves each point, domain handling, the jitted kernels.
* :mod:`.quantile`: isf/ppf/logisf/logppf by one solver on the smaller tail.

Shared numerical helpers (log1mexp, Loader's log Poisson, dtype promotion) are in
:mod:`glrt_jax._src.numerics`.
"""
