"""The notebooks under notebooks/ run from top to bottom without error.

By default every code cell is executed in this test process, in order, in one
namespace per notebook (IPython line magics, which only set up Jupyter's display,
are skipped): the notebooks then share compiled kernels with the rest
of the test session and cost seconds. Set ``GLRT_JAX_NOTEBOOK_KERNEL=1`` to also
execute them in a fresh Jupyter kernel with nbclient (needs ``nbclient`` and
``ipykernel``; about a minute per notebook, mostly compilation).

``dpsgd_accounting.ipynb`` runs in its quick setting (``DPSGD_ACCOUNTING_QUICK=1``: fewer
steps, targets and search iterations; the programs of the full setting) and
``batch_evaluation.ipynb`` in its (``BATCH_EVALUATION_QUICK=1``: thousands of points instead
of millions). ``dpsgd_digits.ipynb`` runs in its quick setting (``DPSGD_DIGITS_QUICK=1``: two
ε values, one seed, 200 steps) and, in this process, with 64-bit floats off around its cells
(``jax.enable_x64(False)``, thread-local): it is a float32 training program, while the
test configuration turns x64 on. A fresh kernel starts with x64 off anyway.
"""

import contextlib
import os
import pathlib

import jax
import matplotlib.figure
import nbformat
import numpy as np
import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
KERNEL = os.environ.get("GLRT_JAX_NOTEBOOK_KERNEL", "") not in ("", "0")
# Per notebook: environment variables, the x64 setting of its cells in this process (None:
# as configured), and the least number of figures it displays.
DEFAULT = {"env": {}, "x64": None, "figures": 1}
SETTINGS = {
    "paper_tour.ipynb": {**DEFAULT, "figures": 10},  # every figure of the paper
    "dpsgd_digits.ipynb": {"env": {"DPSGD_DIGITS_QUICK": "1"}, "x64": False, "figures": 1},
    # Fewer steps, targets and search iterations; same programs as the full setting.
    "dpsgd_accounting.ipynb": {"env": {"DPSGD_ACCOUNTING_QUICK": "1"}, "x64": None, "figures": 1},
    # Thousands of points instead of millions.
    "batch_evaluation.ipynb": {"env": {"BATCH_EVALUATION_QUICK": "1"}, "x64": None, "figures": 1},
}


def _settings(path, monkeypatch):
    settings = SETTINGS.get(path.name, DEFAULT)
    for name, value in settings["env"].items():
        monkeypatch.setenv(name, value)
    return settings


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_cells_run(path, monkeypatch):
    import IPython.display

    settings = _settings(path, monkeypatch)
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and any(c.cell_type == "markdown" for c in nb.cells)
    namespace = {"__name__": "__notebook__"}
    x64 = settings["x64"]
    with contextlib.nullcontext() if x64 is None else jax.enable_x64(x64):
        for i, cell in enumerate(code):
            # Line magics (``%matplotlib inline``) only configure Jupyter's display.
            lines = cell.source.splitlines()
            assert not any(line.startswith("!") for line in lines), "no shell escapes"
            source = "\n".join("" if line.startswith("%") else line for line in lines)
            exec(compile(source, f"{path.name}[cell {i}]", "exec"), namespace)
    figures = sum(isinstance(obj, matplotlib.figure.Figure) for obj in shown)
    assert figures >= settings["figures"]
    if path.name == "dpsgd_digits.ipynb":
        # Both adversaries, every target met (the ledger's certified ε), GLRT needs less noise.
        results = namespace["results"]
        assert {r.adversary for r in results.rows} == {"npo", "glrt"}
        assert all(r.spent[r.adversary] <= r.epsilon for r in results.rows)
        for eps in results.config.epsilons:
            glrt, npo = results.row("glrt", eps), results.row("npo", eps)
            assert glrt.noise_multiplier < npo.noise_multiplier
        # σ was rounded to float32: the recorded, the applied and the reported σ agree.
        sigmas = [r.noise_multiplier for r in results.rows]
        assert sigmas == [float(np.float32(s)) for s in sigmas]


@pytest.mark.skipif(not KERNEL, reason="set GLRT_JAX_NOTEBOOK_KERNEL=1 to run in a kernel")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_in_kernel(path, tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    settings = _settings(path, monkeypatch)  # the kernel inherits the environment
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})  # fmt: skip
    client.execute()
    images = sum(
        1
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {})
    )
    assert images >= settings["figures"]
