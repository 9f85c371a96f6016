"""The myadd family (myadd, myadd_, myadd_inplace) on every device: values against ATen over every memory
layout, the in-place contract, bad inputs, and which kernel each key runs.

Inputs are built on the device under test by tests/helpers.py, so strided layouts reach strided kernels.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import myops
from myops import dispatch
from helpers import (DEVICES, DEVICES_AND_META, DTYPE_IDS, FLOAT_DTYPES, Randn, layout, layout_names,
                     needs_cuda_toolchain, needs_gpu, needs_gpu_memory, storage_tensor)

IN_PLACE_OPS = ["myadd_", "myadd_inplace"]
# In place, self must be writable element by element: not the expanded layout (refused, tested below).
IN_PLACE_LAYOUTS = [name for name in layout_names() if name != "expanded"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", layout_names())
def test_matches_aten(layers, name, dtype, device):
    a, b = layout(name, dtype, device)
    result = myops.myadd(a, b)
    assert result.device == a.device and result.dtype == dtype and result.shape == a.shape
    assert result.is_contiguous()
    # Same rounding as ATen (half types add in float): bit-identical, not merely close.
    torch.testing.assert_close(result, torch.add(a, b), rtol=0, atol=0)


# The contiguous path runs whole vectors, then one partial vector: lengths around every vector width
# (8 to 64 elements, by dtype and CPU), and around the grain size where a second CPU thread starts.
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("n", [1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 32767, 32768, 65537])
def test_vector_remainders_match_aten(layers, n, dtype, device):
    randn = Randn(dtype, device, seed=n)
    a, b = randn(n), randn(n)
    expected = torch.add(a, b)
    torch.testing.assert_close(myops.myadd(a, b), expected, rtol=0, atol=0)
    torch.ops.myops.myadd_(a, b)
    torch.testing.assert_close(a, expected, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", IN_PLACE_OPS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", IN_PLACE_LAYOUTS)
def test_in_place_matches_aten_and_writes_only_self(layers, name, dtype, op, device):
    a, b = layout(name, dtype, device)
    expected = torch.add(a, b)
    storage = storage_tensor(a)
    expected_storage = storage.clone()
    expected_storage.as_strided(a.shape, a.stride(), a.storage_offset()).copy_(expected)
    returned = getattr(torch.ops.myops, op)(a, b)
    assert returned is a if op == "myadd_" else returned is None
    torch.testing.assert_close(a, expected, rtol=0, atol=0)
    torch.testing.assert_close(storage, expected_storage, rtol=0, atol=0)  # gaps and neighbours untouched


@pytest.mark.parametrize("device", DEVICES_AND_META)
@pytest.mark.parametrize("op", IN_PLACE_OPS)
def test_in_place_refuses_overlapping_self(layers, op, device):
    expanded, other = layout("expanded", torch.float32, device)
    with pytest.raises(RuntimeError) as error:
        getattr(torch.ops.myops, op)(expanded, other)
    assert str(error.value).splitlines()[0] == (
        f"myops::{op}: self has elements that share memory (e.g. it was expanded); write into self.clone() instead")
    base = torch.zeros(10, device=device)
    with pytest.raises(RuntimeError) as error:
        getattr(torch.ops.myops, op)(base[:8], base[2:])
    assert str(error.value).splitlines()[0] == (
        f"myops::{op}: self and other partially overlap in memory; pass other.clone()")


# Views of one storage with gaps, which at::get_overlap_status calls "too hard" (and ATen's add_ lets through):
# (self, other) of a base tensor of 40 elements, and whether the in-place ops accept them.
STRIDED_VIEW_PAIRS = {
    "every second, one step apart": (lambda x: (x[0:16:2], x[2:18:2]), False),  # other[i] is self[i + 1]
    "every second, interleaved": (lambda x: (x[0:16:2], x[1:17:2]), True),  # disjoint elements
    "left and right columns": (lambda x: (x.view(5, 8)[:, :4], x.view(5, 8)[:, 4:]), True),
    "the same view twice": (lambda x: (x[::3], x[::3]), True),  # each element adds itself, like myadd_(x, x)
    "a block and its transpose": (lambda x: (x.view(5, 8)[:4, :4], x.view(5, 8)[:4, :4].t()), False),
    "columns against rows": (lambda x: (x.view(5, 8)[:4, :4], x.view(8, 5)[:4, 1:]), False),
}
TOO_HARD = ("myops::{op}: self and other are views of one storage with different strides whose elements may "
            "coincide; pass other.clone()")
PARTIAL = "myops::{op}: self and other partially overlap in memory; pass other.clone()"


@pytest.mark.parametrize("device", DEVICES_AND_META)
@pytest.mark.parametrize("op", IN_PLACE_OPS)
@pytest.mark.parametrize("case", list(STRIDED_VIEW_PAIRS))
def test_in_place_on_strided_views_of_one_storage(layers, case, op, device):
    """Accepted exactly when no element is written for one index and read for another: a GPU runs them at once."""
    make, accepted = STRIDED_VIEW_PAIRS[case]
    base = Randn(torch.float32, device)(40)
    self, other = make(base)
    if accepted:
        expected = torch.add(self, other)
        getattr(torch.ops.myops, op)(self, other)
        if device != "meta":
            torch.testing.assert_close(self, expected, rtol=0, atol=0)
        return
    with pytest.raises(RuntimeError) as error:
        getattr(torch.ops.myops, op)(self, other)
    same_strides = self.stride() == other.stride()
    assert str(error.value).splitlines()[0] == (PARTIAL if same_strides else TOO_HARD).format(op=op)


@pytest.mark.parametrize("device", DEVICES_AND_META)
@pytest.mark.parametrize("op", IN_PLACE_OPS)
def test_in_place_refuses_self_whose_strides_may_meet(layers, op, device):
    """Rows of 4 elements 2 apart: element (0, 2) and (1, 0) are one address."""
    self = torch.zeros(16, device=device).as_strided((4, 4), (2, 1))
    with pytest.raises(RuntimeError) as error:
        getattr(torch.ops.myops, op)(self, torch.ones(4, 4, device=device))
    assert str(error.value).splitlines()[0] == (
        f"myops::{op}: self may have elements that share memory (its strides are [2, 1] for sizes [4, 4]); "
        "write into self.clone() instead")


@pytest.mark.parametrize("op", IN_PLACE_OPS)
def test_tracing_refuses_the_overlaps_running_refuses(layers, op):
    """The Meta kernels make the CPU kernels' overlap checks: FakeTensor and torch.compile refuse while tracing.

    Before, tracing accepted them, and aot_eager then ran the CPU kernel on a functionalized copy of `other`:
    myadd_inplace(x[:8], x[2:]) gave a result where eager mode raises.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    partial = f"myops::{op}: self and other partially overlap in memory; pass other.clone()"
    with FakeTensorMode():
        base = torch.zeros(10)
        with pytest.raises(RuntimeError) as error:
            getattr(torch.ops.myops, op)(base[:8], base[2:])
        assert str(error.value).splitlines()[0] == partial

    def shifted_sum(x):
        getattr(torch.ops.myops, op)(x[:-2], x[2:])
        return x

    torch._dynamo.reset()
    for dynamic in (False, True):
        compiled = torch.compile(shifted_sum, backend="aot_eager", fullgraph=True, dynamic=dynamic)
        with pytest.raises(Exception) as error:
            compiled(torch.ones(10))
        assert partial in str(error.value), error.value


@pytest.mark.parametrize("op", IN_PLACE_OPS)
def test_tracing_accepts_disjoint_views_of_one_tensor(layers, op):
    def add_halves(x):
        getattr(torch.ops.myops, op)(x[: x.shape[0] // 2], x[x.shape[0] // 2:])
        return x

    # myadd_ returns Tensor(a!), which functionalization (aot_eager) refuses: see notebook 09.
    backend = "aot_eager" if op == "myadd_inplace" else "eager"
    torch._dynamo.reset()
    for dynamic in (False, True):
        compiled = torch.compile(add_halves, backend=backend, fullgraph=True, dynamic=dynamic)
        for n in (8, 12):
            x = torch.randn(n)
            torch.testing.assert_close(compiled(x.clone()), add_halves(x.clone()), rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_inputs_are_not_modified(layers, device):
    randn = Randn(torch.float32, device)
    a, b = randn(64), randn(64)
    a_copy, b_copy = a.clone(), b.clone()
    myops.myadd(a, b)
    assert torch.equal(a, a_copy) and torch.equal(b, b_copy)


def test_meta_kernels_give_shape_dtype_and_aliasing(layers):
    x = torch.empty(2, 3, device="meta", dtype=torch.bfloat16)
    y = torch.empty(2, 3, device="meta", dtype=torch.bfloat16)
    result = myops.myadd(x, y)
    assert result.device.type == "meta" and result.shape == (2, 3) and result.dtype == torch.bfloat16
    assert myops.myadd_(x, y) is x
    assert myops.myadd_inplace(x, y) is None


BAD_INPUTS = [  # (first, second, message); the tensors' device is the test's
    (dict(size=(2, 3)), dict(size=(3,)),
     "myops::{op}: expected tensors of the same shape, got [2, 3] and [3]; "
     "broadcast them first, e.g. with torch.broadcast_tensors"),
    (dict(size=(2,)), dict(size=(2,), dtype=torch.float64),
     "myops::{op}: expected tensors of the same dtype, got Float and Double; convert one with .to(dtype)"),
    (dict(size=(2,), dtype=torch.int32), dict(size=(2,), dtype=torch.int32),
     "myops::{op}: unsupported dtype Int; supported are float16, bfloat16, float32 and float64, "
     "convert with .float()"),
    (dict(size=(2,), dtype=torch.bool), dict(size=(2,), dtype=torch.bool),
     "myops::{op}: unsupported dtype Bool; supported are float16, bfloat16, float32 and float64, "
     "convert with .float()"),
    (dict(size=(2,), dtype=torch.complex64), dict(size=(2,), dtype=torch.complex64),
     "myops::{op}: unsupported dtype ComplexFloat; supported are float16, bfloat16, float32 and float64, "
     "convert with .float()"),
]


@pytest.mark.parametrize("device", DEVICES_AND_META)
@pytest.mark.parametrize("op", ["myadd", *IN_PLACE_OPS])
@pytest.mark.parametrize("first, second, message", BAD_INPUTS, ids=["shape", "dtypes", "int", "bool", "complex"])
def test_bad_input_message(layers, first, second, message, op, device):
    a, b = torch.ones(**first, device=device), torch.ones(**second, device=device)
    with pytest.raises(RuntimeError) as error:
        getattr(torch.ops.myops, op)(a, b)
    assert str(error.value).splitlines()[0] == message.format(op=op)


@needs_gpu
@pytest.mark.parametrize("op", ["myadd", *IN_PLACE_OPS])
def test_mixed_devices_are_refused(layers, op):
    with pytest.raises(RuntimeError) as error:
        getattr(torch.ops.myops, op)(torch.ones(4, device="cuda"), torch.ones(4))
    assert str(error.value).splitlines()[0] == (
        f"myops::{op}: expected both tensors on the same device, got cuda:0 and cpu; move one with .to(device)")


@needs_gpu_memory(24)
def test_beyond_2_to_the_31_elements_on_the_gpu(layers):
    n = 2**31 + 64
    randn = Randn(torch.float16, "cuda")
    a, b = randn(n), randn(n)
    assert torch.equal(myops.myadd(a, b), a + b)  # the dense kernel
    at, bt = a.view(2, n // 2).t(), b.view(2, n // 2).t()
    assert torch.equal(myops.myadd(at, bt), at + bt)  # the strided kernel, 64-bit offsets
    expected = a + b
    torch.ops.myops.myadd_(a, b)
    assert torch.equal(a, expected)


@pytest.mark.parametrize("op", ["myadd", *IN_PLACE_OPS])
def test_registered_kernels(layers, op):
    table = {entry.key: entry for entry in dispatch.dispatch_table(f"myops::{op}")}
    assert (table["CPU"].kind, table["CPU"].source) == ("kernel", "csrc/cpu/myadd.cpp")
    assert (table["Meta"].kind, table["Meta"].source) == ("kernel", "csrc/meta/myadd.cpp")
    assert table["AutocastCPU"].kind == "fallthrough"  # no autocast rule: see test_autocast.py


@needs_cuda_toolchain
@pytest.mark.parametrize("op", ["myadd", *IN_PLACE_OPS])
def test_registered_cuda_kernel(layers, op):
    assert "cuda" in layers
    table = {entry.key: entry for entry in dispatch.dispatch_table(f"myops::{op}")}
    assert (table["CUDA"].kind, table["CUDA"].source) == ("kernel", "csrc/cuda/myadd.cu")


# Runs myadd on a large tensor with 1 and with 2 threads in a fresh process and prints how many of its threads
# gained CPU time (utime + stime ticks of /proc/self/task/*/stat) during the calls.
THREADS_AT_WORK = """
import os, time, torch, myops
myops.load("cpu")

def ticks():
    found = {}
    for task in os.listdir("/proc/self/task"):
        try:
            fields = open(f"/proc/self/task/{task}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[task] = int(fields[11]) + int(fields[12])
    return found

a = torch.ones(2**22)
for threads in (1, 2):
    torch.set_num_threads(threads)
    torch.ops.myops.myadd(a, a)
    time.sleep(0.3)  # idle OpenMP workers stop spinning
    before = ticks()
    for _ in range(300):
        torch.ops.myops.myadd(a, a)
    after = ticks()
    print(sum(after[t] - before.get(t, 0) >= 3 for t in after))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir() or os.cpu_count() < 2, reason="needs Linux and two cores")
def test_the_cpu_kernel_runs_on_as_many_threads_as_torch_is_given():
    # at::parallel_for is inlined into the layer: without -fopenmp it has no parallel region and silently runs on
    # one thread. Count the threads that did the work rather than look for OpenMP in the library.
    result = subprocess.run([sys.executable, "-c", THREADS_AT_WORK], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["1", "2"]
