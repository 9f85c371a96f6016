"""`python -m benchmarks.gpu` on a machine without a GPU: everything it does before its first CUDA call.

The GPU work sits behind one seam, the backend object; these tests replace it with a fake that returns
made-up measurements, so planning, the exit statuses, results.json and the plots are proved here, and a
machine lent a GPU only has to measure.
"""
import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from benchmarks import gpu

REPO_ROOT = Path(__file__).resolve().parent.parent

FAKE_MEASUREMENTS = {
    "launch": [{"what": "myadd on 2 elements", "seconds": 4e-6}],
    "myadd": [{"dtype": d, "layout": layout, "elements": n, "regime": "HBM", "myadd_GBps": 3000.0,
               "aten_GBps": 3100.0, "copy_GBps": 3300.0, "ratio_vs_aten": 0.97, "ratio_vs_copy": 0.91}
              for d in gpu.DTYPES for layout in ("contiguous", "transposed") for n in (2**20, 2**24)],
    "myrmsnorm": [{"dtype": d, "rows": r, "cols": 1024, "regime": "HBM", "myrmsnorm_GBps": 2000.0,
                   "aten_GBps": 2500.0, "ratio_vs_aten": 0.8} for d in gpu.DTYPES for r in (4096, 65536)],
    "mymatmul": [{"dtype": d, "n": n, "ours_on": "CUDA cores", "aten_on": "tensor cores", "mymatmul_TFLOPs": 10.0,
                  "aten_TFLOPs": 400.0, "ratio_vs_aten": 0.025} for d in gpu.DTYPES for n in (1024, 2048)],
}
FAKE_GPU = {"torch": "2.11.0+cu130", "python": "3.12.3", "cuda": "13.0", "driver": "580.159.04", "gpu": "fake GPU",
            "capability": "9.0", "multiprocessors": 132, "memory_GiB": 139.8, "L2_MB": 60.0, "gpus": 1}


class FakeBackend:
    """Stands in for GpuBackend: records what it was asked, touches no GPU. Each keyword makes one step fail."""

    def __init__(self, gpu=True, toolkit_problem=None, build_fails=False, tests_pass=True, sanitizer="/cs",
                 sanitizer_finds=False, measure_raises=False, measurements=FAKE_MEASUREMENTS):
        self.gpu, self.toolkit_problem, self.build_fails = gpu, toolkit_problem, build_fails
        self.tests_pass, self.sanitizer, self.sanitizer_finds = tests_pass, sanitizer, sanitizer_finds
        self.measure_raises, self.measurements = measure_raises, measurements
        self.calls = []

    def machine(self):
        return FAKE_GPU if self.gpu else {**FAKE_GPU, "gpu": None, "driver": None}

    def toolkit(self):
        self.calls.append("toolkit")
        return {"problem": self.toolkit_problem, "cuda_home": "/usr/local/cuda", "toolkit_cuda": "13.0",
                "arch_list": "9.0", "sanitizer": self.sanitizer}

    def build(self, plan):
        self.calls.append("build")
        if self.build_fails:
            raise RuntimeError("myops: layer 'cuda' failed to compile. First error:\nmyadd.cu:3: error: nope")
        return gpu.Step("build", "passed", 41.0, facts={"layers_built": {"cuda": 40.0}})

    def run_tests(self, plan):
        self.calls.append("run_tests")
        counts = {"tests": 400, "failures": 0 if self.tests_pass else 2, "errors": 0, "skipped": 3}
        return gpu.TestRun(returncode=0 if self.tests_pass else 1, seconds=12.5, counts=counts)

    def sanitize(self, plan, sanitizer):
        self.calls.append(f"sanitize {sanitizer}")
        output = "========= Invalid __global__ read of size 4 bytes\n========= ERROR SUMMARY: 1 error\n1 failed"
        if self.sanitizer_finds:
            return [gpu.sanitizer_step("memcheck", gpu.SANITIZER_ERROR_EXIT, False, output, 30.0)]
        return [gpu.sanitizer_step(tool, 0, False, "========= ERROR SUMMARY: 0 errors\n9 passed in 3s", 20.0)
                for tool in gpu.SANITIZER_TESTS]

    def nccl(self, plan):
        self.calls.append("nccl")
        return gpu.Step("nccl", "passed", 9.0, "1 ranks, backend nccl, 36 calls; one GPU, so one rank")

    def measure(self, plan, into):
        self.calls.append("measure")
        into.update({key: list(rows) for key, rows in self.measurements.items()})
        if self.measure_raises:
            into["mymatmul"] = into["mymatmul"][:1]
            raise (torch.cuda.OutOfMemoryError("CUDA out of memory") if self.measure_raises is True
                   else self.measure_raises)
        return into


def results_of(tmp_path):
    return json.loads((tmp_path / "results.json").read_text())


def test_defaults_plan_every_step_and_dtype(tmp_path):
    plan = gpu.make_plan(gpu.parse_args(["--out", str(tmp_path)]))
    assert plan.run_tests and plan.run_sanitizer and plan.run_benchmarks and plan.dtypes == gpu.DTYPES
    assert plan.test_command[:3] == [sys.executable, "-m", "pytest"]
    assert plan.test_command[plan.test_command.index("-n") + 1] == "4"
    assert f"--junitxml={tmp_path / 'tests.xml'}" in plan.test_command
    assert set(gpu.CUDA_TESTS) <= set(plan.test_command)
    assert plan.build_command == [sys.executable, "-m", "myops.build", "--jobs", str(os.cpu_count())]
    assert gpu.parse_args([]).out == REPO_ROOT / "build" / "gpu"
    assert gpu.make_plan(gpu.parse_args(["--test-workers", "0"])).test_command[3:5] == ["-n", "0"]


def test_quick_plan_is_smaller():
    full, quick = (gpu.make_plan(gpu.parse_args(a)) for a in ([], ["--quick"]))
    assert len(quick.myadd_elements) < len(full.myadd_elements)
    assert len(quick.matmul_sizes) < len(full.matmul_sizes) and quick.min_run_time_s < full.min_run_time_s


def test_skipping_every_part_is_an_argument_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        gpu.parse_args(["--skip-tests", "--skip-sanitizer", "--skip-benchmarks"])
    assert exit_.value.code == 2
    assert "together leave nothing to run" in capsys.readouterr().err


def test_dry_run_lists_every_step_and_asks_nothing_of_the_backend(tmp_path, capsys):
    backend = FakeBackend()
    assert gpu.main(["--dry-run", "--out", str(tmp_path)], backend=backend) == gpu.EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("; the whole run within 300 s")
    assert [line.split(" ")[0].rstrip(":") for line in lines] == [
        "results", "machine", "build", "tests", "sanitizer", "sanitizer", "nccl", "myadd", "myrmsnorm", "triton",
        "mymatmul"]
    assert "-m myops.build --jobs" in lines[2] and "-m cuda tests" in lines[3]
    assert lines[4].startswith("sanitizer memcheck") and "mymatmul_tiled_kernel" in lines[4]
    assert "mymatmul (CUDA cores) vs torch.matmul (cuBLAS): float16, bfloat16, float32, float64" in lines[-1]
    assert backend.calls == [] and not list(tmp_path.iterdir())


def test_kernel_names_are_every_global_function_of_the_cuda_sources():
    names = gpu.kernel_names()
    sources = "".join(p.read_text() for folder in gpu.KERNEL_SOURCES for p in (REPO_ROOT / folder).glob("*.cu"))
    assert len(names) == sources.count("__global__") >= 5
    assert {"myadd_dense_kernel", "myadd_strided_kernel", "mymatmul_tiled_kernel", "myrmsnorm_kernel"} <= set(names)
    command = gpu.sanitizer_command("/opt/cs", "racecheck")
    assert command[:5] == ["/opt/cs", "--tool", "racecheck", "--error-exitcode", str(gpu.SANITIZER_ERROR_EXIT)]
    assert command.count("--kernel-name") == len(names) and "kns=mymatmul_tiled_kernel" in command
    assert command[-4:] == ["-m", "cuda and not large", *gpu.SANITIZER_TESTS["racecheck"]]


def test_sanitizer_verdicts_from_exit_status_and_output():
    clean = gpu.sanitizer_step("memcheck", 0, False, "========= ERROR SUMMARY: 0 errors\n12 passed in 3.1s", 9.0)
    assert (clean.status, clean.detail, clean.facts["tests"]) == ("passed", "========= ERROR SUMMARY: 0 errors",
                                                                  "12 passed in 3.1s")
    found = gpu.sanitizer_step("racecheck", gpu.SANITIZER_ERROR_EXIT, False,
                               "========= Error: Race reported between Write access at mymatmul\n"
                               "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n", 9.0)
    assert found.status == "failed" and "Race reported between Write access" in found.detail
    assert gpu.sanitizer_step("memcheck", 1, False, "3 failed, 9 passed in 2s", 9.0).detail == (
        "the tests under compute-sanitizer exited 1: 3 failed, 9 passed in 2s")
    assert gpu.sanitizer_step("memcheck", -9, True, "", 120.0).status == "timed out"


def test_regimes():
    assert gpu.regime(5e-6, 10**9, launch_seconds=4e-6, l2_bytes=60 * 2**20) == "launch-bound"
    assert gpu.regime(1e-4, 12 * 2**20, launch_seconds=4e-6, l2_bytes=60 * 2**20) == "in L2"
    assert gpu.regime(1e-4, 61 * 2**20, launch_seconds=4e-6, l2_bytes=60 * 2**20) == "HBM"
    assert gpu.matmul_engines(torch.bfloat16) == ("CUDA cores", "tensor cores")


def test_no_gpu_still_writes_results_with_the_failed_step(tmp_path, capsys):
    backend = FakeBackend(gpu=False)
    assert gpu.main(["--out", str(tmp_path)], backend=backend) == gpu.EXIT_NO_GPU
    printed = capsys.readouterr().out
    assert printed.startswith("ran on: torch 2.11.0+cu130 (CUDA 13.0), no NVIDIA driver found, no CUDA GPU, "
                              "Python 3.12.3\n")
    assert "no CUDA GPU: nothing measured" in printed
    assert backend.calls == [] and [p.name for p in tmp_path.iterdir()] == ["results.json"]
    results = results_of(tmp_path)
    assert results["exit_status"] == gpu.EXIT_NO_GPU and results["steps"][0]["name"] == "machine"


@pytest.mark.parametrize("failure, status, calls, failed_step", [
    ({"toolkit_problem": "no CUDA compiler"}, gpu.EXIT_NO_CUDA_LAYER, ["toolkit"], "toolkit"),
    ({"build_fails": True}, gpu.EXIT_BUILD_FAILED, ["toolkit", "build"], "build"),
    ({"tests_pass": False}, gpu.EXIT_TESTS_FAILED,
     ["toolkit", "build", "run_tests", "sanitize /cs", "nccl", "measure"], "tests"),
    ({"sanitizer_finds": True}, gpu.EXIT_SANITIZER_FAILED,
     ["toolkit", "build", "run_tests", "sanitize /cs", "nccl", "measure"], "sanitizer memcheck"),
    ({"measure_raises": True}, gpu.EXIT_MEASURE_FAILED,
     ["toolkit", "build", "run_tests", "sanitize /cs", "nccl", "measure"], "benchmarks"),
], ids=["toolkit", "build", "tests", "sanitizer", "benchmarks"])
def test_each_failure_has_its_exit_status_and_results_json(tmp_path, failure, status, calls, failed_step):
    backend = FakeBackend(**failure)
    assert gpu.main(["--out", str(tmp_path)], backend=backend) == status
    assert backend.calls == calls
    results = results_of(tmp_path)
    assert results["exit_status"] == status and results["gpu"] == "fake GPU"
    assert [s["name"] for s in results["steps"] if s["status"] != "passed"] == [failed_step]


def test_a_failed_build_reports_the_compiler_error(tmp_path):
    assert gpu.main(["--out", str(tmp_path)], backend=FakeBackend(build_fails=True)) == gpu.EXIT_BUILD_FAILED
    build_step = results_of(tmp_path)["steps"][-1]
    assert build_step["detail"].startswith("RuntimeError: myops: layer 'cuda' failed to compile. First error:\n"
                                           "myadd.cu:3: error: nope")


def test_a_failed_measurement_keeps_what_was_measured(tmp_path):
    assert gpu.main(["--out", str(tmp_path)], backend=FakeBackend(measure_raises=True)) == gpu.EXIT_MEASURE_FAILED
    results = results_of(tmp_path)
    assert results["steps"][-1]["detail"].startswith("OutOfMemoryError: CUDA out of memory")
    assert len(results["measurements"]["myadd"]) == len(FAKE_MEASUREMENTS["myadd"])
    assert len(results["measurements"]["mymatmul"]) == 1 and (tmp_path / "mymatmul_TFLOPs.png").is_file()


def test_the_budget_bounds_every_step_and_stops_the_measurements(tmp_path):
    plan = gpu.make_plan(gpu.parse_args(["--out", str(tmp_path), "--budget", "100"]))
    plan.deadline = time.monotonic() + 50
    assert 49 <= plan.time_left(plan.test_timeout_s) <= 50 and plan.time_left(10) == 10
    plan.deadline = time.monotonic() - 5
    assert plan.time_left(plan.build_timeout_s) == 1.0
    plan.myadd_elements, plan.myrmsnorm_shapes, plan.matmul_sizes = (2**12,), ((16, 64),), (32,)
    taken = {}
    with pytest.raises(gpu.BudgetSpent, match="the run's 100 s were spent"):
        gpu.measure(plan, device="cpu", seconds_of=lambda fn, t: 1e-3, l2_bytes=0, into=taken)
    assert taken["myadd"] == []


def test_a_spent_budget_is_a_timed_out_benchmark_step(tmp_path):
    backend = FakeBackend(measure_raises=gpu.BudgetSpent("the run's 300 s were spent"))
    assert gpu.main(["--out", str(tmp_path)], backend=backend) == gpu.EXIT_MEASURE_FAILED
    step = results_of(tmp_path)["steps"][-1]
    assert (step["name"], step["status"]) == ("benchmarks", "timed out")


def test_a_failed_nccl_run_has_its_exit_status_and_skip_nccl_leaves_it_out(tmp_path):
    class NcclFails(FakeBackend):
        def nccl(self, plan):
            self.calls.append("nccl")
            return gpu.Step("nccl", "failed", 3.0, "ChildFailedError: rank 1 exited with 1")

    backend = NcclFails()
    assert gpu.main(["--out", str(tmp_path)], backend=backend) == gpu.EXIT_NCCL_FAILED
    assert backend.calls[-2:] == ["nccl", "measure"]  # the measurements still run
    backend = FakeBackend()
    assert gpu.main(["--out", str(tmp_path), "--skip-nccl"], backend=backend) == gpu.EXIT_OK
    assert "nccl" not in backend.calls


def test_the_nccl_step_is_skipped_where_torch_has_no_nccl(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: False)
    plan = gpu.make_plan(gpu.parse_args(["--out", str(tmp_path)]))
    assert gpu.run_nccl(plan) == gpu.Step("nccl", "skipped", detail="this torch has no NCCL")


def test_no_sanitizer_is_a_skipped_step_not_a_failure(tmp_path):
    assert gpu.main(["--out", str(tmp_path)], backend=FakeBackend(sanitizer=None)) == gpu.EXIT_OK
    step = next(s for s in results_of(tmp_path)["steps"] if s["name"] == "sanitizer")
    assert step["status"] == "skipped" and "no compute-sanitizer" in step["detail"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the command would measure")
def test_command_without_a_gpu(tmp_path):
    result = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--out", str(tmp_path)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == gpu.EXIT_NO_GPU, result.stderr
    assert result.stdout.startswith(f"ran on: torch {torch.__version__} (CUDA {torch.version.cuda}), ")
    assert "machine: failed in 0 s: no CUDA GPU: nothing measured" in result.stdout
    assert results_of(tmp_path)["steps"] == [{"name": "machine", "status": "failed", "seconds": 0.0,
                                              "detail": gpu.NO_GPU_MESSAGE, "facts": {}}]


def test_full_run_with_fake_measurements_writes_results_and_plots(tmp_path, capsys):
    backend = FakeBackend()
    assert gpu.main(["--out", str(tmp_path)], backend=backend) == gpu.EXIT_OK
    assert backend.calls == ["toolkit", "build", "run_tests", "sanitize /cs", "nccl", "measure"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "myadd_GBps.png", "mymatmul_TFLOPs.png", "myrmsnorm_GBps.png", "results.json",
        "triton_myrmsnorm_GBps.png"]
    results = results_of(tmp_path)
    assert results["gpu"] == "fake GPU" and results["torch"] == "2.11.0+cu130" and results["exit_status"] == 0
    assert [s["name"] for s in results["steps"]] == ["build", "tests", "sanitizer memcheck", "sanitizer racecheck",
                                                     "nccl", "benchmarks"]
    assert results["tests"]["counts"] == {"tests": 400, "failures": 0, "errors": 0, "skipped": 3}
    assert results["tests"]["command"][:2] == ["-m", "pytest"]
    assert results["measurements"] == FAKE_MEASUREMENTS
    for png in tmp_path.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert printed.startswith("ran on: torch 2.11.0+cu130 (CUDA 13.0), driver 580.159.04, fake GPU (compute "
                              "capability 9.0, 132 SMs, 139.8 GiB, L2 60.0 MB; 1 GPU(s)), Python 3.12.3\n"
                              "toolkit: CUDA 13.0 at /usr/local/cuda, architectures 9.0, compute-sanitizer /cs\n")
    assert ("mymatmul  float64   n=2048      10.00 TFLOP/s (CUDA cores)  torch.matmul  400.00 (tensor cores)"
            "  vs aten 0.03") in printed
    assert "[HBM]" in printed and "launch    myadd on 2 elements: 4.0 us per call" in printed


def test_real_backend_finds_the_toolkit_the_build_uses():
    from myops import toolchain

    toolkit = gpu.GpuBackend().toolkit()
    assert toolkit["problem"] == toolchain.cuda_skip_reason()
    if toolkit["problem"] is None:
        assert toolkit["cuda_home"] == str(toolchain.find_cuda_home()) and toolkit["toolkit_cuda"] == "13.0"


def test_child_pytest_is_killed_at_its_timeout(tmp_path):
    plan = gpu.make_plan(gpu.parse_args(["--out", str(tmp_path), "--test-timeout", "1"]))
    plan.test_command = [sys.executable, "-c", "import time; time.sleep(60)"]
    run = gpu.run_child_pytest(plan)
    assert run.timed_out and not run.passed and run.seconds < 30 and run.counts == {}


def test_build_step_reports_the_first_compiler_error(tmp_path):
    plan = gpu.make_plan(gpu.parse_args(["--out", str(tmp_path)]))
    plan.build_command = [sys.executable, "-c", "print('myops: built layer schema in 1.5 s'); import sys; "
                          "sys.exit(\"myops: layer 'cuda' failed to compile. First error:\\nx.cu:1: error: y\")"]
    step = gpu.run_build(plan)
    assert step.status == "failed" and step.facts == {"layers_built": {"schema": 1.5}}
    assert step.detail.endswith("myops: layer 'cuda' failed to compile. First error:\nx.cu:1: error: y")


def test_junit_counts(tmp_path):
    xml = tmp_path / "t.xml"
    xml.write_text('<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="5" tests="9">'
                   "</testsuite></testsuites>")
    assert gpu.junit_counts(xml) == {"tests": 9, "failures": 1, "errors": 0, "skipped": 5}
    assert gpu.junit_counts(tmp_path / "missing.xml") == {}


# A tensor put on a CUDA device: device="cuda", device="cuda:1", .cuda(), .to("cuda").
CUDA_TENSOR = re.compile(r"""device=["']cuda|\.cuda\(\)|\.to\(["']cuda""")


# A decorator that runs a test on a GPU: needs_gpu, needs_two_gpus, needs_gpu_memory(...), or a parametrization
# over DEVICES / DEVICES_AND_META (tests/helpers.py).
GPU_DECORATOR = re.compile(r"needs_gpu|needs_two_gpus|\bDEVICES")


def _uses_cuda(node: ast.FunctionDef, source: str) -> bool:
    return CUDA_TENSOR.search(ast.get_source_segment(source, node) or "") is not None


def _collected(*args: str) -> list[str]:
    result = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "--collect-only", "-q", *args],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_the_gpu_run_collects_every_test_that_touches_cuda():
    """Every test function that puts a tensor on a CUDA device (or is parametrized over devices) is collected by
    the GPU run's `-m cuda`, and the run holds nothing else: each of its tests asks for CUDA."""
    touching = set()
    for path in sorted((REPO_ROOT / "tests").glob("test_*.py")):
        if path.name == "test_gpu_check.py":
            continue
        source = path.read_text()
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and (
                    _uses_cuda(node, source) or any(GPU_DECORATOR.search(ast.get_source_segment(source, d) or "")
                                                    for d in node.decorator_list)):
                touching.add(f"tests/{path.name}::{node.name}")
    planned = _collected(*gpu.CUDA_TESTS)
    # A file this torch cannot run at all (tests/test_stable_abi.py below torch 2.13) is skipped whole.
    collecting = {node.split("::")[0] for node in _collected("tests")}
    assert {node for node in touching if node.split("::")[0] in collecting} == {node.split("[")[0] for node in planned}
    assert len(planned) > 500
    assert not [node for node in planned if re.search(r"[\[-](cpu|meta)[\]-]", node)]  # only the CUDA cases


def test_measurement_code_runs_on_cpu_with_a_stand_in_timer(layers, tmp_path):
    """The same measuring code as on a GPU, on tiny CPU tensors, each timing replaced by one call and 1 ms."""
    plan = gpu.make_plan(gpu.parse_args(["--out", str(tmp_path)]))
    plan.myadd_elements, plan.myrmsnorm_shapes, plan.matmul_sizes = (2**12,), ((16, 64),), (32,)
    timed = []

    def one_call(fn, min_run_time):
        result = fn()
        timed.append(min_run_time)
        # Like with like: for transposed inputs too, myadd, ATen's add and the copy each write a contiguous result.
        assert not isinstance(result, torch.Tensor) or result.is_contiguous()
        return 1e-3

    measured = gpu.measure(plan, device="cpu", seconds_of=one_call, l2_bytes=2**14)
    assert [len(measured[k]) for k in ("launch", "myadd", "myrmsnorm", "mymatmul")] == [1, 4 * 2, 4, 4]
    assert len(timed) == 1 + 4 * (2 * 3 + 2 + 2) and set(timed) == {plan.min_run_time_s}
    first = measured["myadd"][0]
    assert (first["dtype"], first["layout"], first["elements"]) == ("float16", "contiguous", 2**12)
    assert first["myadd_GBps"] == pytest.approx(3 * 2**12 * 2 / 1e-3 / 1e9)
    assert first["ratio_vs_copy"] == pytest.approx(1.5) and first["ratio_vs_aten"] == 1.0
    # every timing equals the launch's (1 ms): all launch-bound
    assert {r["regime"] for key in ("myadd", "myrmsnorm") for r in measured[key]} == {"launch-bound"}
    assert measured["mymatmul"][-1]["mymatmul_TFLOPs"] == pytest.approx(2 * 32**3 / 1e-3 / 1e12)
    assert measured["mymatmul"][-1]["aten_on"] == "FP64 (tensor cores from sm_80)"
    gpu.write_results(tmp_path, {"measurements": measured})
    assert "myrmsnorm float64   16x64" in gpu.summary({"measurements": measured})
