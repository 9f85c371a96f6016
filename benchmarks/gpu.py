"""One command for a machine with a CUDA GPU: every test that executes CUDA kernels, then the CUDA benchmarks.

    .venv/bin/python -m benchmarks.gpu [--out build/gpu] [--quick] [--skip-tests] [--skip-benchmarks] [--dry-run]

Builds and loads every layer, runs the CUDA tests in a child pytest (killed after --test-timeout seconds),
then measures on the GPU: myadd GB/s against torch.add and against a plain copy (the bandwidth bound),
contiguous and transposed; myrmsnorm GB/s against torch.nn.functional.rms_norm; mymatmul TFLOP/s against
torch.matmul; each for float16, bfloat16, float32 and float64. Writes results.json and one PNG per
measurement into --out and prints a summary; the whole run fits in 5 minutes.

Exit status: 0 every test passed and everything was measured; 1 a test failed or the tests timed out;
3 no CUDA GPU here (nothing measured); 4 the CUDA layer cannot be built here. --dry-run prints what would
run and exits 0 without touching CUDA.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent

EXIT_OK, EXIT_TESTS_FAILED, EXIT_NO_GPU, EXIT_NO_CUDA_LAYER = 0, 1, 3, 4
NO_GPU_MESSAGE = "no CUDA GPU: nothing measured"

# Every test that executes a CUDA kernel carries the `cuda` marker (tests/helpers.py).
CUDA_TESTS = ("-m", "cuda", "tests")
DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclass
class Plan:
    """What one run does; everything here is decided without touching CUDA."""
    out: Path
    test_command: list[str]
    test_timeout_s: float
    run_tests: bool
    run_benchmarks: bool
    dtypes: tuple[str, ...] = DTYPES
    myadd_elements: tuple[int, ...] = (2**20, 2**24, 2**27)
    myrmsnorm_shapes: tuple[tuple[int, int], ...] = ((4096, 4096), (65536, 1024))
    matmul_sizes: tuple[int, ...] = (1024, 2048, 4096)
    min_run_time_s: float = 0.1


@dataclass
class TestRun:
    """The child pytest: its exit status and counts from its JUnit XML."""
    returncode: int | None
    seconds: float
    timed_out: bool = False
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "gpu", help="results folder")
    parser.add_argument("--quick", action="store_true", help="fewer sizes, shorter timings")
    parser.add_argument("--skip-tests", action="store_true", help="benchmarks only")
    parser.add_argument("--skip-benchmarks", action="store_true", help="tests only")
    parser.add_argument("--test-timeout", type=float, default=180.0, metavar="SECONDS",
                        help="kill the child pytest after this long (default: %(default)s)")
    parser.add_argument("--dry-run", action="store_true", help="print what would run, then exit")
    args = parser.parse_args(argv)
    if args.skip_tests and args.skip_benchmarks:
        parser.error("--skip-tests and --skip-benchmarks together leave nothing to run")
    return args


def make_plan(args: argparse.Namespace) -> Plan:
    junit = args.out / "tests.xml"
    command = [sys.executable, "-m", "pytest", "-n", "0", "-q", "-rs", f"--junitxml={junit}", *CUDA_TESTS]
    plan = Plan(out=args.out, test_command=command, test_timeout_s=args.test_timeout,
                run_tests=not args.skip_tests, run_benchmarks=not args.skip_benchmarks)
    if args.quick:
        plan.myadd_elements, plan.matmul_sizes = (2**20, 2**24), (1024, 2048)
        plan.myrmsnorm_shapes, plan.min_run_time_s = ((4096, 4096),), 0.03
    return plan


def describe(plan: Plan) -> str:
    lines = [f"results into {plan.out}"]
    if plan.run_tests:
        lines.append(f"tests (timeout {plan.test_timeout_s:.0f} s): {' '.join(plan.test_command[1:])}")
    if plan.run_benchmarks:
        lines.append(f"myadd (contiguous, transposed) vs torch.add and copy: {', '.join(plan.dtypes)} at "
                     + ", ".join(f"2^{n.bit_length() - 1}" for n in plan.myadd_elements) + " elements")
        lines.append(f"myrmsnorm vs rms_norm: {', '.join(plan.dtypes)} at "
                     + ", ".join(f"{r}x{c}" for r, c in plan.myrmsnorm_shapes))
        lines.append(f"mymatmul vs torch.matmul: {', '.join(plan.dtypes)} at n = "
                     + ", ".join(str(n) for n in plan.matmul_sizes))
    return "\n".join(lines)


# -- the seam: everything that needs a GPU is a method of the backend --------------------------------
class GpuBackend:
    """The real thing. Each method but `unavailable` needs a CUDA GPU."""

    def unavailable(self) -> tuple[int, str] | None:
        """(exit status, message) when nothing can run here, else None. Loads the layers if it can."""
        if not torch.cuda.is_available():
            return EXIT_NO_GPU, NO_GPU_MESSAGE
        import myops
        from myops import toolchain

        if (reason := toolchain.cuda_skip_reason()) is not None:
            return EXIT_NO_CUDA_LAYER, f"the CUDA layer cannot be built here: {reason}"
        myops.load()  # built here, in the parent, so that the child's timeout is spent on tests
        return None

    def machine(self) -> dict:
        props = torch.cuda.get_device_properties(0)
        return {"gpu": props.name, "capability": f"{props.major}.{props.minor}",
                "multiprocessors": props.multi_processor_count, "memory_GiB": round(props.total_memory / 2**30, 1),
                "gpus": torch.cuda.device_count(), "cuda": torch.version.cuda}

    def run_tests(self, plan: Plan) -> TestRun:
        return run_child_pytest(plan)

    def measure(self, plan: Plan) -> dict[str, list[dict]]:
        return measure(plan)


def run_child_pytest(plan: Plan) -> TestRun:
    """Run the planned pytest in its own process group; kill the whole group at the timeout."""
    plan.out.mkdir(parents=True, exist_ok=True)
    junit = plan.out / "tests.xml"
    junit.unlink(missing_ok=True)
    start = time.perf_counter()
    child = subprocess.Popen(plan.test_command, cwd=REPO_ROOT, start_new_session=True)
    try:
        returncode, timed_out = child.wait(timeout=plan.test_timeout_s), False
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        returncode, timed_out = child.wait(), True
    return TestRun(returncode=returncode, seconds=time.perf_counter() - start, timed_out=timed_out,
                   counts=junit_counts(junit))


def junit_counts(path: Path) -> dict[str, int]:
    """tests/failures/errors/skipped of a pytest JUnit XML file; empty if there is none."""
    if not path.is_file():
        return {}
    root = ElementTree.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    return {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}


# -- measurements (GPU only) -------------------------------------------------------------------------
def cuda_seconds(fn, min_run_time: float, rounds: int = 5) -> float:
    """Median GPU seconds of one fn(), timed with CUDA events over batches of calls on the current stream."""
    fn()  # warm-up: the first launch also asks the occupancy calculator
    torch.cuda.synchronize()
    calls = 1
    while True:  # grow the batch until one batch lasts its share of min_run_time
        seconds = _batch_seconds(fn, calls)
        if seconds * rounds >= min_run_time or calls >= 2**14:
            break
        calls *= 2
    return statistics.median(_batch_seconds(fn, calls) / calls for _ in range(rounds))


def _batch_seconds(fn, calls: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def measure(plan: Plan, device: str = "cuda", seconds_of=cuda_seconds) -> dict[str, list[dict]]:
    """Every planned measurement on `device`, each timed by seconds_of(fn, min_run_time).

    Only the default arguments measure anything; tests pass the CPU and a stand-in timer to run the same
    code on a machine without a GPU.
    """
    import torch.nn.functional as F

    ops = torch.ops.myops
    g = torch.Generator(device).manual_seed(0)
    results: dict[str, list[dict]] = {"myadd": [], "myrmsnorm": [], "mymatmul": []}
    for name in plan.dtypes:
        dtype = getattr(torch, name)
        itemsize = torch.empty(0, dtype=dtype).element_size()
        for n in plan.myadd_elements:
            for layout in ("contiguous", "transposed"):
                width = 1024  # n // 1024 x 1024 matrices; their transposes take the strided kernel
                a, b = (torch.randn(n // width, width, device=device, dtype=dtype, generator=g) for _ in range(2))
                if layout == "transposed":
                    a, b = a.t(), b.t()
                out = torch.empty_like(a)
                seconds = {
                    "myadd": seconds_of(lambda: ops.myadd.default(a, b), plan.min_run_time_s),
                    "torch.add": seconds_of(lambda: torch.add(a, b), plan.min_run_time_s),
                    "copy": seconds_of(lambda: out.copy_(a), plan.min_run_time_s),
                }
                moved, copied = 3 * n * itemsize, 2 * n * itemsize
                results["myadd"].append({
                    "dtype": name, "layout": layout, "elements": n,
                    "myadd_GBps": moved / seconds["myadd"] / 1e9, "aten_GBps": moved / seconds["torch.add"] / 1e9,
                    "copy_GBps": copied / seconds["copy"] / 1e9,
                    "ratio_vs_aten": seconds["torch.add"] / seconds["myadd"],
                    "ratio_vs_copy": (moved / seconds["myadd"]) / (copied / seconds["copy"]),
                })
                del a, b, out
        for rows, cols in plan.myrmsnorm_shapes:
            x = torch.randn(rows, cols, device=device, dtype=dtype, generator=g)
            w = torch.randn(cols, device=device, dtype=dtype, generator=g)
            ours = seconds_of(lambda: ops.myrmsnorm.default(x, w, 1e-6), plan.min_run_time_s)
            aten = seconds_of(lambda: F.rms_norm(x, (cols,), w, 1e-6), plan.min_run_time_s)
            moved = 2 * x.numel() * itemsize
            results["myrmsnorm"].append({"dtype": name, "rows": rows, "cols": cols,
                                         "myrmsnorm_GBps": moved / ours / 1e9, "aten_GBps": moved / aten / 1e9,
                                         "ratio_vs_aten": aten / ours})
        for n in plan.matmul_sizes:
            a, b = (torch.randn(n, n, device=device, dtype=dtype, generator=g) for _ in range(2))
            ours = seconds_of(lambda: ops.mymatmul.default(a, b), plan.min_run_time_s)
            aten = seconds_of(lambda: torch.matmul(a, b), plan.min_run_time_s)
            flops = 2 * n**3
            results["mymatmul"].append({"dtype": name, "n": n, "mymatmul_TFLOPs": flops / ours / 1e12,
                                        "aten_TFLOPs": flops / aten / 1e12, "ratio_vs_aten": aten / ours})
    return results


# -- results and plots (no GPU needed) ---------------------------------------------------------------
def plot_series(rows: list[dict], x: str, series: dict[str, str], ylabel: str, title: str, group=("dtype",)):
    """One line per (series, group) of `rows`: e.g. myadd GB/s per dtype against the element count."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4))
    ax = fig.subplots()
    groups = sorted({tuple(r[g] for g in group) for r in rows})
    for key, label in series.items():
        for values in groups:
            points = [r for r in rows if tuple(r[g] for g in group) == values]
            ax.plot([r[x] for r in points], [r[key] for r in points], marker="o",
                    label=f"{label} {' '.join(values)}")
    if not rows:
        ax.text(0.5, 0.5, "nothing measured", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=7, ncol=2)
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def write_results(out: Path, results: dict) -> list[Path]:
    """results.json and one PNG per measurement in `out`; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    measured = results.get("measurements", {})
    figures = {
        "myadd_GBps": plot_series(measured.get("myadd", []), "elements",
                                  {"myadd_GBps": "myadd", "aten_GBps": "torch.add", "copy_GBps": "copy"},
                                  "GB/s", "myadd vs torch.add and a copy (CUDA)", group=("dtype", "layout")),
        "myrmsnorm_GBps": plot_series(measured.get("myrmsnorm", []), "rows",
                                      {"myrmsnorm_GBps": "myrmsnorm", "aten_GBps": "F.rms_norm"},
                                      "GB/s", "myrmsnorm vs torch.nn.functional.rms_norm (CUDA)"),
        "mymatmul_TFLOPs": plot_series(measured.get("mymatmul", []), "n",
                                       {"mymatmul_TFLOPs": "mymatmul", "aten_TFLOPs": "torch.matmul"},
                                       "TFLOP/s", "mymatmul vs torch.matmul (CUDA)"),
    }
    written = [out / "results.json"]
    written[0].write_text(json.dumps(results, indent=2, default=str))
    for name, figure in figures.items():
        written.append(out / f"{name}.png")
        figure.savefig(written[-1], dpi=110)
    return written


def summary(results: dict) -> str:
    lines = []
    tests = results.get("tests")
    if tests:
        state = "timed out" if tests["timed_out"] else f"exit {tests['returncode']}"
        lines.append(f"tests: {state} in {tests['seconds']:.0f} s {tests['counts']}")
    measured = results.get("measurements", {})
    for r in measured.get("myadd", []):
        lines.append(f"myadd     {r['dtype']:<9} {r['layout']:<11} 2^{r['elements'].bit_length() - 1:<3}"
                     f"{r['myadd_GBps']:8.0f} GB/s  torch.add {r['aten_GBps']:6.0f}  copy {r['copy_GBps']:6.0f}"
                     f"  vs aten {r['ratio_vs_aten']:.2f}  vs copy {r['ratio_vs_copy']:.2f}")
    for r in measured.get("myrmsnorm", []):
        lines.append(f"myrmsnorm {r['dtype']:<9} {r['rows']}x{r['cols']:<10}{r['myrmsnorm_GBps']:8.0f} GB/s  "
                     f"rms_norm {r['aten_GBps']:6.0f}  vs aten {r['ratio_vs_aten']:.2f}")
    for r in measured.get("mymatmul", []):
        lines.append(f"mymatmul  {r['dtype']:<9} n={r['n']:<6} {r['mymatmul_TFLOPs']:8.2f} TFLOP/s  "
                     f"torch.matmul {r['aten_TFLOPs']:7.2f}  vs aten {r['ratio_vs_aten']:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None, backend=None) -> int:
    """The command; `backend` (default GpuBackend) is the seam tests replace to run without a GPU."""
    args = parse_args(argv)
    plan = make_plan(args)
    if args.dry_run:
        print(describe(plan))
        return EXIT_OK
    backend = backend or GpuBackend()
    if (refusal := backend.unavailable()) is not None:
        status, message = refusal
        print(message)
        return status
    start = time.perf_counter()
    results: dict = {"torch": torch.__version__, "python": platform.python_version(), **backend.machine()}
    status = EXIT_OK
    if plan.run_tests:
        tests = backend.run_tests(plan)
        results["tests"] = {**asdict(tests), "command": plan.test_command[1:]}
        status = EXIT_OK if tests.passed else EXIT_TESTS_FAILED
    if plan.run_benchmarks:
        results["measurements"] = backend.measure(plan)
    results["seconds"] = time.perf_counter() - start
    write_results(plan.out, results)
    print(summary(results))
    print(f"results and plots in {plan.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
