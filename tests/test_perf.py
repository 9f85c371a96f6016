"""The benchmark code: it measures what it says, and the command writes its results."""
import json
import resource
import subprocess
import sys

import pytest
import torch

from myops import build, perf
from myops.build import REPO_ROOT


def test_measurements_have_every_field(layers):
    [bandwidth] = perf.myadd_bandwidth([12], min_run_time=0.01)
    assert bandwidth["elements"] == 4096
    assert min(bandwidth["myadd_GBps"], bandwidth["aten_GBps"], bandwidth["copy_GBps"]) > 0
    [matmul] = perf.mymatmul_throughput([32], min_run_time=0.01)
    assert matmul["n"] == 32 and matmul["mymatmul_GFLOPs"] > 0 and matmul["ratio_vs_aten"] > 0
    overhead = perf.call_overhead(min_run_time=0.01)
    assert {"torch.add", "torch.ops.myops.myadd", "torch.ops.aten.add.Tensor"} <= set(overhead)
    assert min(overhead[name] for name in overhead if name != "ratio_vs_aten") > 0


def test_fastest_micros_times_each_call_with_its_arguments():
    seen, rounds_run = [], []
    with perf.ScriptedClock() as clock:
        # "settling" is slow in its first round only: the fastest round is the cost of the call itself.
        calls = {"a microsecond": lambda x: (seen.append(x), clock.advance(1e-6)),
                 "half a millisecond": lambda x: clock.advance(5e-4),
                 "settling": lambda x: clock.advance(3e-4 if len(rounds_run) > 1 else 9e-4)}
        micros = perf.fastest_micros({**calls, "round": lambda x: (rounds_run.append(x), clock.advance(1e-6))}, "argument",
                                     min_run_time=0.03, rounds=3)
    assert list(micros) == [*calls, "round"] and set(seen) == {"argument"}
    assert micros["half a millisecond"] == pytest.approx(500) and micros["settling"] == pytest.approx(300)
    assert micros["a microsecond"] == pytest.approx(1)


def test_scripted_clock_moves_every_clock_and_only_by_advance():
    import time
    import timeit

    with perf.ScriptedClock() as clock:
        start = [time.perf_counter(), time.monotonic(), time.time(), timeit.default_timer()]
        clock.advance(2.5)
        assert [t - s for t, s in zip([time.perf_counter(), time.monotonic(), time.time(), timeit.default_timer()],
                                      start)] == [2.5] * 4
        assert time.perf_counter_ns() == 2_500_000_000
        with pytest.raises(RuntimeError, match="ScriptedClock: a scripted clock is running already"):
            perf.ScriptedClock().__enter__()
    assert time.perf_counter() != 2.5 and timeit.default_timer is time.perf_counter


def test_blocked_autorange_median_is_over_blocks_of_means():
    from torch.utils.benchmark import Timer

    with perf.ScriptedClock() as clock:
        calls = [0]

        def two_ms_and_a_pause_in_twenty():
            calls[0] += 1
            clock.advance(0.042 if calls[0] % 20 == 2 else 0.002)

        blocks = Timer("f()", globals={"f": two_ms_and_a_pause_in_twenty}).blocked_autorange(min_run_time=0.2)
        one_block = Timer("f()", globals={"f": two_ms_and_a_pause_in_twenty}).timeit(100)
    assert blocks.median == pytest.approx(0.002) and blocks.mean > 0.004 and len(blocks.times) > 20
    assert len(one_block.times) == 1 and one_block.median == one_block.mean == pytest.approx(0.004)  # 5 pauses in 100


def test_a_fresh_output_maps_its_pages_and_an_existing_one_does_not(layers):
    a, b, out = torch.randn(2**24), torch.randn(2**24), torch.zeros(2**24)  # out: written once already
    pages = 2**24 * 4 // resource.getpagesize()
    assert perf.minor_page_faults(torch.add, a, b, out=out) < pages // 100
    assert perf.minor_page_faults(torch.ops.myops.myadd.default, a, b) >= pages // 512  # even in 2 MiB pages


def test_environment_names_the_machine_and_the_flags():
    env = perf.environment()
    assert env["cpu"] and env["torch"] == torch.__version__
    # The CPU's vector extensions as /proc/cpuinfo names them agree with what the compiler finds for
    # -march=native (a second, independent reading of the same CPU).
    if "-march=native" in build.CXX_FLAGS:
        native = build.native_target("c++")
        for flag in ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq"):
            assert (flag in env["simd"]) == (f"#define __{flag.upper()}__ 1" in native), flag
    line = perf.describe(env)
    assert env["cpu"] in line and f"{env['threads']} threads" in line and "-fopenmp" in line
    assert f"load {env['load_average']} on {env['cpus']} CPUs" in line
    figure = perf.plot_matmul([{"n": 8, "mymatmul_GFLOPs": 1.0, "aten_GFLOPs": 2.0}], env=env)
    assert line in figure.axes[0].get_title()  # every plot says what it was measured on


def test_titles_carry_the_thread_count_of_the_measurement():
    env = perf.environment()
    assert perf.describe(perf.environment(threads=1)).count(", 1 thread,") == 1
    assert perf.describe_threads((1, 2, 2)) == "1 and 2 threads" and perf.describe_threads(3) == "3 threads"
    # call_overhead times on one thread, mymatmul_steps torch.matmul on one thread besides the process's count
    overhead = perf.plot_overhead({"torch.add": 1.0, "ratio_vs_aten": 1.0}, env={**env, "threads": 4})
    assert ", 1 thread," in overhead.axes[0].get_title()
    steps = perf.plot_matmul_steps({8: {"naive": 1.0, "torch.matmul": 2.0}}, env={**env, "threads": 4})
    assert ", 1 and 4 threads," in steps.axes[0].get_title()


@pytest.fixture(scope="module")
def steps_layer(layers):
    build.load_layer("bench")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("step", perf.MATMUL_STEPS)
def test_every_matmul_step_computes_the_product(steps_layer, dtype, step):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(70, 300, generator=g, dtype=dtype), torch.randn(300, 41, generator=g, dtype=dtype).t().contiguous().t()
    result = torch.ops.myops_bench.mymatmul_step(x, y, step)
    tolerance = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-5, torch.float64: 1e-12}[dtype]
    torch.testing.assert_close(result, (x.double() @ y.double()).to(dtype), rtol=tolerance, atol=tolerance * 10)
    if step == "threaded":  # the last step is the operator itself
        assert torch.equal(result, torch.ops.myops.mymatmul(x, y))


def test_unknown_step_is_named(steps_layer):
    with pytest.raises(RuntimeError, match="myops_bench::mymatmul_step: unknown step 'fast'; expected naive, "
                                           "packed, vectorized or threaded"):
        torch.ops.myops_bench.mymatmul_step(torch.ones(2, 2), torch.ones(2, 2), "fast")


def test_register_tile_is_whole_vectors(steps_layer):
    rows, cols = torch.ops.myops_bench.mymatmul_tile(torch.float32)
    # 6 rows of 2 vectors of 16 (AVX-512), 8 (AVX2) or 4 (NEON) floats, or the generic build's 4 x 8: the one
    # that csrc/cpu/vectorized.h picks for what the compiler finds here
    lanes = perf.vectorized_float_lanes()
    assert (rows, cols) == ((4, 8) if lanes is None else (6, 2 * lanes))
    double_cols = cols // 2 if rows == 6 else cols
    assert torch.ops.myops_bench.mymatmul_tile(torch.float64) == [rows, double_cols]
    assert torch.ops.myops_bench.mymatmul_tile(torch.bfloat16) == [rows, cols]  # packed as float


def test_matmul_steps_measure_every_step(steps_layer):
    result = perf.mymatmul_steps(32, min_run_time=0.01)
    assert list(result) == [*perf.MATMUL_STEPS, "torch.matmul, 1 thread", "torch.matmul"]
    assert min(result.values()) > 0


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
    assert {"environment", "myadd_cpu", "mymatmul_cpu", "mymatmul_steps", "overhead_us"} <= set(results)
    same_machine = {key: value for key, value in perf.environment().items() if key != "load_average"}
    assert {key: results["environment"][key] for key in same_machine} == json.loads(json.dumps(same_machine))
    assert all((tmp_path / f"{name}.png").stat().st_size > 0
               for name in ("myadd_cpu", "mymatmul_cpu", "mymatmul_steps", "overhead"))
    assert "ratio" in result.stdout and perf.describe(results["environment"]) in result.stdout
