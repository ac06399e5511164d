"""The notebooks under notebooks/ run from top to bottom without error.

By default every code cell is executed in this test process, in order, in one
namespace per notebook (IPython line magics, which only set up Jupyter's display,
are skipped): the notebooks then share compiled kernels with the rest
of the test session and cost seconds. Set ``GLRT_JAX_NOTEBOOK_KERNEL=1`` to also
execute them in a fresh Jupyter kernel with nbclient (needs ``nbclient`` and
``ipykernel``; about a minute, mostly compilation).
"""

import os
import pathlib

import matplotlib.figure
import nbformat
import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
KERNEL = os.environ.get("GLRT_JAX_NOTEBOOK_KERNEL", "") not in ("", "0")


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_cells_run(path, monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and any(c.cell_type == "markdown" for c in nb.cells)
    namespace = {"__name__": "__notebook__"}
    for i, cell in enumerate(code):
        # Line magics (``%matplotlib inline``) only configure Jupyter's display.
        lines = cell.source.splitlines()
        assert not any(line.startswith("!") for line in lines), "no shell escapes"
        source = "\n".join("" if line.startswith("%") else line for line in lines)
        exec(compile(source, f"{path.name}[cell {i}]", "exec"), namespace)
    assert any(isinstance(obj, matplotlib.figure.Figure) for obj in shown)
    if path.name == "paper_tour.ipynb":
        # Every figure of the paper is displayed.
        assert sum(isinstance(obj, matplotlib.figure.Figure) for obj in shown) >= 10


@pytest.mark.skipif(not KERNEL, reason="set GLRT_JAX_NOTEBOOK_KERNEL=1 to run in a kernel")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_in_kernel(path, tmp_path):
    nbclient = pytest.importorskip("nbclient")
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
    assert images >= 10  # every figure of the paper is displayed
