"""The -D arguments that point csrc/CMakeLists.txt at the installed torch (and CUDA toolkit).

    cmake -S csrc -B build/cmake $(python -m myops.cmake_args)
"""
from __future__ import annotations

import shlex

import torch

from myops import toolchain


def cmake_args() -> list[str]:
    args = [f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"]
    if torch.version.cuda is None:
        return args
    # torch's CMake config of a CUDA build requires a CUDA toolkit even for a CPU-only library.
    home = toolchain.find_cuda_home()
    if home is not None:
        args += [f"-DCUDA_TOOLKIT_ROOT_DIR={home}", f"-DCMAKE_CUDA_COMPILER={home / 'bin' / 'nvcc'}"]
    args.append(f"-DMYOPS_CUDA_INCLUDE_DIRS={';'.join(toolchain.cuda_include_paths())}")
    nvrtc = toolchain.nvrtc_library()
    if nvrtc is not None:
        args.append(f"-DCUDA_nvrtc_LIBRARY={nvrtc}")
    args.append(f"-DTORCH_CUDA_ARCH_LIST={toolchain.cuda_arch_list()}")
    return args


if __name__ == "__main__":
    print(" ".join(shlex.quote(arg) for arg in cmake_args()))
