"""The CUDA layer as a whole. Runs everywhere: the strided myadd's plan (csrc/cuda/plan.h) compiled for the
CPU and checked layout by layout. Runs where a GPU is: gradients through the CUDA kernels, the current stream,
CUDA graphs, inputs on a device that is not the current one.

Each operator's values on the GPU are tested with its CPU values, in tests/test_<operator>.py.
"""
import pytest
import torch

import myops
from myops.build import REPO_ROOT
from helpers import (DTYPE_IDS, FLOAT_DTYPES, TOLERANCES, Randn, layout, layout_names, needs_gpu, needs_two_gpus,
                     rmsnorm_reference)

OPS = ("myadd", "myadd_", "myadd_inplace", "mymatmul", "myrmsnorm")


# -- the strided myadd's plan, run on the CPU ------------------------------------------------------------
# tests/cuda_plan_check.cpp compiles csrc/cuda/plan.h (the planning and index arithmetic of the strided
# kernel, no CUDA in it) into a CPU library of its own namespace: the GPU kernel's addressing, proved here.
DENSE, STRIDED32, STRIDED64, CONTIGUOUS_COPIES = range(4)  # myops::cuda::Path
EXPECTED_PLANS = {  # layout: (path, merged dimensions) for myadd(a, b) into a new contiguous tensor
    "contiguous": (DENSE, 1),
    "transposed": (STRIDED32, 2),
    "transposed_and_contiguous": (STRIDED32, 2),
    "sliced_with_gaps": (STRIDED32, 2),
    "expanded": (STRIDED32, 2),
    "channels_last": (STRIDED32, 3),
    "channels_last_and_contiguous": (STRIDED32, 3),
    "offset_aligned": (DENSE, 1),  # alignment is checked at launch: dense, vectorized or not
    "offset_unaligned": (DENSE, 1),
    "offset_mixed": (DENSE, 1),
    "permuted_12d": (STRIDED32, 12),
    "permuted_20d": (CONTIGUOUS_COPIES, 20),
    "large": (DENSE, 1),
    "0-dim": (DENSE, 0),
}


@pytest.fixture(scope="module")
def plan_check():
    from torch.utils import cpp_extension

    build = REPO_ROOT / "build" / "cuda_plan_check"
    build.mkdir(parents=True, exist_ok=True)
    cpp_extension.load(name="myops_cuda_plan_check", sources=[str(REPO_ROOT / "tests" / "cuda_plan_check.cpp")],
                       extra_include_paths=[str(REPO_ROOT / "csrc")], build_directory=str(build),
                       is_python_module=False, verbose=False)
    return torch.ops.myops_plan_check


def test_every_layout_has_an_expected_plan():
    assert set(EXPECTED_PLANS) == set(layout_names()) - {"empty"}  # myadd returns before planning 0 elements


@pytest.mark.parametrize("name", list(EXPECTED_PLANS))
def test_plan_path_and_dimensions(plan_check, name):
    a, b = layout(name, torch.float32, "cpu")
    out = torch.empty(a.shape)
    path, ndim, *dims = plan_check.plan_of(out, a, b)
    assert (path, ndim) == EXPECTED_PLANS[name]
    self_strides = dims[2::4]  # each merged dimension: size, out, self, other strides
    if self_strides and 0 not in self_strides:  # innermost: the one `self` steps through fastest
        assert self_strides[0] == min(self_strides), dims


def test_plan_merges_a_dense_layout_in_place(plan_check):
    """In place, channels-last self and other are one dense run: the vectorized path, not the strided one."""
    a, b = layout("channels_last", torch.float32, "cpu")
    assert plan_check.plan_of(a, a, b)[:2] == [DENSE, 1]


def test_plan_needs_64_bits_beyond_int32_offsets(plan_check):
    """Meta tensors: the plan needs only sizes and strides, so 2**31 elements cost no memory here."""
    n = 2**31 + 64
    flat = torch.empty(n, device="meta")
    assert plan_check.plan_of(torch.empty(n, device="meta"), flat, flat)[:2] == [DENSE, 1]
    transposed = flat.view(2, n // 2).t()
    assert plan_check.plan_of(torch.empty(n // 2, 2, device="meta"), transposed, transposed)[:2] == [STRIDED64, 2]
    far_apart = torch.empty(4, 2**30, device="meta")[:, :3]  # 12 elements, the last 3 * 2**30 + 2 in
    assert plan_check.plan_of(torch.empty(4, 3, device="meta"), far_apart, far_apart)[:2] == [STRIDED64, 2]
    assert plan_check.plan_of(torch.empty(2, 3, device="meta"), far_apart[:2], far_apart[:2])[:2] == [STRIDED32, 2]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", [name for name in EXPECTED_PLANS if name != "permuted_20d"])
def test_adding_through_the_plan_matches_aten(plan_check, name, dtype):
    a, b = layout(name, dtype, "cpu")
    out = torch.empty(a.shape, dtype=dtype)
    plan_check.plan_add(out, a, b)
    torch.testing.assert_close(out, torch.add(a, b), rtol=0, atol=0)
    if name != "expanded":  # in place: out is self
        expected = torch.add(a, b)
        plan_check.plan_add(a, a, b)
        torch.testing.assert_close(a, expected, rtol=0, atol=0)


@needs_gpu
def test_gradients(layers):
    x = torch.randn(20, 30, device="cuda", dtype=torch.float64, requires_grad=True)
    y = torch.randn(30, 10, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(myops.mymatmul, (x, y))
    assert torch.autograd.gradgradcheck(myops.mymatmul, (x, y))
    z = torch.randn(20, 30, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(myops.myadd, (x, z))


def _inputs(op: str, make) -> tuple[torch.Tensor, torch.Tensor]:
    """Two arguments of `op` of matching shapes, each made by make(*shape)."""
    if op == "mymatmul":
        return make(64, 48), make(48, 32)
    if op == "myrmsnorm":
        return make(64, 48), make(48)
    return make(64, 48), make(64, 48)


def _reference(op: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if op == "mymatmul":
        return (x.double() @ y.double()).to(x.dtype)
    if op == "myrmsnorm":
        return rmsnorm_reference(x, y)
    return x + y


def _call(op: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The op's result: the new tensor, or the mutated first argument of an in-place op."""
    result = getattr(torch.ops.myops, op)(x, y)
    return x if op in ("myadd_", "myadd_inplace") else result


@needs_two_gpus
@pytest.mark.parametrize("op", OPS)
def test_runs_on_the_inputs_device_not_the_current_one(layers, op):
    """CUDAGuard: with cuda:0 current, inputs on cuda:1 are computed (and allocated) on cuda:1."""
    x, y = _inputs(op, Randn(torch.float32, "cuda:1"))
    expected = _reference(op, x, y)
    with torch.cuda.device(0):
        result = _call(op, x, y)
        assert result.device == torch.device("cuda:1")
    torch.cuda.synchronize(1)
    torch.testing.assert_close(result, expected, rtol=1e-5, atol=1e-4)


# About 0.1 s of GPU time at the H200's 1.98 GHz; anything longer than a kernel launch would do.
SLEEP_CYCLES = 200_000_000


@needs_gpu
@pytest.mark.parametrize("op", OPS)
def test_waits_for_work_queued_on_the_current_stream(layers, op):
    """The input is rewritten on a side stream behind a sleep, and the op is called with that stream current.

    torch's side streams are non-blocking: the legacy default stream does not wait for them. A kernel
    launched on the current stream runs after the rewrite; one launched on the default stream would run
    at once and read the old values.
    """
    x, y = _inputs(op, lambda *shape: torch.full(shape, 0.5, device="cuda"))
    rewritten = torch.arange(x.numel(), device="cuda", dtype=torch.float32).view_as(x) / x.numel()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        x.copy_(rewritten)
        result = _call(op, x, y)
    side.synchronize()
    torch.testing.assert_close(result, _reference(op, rewritten, y), rtol=1e-5, atol=1e-5)


@needs_gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_captured_in_a_cuda_graph(layers, dtype):
    """Every op captured once, replayed on new input values; each stage checked against ATen given its inputs."""
    randn = Randn(dtype, "cuda")
    x, y_base, w = randn(64, 64), randn(64, 64), randn(64)
    y = y_base.t()  # the strided path as well
    acc = torch.empty(64, 64, dtype=dtype, device="cuda")

    def run():
        total = myops.myadd(x, y)
        product = myops.mymatmul(total, x)
        normed = myops.myrmsnorm(product, w)
        acc.copy_(normed)
        torch.ops.myops.myadd_(acc, x)
        torch.ops.myops.myadd_inplace(acc, y)
        return total, product, normed

    side = torch.cuda.Stream()  # warm up off the capture, as torch.cuda.graph asks
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        total, product, normed = run()
    for tensor in (x, y_base, w):
        tensor.copy_(randn(*tensor.shape))
    graph.replay()
    torch.cuda.synchronize()
    rtol, atol = TOLERANCES[dtype]
    torch.testing.assert_close(total, x + y, rtol=0, atol=0)
    torch.testing.assert_close(product, (total.double() @ x.double()).to(dtype), rtol=rtol, atol=atol)
    torch.testing.assert_close(normed, rmsnorm_reference(product, w), rtol=rtol, atol=atol)
    torch.testing.assert_close(acc, normed + x + y, rtol=0, atol=0)
