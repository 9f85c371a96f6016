"""Re-execute notebooks in place and store outputs free of machine-specific paths.

    .venv/bin/python tools/refresh_notebooks.py notebooks/02_cpu_kernel.ipynb [...]

Run this after changing a notebook or the C++ it shows; nbval then proves the stored outputs.
Error tracebacks are reduced to their last line: they name files of this machine, and nbval never
compares them (it compares the exception's name and message).
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO_ROOT = Path(__file__).resolve().parent.parent


def refresh(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                output.traceback = [f"{output.ename}: {output.evalue}"]
            if output.output_type == "stream":
                output.text = output.text.replace(str(REPO_ROOT) + "/", "")
    nbformat.write(notebook, path)
    print(f"refreshed {path.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(str(p) for p in (REPO_ROOT / "notebooks").glob("*.ipynb")):
        refresh(Path(name).resolve())
