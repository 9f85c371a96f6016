"""The GPU check's CPU half on a stand-in for the GPU machine's image, here, without a GPU.

That machine runs what travels (the working tree: tracked and untracked files, no build/) with its own python3:
Python 3.12, torch 2.11.0's CUDA build, no notebook packages, a system nvcc rather than pip's. `make gpu-image`
makes such an environment under build/gpu-image/ (tools/gpu-image.txt; the pinned pip nvcc laid out as a system
toolkit); these tests copy the working tree beside it and run there, with /usr/local/cuda hidden and the stand-in
toolkit found on PATH: every layer builds against torch 2.11's headers (the CUDA layer too), `benchmarks.gpu`
plans every step and writes results.json when it finds no GPU, `pytest -m cuda tests` collects, and the GPU
check's own tests pass. Skipped where the environment was not made (about 5 GB).
"""
import json
import os
import shutil
import subprocess

import pytest

from helpers import without_system_cuda, without_system_cuda_reason
from myops.build import REPO_ROOT

IMAGE = REPO_ROOT / "build" / "gpu-image"
PYTHON = IMAGE / "venv" / "bin" / "python"
TOOLKIT = IMAGE / "cuda"

pytestmark = pytest.mark.skipif(not (IMAGE / ".installed").is_file(),
                                reason="no stand-in for the GPU machine's image: `make gpu-image` makes it")


def travelling_files() -> list[str]:
    """What the device machine gets: the working tree's tracked and untracked-but-not-ignored files."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                            capture_output=True, text=True, check=True, timeout=60).stdout
    return sorted(name for name in listed.split("\0") if name and (REPO_ROOT / name).is_file())


@pytest.fixture(scope="module")
def tree():
    """A copy of the working tree in build/gpu-image/tree, synced to it; its build/ is kept between runs."""
    if without_system_cuda_reason():
        pytest.skip(without_system_cuda_reason())
    root = IMAGE / "tree"
    wanted = set(travelling_files())
    for path in sorted(root.rglob("*"), reverse=True) if root.exists() else []:
        name = str(path.relative_to(root))
        if name.split("/")[0] in ("build", "__pycache__") or "__pycache__" in path.parts:
            continue
        if path.is_file() and name not in wanted:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    for name in wanted:
        source, copy = REPO_ROOT / name, root / name
        if not copy.is_file() or copy.read_bytes() != source.read_bytes():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
    return root


def in_image(tree, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python3 args...` as on the GPU machine: the image's Python, the stand-in toolkit first on PATH, the
    system toolkit hidden, CUDA_HOME unset."""
    path = f"{TOOLKIT / 'bin'}:{PYTHON.parent}:/usr/bin:/bin"
    command = ["env", f"PATH={path}", "PYTHONDONTWRITEBYTECODE=1", str(PYTHON), *args]
    # As there, it runs outside any suite, with a temporary folder of its own: this run's holds its other workers'
    # files, which a pytest there would count as its own leftovers
    machine_temp = IMAGE / "tmp"
    machine_temp.mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST", "MYOPS_")) and key != "TORCHINDUCTOR_CACHE_DIR"}
    env["TMPDIR"] = str(machine_temp)
    return subprocess.run(without_system_cuda(command), cwd=tree, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_image_is_what_the_gpu_machine_runs():
    facts = subprocess.run([str(PYTHON), "-c", "import platform, torch; print(platform.python_version(), "
                            "torch.__version__, torch.version.cuda)"], capture_output=True, text=True, timeout=120)
    version, torch_version, cuda = facts.stdout.split()
    assert version.startswith("3.12.") and torch_version == "2.11.0+cu130" and cuda == "13.0", facts.stderr
    missing = subprocess.run([str(PYTHON), "-c", "import importlib.util as u; print([m for m in ('nbval', "
                              "'nbformat', 'nbclient', 'IPython', 'nvidia.cu13.bin') if u.find_spec(m)])"],
                             capture_output=True, text=True, timeout=60)
    assert missing.stdout.strip() == "[]", missing.stdout + missing.stderr


def test_every_layer_builds_against_its_torch_with_the_toolkit_on_path(tree):
    built = in_image(tree, "-m", "myops.build", "--jobs", "2")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    probe = in_image(tree, "-c", "import myops, torch; from myops import toolchain; layers = myops.load(); "
                     "print(toolchain.find_cuda_home()); print(layers); "
                     "print(torch._C._dispatch_has_kernel_for_dispatch_key('myops::myadd', 'CUDA'))", timeout=300)
    assert probe.returncode == 0, probe.stderr[-3000:]
    home, layers, registered = probe.stdout.splitlines()[-3:]
    assert home == str(TOOLKIT) and "'cuda'" in layers and registered == "True"


def test_the_gpu_check_plans_every_step_and_reports_no_gpu(tree, tmp_path):
    dry = in_image(tree, "-m", "benchmarks.gpu", "--dry-run", timeout=300)
    assert dry.returncode == 0, dry.stderr[-3000:]
    steps = [line.split(" ")[0].rstrip(":") for line in dry.stdout.splitlines()]
    assert steps == ["results", "machine", "build", "tests", "sanitizer", "sanitizer", "nccl", "myadd", "myrmsnorm",
                     "triton", "mymatmul"]
    run = in_image(tree, "-m", "benchmarks.gpu", "--out", str(tmp_path), timeout=300)
    assert run.returncode == 3, run.stdout + run.stderr[-3000:]
    assert run.stdout.startswith("ran on: torch 2.11.0+cu130 (CUDA 13.0), ")
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["python"].startswith("3.12.") and results["steps"][0]["detail"] == "no CUDA GPU: nothing measured"


def test_cuda_tests_collect_without_the_notebook_packages(tree):
    collected = in_image(tree, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "--collect-only", "-q",
                         "-m", "cuda", "tests", timeout=600)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    nodes = [line for line in collected.stdout.splitlines() if "::" in line]
    assert len(nodes) > 500 and not [node for node in nodes if "test_stable_abi.py" in node]


def test_the_gpu_checks_cpu_half_passes_there(tree):
    result = in_image(tree, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q", "-rs",
                      "tests/test_gpu_check.py", "tests/test_cuda_layer.py", "tests/test_source.py",
                      "tests/test_stable_abi.py", "tests/test_notebook_robustness.py", timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "the stable-ABI operators need torch >= 2.13; this is torch 2.11.0+cu130" in result.stdout
    assert "the notebook packages are not installed here" in result.stdout
