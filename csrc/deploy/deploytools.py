"""Notebook 15 and tests/test_deploy.py: the model, its cached AOTInductor package, the CMake builds of
libmyops.so and of the C++ runner, and the files the runner reads and writes.

    import deploytools            # with csrc/deploy on sys.path
    package = deploytools.aoti_package("block", deploytools.Block(), deploytools.sample_inputs())

Everything is built into build/deploy/ once and reused while its inputs are unchanged: a package is keyed on the
model's code, the C++ sources of the operators and the torch version; a CMake build on its sources, its CMake
files and the torch version. A warm run builds nothing.

The AOTInductor loader extracts every package it loads into the temporary folder and never removes it: the processes
started here get a temporary folder of their own under build/tmp/, removed when they end.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from myops.paths import BUILD_DIR

REPO_ROOT = Path(__file__).resolve().parents[2]
CSRC = REPO_ROOT / "csrc"
BUILD = REPO_ROOT / "build" / "deploy"
LIBRARY_BUILD = BUILD / "myops"    # cmake -S csrc -B build/deploy/myops: libmyops.so
RUNNER_BUILD = BUILD / "runner"    # cmake -S csrc/deploy -B build/deploy/runner: myops_runner

ROWS, FEATURES = 8, 16


# BEGIN model
class Block(torch.nn.Module):
    """A toy residual block on the course's operators: (x + residual + shift) @ weight, RMS-normalized."""

    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(15)
        self.weight = torch.nn.Parameter(torch.randn(FEATURES, FEATURES, generator=generator) / FEATURES**0.5)
        self.norm_weight = torch.nn.Parameter(1 + 0.1 * torch.randn(FEATURES, generator=generator))
        self.register_buffer("shift", 0.1 * torch.randn(ROWS, FEATURES, generator=generator))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = torch.ops.myops.myadd(x, residual)
        torch.ops.myops.myadd_inplace(h, self.shift)  # h is new and needs no gradient: in place is allowed
        h = torch.ops.myops.mymatmul(h, self.weight)
        return torch.ops.myops.myrmsnorm(h, self.norm_weight, 1e-6)
# END model


def reference(model: Block, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """The same computation with ATen's operators."""
    with torch.no_grad():
        h = (x + residual + model.shift) @ model.weight
        return torch.rms_norm(h, (FEATURES,), model.norm_weight, 1e-6)


# BEGIN python_model
class PyBlock(torch.nn.Module):
    """The same block's first two steps on notebook 11's Python operators (namespace pyops)."""

    def __init__(self):
        super().__init__()
        self.weight = Block().weight

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return torch.ops.pyops.mymatmul(torch.ops.pyops.myadd(x, residual), self.weight)
# END python_model


def sample_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(ROWS, FEATURES, generator=generator), torch.randn(ROWS, FEATURES, generator=generator))


# -- what a build depends on --------------------------------------------------------------------------------------
def operator_sources() -> list[Path]:
    """The C++ of the course's operators: every source and csrc/ header of the layers libmyops.so holds."""
    from myops.build import Builder

    builder = Builder(CSRC, REPO_ROOT / "build")
    return sorted({path for layer in builder.course_layers() for path in builder.sources(layer) + builder.headers(layer)})


def _digest(*parts: str | bytes | Path) -> str:
    digest = hashlib.sha256(torch.__version__.encode())
    for part in parts:
        if isinstance(part, Path):
            digest.update(str(part.relative_to(REPO_ROOT)).encode())
            part = part.read_bytes()
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()


@dataclass
class Built:
    """What a cached build returned: the product, and how long building took (None: reused from build/)."""
    path: Path
    seconds: float | None

    @property
    def relative(self) -> str:
        return str(self.path.relative_to(REPO_ROOT))


def _cached(product: Path, key: str, build) -> Built:
    """`build()` makes `product` unless a stamp beside it says it was made from `key`."""
    stamp = product.with_name(product.name + ".key")
    if product.exists() and stamp.is_file() and stamp.read_text() == key:
        return Built(product, None)
    stamp.unlink(missing_ok=True)
    start = time.perf_counter()
    build()
    stamp.write_text(key)
    return Built(product, time.perf_counter() - start)


# -- the AOTInductor package ---------------------------------------------------------------------------------------
def aoti_package(name: str, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                 also_keyed_on: tuple[Path, ...] = ()) -> Built:
    """build/deploy/<name>.pt2: `model` exported and compiled by AOTInductor for the CPU, or the cached package.

    The key is this file (the model classes and their weights), the inputs' shapes, the operators' C++, the
    files `also_keyed_on` (Python operators, say) and the torch version.
    """
    shapes = repr([tuple(t.shape) for t in inputs])
    key = _digest(name, Path(__file__).resolve(), shapes, *operator_sources(), *also_keyed_on)
    product = BUILD / f"{name}.pt2"

    def build():
        product.parent.mkdir(parents=True, exist_ok=True)
        program = torch.export.export(model, inputs)
        torch._inductor.aoti_compile_and_package(program, package_path=str(product))

    return _cached(product, key, build)


# -- the CMake builds ----------------------------------------------------------------------------------------------
def cmake() -> str:
    """The project's pinned CMake (in the virtual environment), else the first on PATH."""
    pinned = Path(sys.executable).parent / "cmake"
    found = str(pinned) if pinned.exists() else shutil.which("cmake")
    if found is None:
        raise RuntimeError("deploy: no cmake found; install the project's requirements (make setup)")
    return found


def _cmake_build(source: Path, build_dir: Path, product: str, inputs: list[Path]) -> Built:
    # The seed tutorial's command: only the prefix of the installed torch.
    args = [f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"]
    key = _digest(cmake(), *args, *inputs)

    def build():
        for command in ([cmake(), "-S", str(source), "-B", str(build_dir), *args],
                        [cmake(), "--build", str(build_dir), "--parallel", "2"]):
            result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
            if result.returncode != 0:
                raise RuntimeError(f"deploy: {' '.join(command[:2])} failed:\n{result.stdout[-3000:]}{result.stderr}")

    return _cached(build_dir / product, key, build)


def build_library() -> Built:
    """libmyops.so, built by csrc/CMakeLists.txt into build/deploy/myops/."""
    cmake_files = [CSRC / "CMakeLists.txt", CSRC / "layers.json", *sorted((CSRC / "cmake").glob("*.cmake"))]
    return _cmake_build(CSRC, LIBRARY_BUILD, "libmyops.so", cmake_files + operator_sources())


def build_runner() -> Built:
    """myops_runner, built by csrc/deploy/CMakeLists.txt into build/deploy/runner/."""
    deploy = CSRC / "deploy"
    inputs = [deploy / "CMakeLists.txt", deploy / "runner.cpp", *sorted((CSRC / "cmake").glob("*.cmake"))]
    return _cmake_build(deploy, RUNNER_BUILD, "myops_runner", inputs)


# -- the runner's files --------------------------------------------------------------------------------------------
def write_inputs(folder: Path, tensors: tuple[torch.Tensor, ...]) -> list[str]:
    """Each tensor as raw little-endian float32 (input0.f32, ...) and folder/inputs.txt naming files and sizes."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, tensor in enumerate(tensors):
        name = f"input{i}.f32"
        (folder / name).write_bytes(tensor.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes())
        lines.append(" ".join([name, *map(str, tensor.shape)]))
    (folder / "inputs.txt").write_text("\n".join(lines) + "\n")
    return lines


def read_outputs(folder: Path) -> list[torch.Tensor]:
    """The tensors the runner wrote: folder/outputs.txt names each file and its sizes."""
    import numpy as np

    outputs = []
    for line in (folder / "outputs.txt").read_text().splitlines():
        name, *sizes = line.split()
        values = np.frombuffer((folder / name).read_bytes(), dtype="<f4").copy()
        outputs.append(torch.from_numpy(values).reshape([int(s) for s in sizes]))
    return outputs


def run_runner(runner: Path, package: Path, inputs: Path, outputs: Path, *libraries: Path,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """myops_runner on `package` with `libraries` loaded first; its own output, paths made relative."""
    outputs.mkdir(parents=True, exist_ok=True)
    for stale in outputs.glob("*"):
        stale.unlink()
    command = [str(runner), *[arg for library in libraries for arg in ("--load", str(library))],
               str(package), str(inputs), str(outputs)]
    with scratch_env(env) as scratch:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=scratch)
    result.stdout = result.stdout.replace(str(REPO_ROOT) + "/", "")
    result.stderr = result.stderr.replace(str(REPO_ROOT) + "/", "")
    return result


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    """`code` in a fresh Python process (the repository root on sys.path, no library of ours loaded)."""
    with scratch_env() as scratch:
        result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600,
                                cwd=REPO_ROOT, env=scratch)
    result.stdout = result.stdout.replace(str(REPO_ROOT) + "/", "")
    result.stderr = result.stderr.replace(str(REPO_ROOT) + "/", "")
    return result


@contextlib.contextmanager
def scratch_env(env: dict[str, str] | None = None):
    """`env` (default: this process's) with a temporary folder of its own under build/tmp/, removed afterwards:
    where a child process's AOTInductor loader extracts the packages it loads."""
    root = BUILD_DIR / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix="deploy-") as folder:
        yield {**(os.environ if env is None else env), "TMPDIR": folder}
