"""Notebooks survive being run twice in one kernel (conftest.py), and a hung cell is stopped by nbval's timeout."""
import os
import shutil
import subprocess
import sys

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook packages are not installed here")
from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import DeadKernelError  # noqa: E402
from nbclient.util import run_sync  # noqa: E402

from myops.build import REPO_ROOT  # noqa: E402

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


# A cell that kills its kernel the second time it runs, as a second load of changed C++ would.
KILLED_ON_SECOND_RUN = """import builtins, os, signal
if getattr(builtins, "ran_once", False):
    os.kill(os.getpid(), signal.SIGKILL)
builtins.ran_once = True"""


def temp_dir_in(tmp_path) -> dict[str, str]:
    """The environment with TMPDIR in tmp_path: a kernel that dies, or is stopped at a timeout, leaves its connection
    file (tmpXXXX.json) behind, and that must not be in /tmp."""
    return {**os.environ, "TMPDIR": str(tmp_path)}


def run_nbval(tmp_path, *sources: str) -> subprocess.CompletedProcess:
    """pytest --nbval-lax on a notebook of these code cells, with the repository's conftest.py beside it."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(notebook, tmp_path / "probe.ipynb")
    shutil.copy(REPO_ROOT / "conftest.py", tmp_path / "conftest.py")
    return subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider",
                           "-o", "addopts=", "-rf", "probe.ipynb"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=temp_dir_in(tmp_path))


def test_every_notebook_is_run_a_second_time_in_its_kernel():
    """Each notebook's cells are followed by one "every cell again" item (conftest.py), in the same file."""
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "notebooks"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:]
    collected = [line for line in result.stdout.splitlines() if "::" in line]
    for path in NOTEBOOKS:
        mine = [line for line in collected if line.startswith(f"notebooks/{path.name}::")]
        assert mine[-1] == f"notebooks/{path.name}::every cell again", path.name
        assert sum("every cell again" in line for line in mine) == 1


# A cell that raises the second time it runs, as a "before" check does once its layer is loaded: allowed.
RAISES_ON_SECOND_RUN = """import builtins
if getattr(builtins, "checked_once", False):
    raise AssertionError("the layer is loaded now")
builtins.checked_once = True"""


def test_second_run_passes_when_the_kernel_survives(tmp_path):
    result = run_nbval(tmp_path, "x = 1", RAISES_ON_SECOND_RUN, "x += 1")
    assert result.returncode == 0, result.stdout[-2000:]
    assert "4 passed" in result.stdout


def test_second_run_fails_when_the_kernel_dies(tmp_path):
    result = run_nbval(tmp_path, "x = 1", KILLED_ON_SECOND_RUN, "x += 1")
    assert result.returncode == 1, result.stdout[-2000:]
    assert "probe.ipynb: the kernel died during the second run of cell 1" in result.stdout
    assert "1 failed, 3 passed" in result.stdout


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
    """The project's own configuration (pyproject.toml's addopts: xdist, strict nbval) stops a hung cell; the
    3 s given last on the command line stands in for the project's value, which the next test reads."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import time\ntime.sleep(600)")]
    notebook.cells[0].execution_count = 1
    path = tmp_path / "hang.ipynb"
    nbformat.write(notebook, path)
    result = subprocess.run([sys.executable, "-m", "pytest", "--rootdir", str(REPO_ROOT), "-c",
                             str(REPO_ROOT / "pyproject.toml"), "--nbval-cell-timeout=3", str(path)],
                            capture_output=True, text=True, timeout=180, cwd=REPO_ROOT, env=temp_dir_in(tmp_path))
    assert result.returncode == 1, result.stdout[-2000:]
    assert "Timeout of 3 seconds exceeded executing cell" in result.stdout


def test_the_projects_cell_timeout_is_the_one_in_force(tmp_path):
    """What a notebook cell gets under `make test`: pyproject.toml's --nbval-cell-timeout, not nbval's default
    (2000 s, a long hang on a dead kernel)."""
    import tomllib

    addopts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    configured = float(next(o for o in addopts if o.startswith("--nbval-cell-timeout=")).split("=")[1])
    (tmp_path / "cell_timeout_probe.py").write_text(
        "def pytest_configure(config):\n    print('cell timeout in force:', config.getoption('nbval_cell_timeout'))\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "cell_timeout_probe", "-n", "0", "--collect-only",
                             "-q", str(NOTEBOOKS[0])], capture_output=True, text=True, timeout=180, cwd=REPO_ROOT,
                            env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"cell timeout in force: {configured:g}" in result.stdout.replace(".0\n", "\n")
    assert configured < 2000
