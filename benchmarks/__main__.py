"""Benchmarks of the myops kernels against ATen, in one run:

    .venv/bin/python -m benchmarks [--quick] [--no-builds] [--out build/benchmarks]

Writes results.json and one PNG per measurement into --out, and prints a summary. Both record what the
numbers were measured on (CPU model and vector flags, threads, torch, our compiler flags; every plot
carries it in its title). With a GPU it adds the CUDA kernels. Full run on a 2-core machine: about 5 minutes, most of it the cold builds.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

import myops
from myops import perf
from myops.build import REPO_ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes, shorter timings")
    parser.add_argument("--no-builds", action="store_true", help="skip the cold build measurements")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "benchmarks")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    myops.load()
    env = perf.environment()
    run_time = 0.05 if args.quick else 0.3
    exponents = range(10, 27, 4) if args.quick else range(10, 27, 2)
    sizes = (64, 256, 512) if args.quick else (64, 128, 256, 512, 1024)
    dtypes = (torch.float32,) if args.quick else (torch.float32, torch.float64, torch.bfloat16, torch.float16)
    step_sizes = (128,) if args.quick else (256, 512)
    results = {
        "environment": env,
        "myadd_cpu": perf.myadd_bandwidth(exponents, min_run_time=run_time),
        "mymatmul_cpu": [row for dtype in dtypes
                         for row in perf.mymatmul_throughput(sizes, dtype=dtype, min_run_time=run_time)],
        "mymatmul_steps": {n: perf.mymatmul_steps(n, min_run_time=run_time) for n in step_sizes},
        "mymatmul_register_tile": {str(dtype).removeprefix("torch."): torch.ops.myops_bench.mymatmul_tile(dtype)
                                   for dtype in (torch.float32, torch.float64)},
        "overhead_us": perf.call_overhead(),
    }
    figures = {
        "myadd_cpu": perf.plot_bandwidth(results["myadd_cpu"], env=env),
        "overhead": perf.plot_overhead(results["overhead_us"], env=env),
        "mymatmul_steps": perf.plot_matmul_steps(results["mymatmul_steps"], env=env),
    }
    for dtype in dtypes:
        name = str(dtype).removeprefix("torch.")
        rows = [row for row in results["mymatmul_cpu"] if row["dtype"] == name]
        figures["mymatmul_cpu" if dtype == torch.float32 else f"mymatmul_cpu_{name}"] = perf.plot_matmul(
            rows, f"mymatmul vs torch.matmul ({name})", env=env)
    if torch.cuda.is_available() and "cuda" in myops.loaded_layers():
        results["gpu"] = torch.cuda.get_device_name()
        results["myadd_cuda"] = perf.myadd_bandwidth(range(16, 29, 2), device="cuda", min_run_time=run_time)
        results["mymatmul_cuda"] = perf.mymatmul_throughput((1024, 2048, 4096), device="cuda", min_run_time=run_time)
        gpu_env = {**env, "cpu": results["gpu"]}
        figures["myadd_cuda"] = perf.plot_bandwidth(results["myadd_cuda"], "myadd vs torch.add on CUDA", env=gpu_env)
        figures["mymatmul_cuda"] = perf.plot_matmul(results["mymatmul_cuda"], "mymatmul vs torch.matmul on CUDA",
                                                    env=gpu_env)
    if not args.no_builds:
        results["precompiled_header_seconds"] = perf.precompile_seconds()
        results["builds"] = perf.build_times()
        figures["builds"] = perf.plot_build_times(results["builds"], env=env,
                                                  precompile=results["precompiled_header_seconds"])

    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    for name, figure in figures.items():
        figure.savefig(args.out / f"{name}.png", dpi=110)
    print(summary(results))
    print(f"results and plots in {args.out}")


def summary(results: dict) -> str:
    lines = [perf.describe(results["environment"])]
    for row in results["myadd_cpu"]:
        lines.append(f"myadd     2^{row['elements'].bit_length() - 1:<3} {row['myadd_GBps']:7.1f} GB/s  "
                     f"torch.add {row['aten_GBps']:7.1f}  copy {row['copy_GBps']:7.1f}  ratio {row['ratio_vs_aten']:.2f}"
                     f"  (vs torch.ops.aten.add.Tensor {row['ratio_vs_aten_same_entry']:.2f})")
    for row in results["mymatmul_cpu"]:
        lines.append(f"mymatmul  {row['dtype']:<8} {row['n']:<5} {row['mymatmul_GFLOPs']:7.1f} GFLOP/s  torch.matmul "
                     f"{row['aten_GFLOPs']:7.1f}  ratio {row['ratio_vs_aten']:.2f}")
    for n, steps in results["mymatmul_steps"].items():
        lines.append(f"steps     {n:<5} " + "  ".join(f"{name} {gflops:.1f}" for name, gflops in steps.items())
                     + " GFLOP/s")
    lines.append("register tile " + "  ".join(f"{dtype} {rows} x {cols}" for dtype, (rows, cols)
                                             in results["mymatmul_register_tile"].items()))
    overhead = results["overhead_us"]
    lines.append(f"overhead  torch.ops.myops.myadd {overhead['torch.ops.myops.myadd']:.2f} us  torch.add "
                 f"{overhead['torch.add']:.2f} us  ratio {overhead['ratio_vs_aten']:.2f}  "
                 f"(torch.ops.aten.add.Tensor {overhead['torch.ops.aten.add.Tensor']:.2f} us)")
    for key in ("myadd_cuda", "mymatmul_cuda"):
        for row in results.get(key, []):
            lines.append(f"{key:<14} " + "  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                                   for k, v in row.items()))
    if results.get("precompiled_header_seconds"):
        lines.append(f"build     precompiled header {results['precompiled_header_seconds']:5.1f} s (once)")
    for row in results.get("builds", []):
        lines.append(f"build     {row['layer']:<16} {row['seconds']:5.1f} s  nothing precompiled "
                     f"{row['no_pch_seconds']:5.1f} s  with extension.h {row['extension_h_seconds']:5.1f} s  "
                     f"ratio {row['ratio']:.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
