"""Measure the myops kernels against ATen: throughput, per-call overhead and build times.

`python -m benchmarks` runs the full set and writes JSON and plots; notebook 08 runs a short version.
Timings use torch.utils.benchmark with the process's thread count (its default is one thread).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from myops.build import REPO_ROOT, Builder


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
    """GB/s of myops.myadd, torch.add and a plain copy (the bandwidth bound) for 2**e float32 elements."""
    threads = torch.get_num_threads()
    rows = []
    for e in exponents:
        n = 2**e
        a, b, out = (torch.randn(n, device=device) for _ in range(3))
        add_bytes, copy_bytes = 3 * n * 4, 2 * n * 4  # read two, write one / read one, write one
        seconds = {
            "myadd": _median_seconds("torch.ops.myops.myadd.default(a, b)" + _sync(device), threads,
                                     min_run_time, a=a, b=b),
            "torch.add": _median_seconds("torch.add(a, b)" + _sync(device), threads, min_run_time, a=a, b=b),
            "copy": _median_seconds("out.copy_(a)" + _sync(device), threads, min_run_time, a=a, out=out),
        }
        rows.append({
            "elements": n,
            "myadd_GBps": add_bytes / seconds["myadd"] / 1e9,
            "aten_GBps": add_bytes / seconds["torch.add"] / 1e9,
            "copy_GBps": copy_bytes / seconds["copy"] / 1e9,
            "ratio_vs_aten": seconds["torch.add"] / seconds["myadd"],
        })
    return rows


def mymatmul_throughput(sizes, device="cpu", dtype=torch.float32, min_run_time=0.2) -> list[dict]:
    """GFLOP/s of myops.mymatmul and torch.matmul for square n x n matrices."""
    threads = torch.get_num_threads()
    rows = []
    for n in sizes:
        a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
        flops = 2 * n**3
        ours = _median_seconds("torch.ops.myops.mymatmul.default(a, b)" + _sync(device), threads,
                               min_run_time, a=a, b=b)
        aten = _median_seconds("torch.matmul(a, b)" + _sync(device), threads, min_run_time, a=a, b=b)
        rows.append({"n": n, "mymatmul_GFLOPs": flops / ours / 1e9, "aten_GFLOPs": flops / aten / 1e9,
                     "ratio_vs_aten": aten / ours})
    return rows


def call_overhead(elements=16, min_run_time=0.5) -> dict:
    """Microseconds per call on tiny tensors, where the time is all dispatch and Python."""
    a, b = torch.randn(elements), torch.randn(elements)
    calls = {
        "torch.add": "torch.add(a, b)",
        "torch.ops.myops.myadd": "torch.ops.myops.myadd(a, b)",
        "torch.ops.myops.myadd.default": "torch.ops.myops.myadd.default(a, b)",
    }
    micros = {name: _median_seconds(stmt, 1, min_run_time, a=a, b=b) * 1e6 for name, stmt in calls.items()}
    micros["ratio_vs_aten"] = micros["torch.ops.myops.myadd"] / micros["torch.add"]
    return micros


# -- build times -------------------------------------------------------------------------------------
def _cold_build_seconds(csrc: Path, layer: str, prefix: str) -> float:
    """Build `layer` of `csrc` into a fresh directory, in a fresh process; the helper's own timing line."""
    with tempfile.TemporaryDirectory(dir=REPO_ROOT / "build") as build_dir:
        result = subprocess.run([sys.executable, "-m", "myops.build", "--csrc", str(csrc), "--build", build_dir,
                                 "--prefix", prefix, layer], capture_output=True, text=True, check=True)
    return float(re.search(r"built layer \S+ in ([0-9.]+) s", result.stdout).group(1))


def _with_extension_header(source: str) -> str:
    """The same translation unit, but including the catch-all <torch/extension.h> first."""
    body = source.replace("#define TORCH_ASSERT_ONLY_METHOD_OPERATORS", "")
    return "#include <torch/extension.h>\n" + body


def build_times(layers=("schema", "cpu", "composite", "autograd", "inplace_or_view", "autocast", "meta")) -> list[dict]:
    """Cold build seconds of each .cpp layer as written, and with <torch/extension.h> instead."""
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
                "extension_h_seconds": _cold_build_seconds(heavy, layer, "bench_heavy_"),
            })
            rows[-1]["ratio"] = rows[-1]["seconds"] / rows[-1]["extension_h_seconds"]
    return rows


# -- plots -------------------------------------------------------------------------------------------
def plot_bandwidth(rows, title="myadd vs torch.add (float32)"):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    sizes = [r["elements"] for r in rows]
    for key, label in (("myadd_GBps", "myops.myadd"), ("aten_GBps", "torch.add"), ("copy_GBps", "copy (bound)")):
        ax.plot(sizes, [r[key] for r in rows], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("elements")
    ax.set_ylabel("GB/s")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def plot_matmul(rows, title="mymatmul vs torch.matmul (float32)"):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    sizes = [r["n"] for r in rows]
    ax.plot(sizes, [r["mymatmul_GFLOPs"] for r in rows], marker="o", label="myops.mymatmul")
    ax.plot(sizes, [r["aten_GFLOPs"] for r in rows], marker="o", label="torch.matmul")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (n x n times n x n)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def plot_overhead(micros):
    from matplotlib.figure import Figure

    names = [k for k in micros if k != "ratio_vs_aten"]
    fig = Figure(figsize=(7, 2.4))
    ax = fig.subplots()
    ax.barh(names, [micros[k] for k in names], color=["#9db4c0", "#4c9f70", "#4c9f70"])
    ax.set_xlabel("microseconds per call (16 elements, one thread)")
    ax.invert_yaxis()
    fig.tight_layout()
    return fig


def plot_vmap(batch_sizes, fallback_seconds, rule_seconds, title):
    """Time per vmap call against the batch size: functorch's per-element fallback vs a batching rule."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3))
    ax = fig.subplots()
    ax.loglog(batch_sizes, [s * 1e6 for s in fallback_seconds], "o-", color="#e0a458", label="fallback (a loop)")
    ax.loglog(batch_sizes, [s * 1e6 for s in rule_seconds], "o-", color="#4c9f70", label="batching rule")
    ax.set_xlabel("batch size")
    ax.set_ylabel("microseconds per vmap call")
    ax.set_title(title, fontsize=10)
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


def plot_build_times(rows):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.2))
    ax = fig.subplots()
    layers = [r["layer"] for r in rows]
    x = range(len(layers))
    ax.bar([i - 0.2 for i in x], [r["seconds"] for r in rows], width=0.4, label="per-operator headers")
    ax.bar([i + 0.2 for i in x], [r["extension_h_seconds"] for r in rows], width=0.4, label="<torch/extension.h>")
    ax.set_xticks(list(x), layers, rotation=20)
    ax.set_ylabel("cold build, seconds")
    ax.legend()
    fig.tight_layout()
    return fig
