"""Notebooks 08 and later survive being run twice in one kernel (the stage notebooks: test_notebook_robustness.py)."""
import pytest

from test_notebook_robustness import NOTEBOOKS, STAGE_NOTEBOOKS, run_every_cell_twice


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p not in STAGE_NOTEBOOKS], ids=lambda p: p.stem)
def test_running_every_cell_twice_keeps_the_kernel_alive(path):
    run_every_cell_twice(path)
