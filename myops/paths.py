"""Where the repository's trees are, without importing torch (the exercise checker's parent process uses it)."""
from __future__ import annotations

import os
import shutil
import tempfile
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


def temp_dir_in_build(name: str) -> Path:
    """Point this process's temporary folder (TMPDIR, read by C++ as well) at build/tmp/<name>-<pid>, and remove the
    folders earlier processes left there once they have ended.

    The AOTInductor loader (torch._inductor.aoti_load_package, and the C++ AOTIModelPackageLoader) extracts every
    package it loads into a new folder, aotinductor_XXXXXX, of the temporary folder, and never removes it: left in
    /tmp, about 1.6 MB a load. A child process inherits the setting."""
    root = BUILD_DIR / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    for folder in root.glob("*-*"):
        pid = folder.name.rsplit("-", 1)[1]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
    mine = root / f"{name}-{os.getpid()}"
    mine.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(mine)
    tempfile.tempdir = None  # Python's tempfile reads TMPDIR again
    return mine


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
