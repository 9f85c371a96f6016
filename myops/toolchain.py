"""Where the CUDA layer can be compiled, and with which toolkit and architectures."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

# Compiled for when no GPU can be queried: Ampere machine code plus PTX that newer GPUs JIT-compile.
DEFAULT_CUDA_ARCH_LIST = "8.0+PTX"


def _is_toolkit_root(path: Path) -> bool:
    return (path / "bin" / "nvcc").is_file() and (path / "include" / "cuda_runtime.h").is_file()


def find_cuda_home() -> Path | None:
    """The CUDA toolkit root: the folder holding the real nvcc and the CUDA headers.

    `nvcc` on PATH may be a wrapper script (e.g. /usr/local/bin/nvcc), whose parent is not a toolkit;
    torch's own guess then points at the wrong folder and linking fails on -lcudart.
    """
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    candidates.append("/usr/local/cuda")
    for candidate in candidates:
        if candidate and _is_toolkit_root(Path(candidate)):
            return Path(candidate)
    return None


def cuda_skip_reason() -> str | None:
    """Why the CUDA layer cannot be built here, or None when it can."""
    if torch.version.cuda is None:
        return (f"torch {torch.__version__} is a CPU-only build; install a CUDA build of torch "
                "(the pinned torch==2.14.1 from PyPI is one) to compile CUDA kernels")
    if find_cuda_home() is None:
        return ("no CUDA toolkit found (nvcc and cuda_runtime.h); install the CUDA toolkit "
                "or set CUDA_HOME to its root")
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
        import nvidia  # a namespace package; absent with CPU builds of torch
    except ImportError:
        return []
    return [Path(p) / sub for p in nvidia.__path__ for sub in ("cu13", "cu12") if (Path(p) / sub).is_dir()]


def cuda_include_paths() -> list[str]:
    """Headers that ATen/cuda/CUDAContext.h needs (cuBLAS, cuSPARSE, ...) from torch's pip packages."""
    return [str(root / "include") for root in _pip_cuda_roots() if (root / "include").is_dir()]


def nvrtc_library() -> Path | None:
    """libnvrtc for torch's CMake config when the toolkit lacks it (a minimal toolkit install)."""
    home = find_cuda_home()
    if home and any((home / "lib64").glob("libnvrtc.so*")):
        return None
    found = sorted(lib for root in _pip_cuda_roots() for lib in (root / "lib").glob("libnvrtc.so.*"))
    return found[0] if found else None
