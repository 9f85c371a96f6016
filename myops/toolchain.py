"""Where the CUDA layer can be compiled, and with which toolkit and architectures.

The toolkit, in this order: the one the user names with CUDA_HOME (or CUDA_PATH); the one pip installs beside
torch (requirements.txt pins `nvidia-cuda-nvcc`, `nvidia-nvvm` and `nvidia-cuda-crt` to torch's CUDA release), so
the CUDA layer compiles and registers on every Linux machine with the pinned torch, GPU or not; else a system
toolkit of torch's CUDA major version: the one whose nvcc is first on PATH, or /usr/local/cuda (a GPU machine's
own Python often has no pip nvcc).
"""
from __future__ import annotations

import fcntl
import os
import platform
import re
import shutil
from pathlib import Path

import torch

from myops.paths import REPO_ROOT

# Compiled for when no GPU can be queried: Ampere machine code plus PTX that newer GPUs JIT-compile.
DEFAULT_CUDA_ARCH_LIST = "8.0+PTX"

# The pip toolkit laid out as nvcc and cpp_extension expect it (see toolkit_layout).
TOOLKIT_LAYOUT_DIR = REPO_ROOT / "build" / "cuda-toolkit"

# Where a system toolkit lives when no nvcc is on PATH.
SYSTEM_TOOLKIT = Path("/usr/local/cuda")

PIP_TOOLKIT_HINT = ("install the pinned CUDA compiler with `pip install -r requirements.txt` "
                    "(nvidia-cuda-nvcc, nvidia-nvvm, nvidia-cuda-crt), or set CUDA_HOME to a CUDA toolkit")


def _is_toolkit_root(path: Path) -> bool:
    return (path / "bin" / "nvcc").is_file() and (path / "include" / "cuda_runtime.h").is_file()


def pip_toolkit_root() -> Path | None:
    """`site-packages/nvidia/cuNN` holding the pip nvcc for torch's CUDA major version, if installed."""
    if torch.version.cuda is None:
        return None
    try:
        import nvidia  # a namespace package; absent with CPU builds of torch
    except ImportError:
        return None
    subdir = "cu" + torch.version.cuda.split(".")[0]
    for path in nvidia.__path__:
        root = Path(path) / subdir
        if _is_toolkit_root(root) and (root / "nvvm").is_dir():
            return root
    return None


def user_cuda_home() -> Path | None:
    """The toolkit the user named with CUDA_HOME or CUDA_PATH, if any."""
    named = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    return Path(named) if named else None


def toolkit_cuda_version(root: Path) -> str | None:
    """The CUDA release of a toolkit root ("13.0"), read from its runtime header; None if unreadable."""
    try:
        header = (root / "include" / "cuda_runtime_api.h").read_text(errors="replace")
    except OSError:
        return None
    found = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", header)
    return f"{int(found[1]) // 1000}.{int(found[1]) % 1000 // 10}" if found else None


def system_toolkit_root() -> Path | None:
    """A system toolkit for torch's CUDA major version: the one of the first nvcc on PATH, else /usr/local/cuda.

    A toolkit of another major version is passed over: torch's cpp_extension refuses to build with it.
    """
    nvcc = shutil.which("nvcc")
    # resolve(): /usr/local/cuda/bin is often a link to /usr/local/cuda-13.0/bin; the root is beside the real bin/
    candidates = ([Path(nvcc).resolve().parent.parent] if nvcc else []) + [SYSTEM_TOOLKIT]
    major = (torch.version.cuda or "").split(".")[0]
    for root in candidates:
        version = toolkit_cuda_version(root) if _is_toolkit_root(root) else None
        if version is not None and version.split(".")[0] == major:
            return root
    return None


def find_cuda_home() -> Path | None:
    """The toolkit root to compile with: the user's CUDA_HOME, else the pip toolkit's layout, else a system
    toolkit of torch's CUDA major version."""
    named = user_cuda_home()
    if named is not None:
        return named if _is_toolkit_root(named) else None
    root = pip_toolkit_root()
    if root is not None:
        return toolkit_layout(root)
    return system_toolkit_root() if torch.version.cuda else None


def cuda_skip_reason() -> str | None:
    """Why the CUDA layer cannot be built here, or None when it can."""
    if platform.system() != "Linux":
        return (f"CUDA kernels are compiled on Linux only; on {platform.system()} the course runs without "
                "its CUDA layer")
    if torch.version.cuda is None:
        return (f"torch {torch.__version__} is a CPU-only build; install a CUDA build of torch "
                "(the pinned torch==2.14.1 from PyPI is one) to compile CUDA kernels")
    named = user_cuda_home()
    if named is not None and not _is_toolkit_root(named):
        return (f"CUDA_HOME={named} is not a CUDA toolkit (no bin/nvcc and include/cuda_runtime.h); "
                "point it at one, or unset it to use the pip toolkit")
    if find_cuda_home() is None:
        return (f"no CUDA compiler for torch's CUDA {torch.version.cuda} found (none from pip, none of CUDA "
                f"{torch.version.cuda.split('.')[0]} on PATH or in {SYSTEM_TOOLKIT}); {PIP_TOOLKIT_HINT}")
    return None


def cuda_arch_list() -> str:
    """TORCH_CUDA_ARCH_LIST for the build: the user's, else the local GPUs', else a default."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    if torch.cuda.is_available():
        capabilities = {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
        return ";".join(f"{major}.{minor}" for major, minor in sorted(capabilities))
    return DEFAULT_CUDA_ARCH_LIST


def _pip_cuda_roots() -> list[Path]:
    """The lib/include roots of the nvidia-* pip packages that CUDA builds of torch depend on."""
    try:
        import nvidia
    except ImportError:
        return []
    return [Path(p) / sub for p in nvidia.__path__ for sub in ("cu13", "cu12") if (Path(p) / sub).is_dir()]


def cuda_include_paths() -> list[str]:
    """Headers that ATen/cuda/CUDAContext.h needs (cuBLAS, cuSPARSE, ...) from torch's pip packages."""
    return [str(root / "include") for root in _pip_cuda_roots() if (root / "include").is_dir()]


def toolkit_layout(root: Path, layout: Path = TOOLKIT_LAYOUT_DIR) -> Path:
    """The pip toolkit at `root` as a toolkit root in the usual layout; made once, links only.

    pip puts the toolkit under `nvidia/cu13` with `lib/` and versioned library names only
    (`libcudart.so.13`). cpp_extension links `-L<home>/lib64 -lcudart`, and nvcc itself, when it links,
    looks for `<its folder>/../lib64`. So the layout has `lib64/` with the linker names added, links to
    everything else, and a hard link (or copy) of nvcc: nvcc resolves symbolic links to find its
    profile, so only a real file makes this folder its toolkit root. Nothing in site-packages changes.
    csrc/CMakeLists.txt makes the same layout for CMake builds.
    """
    nvcc = root / "bin" / "nvcc"
    stamp = f"{root}\n{nvcc.stat().st_size} {nvcc.stat().st_mtime_ns}\n"
    if _has_stamp(layout, stamp):
        return layout
    layout.parent.mkdir(parents=True, exist_ok=True)
    with open(layout.parent / f".{layout.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # test workers and notebook kernels may ask at the same time
        if not _has_stamp(layout, stamp):
            shutil.rmtree(layout, ignore_errors=True)
            _make_layout(root, layout)
            (layout / "STAMP").write_text(stamp)
    return layout


def _has_stamp(layout: Path, stamp: str) -> bool:
    return (layout / "STAMP").is_file() and (layout / "STAMP").read_text() == stamp


def _make_layout(root: Path, layout: Path) -> None:
    (layout / "bin").mkdir(parents=True)
    (layout / "lib64").mkdir()
    for folder in ("include", "nvvm", "lib"):
        (layout / folder).symlink_to(root / folder)
    for tool in (root / "bin").iterdir():
        if tool.name == "nvcc":
            try:
                os.link(tool, layout / "bin" / "nvcc")
            except OSError:  # another file system
                shutil.copy2(tool, layout / "bin" / "nvcc")
        else:
            (layout / "bin" / tool.name).symlink_to(tool)
    for library in (root / "lib").iterdir():
        (layout / "lib64" / library.name).symlink_to(library)
        stem, _, version = library.name.partition(".so.")
        if version.isdigit() and "." not in stem and not (layout / "lib64" / f"{stem}.so").exists():
            (layout / "lib64" / f"{stem}.so").symlink_to(library)
