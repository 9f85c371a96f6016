"""Notebooks survive being run twice in one kernel, and a hung cell is stopped by nbval's timeout."""
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from myops.build import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_running_every_cell_twice_keeps_the_kernel_alive(path):
    # The second round may raise Python errors (a "before" check after the layer is loaded fails its
    # assert, as it should); what must not happen is a dead kernel (nbclient raises DeadKernelError).
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    code_cells = [(i, cell) for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    with client.setup_kernel():
        for round_ in (1, 2):
            for index, cell in code_cells:
                try:
                    client.execute_cell(cell, index)
                except CellExecutionError:
                    expected = round_ == 2 or "raises-exception" in cell.metadata.get("tags", [])
                    assert expected, f"round 1, cell {index} failed"
            assert client.km.is_alive(), f"the kernel died in round {round_}"


def test_a_hung_cell_is_stopped_by_the_cell_timeout(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import time\ntime.sleep(600)")]
    notebook.cells[0].execution_count = 1
    path = tmp_path / "hang.ipynb"
    nbformat.write(notebook, path)
    result = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
                             "--nbval-cell-timeout=3", "-p", "no:cacheprovider", "-o", "addopts=", str(path)],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 1
    assert "Timeout of 3 seconds exceeded executing cell" in result.stdout
