"""The CPU kernels on every vector width this machine can run, not only the one -march=native picks.

A layer is compiled for the machine that builds it (myops/build.py), so on an AVX-512 machine the AVX2 code of
cpu/vectorized.h never runs, and on an AVX2 machine the AVX-512 code never runs; the generic `Vectorized` (a plain
array with scalar loops, what a portable build gets) runs on neither. Each capability can be forced with a macro
(cpu/vectorized.h): here the cpu layer is compiled once per capability the CPU supports, each build run in a
process of its own on the same inputs, and the results compared bit for bit. The widest capability is what
-march=native compiles anyway, so that one is the course's own build (build/, the layers every test loads).
"""
import os
import subprocess
import sys

import pytest
import torch

from myops import build
from myops.build import REPO_ROOT

# capability -> (the macros of the compiler that it needs, the defines that force it, mymatmul's float32 tile)
CAPABILITIES = {
    "AVX512": (("AVX512F", "AVX512BW", "AVX512DQ", "AVX512VL"), (), (6, 32)),
    "AVX2": (("AVX2", "FMA", "F16C"), ("-DMYOPS_AT_MOST_AVX2",), (6, 16)),
    "generic": ((), ("-DCPU_CAPABILITY=DEFAULT",), (4, 8)),
}

# Builds the cpu layer with the given defines into a build folder of its own (none: the course's build), runs it on
# fixed inputs, saves them.
CHILD = """
import sys, torch
from myops import build
out, build_dir, *defines = sys.argv[1:]
build.CXX_FLAGS = (*build.CXX_FLAGS, *defines)
builder = build.Builder(build.REPO_ROOT / "csrc", build_dir, prefix="capability_") if build_dir else build._BUILDER
for layer in ("schema", "cpu", "bench"):
    builder.load(layer)
g = torch.Generator().manual_seed(0)
results = {"tile": tuple(torch.ops.myops_bench.mymatmul_tile(torch.float32))}  # the vector width it got
for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
    a, b = torch.randn(67, 301, generator=g, dtype=dtype), torch.randn(301, 129, generator=g, dtype=dtype)
    x, w = torch.randn(37, 1029, generator=g, dtype=dtype), torch.randn(1029, generator=g, dtype=dtype)
    results[str(dtype)] = {
        "myadd": torch.ops.myops.myadd(a, a.flip(0)),
        "myadd strided": torch.ops.myops.myadd(a.t(), a.t().flip(1)),
        "mymatmul": torch.ops.myops.mymatmul(a, b),
        "mymatmul narrow": torch.ops.myops.mymatmul(a, b[:, :5]),
        "myrmsnorm": torch.ops.myops.myrmsnorm(x, w, 1e-6),
    }
torch.save(results, out)
"""


def supported() -> list[str]:
    native = build.native_target("c++") if "-march=native" in build.CXX_FLAGS else ""
    return [name for name, (macros, _, _) in CAPABILITIES.items()
            if all(f"#define __{macro}__ 1" in native for macro in macros)]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("capabilities")
    found = {}
    for widest, name in zip((True, False, False), supported()):
        out = folder / f"{name}.pt"
        own_build = () if widest else (str(folder / name), *CAPABILITIES[name][1])
        child = subprocess.run([sys.executable, "-c", CHILD, str(out), *(own_build or ("",))],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=900,
                               env={**os.environ, **({} if widest else {"MYOPS_PRECOMPILED_HEADER": "0"})})
        assert child.returncode == 0, child.stdout[-2000:] + child.stderr[-3000:]
        found[name] = torch.load(out)
    return found


def test_each_build_got_the_vector_width_it_was_compiled_for(results):
    assert len(results) >= 2 and "generic" in results
    assert {name: found["tile"] for name, found in results.items()} == {
        name: CAPABILITIES[name][2] for name in results}


@pytest.mark.parametrize("capability", [name for name in CAPABILITIES if name != "generic"])
def test_each_vector_width_gives_the_generic_builds_bits(results, capability):
    if capability not in results:
        pytest.skip(f"this CPU cannot run {capability} code")
    for dtype, outputs in results["generic"].items():
        if dtype == "tile":
            continue
        for op, expected in outputs.items():
            got = results[capability][dtype][op]
            assert got.dtype == expected.dtype and torch.equal(got, expected), f"{capability} {dtype} {op}"
