"""Notebooks survive being run twice in one kernel, and a hung cell is stopped by nbval's timeout."""
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, DeadKernelError
from nbclient.util import run_sync

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
            assert kernel_alive(client), f"the kernel died in round {round_}"


def kernel_alive(client):
    return run_sync(client.km.is_alive)()


def test_a_dead_kernel_is_detected():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")]
    client = NotebookClient(notebook, timeout=60, kernel_name="python3")
    with client.setup_kernel():
        with pytest.raises(DeadKernelError):
            client.execute_cell(notebook.cells[0], 0)
        assert not kernel_alive(client)


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
