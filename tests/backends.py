"""How closely two answers of one query must agree on the backend the tests run on.

On a CPU, two calls of one program give the same bits. On a GPU the non-uniform FFT's
scatter-adds sum in an order that varies between calls, so two calls of the same query
differ in their last bits, and at tiny δ by more: on an H200 two calls' NPO upper bounds
differed by up to 1.4e-6 relative at δ = 1.5e-12 (3e-14 and 4e-16 in other queries). The
bounds are certified in any order (the rounding terms assume none), so only the tests'
comparisons of two calls need to know this.
"""

import jax
import numpy as np

import conftest

# Two calls of one query off the CPU: above the 1.4e-6 seen, far below the bugs these
# comparisons guard against (a wrong program or input, a factor of two).
OFF_CPU_RTOL = 1e-5
# Two programs that add the same terms in another order, compiled without LLVM's
# optimisation (the suite's quick flags, conftest.py): up to 8.5e-11 seen (σ = 1,
# q = 1e-4, N = 5·10⁶, δ = 1e-7: the rounding of each round's log-transform, multiplied
# by N), where with XLA's defaults the same programs agree to 1e-12.
UNOPTIMIZED_RTOL = 1e-9


def on_cpu() -> bool:
    return jax.default_backend() == "cpu"


def between_calls(rtol: float = 0.0) -> float:
    """The relative tolerance between two calls that compute one query: ``rtol`` on a CPU
    (0 for the same program, bit for bit; e.g. 1e-12 where two programs add the same
    terms in another order, at least ``UNOPTIMIZED_RTOL`` under the suite's quick
    flags), at least ``OFF_CPU_RTOL`` elsewhere."""
    if not on_cpu():
        return max(rtol, OFF_CPU_RTOL)
    if rtol > 0.0 and not conftest.XLA_DEFAULTS:
        return max(rtol, UNOPTIMIZED_RTOL)
    return rtol


def assert_same_query(a, b, rtol: float = 0.0) -> None:
    """``a`` and ``b``, two answers of one query, agree to :func:`between_calls` ``(rtol)``."""
    tol = between_calls(rtol)
    if tol == 0.0:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=tol, atol=0)


# XLA's default optimisation on the CPU, whatever the suite's quick flags say (conftest.py):
# LLVM's optimisation on, which contracts ``a·b + c`` into fused multiply-adds.
_OPTIMISED_CPU = {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}


def run_optimised(fn, *args):
    """``jax.jit(fn)(*args)`` compiled as a user's program is (on the CPU: XLA's default
    optimisation, not the suite's quick flags; elsewhere the backend's defaults)."""
    lowered = jax.jit(fn).lower(*args)
    return lowered.compile(_OPTIMISED_CPU if on_cpu() else None)(*args)
