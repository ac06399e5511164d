"""Numbers in printed text: the documentation's shown outputs against what its code prints
(shared by test_readme.py and test_docs.py; not a test module)."""

import re

import numpy as np

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def numbers(text: str) -> np.ndarray:
    """Every number in ``text``, in order."""
    return np.array([float(m) for m in NUMBER.findall(text)])


def assert_prints(printed: str, shown: str, where: str) -> None:
    """``printed`` has the numbers ``shown`` has (the docs round them: 6 significant digits
    and more), so that an engine change that moves an answer also moves the example."""
    got, want = numbers(printed), numbers(shown)
    assert got.shape == want.shape, f"{where} printed:\n{printed}\nbut shows:\n{shown}"
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0, err_msg=f"{where}:\n{printed}")
