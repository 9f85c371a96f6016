"""The C++ runner of notebook 15 (csrc/deploy/): libmyops.so and an AOTInductor package run with no Python, and
its output equals ATen's; built with the seed's CMake command style, with and without a system CUDA toolkit."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from myops.build import REPO_ROOT

from helpers import without_system_cuda, without_system_cuda_reason

sys.path.insert(0, str(REPO_ROOT / "csrc" / "deploy"))
import deploytools  # noqa: E402

# Made in a fresh interpreter: the package is compiled with our layers loaded, and this process must not load
# libmyops.so next to them (a second TORCH_LIBRARY(myops) aborts the process).
PACKAGE = """
import sys
sys.path.insert(0, "csrc/deploy")
import deploytools, myops
myops.load("schema", "cpu", "autograd", "inplace_or_view", "meta")
print(deploytools.aoti_package("block", deploytools.Block(), deploytools.sample_inputs()).relative)
"""


@pytest.fixture(scope="module")
def package():
    made = deploytools.run_python(PACKAGE)
    assert made.returncode == 0, made.stderr[-3000:]
    return REPO_ROOT / made.stdout.strip()


@pytest.fixture(scope="module")
def built():
    return deploytools.build_library(), deploytools.build_runner()


def test_runner_output_equals_aten(package, built, tmp_path):
    library, runner = built
    inputs = deploytools.sample_inputs(seed=3)  # other values than the package was traced with: shapes are fixed
    deploytools.write_inputs(tmp_path / "in", inputs)
    ran = deploytools.run_runner(runner.path, package, tmp_path / "in", tmp_path / "out", library.path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "myops_runner: 2 inputs, 1 output, sizes [8, 16]\n"
    (out,) = deploytools.read_outputs(tmp_path / "out")
    torch.testing.assert_close(out, deploytools.reference(deploytools.Block(), *inputs))


def test_the_loader_leaves_nothing_in_the_temporary_folder(package, built, tmp_path):
    """The runner's loader extracts the package into its temporary folder and never removes it: run_runner gives
    it one of its own under build/tmp/ and removes it afterwards."""
    import tempfile

    library, runner = built
    deploytools.write_inputs(tmp_path / "in", deploytools.sample_inputs())
    here = set(Path(tempfile.gettempdir()).glob("aotinductor_*"))
    scratch = set((REPO_ROOT / "build" / "tmp").glob("deploy-*"))
    ran = deploytools.run_runner(runner.path, package, tmp_path / "in", tmp_path / "out", library.path)
    assert ran.returncode == 0, ran.stderr
    assert set(Path(tempfile.gettempdir()).glob("aotinductor_*")) == here
    assert set((REPO_ROOT / "build" / "tmp").glob("deploy-*")) == scratch
    with deploytools.scratch_env() as env:
        assert Path(env["TMPDIR"]).parent == REPO_ROOT / "build" / "tmp"
        assert (Path(env["TMPDIR"]) / "probe").write_text("x") and subprocess.run(
            [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"], env=env, capture_output=True,
            text=True).stdout.strip() == env["TMPDIR"]
    assert not Path(env["TMPDIR"]).exists()


def test_runner_without_the_library_names_the_missing_operator(package, built, tmp_path):
    _, runner = built
    deploytools.write_inputs(tmp_path / "in", deploytools.sample_inputs())
    ran = deploytools.run_runner(runner.path, package, tmp_path / "in", tmp_path / "out")
    assert (ran.returncode, ran.stderr) == (1, "myops_runner: Could not find schema for myops::myadd.\n")


def test_runner_refuses_inputs_of_the_wrong_size(package, built, tmp_path):
    library, runner = built
    deploytools.write_inputs(tmp_path / "in", deploytools.sample_inputs())
    (tmp_path / "in" / "inputs.txt").write_text("input0.f32 8 15\ninput1.f32 8 16\n")
    ran = deploytools.run_runner(runner.path, package, tmp_path / "in", tmp_path / "out", library.path)
    assert ran.returncode == 1
    assert ran.stderr.endswith("input0.f32 holds 512 bytes, but sizes [8, 15] need 480\n")


def test_runner_usage(built):
    _, runner = built
    ran = subprocess.run([str(runner.path)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2
    assert ran.stderr == "usage: myops_runner [--load LIBRARY.so]... PACKAGE.pt2 INPUT_DIR OUTPUT_DIR\n"


def test_a_warm_build_builds_nothing(built):
    assert deploytools.build_library().seconds is None
    assert deploytools.build_runner().seconds is None


def test_both_cmake_projects_share_one_toolkit_file():
    shared = "torch_cuda_toolkit.cmake"
    for cmake_lists in (REPO_ROOT / "csrc" / "CMakeLists.txt", REPO_ROOT / "csrc" / "deploy" / "CMakeLists.txt"):
        text = cmake_lists.read_text()
        assert f"cmake/{shared}\")" in text and "function(myops_lay_out_pip_toolkit" not in text, cmake_lists


@pytest.mark.skipif(without_system_cuda_reason() is not None, reason=str(without_system_cuda_reason()))
def test_runner_builds_and_runs_without_a_system_toolkit(package, built, tmp_path):
    """The seed's command for csrc/deploy with /usr/local/cuda hidden and no nvcc on PATH, into a fresh folder."""
    library, _ = built
    cmake = deploytools.cmake()
    build_dir = tmp_path / "runner"
    logs = []
    for command in ([cmake, "-S", str(REPO_ROOT / "csrc" / "deploy"), "-B", str(build_dir),
                     f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"],
                    [cmake, "--build", str(build_dir), "--parallel", "2"]):
        result = subprocess.run(without_system_cuda(command), capture_output=True, text=True, timeout=1200)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr
        logs.append(result.stdout)
    if torch.version.cuda is not None:
        assert "myops: CUDA toolkit from pip" in logs[0]  # the shared toolkit file laid out pip's
    inputs = deploytools.sample_inputs(seed=4)
    deploytools.write_inputs(tmp_path / "in", inputs)
    (tmp_path / "out").mkdir()
    ran = subprocess.run(without_system_cuda([str(build_dir / "myops_runner"), "--load", str(library.path),
                                              str(package), str(tmp_path / "in"), str(tmp_path / "out")]),
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    (out,) = deploytools.read_outputs(tmp_path / "out")
    torch.testing.assert_close(out, deploytools.reference(deploytools.Block(), *inputs))


def test_a_process_keeps_its_temporary_folder_in_build_until_it_ends():
    """myops.paths.temp_dir_in_build, which notebook 15 and exercise 15's check call before loading a package."""
    program = ("import tempfile; from myops.paths import temp_dir_in_build; folder = temp_dir_in_build('probe'); "
               "print(folder); assert tempfile.gettempdir() == str(folder)")
    first = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    left = Path(first.stdout.strip())
    assert left.parent == REPO_ROOT / "build" / "tmp" and left.is_dir()  # its process has ended; the folder stays
    second = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert not left.exists()  # the next process removed it
