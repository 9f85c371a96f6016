"""One command for a machine with a CUDA GPU: build, every test that executes CUDA kernels, a compute-sanitizer
pass over the kernels, the course's operators sharded by DTensor over NCCL, then the CUDA benchmarks.

    python3 -m benchmarks.gpu [--out build/gpu] [--quick] [--skip-tests] [--skip-sanitizer] [--skip-benchmarks]
                              [--jobs N] [--budget SECONDS] [--dry-run]

Runs with whatever Python and torch the machine has (torch 2.11 to the pin; no notebook packages needed) and
the CUDA toolkit it finds (myops/toolchain.py). It prints what it ran on (torch, CUDA, driver, GPU), builds every
layer N at a time, runs the CUDA tests in a child pytest, runs the operators' CUDA tests again under
compute-sanitizer (memcheck, and racecheck where a kernel uses shared memory), runs myops.sharded_run under
torchrun with NCCL, one rank per GPU (two at most) on 127.0.0.1 (one GPU: one rank, so NCCL and DTensor run our
CUDA kernels but no data crosses between GPUs; skipped where torch has no NCCL), then measures on the GPU:
myadd GB/s against torch.add and a copy (the bandwidth bound), contiguous and transposed; myrmsnorm GB/s against
torch.nn.functional.rms_norm, and notebook 17's Triton myrmsnorm against it and the CUDA C++ one; mymatmul
TFLOP/s against torch.matmul; each for four float dtypes. Every step has a
time limit, and none runs past the whole run's budget (--budget, 5 minutes, cold build included): a step still
running then is stopped and reported as timed out, the measurements keep what they took.

Whatever fails, results.json (with every step: passed, failed, skipped or timed out, and why) is written into
--out, with one PNG per measurement when the benchmarks ran. Exit status: the first step that failed —
0 everything passed; 1 a test failed or the tests timed out; 3 no CUDA GPU; 4 no CUDA toolkit to build the CUDA
layer with; 5 a layer failed to compile (or the build timed out); 6 compute-sanitizer found an error (or its run
failed or timed out); 7 a measurement failed or the budget ran out during the measurements; 8 the NCCL run
failed or timed out. --dry-run prints every step it would run and exits 0 without touching CUDA.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import traceback
import xml.etree.ElementTree as ElementTree
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent

EXIT_OK, EXIT_TESTS_FAILED, EXIT_NO_GPU, EXIT_NO_CUDA_LAYER = 0, 1, 3, 4
EXIT_BUILD_FAILED, EXIT_SANITIZER_FAILED, EXIT_MEASURE_FAILED, EXIT_NCCL_FAILED = 5, 6, 7, 8
NO_GPU_MESSAGE = "no CUDA GPU: nothing measured"

# Every test that executes a CUDA kernel carries the `cuda` marker (tests/helpers.py).
CUDA_TESTS = ("-m", "cuda", "tests")
DTYPES = ("float16", "bfloat16", "float32", "float64")

# What compute-sanitizer runs: the operators' own CUDA value tests (every layout, dtype and edge size, each small),
# without the `large` ones (GiBs of input, far too slow instrumented). racecheck checks shared memory only, which
# only the matrix products' tiles use (csrc/cuda/mymatmul.cu, csrc/stable/cuda/mymatmul.cu).
SANITIZER_TESTS = {
    "memcheck": ("tests/test_myadd.py", "tests/test_mymatmul.py", "tests/test_myrmsnorm.py", "tests/test_stable_abi.py"),
    "racecheck": ("tests/test_mymatmul.py", "tests/test_stable_abi.py"),
}
SANITIZER_ERROR_EXIT = 86  # what compute-sanitizer returns when it found an error (any other code is pytest's)
KERNEL_SOURCES = ("csrc/cuda", "csrc/stable/cuda")


@dataclass
class Plan:
    """What one run does; everything here is decided without touching CUDA."""
    out: Path
    build_command: list[str]
    test_command: list[str]
    test_timeout_s: float
    run_tests: bool
    run_sanitizer: bool
    run_benchmarks: bool
    run_nccl: bool = True
    nccl_timeout_s: float = 120.0
    sanitizer_timeout_s: float = 120.0
    build_timeout_s: float = 240.0
    budget_s: float = 300.0  # the whole run; each step gets at most what is left of it
    deadline: float = float("inf")  # time.monotonic() at which the budget is spent; set when the run starts
    dtypes: tuple[str, ...] = DTYPES
    myadd_elements: tuple[int, ...] = (2**20, 2**24, 2**27)
    myrmsnorm_shapes: tuple[tuple[int, int], ...] = ((4096, 4096), (65536, 1024))
    matmul_sizes: tuple[int, ...] = (1024, 2048, 4096)
    min_run_time_s: float = 0.1

    def time_left(self, limit: float) -> float:
        """A step's time limit: its own, or what is left of the run's budget if that is less."""
        return max(1.0, min(limit, self.deadline - time.monotonic()))


class BudgetSpent(Exception):
    """The run's time budget ran out during the measurements."""


@dataclass
class Step:
    """One step of the run, as results.json records it."""
    name: str
    status: str  # "passed", "failed", "skipped" or "timed out"
    seconds: float = 0.0
    detail: str = ""  # why it failed or was skipped, or what it found
    facts: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in ("passed", "skipped")


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
    parser.add_argument("--skip-tests", action="store_true", help="no child pytest")
    parser.add_argument("--skip-sanitizer", action="store_true", help="no compute-sanitizer pass")
    parser.add_argument("--skip-benchmarks", action="store_true", help="tests only")
    parser.add_argument("--skip-nccl", action="store_true", help="no DTensor run over NCCL")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="layers built at once (default: one per core, %(default)s here)")
    parser.add_argument("--test-workers", type=int, default=4, metavar="N",
                        help="pytest-xdist workers of the child pytest (default: %(default)s; 0: one process)")
    parser.add_argument("--test-timeout", type=float, default=180.0, metavar="SECONDS",
                        help="kill the child pytest after this long (default: %(default)s)")
    parser.add_argument("--sanitizer-timeout", type=float, default=120.0, metavar="SECONDS",
                        help="kill each compute-sanitizer run after this long (default: %(default)s)")
    parser.add_argument("--budget", type=float, default=300.0, metavar="SECONDS",
                        help="the whole run's time; a step still running when it is spent is stopped and reported "
                             "(default: %(default)s)")
    parser.add_argument("--dry-run", action="store_true", help="print what would run, then exit")
    args = parser.parse_args(argv)
    if args.skip_tests and args.skip_sanitizer and args.skip_benchmarks:
        parser.error("--skip-tests, --skip-sanitizer and --skip-benchmarks together leave nothing to run")
    return args


def make_plan(args: argparse.Namespace) -> Plan:
    junit = args.out / "tests.xml"
    workers = ["-n", str(args.test_workers), "--dist", "loadfile"] if args.test_workers > 0 else ["-n", "0"]
    command = [sys.executable, "-m", "pytest", *workers, "-q", "-rs", "-p", "no:cacheprovider",
               f"--junitxml={junit}", *CUDA_TESTS]
    build = [sys.executable, "-m", "myops.build", "--jobs", str(max(args.jobs, 1))]
    plan = Plan(out=args.out, build_command=build, test_command=command, test_timeout_s=args.test_timeout,
                run_tests=not args.skip_tests, run_sanitizer=not args.skip_sanitizer,
                run_benchmarks=not args.skip_benchmarks, run_nccl=not args.skip_nccl,
                sanitizer_timeout_s=args.sanitizer_timeout,
                budget_s=args.budget)
    if args.quick:
        plan.myadd_elements, plan.matmul_sizes = (2**20, 2**24), (1024, 2048)
        plan.myrmsnorm_shapes, plan.min_run_time_s = ((4096, 4096),), 0.03
    return plan


def kernel_names(root: Path = REPO_ROOT) -> list[str]:
    """The names of every __global__ function of the course's CUDA sources: what compute-sanitizer checks."""
    pattern = re.compile(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)")
    return sorted({name for folder in KERNEL_SOURCES for source in sorted((root / folder).glob("*.cu"))
                   for name in pattern.findall(source.read_text())})


def sanitized_tests(tool: str) -> list[str]:
    """The pytest command compute-sanitizer runs with `tool`."""
    return [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider", "-m", "cuda and not large",
            *SANITIZER_TESTS[tool]]


def sanitizer_command(sanitizer: str | Path, tool: str, root: Path = REPO_ROOT) -> list[str]:
    """compute-sanitizer running the operators' CUDA tests with `tool`, checking only the course's kernels."""
    filters = [arg for name in kernel_names(root) for arg in ("--kernel-name", f"kns={name}")]
    return [str(sanitizer), "--tool", tool, "--error-exitcode", str(SANITIZER_ERROR_EXIT), "--print-limit", "20",
            *filters, *sanitized_tests(tool)]


def describe(plan: Plan) -> str:
    """Every step the plan would run, one line each."""
    lines = [f"results into {plan.out}; the whole run within {plan.budget_s:.0f} s",
             "machine: torch, CUDA, driver and GPU of this process; the CUDA toolkit myops.toolchain finds",
             f"build (timeout {plan.build_timeout_s:.0f} s): {' '.join(plan.build_command[1:])}"]
    if plan.run_tests:
        lines.append(f"tests (timeout {plan.test_timeout_s:.0f} s): {' '.join(plan.test_command[1:])}")
    if plan.run_sanitizer:
        for tool in SANITIZER_TESTS:
            lines.append(f"sanitizer {tool} (timeout {plan.sanitizer_timeout_s:.0f} s) of the kernels "
                         f"{', '.join(kernel_names())}: compute-sanitizer --tool {tool} "
                         f"{' '.join(sanitized_tests(tool)[1:])}")
    if plan.run_nccl:
        lines.append(f"nccl (timeout {plan.nccl_timeout_s:.0f} s): torchrun -m myops.sharded_run --backend nccl, "
                     "one rank per GPU (two at most) on 127.0.0.1, every operator in every placement against one "
                     "process")
    if plan.run_benchmarks:
        lines.append(f"myadd (contiguous; transposed inputs, contiguous output) vs torch.add and copy: "
                     f"{', '.join(plan.dtypes)} at "
                     + ", ".join(f"2^{n.bit_length() - 1}" for n in plan.myadd_elements) + " elements")
        lines.append(f"myrmsnorm vs rms_norm: {', '.join(plan.dtypes)} at "
                     + ", ".join(f"{r}x{c}" for r, c in plan.myrmsnorm_shapes))
        lines.append(f"triton myrmsnorm (tritonops::myrmsnorm, compiled by Triton) vs the CUDA C++ myrmsnorm, rms_norm "
                     f"and copy: {', '.join(plan.dtypes)} at " + ", ".join(f"{r}x{c}" for r, c in plan.myrmsnorm_shapes))
        lines.append(f"mymatmul (CUDA cores) vs torch.matmul (cuBLAS): {', '.join(plan.dtypes)} at n = "
                     + ", ".join(str(n) for n in plan.matmul_sizes))
    return "\n".join(lines)


# -- the seam: everything that needs a GPU or a toolkit is a method of the backend --------------------------------
def driver_version() -> str | None:
    """The NVIDIA driver's version, from nvidia-smi; None where there is none."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        result = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.splitlines()[0].strip() if result.returncode == 0 and result.stdout.strip() else None


def find_sanitizer() -> Path | None:
    """compute-sanitizer: on PATH, else in the toolkit the build uses, else in /usr/local/cuda."""
    from myops import toolchain

    if (found := shutil.which("compute-sanitizer")) is not None:
        return Path(found)
    for root in (toolchain.find_cuda_home(), toolchain.SYSTEM_TOOLKIT):
        if root is not None and (root / "bin" / "compute-sanitizer").is_file():
            return root / "bin" / "compute-sanitizer"
    return None


class GpuBackend:
    """The real thing. `machine` and `toolkit` run anywhere; the other methods need a CUDA GPU."""

    def machine(self) -> dict:
        facts = {"torch": torch.__version__, "python": platform.python_version(), "cuda": torch.version.cuda,
                 "driver": driver_version(), "gpu": None}
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            facts.update(gpu=props.name, capability=f"{props.major}.{props.minor}",
                         multiprocessors=props.multi_processor_count,
                         memory_GiB=round(props.total_memory / 2**30, 1),
                         L2_MB=round(getattr(props, "L2_cache_size", 0) / 2**20, 1), gpus=torch.cuda.device_count())
        return facts

    def toolkit(self) -> dict:
        from myops import toolchain

        reason = toolchain.cuda_skip_reason()
        home = None if reason else toolchain.find_cuda_home()
        sanitizer = find_sanitizer()
        return {"problem": reason, "cuda_home": str(home) if home else None,
                "toolkit_cuda": toolchain.toolkit_cuda_version(home) if home else None,
                "arch_list": toolchain.cuda_arch_list(), "sanitizer": str(sanitizer) if sanitizer else None}

    def build(self, plan: Plan) -> Step:
        return run_build(plan)

    def run_tests(self, plan: Plan) -> TestRun:
        return run_child_pytest(plan)

    def sanitize(self, plan: Plan, sanitizer: str) -> list[Step]:
        return [run_sanitizer(plan, sanitizer, tool) for tool in SANITIZER_TESTS]

    def nccl(self, plan: Plan) -> Step:
        return run_nccl(plan)

    def measure(self, plan: Plan, into: dict) -> dict[str, list[dict]]:
        import myops

        myops.load()  # built by the build step: only loaded here
        return measure(plan, into=into)


def _run_group(command: list[str], timeout: float, **kwargs) -> tuple[int | None, bool, str]:
    """Run `command` in its own process group, output captured; kill the whole group at the timeout.
    (exit status, timed out, output)."""
    child = subprocess.Popen(command, cwd=REPO_ROOT, start_new_session=True, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, **kwargs)
    try:
        output, _ = child.communicate(timeout=timeout)
        return child.returncode, False, output
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
        return child.returncode, True, output


def run_build(plan: Plan) -> Step:
    """Every layer of the course, N at a time (python -m myops.build --jobs N)."""
    start = time.perf_counter()
    limit = plan.time_left(plan.build_timeout_s)
    returncode, timed_out, output = _run_group(plan.build_command, limit)
    seconds = time.perf_counter() - start
    built = re.findall(r"myops: built layer (\w+) in ([\d.]+) s", output)
    facts = {"layers_built": {name: float(s) for name, s in built}}
    if timed_out:
        return Step("build", "timed out", seconds, f"not done after {limit:.0f} s", facts)
    if returncode != 0:
        return Step("build", "failed", seconds, output.strip()[-3000:], facts)
    return Step("build", "passed", seconds, "; ".join(line for line in output.splitlines() if "skipping" in line),
                facts)


def run_child_pytest(plan: Plan) -> TestRun:
    """Run the planned pytest in its own process group; kill the whole group at the timeout."""
    plan.out.mkdir(parents=True, exist_ok=True)
    junit = plan.out / "tests.xml"
    junit.unlink(missing_ok=True)
    start = time.perf_counter()
    child = subprocess.Popen(plan.test_command, cwd=REPO_ROOT, start_new_session=True)
    try:
        returncode, timed_out = child.wait(timeout=plan.time_left(plan.test_timeout_s)), False
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        returncode, timed_out = child.wait(), True
    return TestRun(returncode=returncode, seconds=time.perf_counter() - start, timed_out=timed_out,
                   counts=junit_counts(junit))


def run_nccl(plan: Plan) -> Step:
    """myops.sharded_run under torchrun with NCCL, one rank per GPU (two at most); its verdict is each rank's
    comparison with one process."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_nccl_available():
        return Step("nccl", "skipped", detail="this torch has no NCCL")
    from myops import sharded_run

    ranks = min(torch.cuda.device_count(), 2)  # the script's tensors split evenly over two ranks
    scope = (f"{ranks} ranks, one per GPU" if ranks > 1 else
             "one GPU, so one rank: NCCL and DTensor ran our CUDA kernels, but no data crossed between GPUs")
    start = time.perf_counter()
    try:
        # Stopping a launch that timed out takes up to 2 * STOP_GRACE_S more: keep that inside the step's limit.
        limit = plan.time_left(plan.nccl_timeout_s) - 2 * sharded_run.STOP_GRACE_S
        run = sharded_run.launch(ranks, backend="nccl", timeout_s=max(1.0, limit))
    except TimeoutError as error:
        return Step("nccl", "timed out", time.perf_counter() - start, str(error))
    seconds, lines = time.perf_counter() - start, run.stdout.splitlines()
    facts = {"ranks": ranks, "output": lines}
    if run.returncode != 0:
        return Step("nccl", "failed", seconds, (run.stdout + run.stderr).strip()[-3000:], facts)
    return Step("nccl", "passed", seconds, f"{lines[0] if lines else 'no output'}; {scope}", facts)


def run_sanitizer(plan: Plan, sanitizer: str, tool: str) -> Step:
    """One compute-sanitizer pass; its output is kept in --out/sanitizer-<tool>.log."""
    env = dict(os.environ)
    if tool == "memcheck":  # every tensor its own cudaMalloc: a read past its end leaves the allocation
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    start = time.perf_counter()
    returncode, timed_out, output = _run_group(sanitizer_command(sanitizer, tool),
                                               plan.time_left(plan.sanitizer_timeout_s), env=env)
    seconds = time.perf_counter() - start
    plan.out.mkdir(parents=True, exist_ok=True)
    (plan.out / f"sanitizer-{tool}.log").write_text(output)
    return sanitizer_step(tool, returncode, timed_out, output, seconds)


def sanitizer_step(tool: str, returncode: int | None, timed_out: bool, output: str, seconds: float) -> Step:
    """What one compute-sanitizer run found, from its exit status and its summary lines."""
    summaries = [line.strip() for line in output.splitlines() if re.search(r"(ERROR|RACECHECK) SUMMARY", line)]
    tests = next((line.strip() for line in reversed(output.splitlines()) if re.search(r"\d+ (passed|failed)", line)),
                 "")
    facts = {"summary": summaries, "tests": tests, "returncode": returncode}
    name = f"sanitizer {tool}"
    if timed_out:
        return Step(name, "timed out", seconds, f"not done after its time limit; {tests}", facts)
    if returncode == SANITIZER_ERROR_EXIT:
        first = next((line for line in output.splitlines() if line.startswith("========= ") and
                      re.search(r"Invalid|hazard|Error|error", line)), "")
        return Step(name, "failed", seconds, f"compute-sanitizer found errors: {first.strip()}", facts)
    if returncode != 0:
        return Step(name, "failed", seconds, f"the tests under compute-sanitizer exited {returncode}: {tests}", facts)
    return Step(name, "passed", seconds, "; ".join(summaries), facts)


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


# Below twice the cost of a call on two elements, a timing measures the launch, not the kernel.
LAUNCH_BOUND_FACTOR = 2


def regime(seconds: float, footprint_bytes: int, launch_seconds: float, l2_bytes: int) -> str:
    """What bounds one timing: "launch-bound", "in L2" (every byte it touches fits in the L2 cache) or "HBM"."""
    if seconds < LAUNCH_BOUND_FACTOR * launch_seconds:
        return "launch-bound"
    return "in L2" if footprint_bytes <= l2_bytes else "HBM"


def matmul_engines(dtype: torch.dtype) -> tuple[str, str]:
    """Which units do the multiply-adds: (ours, cuBLAS's through torch.matmul) for one dtype."""
    if dtype in (torch.float16, torch.bfloat16):
        theirs = "tensor cores"
    elif dtype == torch.float32:
        theirs = "TF32 tensor cores" if torch.backends.cuda.matmul.allow_tf32 else "FP32 CUDA cores (TF32 off)"
    else:
        theirs = "FP64 (tensor cores from sm_80)"
    return "CUDA cores", theirs


def measure(plan: Plan, device: str = "cuda", seconds_of=cuda_seconds, l2_bytes: int | None = None,
            into: dict | None = None) -> dict[str, list[dict]]:
    """Every planned measurement on `device`, each timed by seconds_of(fn, min_run_time), appended to `into`
    as it is taken (so a failure half-way keeps what was measured).

    Only the default arguments measure anything; tests pass the CPU and a stand-in timer to run the same
    code on a machine without a GPU. Each row names its regime (see `regime`); `l2_bytes` defaults to the
    GPU's L2 size.
    """
    import torch.nn.functional as F

    ops = torch.ops.myops
    timer = seconds_of

    def seconds_of(fn, min_run_time):
        if time.monotonic() > plan.deadline:
            raise BudgetSpent(f"the run's {plan.budget_s:.0f} s were spent; what was measured until then is kept")
        return timer(fn, min_run_time)

    if l2_bytes is None:
        l2_bytes = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)
    g = torch.Generator(device).manual_seed(0)
    results = into if into is not None else {}
    for key in ("launch", "myadd", "myrmsnorm", "mymatmul"):
        results.setdefault(key, [])
    tiny = torch.ones(2, device=device)
    launch = seconds_of(lambda: ops.myadd.default(tiny, tiny), plan.min_run_time_s)
    results["launch"].append({"what": "myadd on 2 elements", "seconds": launch})
    for name in plan.dtypes:
        dtype = getattr(torch, name)
        itemsize = torch.empty(0, dtype=dtype).element_size()
        for n in plan.myadd_elements:
            for layout in ("contiguous", "transposed"):
                width = 1024  # n // 1024 x 1024 matrices; their transposes take the strided kernel
                a, b = (torch.randn(n // width, width, device=device, dtype=dtype, generator=g) for _ in range(2))
                # Like with like: myadd writes a contiguous result whatever its inputs' layout, so ATen's add and
                # the copy write into a contiguous tensor too (torch.add alone would keep the inputs' layout).
                out = torch.empty(a.shape[::-1] if layout == "transposed" else a.shape, device=device, dtype=dtype)
                if layout == "transposed":
                    a, b = a.t(), b.t()
                seconds = {
                    "myadd": seconds_of(lambda: ops.myadd.default(a, b), plan.min_run_time_s),
                    "torch.add": seconds_of(lambda: torch.add(a, b, out=out), plan.min_run_time_s),
                    "copy": seconds_of(lambda: out.copy_(a), plan.min_run_time_s),
                }
                moved, copied = 3 * n * itemsize, 2 * n * itemsize
                results["myadd"].append({
                    "dtype": name, "layout": layout, "elements": n,
                    "regime": regime(seconds["myadd"], moved, launch, l2_bytes),
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
                                         "regime": regime(ours, moved, launch, l2_bytes),
                                         "myrmsnorm_GBps": moved / ours / 1e9, "aten_GBps": moved / aten / 1e9,
                                         "ratio_vs_aten": aten / ours})
        ours_engine, aten_engine = matmul_engines(dtype)
        for n in plan.matmul_sizes:
            a, b = (torch.randn(n, n, device=device, dtype=dtype, generator=g) for _ in range(2))
            ours = seconds_of(lambda: ops.mymatmul.default(a, b), plan.min_run_time_s)
            aten = seconds_of(lambda: torch.matmul(a, b), plan.min_run_time_s)
            flops = 2 * n**3
            results["mymatmul"].append({"dtype": name, "n": n, "ours_on": ours_engine, "aten_on": aten_engine,
                                        "mymatmul_TFLOPs": flops / ours / 1e12,
                                        "aten_TFLOPs": flops / aten / 1e12, "ratio_vs_aten": aten / ours})
    measure_triton(plan, device, seconds_of, launch, l2_bytes, g, results)
    return results


# Values of the Triton operator against ATen's rms_norm: both round once to the dtype, from different summation orders.
TRITON_TOLERANCE = {"float64": 1e-9, "float32": 1e-4, "bfloat16": 2e-2, "float16": 2e-3}


def triton_unavailable(device: str) -> str | None:
    """Why the Triton operator of notebook 17 cannot be measured on `device`; None when it can."""
    if torch.device(device).type != "cuda":
        return f"Triton compiles kernels for GPUs: nothing to measure on {device}"
    try:
        import triton  # noqa: F401
        from torch.library import triton_op, wrap_triton  # noqa: F401
    except ImportError as error:
        return f"this torch cannot make Triton operators: {error}"
    return None


def measure_triton(plan: Plan, device: str, seconds_of, launch: float, l2_bytes: int, g, results: dict,
                   op=None) -> None:
    """tritonops::myrmsnorm (myops/triton_ops.py, compiled by Triton) on myrmsnorm's shapes: values against
    rms_norm, GB/s next to the CUDA C++ myrmsnorm, rms_norm and a copy of the input (the bound: each element read
    and written once). `op` replaces the operator where tests run this on CPU (its kernel interpreted); without
    it, a device Triton cannot compile for gets one row saying why."""
    import torch.nn.functional as F

    rows = results.setdefault("triton", [])
    if op is None:
        if (reason := triton_unavailable(device)) is not None:
            rows.append({"skipped": reason})
            return
        from myops import triton_ops

        op = triton_ops.myrmsnorm
    for name in plan.dtypes:
        dtype = getattr(torch, name)
        itemsize = torch.empty(0, dtype=dtype).element_size()
        for n_rows, cols in plan.myrmsnorm_shapes:
            x = torch.randn(n_rows, cols, device=device, dtype=dtype, generator=g)
            w = torch.randn(cols, device=device, dtype=dtype, generator=g)
            expected = F.rms_norm(x, (cols,), w, 1e-6)
            torch.testing.assert_close(op(x, w, 1e-6), expected, rtol=TRITON_TOLERANCE[name],
                                       atol=TRITON_TOLERANCE[name])
            out = torch.empty_like(x)
            seconds = {"triton": seconds_of(lambda: op(x, w, 1e-6), plan.min_run_time_s),
                       "cuda_cpp": seconds_of(lambda: torch.ops.myops.myrmsnorm.default(x, w, 1e-6),
                                              plan.min_run_time_s),
                       "aten": seconds_of(lambda: F.rms_norm(x, (cols,), w, 1e-6), plan.min_run_time_s),
                       "copy": seconds_of(lambda: out.copy_(x), plan.min_run_time_s)}
            moved = 2 * x.numel() * itemsize
            rows.append({"dtype": name, "rows": n_rows, "cols": cols,
                         "regime": regime(seconds["triton"], moved, launch, l2_bytes),
                         **{f"{key}_GBps": moved / s / 1e9 for key, s in seconds.items()},
                         "ratio_vs_cuda_cpp": seconds["cuda_cpp"] / seconds["triton"],
                         "ratio_vs_copy": seconds["copy"] / seconds["triton"]})


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
    """results.json, and one PNG per measurement when the benchmarks ran, in `out`; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "results.json"]
    written[0].write_text(json.dumps(results, indent=2, default=str))
    if "measurements" not in results:
        return written
    measured = results["measurements"]
    figures = {
        "myadd_GBps": plot_series(measured.get("myadd", []), "elements",
                                  {"myadd_GBps": "myadd", "aten_GBps": "torch.add", "copy_GBps": "copy"},
                                  "GB/s", "myadd vs torch.add and a copy, each writing a contiguous result (CUDA)",
                                  group=("dtype", "layout")),
        "myrmsnorm_GBps": plot_series(measured.get("myrmsnorm", []), "rows",
                                      {"myrmsnorm_GBps": "myrmsnorm", "aten_GBps": "F.rms_norm"},
                                      "GB/s", "myrmsnorm vs torch.nn.functional.rms_norm (CUDA)"),
        "triton_myrmsnorm_GBps": plot_series([r for r in measured.get("triton", []) if "dtype" in r], "rows",
                                             {"triton_GBps": "tritonops::myrmsnorm (Triton)",
                                              "cuda_cpp_GBps": "myops::myrmsnorm (CUDA C++)",
                                              "aten_GBps": "F.rms_norm", "copy_GBps": "copy"},
                                             "GB/s", "the Triton myrmsnorm of notebook 17 vs CUDA C++, ATen and a copy"),
        "mymatmul_TFLOPs": plot_series(measured.get("mymatmul", []), "n",
                                       {"mymatmul_TFLOPs": "mymatmul (CUDA cores)",
                                        "aten_TFLOPs": "torch.matmul (cuBLAS)"},
                                       "TFLOP/s", "mymatmul vs torch.matmul (CUDA)"),
    }
    for name, figure in figures.items():
        written.append(out / f"{name}.png")
        figure.savefig(written[-1], dpi=110)
    return written


def ran_on(facts: dict) -> str:
    """One line: the torch, CUDA, driver and GPU this run had."""
    gpu = "no CUDA GPU"
    if facts.get("gpu"):
        gpu = (f"{facts['gpu']} (compute capability {facts['capability']}, {facts['multiprocessors']} SMs, "
               f"{facts['memory_GiB']} GiB, L2 {facts['L2_MB']} MB; {facts['gpus']} GPU(s))")
    driver = f"driver {facts['driver']}" if facts.get("driver") else "no NVIDIA driver found"
    return f"ran on: torch {facts['torch']} (CUDA {facts['cuda']}), {driver}, {gpu}, Python {facts['python']}"


def summary(results: dict) -> str:
    lines = []
    for step in results.get("steps", []):
        lines.append(f"{step['name']:<19} {step['status']:<9} {step['seconds']:6.0f} s"
                     + (f"  {step['detail'].splitlines()[0]}" if step["detail"] else ""))
    measured = results.get("measurements", {})
    for r in measured.get("launch", []):
        lines.append(f"launch    {r['what']}: {r['seconds'] * 1e6:.1f} us per call")
    for r in measured.get("myadd", []):
        lines.append(f"myadd     {r['dtype']:<9} {r['layout']:<11} 2^{r['elements'].bit_length() - 1:<3}"
                     f"{r['myadd_GBps']:8.0f} GB/s  torch.add {r['aten_GBps']:6.0f}  copy {r['copy_GBps']:6.0f}"
                     f"  vs aten {r['ratio_vs_aten']:.2f}  vs copy {r['ratio_vs_copy']:.2f}  [{r['regime']}]")
    for r in measured.get("myrmsnorm", []):
        lines.append(f"myrmsnorm {r['dtype']:<9} {r['rows']}x{r['cols']:<10}{r['myrmsnorm_GBps']:8.0f} GB/s  "
                     f"rms_norm {r['aten_GBps']:6.0f}  vs aten {r['ratio_vs_aten']:.2f}  [{r['regime']}]")
    for r in measured.get("triton", []):
        lines.append(f"triton    skipped: {r['skipped']}" if "skipped" in r else
                     f"triton    {r['dtype']:<9} {r['rows']}x{r['cols']:<10}{r['triton_GBps']:8.0f} GB/s  CUDA C++ "
                     f"{r['cuda_cpp_GBps']:6.0f}  rms_norm {r['aten_GBps']:6.0f}  copy {r['copy_GBps']:6.0f}  "
                     f"vs C++ {r['ratio_vs_cuda_cpp']:.2f}  vs copy {r['ratio_vs_copy']:.2f}  [{r['regime']}]")
    for r in measured.get("mymatmul", []):
        lines.append(f"mymatmul  {r['dtype']:<9} n={r['n']:<6} {r['mymatmul_TFLOPs']:8.2f} TFLOP/s ({r['ours_on']})"
                     f"  torch.matmul {r['aten_TFLOPs']:7.2f} ({r['aten_on']})  vs aten {r['ratio_vs_aten']:.2f}")
    return "\n".join(lines)


def _attempt(name: str, action):
    """action() or, if it raises, a failed Step that names the exception (the check itself must not crash)."""
    start = time.perf_counter()
    try:
        return action()
    except Exception as error:  # noqa: BLE001 - whatever broke is reported in results.json
        where = traceback.extract_tb(error.__traceback__)[-1]
        return Step(name, "failed", time.perf_counter() - start,
                    f"{type(error).__name__}: {error} ({Path(where.filename).name}:{where.lineno})")


def main(argv: list[str] | None = None, backend=None) -> int:
    """The command; `backend` (default GpuBackend) is the seam tests replace to run without a GPU."""
    args = parse_args(argv)
    plan = make_plan(args)
    if args.dry_run:
        print(describe(plan))
        return EXIT_OK
    backend = backend or GpuBackend()
    start = time.perf_counter()
    plan.deadline = time.monotonic() + plan.budget_s
    results: dict = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                     **backend.machine(), "steps": []}
    print(ran_on(results), flush=True)
    status = EXIT_OK

    def record(step: Step, code: int) -> bool:
        nonlocal status
        results["steps"].append(asdict(step))
        print(f"{step.name}: {step.status} in {step.seconds:.0f} s"
              + (f": {step.detail}" if step.detail and not step.ok else ""), flush=True)
        if not step.ok and status == EXIT_OK:
            status = code
        return step.ok

    try:
        if not results["gpu"]:
            record(Step("machine", "failed", detail=NO_GPU_MESSAGE), EXIT_NO_GPU)
            return status
        results["toolkit"] = toolkit = backend.toolkit()
        print(f"toolkit: CUDA {toolkit['toolkit_cuda']} at {toolkit['cuda_home']}, architectures "
              f"{toolkit['arch_list']}, compute-sanitizer {toolkit['sanitizer'] or 'not found'}", flush=True)
        if toolkit["problem"]:
            record(Step("toolkit", "failed", detail=f"the CUDA layer cannot be built here: {toolkit['problem']}"),
                   EXIT_NO_CUDA_LAYER)
            return status
        if not record(_attempt("build", lambda: backend.build(plan)), EXIT_BUILD_FAILED):
            return status
        if plan.run_tests:
            tests = backend.run_tests(plan)
            results["tests"] = {**asdict(tests), "command": plan.test_command[1:]}
            record(Step("tests", "passed" if tests.passed else "timed out" if tests.timed_out else "failed",
                        tests.seconds, "" if tests.passed else f"exit {tests.returncode}, {tests.counts}",
                        {"counts": tests.counts}), EXIT_TESTS_FAILED)
        if plan.run_sanitizer:
            if toolkit["sanitizer"] is None:
                record(Step("sanitizer", "skipped", detail="no compute-sanitizer on PATH or in the CUDA toolkit"),
                       EXIT_SANITIZER_FAILED)
            else:
                steps = _attempt("sanitizer", lambda: backend.sanitize(plan, toolkit["sanitizer"]))
                for step in steps if isinstance(steps, list) else [steps]:
                    record(step, EXIT_SANITIZER_FAILED)
        if plan.run_nccl:
            record(_attempt("nccl", lambda: backend.nccl(plan)), EXIT_NCCL_FAILED)
        if plan.run_benchmarks:
            results["measurements"] = measured = {}

            def benchmarks() -> Step:
                began = time.perf_counter()
                backend.measure(plan, into=measured)
                return Step("benchmarks", "passed", time.perf_counter() - began)

            step = _attempt("benchmarks", benchmarks)
            if step.detail.startswith("BudgetSpent"):
                step.status = "timed out"
            record(step, EXIT_MEASURE_FAILED)
        return status
    finally:
        results["seconds"] = time.perf_counter() - start
        results["exit_status"] = status
        write_results(plan.out, results)
        print(summary(results))
        print(f"results in {plan.out} (exit status {status})")


if __name__ == "__main__":
    sys.exit(main())
