"""`python -m benchmarks.gpu` on a machine without a GPU: everything it does before its first CUDA call.

The GPU work sits behind one seam, the backend object; these tests replace it with a fake that returns
made-up measurements, so planning, the exit statuses, results.json and the plots are proved here, and a
machine lent a GPU only has to measure.
"""
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import gpu

REPO_ROOT = Path(__file__).resolve().parent.parent

FAKE_MEASUREMENTS = {
    "myadd": [{"dtype": d, "layout": layout, "elements": n, "myadd_GBps": 3000.0, "aten_GBps": 3100.0,
               "copy_GBps": 3300.0, "ratio_vs_aten": 0.97, "ratio_vs_copy": 0.91}
              for d in gpu.DTYPES for layout in ("contiguous", "transposed") for n in (2**20, 2**24)],
    "myrmsnorm": [{"dtype": d, "rows": r, "cols": 1024, "myrmsnorm_GBps": 2000.0, "aten_GBps": 2500.0,
                   "ratio_vs_aten": 0.8} for d in gpu.DTYPES for r in (4096, 65536)],
    "mymatmul": [{"dtype": d, "n": n, "mymatmul_TFLOPs": 10.0, "aten_TFLOPs": 400.0, "ratio_vs_aten": 0.025}
                 for d in gpu.DTYPES for n in (1024, 2048)],
}


class FakeBackend:
    """Stands in for GpuBackend: records what it was asked, touches no GPU."""

    def __init__(self, refusal=None, tests_pass=True, measurements=FAKE_MEASUREMENTS):
        self.refusal, self.tests_pass, self.measurements = refusal, tests_pass, measurements
        self.calls = []

    def unavailable(self):
        self.calls.append("unavailable")
        return self.refusal

    def machine(self):
        return {"gpu": "fake GPU", "capability": "9.0", "multiprocessors": 132, "memory_GiB": 139.8, "gpus": 1,
                "cuda": "13.0"}

    def run_tests(self, plan):
        self.calls.append("run_tests")
        counts = {"tests": 400, "failures": 0 if self.tests_pass else 2, "errors": 0, "skipped": 3}
        return gpu.TestRun(returncode=0 if self.tests_pass else 1, seconds=12.5, counts=counts)

    def measure(self, plan):
        self.calls.append("measure")
        return self.measurements


def test_defaults_plan_every_dtype_and_the_cuda_tests(tmp_path):
    plan = gpu.make_plan(gpu.parse_args(["--out", str(tmp_path)]))
    assert plan.run_tests and plan.run_benchmarks and plan.dtypes == gpu.DTYPES
    assert plan.test_command[:3] == [sys.executable, "-m", "pytest"]
    assert "-n" in plan.test_command and plan.test_command[plan.test_command.index("-n") + 1] == "0"
    assert f"--junitxml={tmp_path / 'tests.xml'}" in plan.test_command
    assert set(gpu.CUDA_TESTS) <= set(plan.test_command)
    assert gpu.parse_args([]).out == REPO_ROOT / "build" / "gpu"


def test_quick_plan_is_smaller():
    full, quick = (gpu.make_plan(gpu.parse_args(a)) for a in ([], ["--quick"]))
    assert len(quick.myadd_elements) < len(full.myadd_elements)
    assert len(quick.matmul_sizes) < len(full.matmul_sizes) and quick.min_run_time_s < full.min_run_time_s


def test_skipping_both_parts_is_an_argument_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        gpu.parse_args(["--skip-tests", "--skip-benchmarks"])
    assert exit_.value.code == 2
    assert "--skip-tests and --skip-benchmarks together leave nothing to run" in capsys.readouterr().err


def test_dry_run_prints_the_plan_and_asks_nothing_of_the_backend(tmp_path, capsys):
    backend = FakeBackend()
    assert gpu.main(["--dry-run", "--out", str(tmp_path)], backend=backend) == gpu.EXIT_OK
    printed = capsys.readouterr().out
    assert "-m cuda tests" in printed and "mymatmul vs torch.matmul: float16, bfloat16, float32, float64" in printed
    assert backend.calls == [] and not list(tmp_path.iterdir())


def test_refusal_exits_with_its_status_and_writes_nothing(tmp_path, capsys):
    backend = FakeBackend(refusal=(gpu.EXIT_NO_GPU, gpu.NO_GPU_MESSAGE))
    assert gpu.main(["--out", str(tmp_path)], backend=backend) == gpu.EXIT_NO_GPU
    assert capsys.readouterr().out == "no CUDA GPU: nothing measured\n"
    assert backend.calls == ["unavailable"] and not list(tmp_path.iterdir())


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the real backend would measure")
def test_real_backend_without_a_gpu_refuses_before_building_anything():
    assert gpu.GpuBackend().unavailable() == (gpu.EXIT_NO_GPU, gpu.NO_GPU_MESSAGE)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the command would measure")
def test_command_without_a_gpu(tmp_path):
    result = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--out", str(tmp_path)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (gpu.EXIT_NO_GPU, "no CUDA GPU: nothing measured\n"), result.stderr
    assert not list(tmp_path.iterdir())


def test_full_run_with_fake_measurements_writes_results_and_plots(tmp_path, capsys):
    backend = FakeBackend()
    assert gpu.main(["--out", str(tmp_path)], backend=backend) == gpu.EXIT_OK
    assert backend.calls == ["unavailable", "run_tests", "measure"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "myadd_GBps.png", "mymatmul_TFLOPs.png", "myrmsnorm_GBps.png", "results.json"]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["gpu"] == "fake GPU" and results["torch"] == torch.__version__
    assert results["tests"]["counts"] == {"tests": 400, "failures": 0, "errors": 0, "skipped": 3}
    assert results["tests"]["command"][:2] == ["-m", "pytest"]
    assert results["measurements"] == FAKE_MEASUREMENTS
    for png in tmp_path.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "tests: exit 0 in 12 s" in printed
    assert "mymatmul  float64   n=2048      10.00 TFLOP/s  torch.matmul  400.00  vs aten 0.03" in printed


def test_failed_tests_give_status_1_and_still_measure(tmp_path):
    backend = FakeBackend(tests_pass=False)
    assert gpu.main(["--out", str(tmp_path)], backend=backend) == gpu.EXIT_TESTS_FAILED
    assert backend.calls == ["unavailable", "run_tests", "measure"]
    assert json.loads((tmp_path / "results.json").read_text())["tests"]["counts"]["failures"] == 2


def test_empty_measurements_still_write_results_and_plots(tmp_path):
    backend = FakeBackend(measurements={})
    assert gpu.main(["--skip-tests", "--out", str(tmp_path)], backend=backend) == gpu.EXIT_OK
    assert backend.calls == ["unavailable", "measure"]
    assert json.loads((tmp_path / "results.json").read_text())["measurements"] == {}
    assert len(list(tmp_path.glob("*.png"))) == 3


def test_child_pytest_is_killed_at_its_timeout(tmp_path):
    plan = gpu.make_plan(gpu.parse_args(["--out", str(tmp_path), "--test-timeout", "1"]))
    plan.test_command = [sys.executable, "-c", "import time; time.sleep(60)"]
    run = gpu.run_child_pytest(plan)
    assert run.timed_out and not run.passed and run.seconds < 30 and run.counts == {}


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
    assert touching == {node.split("[")[0] for node in planned}
    assert len(planned) > 500
    assert not [node for node in planned if re.search(r"[\[-](cpu|meta)[\]-]", node)]  # only the CUDA cases


def test_measurement_code_runs_on_cpu_with_a_stand_in_timer(layers, tmp_path):
    """The same measuring code as on a GPU, on tiny CPU tensors, each timing replaced by one call and 1 ms."""
    plan = gpu.make_plan(gpu.parse_args(["--out", str(tmp_path)]))
    plan.myadd_elements, plan.myrmsnorm_shapes, plan.matmul_sizes = (2**12,), ((16, 64),), (32,)
    timed = []

    def one_call(fn, min_run_time):
        fn()
        timed.append(min_run_time)
        return 1e-3

    measured = gpu.measure(plan, device="cpu", seconds_of=one_call)
    assert [len(measured[k]) for k in ("myadd", "myrmsnorm", "mymatmul")] == [4 * 2, 4, 4]
    assert len(timed) == 4 * (2 * 3 + 2 + 2) and set(timed) == {plan.min_run_time_s}
    first = measured["myadd"][0]
    assert (first["dtype"], first["layout"], first["elements"]) == ("float16", "contiguous", 2**12)
    assert first["myadd_GBps"] == pytest.approx(3 * 2**12 * 2 / 1e-3 / 1e9)
    assert first["ratio_vs_copy"] == pytest.approx(1.5) and first["ratio_vs_aten"] == 1.0
    assert measured["mymatmul"][-1]["mymatmul_TFLOPs"] == pytest.approx(2 * 32**3 / 1e-3 / 1e12)
    gpu.write_results(tmp_path, {"measurements": measured})
    assert "myrmsnorm float64   16x64" in gpu.summary({"measurements": measured})
