"""csrc/CMakeLists.txt builds one libmyops.so that torch.ops.load_library users can load."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from myops import toolchain
from myops.build import REPO_ROOT
from myops.cmake_args import cmake_args


def cmake_version(cmake):
    return subprocess.run([cmake, "--version"], capture_output=True, text=True,
                          check=True).stdout.split()[2]


def available_cmakes():
    """The project's pinned CMake 4 (in the virtual environment) and the system's, if different."""
    found = {}
    for cmake in (Path(sys.executable).parent / "cmake", shutil.which("cmake", path="/usr/bin:/usr/local/bin")):
        if cmake and Path(cmake).exists():
            found.setdefault(cmake_version(cmake), str(cmake))
    return found


CMAKES = available_cmakes()
CMAKE4 = next((v for v in sorted(CMAKES) if v.startswith("4.")), None)

# Runs in a fresh interpreter: the library defines the myops namespace, which the test process has.
CHECK = """
import sys, torch
torch.ops.load_library(sys.argv[1])
a, b = torch.randn(100, 30).t(), torch.randn(30, 100)
assert torch.equal(torch.ops.myops.myadd(a, b), a + b)
if torch._C._dispatch_has_kernel_for_dispatch_key("myops::mymatmul", "AutogradCPU"):  # the autograd layer
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(torch.ops.myops.mymatmul, (x, w))
cuda = [torch._C._dispatch_has_kernel_for_dispatch_key(f"myops::{op}", "CUDA") for op in ("myadd", "mymatmul")]
print("cuda" if all(cuda) else "cpu" if not any(cuda) else "partial")
"""


def build_and_check(version, *extra):
    cmake = CMAKES[version]
    build_dir = REPO_ROOT / "build" / f"cmake-{version}{'-cuda' if '-DMYOPS_WITH_CUDA=ON' in extra else ''}"
    configure = subprocess.run([cmake, "-S", str(REPO_ROOT / "csrc"), "-B", str(build_dir), *cmake_args(), *extra],
                               capture_output=True, text=True)
    assert configure.returncode == 0, configure.stderr
    compile_ = subprocess.run([cmake, "--build", str(build_dir), "--parallel", "2"], capture_output=True, text=True)
    assert compile_.returncode == 0, compile_.stdout[-3000:]
    check = subprocess.run([sys.executable, "-c", CHECK, str(build_dir / "libmyops.so")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    return check.stdout.strip()


# Each CMake builds once. CMake 4 builds every layer, with CUDA where it can be compiled (CMake 3.25 does
# not know nvcc 13's C++20 dialect); other versions build the CPU layer only (MYOPS_LAYERS), which is enough
# to prove the configuration works and keeps the suite's cold run short.
WITH_CUDA = toolchain.cuda_skip_reason() is None


@pytest.mark.parametrize("version", sorted(CMAKES))
def test_cmake_build_loads_and_computes(version):
    if version == CMAKE4:
        cuda = WITH_CUDA
        assert build_and_check(version, *(["-DMYOPS_WITH_CUDA=ON"] if cuda else [])) == ("cuda" if cuda else "cpu")
    else:
        assert build_and_check(version, "-DMYOPS_LAYERS=cpu") == "cpu"


def test_both_major_versions_are_covered():
    assert any(v.startswith("4.") for v in CMAKES), CMAKES
