"""csrc/CMakeLists.txt builds one libmyops.so that torch.ops.load_library users can load."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("version", sorted(CMAKES))
def test_cmake_build_loads_and_computes(version):
    cmake = CMAKES[version]
    build_dir = REPO_ROOT / "build" / f"cmake-{version}"
    subprocess.run([cmake, "-S", str(REPO_ROOT / "csrc"), "-B", str(build_dir), *cmake_args()],
                   check=True, capture_output=True)
    subprocess.run([cmake, "--build", str(build_dir), "--parallel", "2"], check=True, capture_output=True)
    library = build_dir / "libmyops.so"
    # A fresh interpreter: this library defines the myops namespace, which the test process already has.
    check = subprocess.run([sys.executable, "-c", f"""
import torch
torch.ops.load_library({str(library)!r})
a, b = torch.randn(100, 30).t(), torch.randn(30, 100)
assert torch.equal(torch.ops.myops.myadd(a, b), a + b)
print("ok")
"""], capture_output=True, text=True)
    assert check.stdout == "ok\n", check.stderr


def test_both_major_versions_are_covered():
    assert any(v.startswith("4.") for v in CMAKES), CMAKES
