"""The library in a program with 64-bit floats off (JAX's default), in a fresh interpreter.

conftest.py switches x64 on for the rest of the suite, so these run in a subprocess: importing
every public module must leave x64 off, and the float64-only entry points must refuse with a
message that says how to switch it on, instead of returning float32 numbers.
"""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import importlib, jax
    assert not jax.config.jax_enable_x64
    for name in ["accountant", "calibrate", "profile", "roc", "ncx2", "audit",
                 "asymptotics", "sweep", "training", "schedules"]:
        importlib.import_module("glrt_jax." + name)
    assert not jax.config.jax_enable_x64, "importing glrt_jax switched x64 on"
    from glrt_jax import accountant, calibrate
    for call in (
        lambda: accountant.schedule_epsilon(1.0, 0.01, 100, 1e-5),
        lambda: calibrate.noise_multiplier(1.0, 1e-5, steps=100, sampling_rate=0.01),
    ):
        try:
            call()
        except ValueError as exc:
            assert "64" in str(exc), str(exc)
        else:
            raise AssertionError("a float64-only entry point ran with x64 off")
    print("ok")
    """
)


def test_x64_stays_off_and_float64_paths_refuse():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")
