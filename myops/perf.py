"""Measure the myops kernels against ATen: throughput, per-call overhead and build times.

`python -m benchmarks` runs the full set and writes JSON and plots; notebook 08 runs a short version.
Timings use torch.utils.benchmark with the process's thread count (its default is one thread).
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import resource
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

import torch

from myops.build import REPO_ROOT, Builder


# -- what the numbers were measured on ---------------------------------------------------------------
# The /proc/cpuinfo flags that decide which vector code runs: ours (cpu/vectorized.h) and ATen's.
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
              "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "neon", "asimd", "sve")


def environment(threads: int | tuple[int, ...] | None = None) -> dict:
    """The machine, threads, torch and build flags behind a measurement: store it with the numbers.
    `threads`: the thread count(s) the measurement ran with (default: the process's, torch.get_num_threads())."""
    from myops import build

    cpu_model, flags = "", set()
    cpuinfo = Path("/proc/cpuinfo")  # Linux; elsewhere only platform's one word is known
    for line in cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []:
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "model name" and not cpu_model:
            cpu_model = value
        elif key in ("flags", "Features") and not flags:  # Features: ARM
            flags = set(value.split())
    return {
        "cpu": cpu_model or platform.processor() or platform.machine(),
        "simd": [flag for flag in SIMD_FLAGS if flag in flags],
        "threads": torch.get_num_threads() if threads is None else threads,
        "cpus": os.cpu_count(),
        # runnable processes, averaged over the last minute: above the CPU count, threads wait for cores
        "load_average": round(os.getloadavg()[0], 1),
        "torch": torch.__version__,
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cxx_flags": list(build.CXX_FLAGS),
        "ld_flags": list(build.LD_FLAGS),
    }


def describe(env: dict) -> str:
    """One line for a plot title: CPU, SIMD, threads, torch, our compiler flags."""
    widest = [flag for flag in env["simd"] if flag in ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile",
                                                        "asimd", "sve")]
    return (f"{env['cpu']} ({' '.join(widest) or 'no vector flags'}), {describe_threads(env['threads'])}, "
            f"load {env['load_average']} on {env['cpus']} CPUs, torch {env['torch']} "
            f"(ATen {env['aten_cpu_capability']}), {' '.join(env['cxx_flags'])}")


def describe_threads(threads) -> str:
    """'1 thread', '2 threads', '1 and 2 threads': a count, or the counts a plot's measurements ran with."""
    counts = sorted(set(threads)) if isinstance(threads, (list, tuple)) else [threads]
    return " and ".join(map(str, counts)) + (" thread" if counts == [1] else " threads")


def _title(ax, title: str, env: dict | None) -> None:
    ax.set_title(title if env is None else f"{title}\n{describe(env)}", fontsize=9 if env else None, wrap=True)


def vectorized_float_lanes() -> int | None:
    """Floats in one at::vec::Vectorized<float> of our JIT-built layers, as cpu/vectorized.h chooses it from what
    the compiler predefines for CXX_FLAGS on this machine: 16 (AVX-512), 8 (AVX2), 4 (aarch64: NEON needs no
    macro, ATen/cpu/vec/vec128/vec128.h); None where ATen's generic Vectorized (scalar loops) is left."""
    from myops import build

    macros = set(build.native_target(os.environ.get("CXX", "c++")).split())
    if {"__AVX512F__", "__AVX512BW__", "__AVX512DQ__", "__AVX512VL__"} <= macros:
        return 16
    if {"__AVX2__", "__FMA__", "__F16C__"} <= macros:
        return 8
    return 4 if "__aarch64__" in macros else None


def _median_seconds(stmt: str, num_threads: int, min_run_time: float, **values) -> float:
    from torch.utils.benchmark import Timer  # imported late: it imports cpp_extension, see build.py

    # MYOPS_MAX_RUN_TIME caps every measurement: runs that check no timings (the test suite) set it.
    min_run_time = min(min_run_time, float(os.environ.get("MYOPS_MAX_RUN_TIME", min_run_time)))

    timer = Timer(stmt, globals={"torch": torch, **values}, num_threads=num_threads)
    return timer.blocked_autorange(min_run_time=min_run_time).median


def seconds_per_call(fn, *args, min_run_time: float = 0.2, num_threads: int | None = None) -> float:
    """Median seconds of one call fn(*args), with `num_threads` threads (default: the process's)."""
    return _median_seconds("fn(*args)", num_threads or torch.get_num_threads(), min_run_time, fn=fn, args=args)


def _sync(device: str) -> str:
    return "; torch.cuda.synchronize()" if device == "cuda" else ""


def myadd_bandwidth(exponents, device="cpu", min_run_time=0.2) -> list[dict]:
    """GB/s of myops.myadd, torch.add, torch.add into an existing tensor (out=) and a plain copy (the bandwidth
    bound) for 2**e float32 elements, and the ratio to ATen's add called through torch.ops as ours is."""
    threads = torch.get_num_threads()
    rows = []
    for e in exponents:
        n = 2**e
        a, b, out = (torch.randn(n, device=device) for _ in range(3))
        add_bytes, copy_bytes = 3 * n * 4, 2 * n * 4  # read two, write one / read one, write one
        # Both operators are bound to a name first: the statement times the call, not a chain of
        # attribute lookups (torch.ops.myops.myadd.default is four), which call_overhead() shows apart.
        seconds = {
            "myadd": _median_seconds("fn(a, b)" + _sync(device), threads, min_run_time, a=a, b=b,
                                     fn=torch.ops.myops.myadd.default),
            "torch.add": _median_seconds("fn(a, b)" + _sync(device), threads, min_run_time, a=a, b=b, fn=torch.add),
            # ATen's add entered as ours is (see call_overhead): the kernels compared without the entry's cost
            "aten.add": _median_seconds("fn(a, b)" + _sync(device), threads, min_run_time, a=a, b=b,
                                        fn=torch.ops.aten.add.Tensor),
            "copy": _median_seconds("out.copy_(a)" + _sync(device), threads, min_run_time, a=a, out=out),
            # the same add into an existing tensor: what allocating (and first touching) a new output costs
            "torch.add out=": _median_seconds("fn(a, b, out=out)" + _sync(device), threads, min_run_time, a=a, b=b,
                                              out=out, fn=torch.add),
        }
        rows.append({
            "elements": n,
            "myadd_GBps": add_bytes / seconds["myadd"] / 1e9,
            "aten_GBps": add_bytes / seconds["torch.add"] / 1e9,
            "copy_GBps": copy_bytes / seconds["copy"] / 1e9,
            "aten_out_GBps": add_bytes / seconds["torch.add out="] / 1e9,
            "ratio_vs_aten": seconds["torch.add"] / seconds["myadd"],
            "ratio_vs_aten_same_entry": seconds["aten.add"] / seconds["myadd"],
        })
    return rows


def mymatmul_throughput(sizes, device="cpu", dtype=torch.float32, min_run_time=0.2) -> list[dict]:
    """GFLOP/s of myops.mymatmul and torch.matmul for square n x n matrices."""
    threads = torch.get_num_threads()
    rows = []
    for n in sizes:
        a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
        flops = 2 * n**3
        ours = _median_seconds("fn(a, b)" + _sync(device), threads, min_run_time, a=a, b=b,
                               fn=torch.ops.myops.mymatmul.default)
        aten = _median_seconds("fn(a, b)" + _sync(device), threads, min_run_time, a=a, b=b, fn=torch.matmul)
        rows.append({"n": n, "dtype": str(dtype).removeprefix("torch."), "mymatmul_GFLOPs": flops / ours / 1e9,
                     "aten_GFLOPs": flops / aten / 1e9, "ratio_vs_aten": aten / ours})
    return rows


MATMUL_STEPS = ("naive", "packed", "vectorized", "threaded")


def mymatmul_steps(n, dtype=torch.float32, steps=MATMUL_STEPS, min_run_time=0.2) -> dict:
    """GFLOP/s of each step from the textbook loop to myops.mymatmul (the `bench` layer), and of
    torch.matmul on one thread and on all, for n x n matrices. Every step but the last runs on one thread."""
    from myops import build

    build.load_layer("bench")
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(n, n, generator=g, dtype=dtype) for _ in range(2))
    threads, gflop = torch.get_num_threads(), 2 * n**3 / 1e9
    step_op = torch.ops.myops_bench.mymatmul_step.default
    result = {step: gflop / _median_seconds("fn(a, b, step)", threads, min_run_time, fn=step_op, a=a, b=b, step=step)
              for step in steps}
    result["torch.matmul, 1 thread"] = gflop / _median_seconds("fn(a, b)", 1, min_run_time, fn=torch.matmul, a=a, b=b)
    result["torch.matmul"] = gflop / _median_seconds("fn(a, b)", threads, min_run_time, fn=torch.matmul, a=a, b=b)
    return result


def _fastest_micros(timings: dict[str, tuple[str, dict]], num_threads: int, min_run_time: float,
                    rounds: int) -> dict[str, float]:
    """Microseconds per run of each (statement, values), timed in turn `rounds` times; each keeps its fastest
    round. Other work on the machine only ever adds time, so the minimum is the cost of the call itself, and
    taking turns exposes every statement to the same bursts of it."""
    micros = {name: float("inf") for name in timings}
    for _ in range(rounds):
        for name, (stmt, values) in timings.items():
            seconds = _median_seconds(stmt, num_threads, min_run_time / rounds, **values)
            micros[name] = min(micros[name], seconds * 1e6)
    return micros


def fastest_micros(calls: dict, *args, min_run_time: float = 0.5, rounds: int = 5, num_threads: int = 1) -> dict:
    """Microseconds per call fn(*args) for each name -> fn of `calls`, compared fairly on a busy machine (the
    calls take turns, each keeps its fastest round); `min_run_time` is the total per call."""
    timings = {name: ("fn(*args)", {"fn": fn, "args": args}) for name, fn in calls.items()}
    return _fastest_micros(timings, num_threads, min_run_time, rounds)


def call_overhead(elements=16, min_run_time=0.5, rounds=5) -> dict:
    """Microseconds per call on tiny tensors, where the time is all dispatch and Python, on one thread.

    Each call is written out in full: the attribute lookups of torch.ops are part of what a caller pays."""
    a, b = torch.randn(elements), torch.randn(elements)
    # ATen's add through torch.ops enters as ours does: its gap to torch.add is the entry alone (the same kernels
    # run); ours also runs other kernels (notebook 08, section 5)
    calls = {
        "torch.add": "torch.add(a, b)",
        "torch.ops.aten.add.Tensor": "torch.ops.aten.add.Tensor(a, b)",
        "torch.ops.myops.myadd": "torch.ops.myops.myadd(a, b)",
        "torch.ops.myops.myadd.default": "torch.ops.myops.myadd.default(a, b)",
    }
    micros = _fastest_micros({name: (stmt, {"a": a, "b": b}) for name, stmt in calls.items()}, 1, min_run_time,
                             rounds)
    micros["ratio_vs_aten"] = micros["torch.ops.myops.myadd"] / micros["torch.add"]
    return micros


# -- costs that are counted, not timed -------------------------------------------------------------------
# A busy machine (a learner's laptop, CI beside other jobs) stretches any time by an unknown factor, so what a
# check asserts is a count; times go into plots titled with the machine and its load.
def minor_page_faults(fn, *args, **kwargs) -> int:
    """Pages the process mapped in during fn(*args, **kwargs) (minor faults: memory fresh from the system)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn(*args, **kwargs)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def python_functions_run(call) -> list[str]:
    """Names of the Python functions entered, in order, while call() runs (without call itself)."""
    names = []
    sys.setprofile(lambda frame, event, arg: names.append(frame.f_code.co_name) if event == "call" else None)
    try:
        call()
    finally:
        sys.setprofile(None)
    return names[1:]


_REAL_CLOCKS = {name: getattr(time, name) for name in
                ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "process_time")}
_REAL_DEFAULT_TIMER = timeit.default_timer


class ScriptedClock:
    """Every Python clock (time.perf_counter, time.monotonic, time.time, timeit.default_timer, which
    torch.utils.benchmark.Timer reads) shows a time that moves only by advance(): a timing method can then be
    judged on a function whose cost is known exactly, whatever else the machine is doing. A function timed on it
    must advance it: Timer grows its blocks until they take measurable time.

        with ScriptedClock() as clock:
            m = Timer("f()", globals={"f": lambda: clock.advance(0.002)}).blocked_autorange()
    """

    _active: "ScriptedClock | None" = None

    def __init__(self):
        self.now = 0.0

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def __enter__(self) -> "ScriptedClock":
        if ScriptedClock._active is not None:
            raise RuntimeError("ScriptedClock: a scripted clock is running already; leave it first")
        ScriptedClock._active = self
        for name, real in _REAL_CLOCKS.items():
            setattr(time, name, _scripted(real, nanoseconds=name.endswith("_ns")))
        timeit.default_timer = time.perf_counter
        return self

    def __exit__(self, *exc) -> None:
        ScriptedClock._active = None
        for name, real in _REAL_CLOCKS.items():
            setattr(time, name, real)
        timeit.default_timer = _REAL_DEFAULT_TIMER


def _scripted(real, nanoseconds: bool):
    """A clock that reads the scripted time while one runs, and the real clock after (for code that kept it)."""
    def clock():
        scripted = ScriptedClock._active
        if scripted is None:
            return real()
        return int(scripted.now * 1e9) if nanoseconds else scripted.now
    return clock


# -- build times -------------------------------------------------------------------------------------
def _cold_build_seconds(csrc: Path, layer: str, prefix: str, precompiled_header: bool = True) -> float:
    """Build `layer` of `csrc` into a fresh directory, in a fresh process; the helper's own timing. The
    precompiled header, built once per machine, is used as it is (or not at all)."""
    env = {**os.environ, "MYOPS_PRECOMPILED_HEADER": "1" if precompiled_header else "0"}
    with tempfile.TemporaryDirectory(dir=REPO_ROOT / "build") as build_dir:
        result = subprocess.run([sys.executable, "-m", "myops.build", "--json", "--csrc", str(csrc), "--build",
                                 build_dir, "--prefix", prefix, layer], capture_output=True, text=True, check=True,
                                timeout=1800, env=env)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    return next(row["seconds"] for row in rows if row["layer"] == layer)  # the layers it needs come first


def _with_extension_header(source: str) -> str:
    """The same translation unit, but including the catch-all <torch/extension.h> first."""
    body = source.replace("#define TORCH_ASSERT_ONLY_METHOD_OPERATORS", "")
    return "#include <torch/extension.h>\n" + body


def precompile_seconds() -> float | None:
    """How long the one-time precompiled header takes (built into a scratch folder; None: not used here)."""
    from torch.utils import cpp_extension

    from myops import build

    (REPO_ROOT / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=REPO_ROOT / "build") as scratch:
        return build.precompiled_header(cpp_extension, directory=Path(scratch))[1]


def build_times(layers=("schema", "cpu", "composite", "autograd", "inplace_or_view", "autocast", "meta")) -> list[dict]:
    """Cold build seconds of each .cpp layer as written (with the precompiled header, already made), without
    the precompiled header, and with <torch/extension.h> instead."""
    (REPO_ROOT / "build").mkdir(exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(dir=REPO_ROOT / "build") as tree:
        heavy = Path(tree) / "csrc"
        shutil.copytree(REPO_ROOT / "csrc", heavy)
        for cpp in heavy.rglob("*.cpp"):
            cpp.write_text(_with_extension_header(cpp.read_text()))
        for layer in layers:
            rows.append({
                "layer": layer,
                "files": len(Builder(REPO_ROOT / "csrc", REPO_ROOT / "build").sources(layer)),
                "seconds": _cold_build_seconds(REPO_ROOT / "csrc", layer, "bench_"),
                "no_pch_seconds": _cold_build_seconds(REPO_ROOT / "csrc", layer, "bench_", precompiled_header=False),
                "extension_h_seconds": _cold_build_seconds(heavy, layer, "bench_heavy_"),
            })
            rows[-1]["ratio"] = rows[-1]["seconds"] / rows[-1]["extension_h_seconds"]
    return rows


# -- plots -------------------------------------------------------------------------------------------
def _line_plot(xs, series, xlabel, ylabel, title, env):
    """One log2-x line chart: `series` maps a legend label to its y values."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    for label, ys in series.items():
        ax.plot(xs, ys, marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _title(ax, title, env)
    ax.legend()
    fig.tight_layout()
    return fig


def plot_bandwidth(rows, title="myadd vs torch.add (float32)", env=None):
    series = {label: [r[key] for r in rows] for key, label in
              (("myadd_GBps", "myops.myadd"), ("aten_GBps", "torch.add"),
               ("aten_out_GBps", "torch.add(out=existing)"), ("copy_GBps", "copy_ into existing"))
              if all(key in r for r in rows)}
    return _line_plot([r["elements"] for r in rows], series, "elements", "GB/s", title, env)


def plot_matmul(rows, title="mymatmul vs torch.matmul (float32)", env=None):
    series = {"myops.mymatmul": [r["mymatmul_GFLOPs"] for r in rows], "torch.matmul": [r["aten_GFLOPs"] for r in rows]}
    return _line_plot([r["n"] for r in rows], series, "n (n x n times n x n)", "GFLOP/s", title, env)


def plot_overhead(micros, env=None):
    from matplotlib.figure import Figure

    names = [k for k in micros if k != "ratio_vs_aten"]
    fig = Figure(figsize=(7, 2.4 if env is None else 2.8))
    ax = fig.subplots()
    ax.barh(names, [micros[k] for k in names], color=["#4c9f70" if "myops" in k else "#9db4c0" for k in names])
    ax.set_xlabel("microseconds per call (16 elements, one thread)")
    ax.invert_yaxis()
    if env is not None:
        _title(ax, "per-call overhead", {**env, "threads": 1})  # call_overhead times on one thread
    fig.tight_layout()
    return fig


def plot_matmul_steps(results: dict, title="from the textbook loop to mymatmul (float32)", env=None):
    """Bars of GFLOP/s per step, one group per matrix size: results maps n to mymatmul_steps(n)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    names = list(next(iter(results.values())))
    width = 0.8 / len(results)
    colors = ["#9db4c0", "#e0a458", "#4c9f70", "#2d6a4f", "#999999", "#555555"]
    for index, (n, gflops) in enumerate(results.items()):
        xs = [i + (index - (len(results) - 1) / 2) * width for i in range(len(names))]
        bars = ax.bar(xs, [gflops[name] for name in names], width=width * 0.95,
                      color=colors[:len(names)], alpha=1 - 0.35 * index, label=f"n = {n}")
        ax.bar_label(bars, fmt="%.3g", fontsize=7)
    labels = {"threaded": "threaded\n= mymatmul", "torch.matmul, 1 thread": "torch.matmul\n1 thread",
              "torch.matmul": "torch.matmul\nall threads"}
    ax.set_xticks(range(len(names)), [labels.get(name, name) for name in names], fontsize=9)
    ax.set_yscale("log")
    ax.set_ylabel("GFLOP/s (log scale)")
    if len(results) > 1:
        ax.legend(frameon=False)
    # mymatmul_steps times torch.matmul on one thread too
    _title(ax, title, None if env is None else {**env, "threads": (1, env["threads"])})
    fig.tight_layout()
    return fig


def plot_vmap(batch_sizes, fallback_seconds, rule_seconds, title, env=None):
    """Time per vmap call against the batch size: functorch's per-element fallback vs a batching rule."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3 if env is None else 3.6))
    ax = fig.subplots()
    ax.loglog(batch_sizes, [s * 1e6 for s in fallback_seconds], "o-", color="#e0a458", label="fallback (a loop)")
    ax.loglog(batch_sizes, [s * 1e6 for s in rule_seconds], "o-", color="#4c9f70", label="batching rule")
    ax.set_xlabel("batch size")
    ax.set_ylabel("microseconds per vmap call")
    _title(ax, title, env)
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


def plot_build_times(rows, env=None, precompile=None):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.2))
    ax = fig.subplots()
    layers = [r["layer"] for r in rows]
    x = range(len(layers))
    once = f" (made once: {precompile:.1f} s)" if precompile else ""
    ax.bar([i - 0.27 for i in x], [r["seconds"] for r in rows], width=0.27,
           label=f"per-operator headers, precompiled torch/library.h{once}")
    ax.bar(list(x), [r["no_pch_seconds"] for r in rows], width=0.27, label="per-operator headers, nothing precompiled")
    ax.bar([i + 0.27 for i in x], [r["extension_h_seconds"] for r in rows], width=0.27,
           label="<torch/extension.h>, precompiled torch/library.h")
    ax.set_xticks(list(x), layers, rotation=20)
    ax.set_ylabel("cold build, seconds")
    if env is not None:
        _title(ax, "cold builds", env)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def plot_call_micros(micros: dict, env=None):
    """Grouped bars of microseconds per call: micros maps a group label to {call name: microseconds}."""
    from matplotlib.figure import Figure

    names = list(next(iter(micros.values())))
    fig = Figure(figsize=(7, 2.8 if env is None else 3.4))
    ax = fig.subplots()
    height = 0.8 / len(micros)
    for row, (label, values) in enumerate(micros.items()):
        ax.barh([i + height * row for i in range(len(names))], [values[name] for name in names], height=height,
                label=label)
    ax.set_yticks([i + height * (len(micros) - 1) / 2 for i in range(len(names))], names)
    ax.invert_yaxis()
    ax.set_xlabel("microseconds per call (16 elements, one thread)")
    ax.legend(frameon=False)
    if env is not None:
        _title(ax, "time per call", env)
    fig.tight_layout()
    return fig
