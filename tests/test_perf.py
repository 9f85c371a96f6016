"""The benchmark code: it measures what it says, and the command writes its results."""
import json
import subprocess
import sys

from myops import perf
from myops.build import REPO_ROOT


def test_measurements_have_every_field(layers):
    [bandwidth] = perf.myadd_bandwidth([12], min_run_time=0.01)
    assert bandwidth["elements"] == 4096
    assert min(bandwidth["myadd_GBps"], bandwidth["aten_GBps"], bandwidth["copy_GBps"]) > 0
    [matmul] = perf.mymatmul_throughput([32], min_run_time=0.01)
    assert matmul["n"] == 32 and matmul["mymatmul_GFLOPs"] > 0 and matmul["ratio_vs_aten"] > 0
    overhead = perf.call_overhead(min_run_time=0.01)
    assert overhead["ratio_vs_aten"] == overhead["torch.ops.myops.myadd"] / overhead["torch.add"]


def test_extension_header_variant_is_the_same_unit_with_the_big_header():
    source = (REPO_ROOT / "csrc" / "cpu" / "myadd.cpp").read_text()
    heavy = perf._with_extension_header(source)
    assert heavy.startswith("#include <torch/extension.h>\n")
    assert "TORCH_ASSERT_ONLY_METHOD_OPERATORS" not in heavy  # extension.h includes all of ATen
    assert heavy.count("TORCH_LIBRARY_IMPL") == source.count("TORCH_LIBRARY_IMPL")


def test_benchmark_command_writes_results(tmp_path):
    result = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--no-builds", "--out", str(tmp_path)],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert {"myadd_cpu", "mymatmul_cpu", "overhead_us"} <= set(results)
    assert all((tmp_path / f"{name}.png").stat().st_size > 0 for name in ("myadd_cpu", "mymatmul_cpu", "overhead"))
    assert "ratio" in result.stdout
