"""requirements.txt, environment.yml and pyproject.toml describe the same environment."""
import re
import tomllib

import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from myops.build import REPO_ROOT

PIN = re.compile(r"^\s*(?:-\s+)?([A-Za-z0-9_.\-]+)==([^\s#;]+)")


def pins(path):
    return dict(m.groups() for line in path.read_text().splitlines() if (m := PIN.match(line)))


def test_conda_and_pip_pins_agree():
    pip_pins = pins(REPO_ROOT / "requirements.txt")
    conda_pins = pins(REPO_ROOT / "environment.yml")
    assert pip_pins == conda_pins
    for required in ("torch", "jupyterlab", "nbval", "ninja", "matplotlib", "pytest"):
        assert required in pip_pins


def test_pinned_torch_is_inside_the_supported_range():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    torch_range = next(d for d in project["dependencies"] if d.startswith("torch"))
    specifier = SpecifierSet(torch_range.removeprefix("torch"))
    assert Version(pins(REPO_ROOT / "requirements.txt")["torch"]) in specifier
    assert Version(torch.__version__.split("+")[0]) in specifier


def test_cuda_compiler_pins_match_torchs_cuda_release():
    # nvcc, nvvm, crt and cccl of another release than torch's CUDA break the build (see requirements.txt).
    pip_pins = pins(REPO_ROOT / "requirements.txt")
    compiler = {name: version for name, version in pip_pins.items() if name.startswith("nvidia-")}
    assert set(compiler) == {"nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-cccl"}
    if torch.version.cuda is not None:
        assert all(v.startswith(torch.version.cuda + ".") for v in compiler.values()), (torch.version.cuda, compiler)
