"""csrc/CMakeLists.txt builds one libmyops.so that torch.ops.load_library users can load, with the
seed tutorial's own command and no system CUDA toolkit."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from myops import toolchain
from myops.build import REPO_ROOT

from helpers import without_system_cuda, without_system_cuda_reason


def cmake_version(cmake):
    return subprocess.run([cmake, "--version"], capture_output=True, text=True, check=True,
                          timeout=60).stdout.split()[2]


def available_cmakes():
    """The project's pinned CMake 4 (in the virtual environment) and the system's, if different."""
    found = {}
    for cmake in (Path(sys.executable).parent / "cmake", shutil.which("cmake", path="/usr/bin:/usr/local/bin")):
        if cmake and Path(cmake).exists():
            found.setdefault(cmake_version(cmake), str(cmake))
    return found


CMAKES = available_cmakes()
CMAKE4 = next((v for v in sorted(CMAKES) if v.startswith("4.")), None)
OLDER = [v for v in sorted(CMAKES) if not v.startswith("4.")]

# The seed tutorial's command, as written: only the prefix of the installed torch.
SEED_ARGS = [f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"]

# Runs in a fresh interpreter: the library defines the myops namespace, which the test process has.
CHECK = """
import sys, torch
torch.ops.load_library(sys.argv[1])
has = torch._C._dispatch_has_kernel_for_dispatch_key
if has("myops::myadd", "CPU"):  # the course's CPU layers
    a, b = torch.randn(100, 30).t(), torch.randn(30, 100)
    assert torch.equal(torch.ops.myops.myadd(a, b), a + b)
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(torch.ops.myops.mymatmul, (x, w))  # the autograd layer is in
cuda = [has(f"myops::{op}", "CUDA") for op in ("myadd", "myadd_", "myadd_inplace", "mymatmul", "myrmsnorm")]
print("cuda" if all(cuda) else "cpu" if not any(cuda) else "partial")
"""


def build_and_check(cmake, build_dir, *args, wrap=lambda command: command):
    configure = subprocess.run(wrap([cmake, "-S", str(REPO_ROOT / "csrc"), "-B", str(build_dir), *args]),
                               capture_output=True, text=True, timeout=300)
    assert configure.returncode == 0, configure.stdout[-2000:] + configure.stderr
    compile_ = subprocess.run(wrap([cmake, "--build", str(build_dir), "--parallel", "2"]),
                              capture_output=True, text=True, timeout=1200)
    assert compile_.returncode == 0, compile_.stdout[-3000:]
    check = subprocess.run([sys.executable, "-c", CHECK, str(build_dir / "libmyops.so")],
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr
    # the layers' protection against a driver that links libstdc++ statically (tests/test_build.py proves it works)
    assert "-l:libstdc++.so.6" in (build_dir / "CMakeFiles" / "myops.dir" / "link.txt").read_text()
    return configure.stdout, check.stdout.strip()


needs_hiding = pytest.mark.skipif(without_system_cuda_reason() is not None, reason=str(without_system_cuda_reason()))
needs_cuda_torch = pytest.mark.skipif(toolchain.cuda_skip_reason() is not None,
                                      reason=str(toolchain.cuda_skip_reason()))


# The oldest CMake found: the system's (/usr/bin or /usr/local/bin: 3.25 on Debian 12), else the pinned CMake 4.
OLDEST = (OLDER or [CMAKE4])[0]


@needs_hiding
@pytest.mark.skipif(OLDEST is None, reason="no CMake: neither the pinned CMake 4 nor one in /usr/bin or /usr/local/bin")
@pytest.mark.parametrize("version", [OLDEST], ids=lambda version: f"oldest-cmake-found-{version}")
def test_seed_command_with_the_oldest_cmake_builds_every_cpu_layer_without_a_system_toolkit(version):
    # Exactly the seed's flags, with the oldest CMake the project meets: the test's name says which one ran.
    log, layers = build_and_check(CMAKES[version], REPO_ROOT / "build" / f"cmake-{version}", *SEED_ARGS,
                                  wrap=without_system_cuda)
    assert layers == "cpu"
    if torch.version.cuda is not None:
        assert "myops: CUDA toolkit from pip" in log


@needs_hiding
@needs_cuda_torch
@pytest.mark.skipif(CMAKE4 is None, reason="the pinned CMake 4 is not installed")
def test_cuda_layer_builds_with_cmake4_without_a_system_toolkit():
    # CMake 3.25 does not know nvcc 13's C++20 dialect; the architecture list only keeps the build short.
    # The CPU layers are the seed test's; here the schema and the CUDA layer only (a third of the compile time),
    # and no precompiled header: it would serve one C++ file.
    _, layers = build_and_check(CMAKES[CMAKE4], REPO_ROOT / "build" / f"cmake-{CMAKE4}-cuda", *SEED_ARGS,
                                "-DMYOPS_WITH_CUDA=ON", "-DMYOPS_LAYERS=cuda", "-DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON",
                                f"-DTORCH_CUDA_ARCH_LIST={toolchain.DEFAULT_CUDA_ARCH_LIST}", wrap=without_system_cuda)
    assert layers == "cuda"


def cuda_architectures(command: str) -> set[str]:
    """What nvcc is asked to emit, as ("sm_80": machine code, "compute_80": PTX), whichever flag asks for it."""
    found = set()
    for arch, codes in re.findall(r"(?:-gencode[= ]|--generate-code=)arch=compute_(\d+),code=\[?([\w,]+)\]?", command):
        found.update(codes.split(","))
    found.update(re.findall(r"(?:-arch[= ]|--gpu-architecture[= ])(\w+)", command))
    return found


@needs_cuda_torch
@pytest.mark.skipif(CMAKE4 is None, reason="the pinned CMake 4 is not installed")
@pytest.mark.parametrize("arch_list, expected", [("8.0+PTX", {"sm_80", "compute_80"}),
                                                 ("9.0;10.0", {"sm_90", "sm_100"})])
def test_cuda_compile_lines_carry_the_requested_architectures(tmp_path, arch_list, expected):
    """TORCH_CUDA_ARCH_LIST decides the machine code of csrc/cuda, and nothing else adds an architecture.

    torch's config enables the CUDA language itself, turns CMAKE_CUDA_ARCHITECTURES off and appends its -gencode
    flags to CMAKE_CUDA_FLAGS, which native CUDA targets use. Configure only: the compile lines are read from
    compile_commands.json, nothing is compiled.
    """
    result = subprocess.run([CMAKES[CMAKE4], "-S", str(REPO_ROOT / "csrc"), "-B", str(tmp_path), *SEED_ARGS,
                             "-DMYOPS_WITH_CUDA=ON", "-DMYOPS_LAYERS=cuda", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                             f"-DTORCH_CUDA_ARCH_LIST={arch_list}"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    commands = json.loads((tmp_path / "compile_commands.json").read_text())
    cuda = {Path(entry["file"]).name: cuda_architectures(entry["command"]) for entry in commands
            if entry["file"].endswith(".cu")}
    assert sorted(cuda) == sorted(path.name for path in (REPO_ROOT / "csrc" / "cuda").glob("*.cu"))
    assert all(found == expected for found in cuda.values()), cuda


@needs_cuda_torch
@pytest.mark.skipif(toolchain.pip_toolkit_root() is None, reason="no pip CUDA compiler to lay out as a named toolkit")
def test_a_toolkit_named_by_cuda_home_is_used_as_it_is(tmp_path):
    # A toolkit of its own, in the usual layout, built from the pinned pip compiler: any machine has one to name.
    named = toolchain.toolkit_layout(toolchain.pip_toolkit_root(), tmp_path / "named-toolkit")
    result = subprocess.run([CMAKES[max(CMAKES)], "-S", str(REPO_ROOT / "csrc"), "-B", str(tmp_path / "build"),
                             *SEED_ARGS], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "CUDA_HOME": str(named)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert "myops: CUDA toolkit from pip" not in result.stdout
    assert str(named / "bin" / "nvcc") in (tmp_path / "build" / "CMakeCache.txt").read_text()


def test_the_pinned_cmake_is_installed():
    assert CMAKE4 is not None, CMAKES
