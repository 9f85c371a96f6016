"""A convenience: the -D arguments for csrc/CMakeLists.txt with the installed torch.

    cmake -S csrc -B build/cmake $(python -m myops.cmake_args)

The prefix of torch's CMake config is all the project needs (CMakeLists.txt finds the pip CUDA
toolkit itself); for CUDA builds of torch the architectures are added, which otherwise default to
every architecture torch supports (a long build of csrc/cuda with -DMYOPS_WITH_CUDA=ON).
"""
from __future__ import annotations

import shlex

import torch

from myops import toolchain


def cmake_args() -> list[str]:
    args = [f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"]
    if torch.version.cuda is not None:
        args.append(f"-DTORCH_CUDA_ARCH_LIST={toolchain.cuda_arch_list()}")
    return args


if __name__ == "__main__":
    print(" ".join(shlex.quote(arg) for arg in cmake_args()))
