"""The CUDA launch helper (csrc/cuda/launch.cuh): what it remembers, and the grids it gives.

Its cache (csrc/cuda/memo.h) has no CUDA in it: tests/cuda_memo_check.cpp runs it on the CPU, here on every
machine. Where a GPU is, the grids of real launches are read back from the profiler.
"""
import json
import os
import subprocess

import pytest
import torch

import myops
from myops.build import REPO_ROOT
from helpers import needs_gpu


@pytest.fixture(scope="module")
def memo_check(tmp_path_factory):
    program = tmp_path_factory.mktemp("memo") / "cuda_memo_check"
    compiler = os.environ.get("CXX", "c++")
    subprocess.run([compiler, "-std=c++17", "-O1", "-pthread", f"-I{REPO_ROOT / 'csrc'}",
                    str(REPO_ROOT / "tests" / "cuda_memo_check.cpp"), "-o", str(program)],
                   check=True, capture_output=True, text=True, timeout=120)
    return subprocess.run([str(program)], check=True, capture_output=True, text=True, timeout=60).stdout.splitlines()


def test_a_failed_occupancy_query_is_asked_again(memo_check):
    """A query that throws leaves no answer behind: before, a 0 stayed and every launch got one block per SM."""
    assert memo_check[:4] == ["the failing query threw: cudaErrorNoDevice",
                              "after the failure: 8 (asked 2 times)",
                              "remembered: 8 (asked 2 times)",
                              "another key: 4 (asked 3 times)"]


def test_one_query_for_threads_asking_at_once(memo_check):
    assert memo_check[4:] == ["8 threads: 8 answers of 16, 1 query"]


@needs_gpu
def test_grid_fills_every_sm_with_as_many_blocks_as_fit(layers, tmp_path):
    """A large myadd gets (resident blocks per SM) x (SMs) blocks: more than one per SM, a whole number of them."""
    x = torch.randn(2**24, device="cuda")
    myops.myadd(x, x)  # the first launch asks the occupancy calculator
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        myops.myadd(x, x)
        torch.cuda.synchronize()
    trace = tmp_path / "trace.json"
    profile.export_chrome_trace(str(trace))
    grids = [event["args"]["grid"] for event in json.loads(trace.read_text())["traceEvents"]
             if event.get("cat") == "kernel" and "myadd_dense_kernel" in event.get("name", "")]
    assert len(grids) == 1, grids
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    blocks, grid_y, grid_z = grids[0]
    assert (grid_y, grid_z) == (1, 1)
    assert blocks % sms == 0 and blocks // sms >= 2, (blocks, sms)
