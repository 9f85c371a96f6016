"""Where the repository's trees are, without importing torch (the exercise checker's parent process uses it)."""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
EXERCISES_DIR = REPO_ROOT / "exercises"
SOLUTIONS_DIR = REPO_ROOT / "solutions"
BUILD_DIR = REPO_ROOT / "build"


def relative_path(path: Path) -> str:
    """A path as printed to users: relative to the repository, never a machine-specific one."""
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return Path(path).name
