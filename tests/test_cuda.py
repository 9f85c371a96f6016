"""The CUDA layer: compiled and registered wherever a CUDA toolchain exists; executed where a GPU exists.

Inputs come from tests/helpers.py, built on the GPU itself, so that strided layouts reach the strided
kernels (a layout built on the CPU and moved with .cuda() arrives contiguous). The first tests prove, on
the devices this machine has (CPU and meta everywhere), that each layout is what its name claims.
"""
from pathlib import Path

import pytest
import torch

import myops
from myops import dispatch, toolchain
from helpers import (FLOAT_DTYPES, TOLERANCES, VECTOR_BYTES, Randn, element_offset_bytes, layout, layout_names,
                     matmul_layouts, rmsnorm_layouts, rmsnorm_reference, storage_tensor)

REPO_ROOT = Path(__file__).resolve().parent.parent
NO_GPU = "no CUDA GPU on this machine"
needs_toolchain = pytest.mark.skipif(toolchain.cuda_skip_reason() is not None,
                                     reason=str(toolchain.cuda_skip_reason()))
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)
needs_two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")


def free_gpu_gib() -> float:
    return torch.cuda.mem_get_info()[0] / 2**30 if torch.cuda.is_available() else 0.0


def needs_gpu_memory(gib: float):
    """Large-input tests: run only on a GPU with `gib` GiB free."""
    if not torch.cuda.is_available():
        return pytest.mark.skipif(True, reason=NO_GPU)
    return pytest.mark.skipif(free_gpu_gib() < gib, reason=f"needs {gib} GiB of free GPU memory")


DTYPE_IDS = [str(d).removeprefix("torch.") for d in FLOAT_DTYPES]
DEVICES_HERE = ["cpu", "meta"] + (["cuda"] if torch.cuda.is_available() else [])
OPS = ("myadd", "myadd_", "myadd_inplace", "mymatmul", "myrmsnorm")
CUDA_SOURCE = {"myadd": "myadd", "myadd_": "myadd", "myadd_inplace": "myadd", "mymatmul": "mymatmul",
               "myrmsnorm": "myrmsnorm"}


# -- compiled and registered (runs wherever the toolchain exists) -------------------------------------
@needs_toolchain
@pytest.mark.parametrize("op", OPS)
def test_cuda_layer_registers_a_cuda_kernel(layers, op):
    assert "cuda" in layers
    table = {entry.key: entry for entry in dispatch.dispatch_table(f"myops::{op}")}
    assert table["CUDA"].kind == "kernel"
    assert table["CUDA"].source == f"csrc/cuda/{CUDA_SOURCE[op]}.cu"
    assert table["CPU"].source.startswith("csrc/cpu/")


# -- the test helpers build what they claim (runs on every machine) -----------------------------------
def _span(t: torch.Tensor) -> int:
    """Elements from t's first to its last element in memory."""
    return sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) + 1


def _has_gaps(t: torch.Tensor) -> bool:
    return 0 not in t.stride() and _span(t) > t.numel()


def _aligned(t: torch.Tensor) -> bool:
    return element_offset_bytes(t) % VECTOR_BYTES == 0


def _reversed_is_contiguous(t: torch.Tensor) -> bool:
    return t.permute(*reversed(range(t.dim()))).is_contiguous()


CHANNELS_LAST = torch.channels_last
LAYOUT_CLAIMS = {
    "contiguous": lambda a, b: a.is_contiguous() and b.is_contiguous(),
    "transposed": lambda a, b: (not a.is_contiguous() and a.t().is_contiguous()
                                and not b.is_contiguous() and b.t().is_contiguous()),
    "transposed_and_contiguous": lambda a, b: not a.is_contiguous() and a.t().is_contiguous() and b.is_contiguous(),
    "sliced_with_gaps": lambda a, b: (_has_gaps(a) and _has_gaps(b) and a.storage_offset() > 0
                                      and b.storage_offset() > 0),
    "expanded": lambda a, b: a.stride(0) == 0 and a.stride(1) != 0 and b.stride(1) == 0 and b.stride(0) != 0,
    "channels_last": lambda a, b: all(t.is_contiguous(memory_format=CHANNELS_LAST) and not t.is_contiguous()
                                      for t in (a, b)),
    "channels_last_and_contiguous": lambda a, b: (a.is_contiguous(memory_format=CHANNELS_LAST)
                                                  and not a.is_contiguous() and b.is_contiguous()),
    "offset_aligned": lambda a, b: (a.is_contiguous() and b.is_contiguous() and a.storage_offset() > 0
                                    and b.storage_offset() > 0 and _aligned(a) and _aligned(b)),
    "offset_unaligned": lambda a, b: (a.is_contiguous() and b.is_contiguous()
                                      and not _aligned(a) and not _aligned(b)),
    "offset_mixed": lambda a, b: (a.is_contiguous() and b.is_contiguous() and a.storage_offset() > 0
                                  and _aligned(a) and not _aligned(b)),
    "permuted_12d": lambda a, b: (a.dim() == 12 and not a.is_contiguous() and _reversed_is_contiguous(a)
                                  and b.is_contiguous()),
    "permuted_20d": lambda a, b: (a.dim() == 20 and not a.is_contiguous() and _reversed_is_contiguous(a)
                                  and b.is_contiguous()),
    "0-dim": lambda a, b: a.dim() == 0 and b.dim() == 0,
    "empty": lambda a, b: a.numel() == 0 and b.numel() == 0,
}


def test_every_layout_states_a_claim():
    assert list(LAYOUT_CLAIMS) == layout_names()


@pytest.mark.parametrize("device", DEVICES_HERE)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", layout_names())
def test_layout_is_what_it_claims(name, dtype, device):
    a, b = layout(name, dtype, device)
    assert a.device.type == b.device.type == device and a.dtype == b.dtype == dtype
    assert a.shape == b.shape
    assert LAYOUT_CLAIMS[name](a, b), f"{name}: sizes {tuple(a.shape)}, strides {a.stride()} and {b.stride()}"
    if device != "meta":  # meta tensors have no memory; their data_ptr is not an address
        for t in (a, b):
            assert (t.data_ptr() % VECTOR_BYTES == 0) == _aligned(t), name


@pytest.mark.parametrize("device", DEVICES_HERE)
def test_matmul_and_rmsnorm_inputs_keep_their_layout_on_the_device(device):
    cases = dict((name, (a, b)) for name, a, b in matmul_layouts(torch.float32, device))
    a, b = cases["transposed"]
    assert a.device.type == device and a.t().is_contiguous() and not a.is_contiguous() and b.t().is_contiguous()
    a, _ = cases["sliced_with_gaps"]
    assert _has_gaps(a)
    a, b = cases["expanded"]
    assert a.stride(0) == 0 and b.stride(1) == 0
    a, _ = cases["offset_unaligned"]
    assert not _aligned(a) and not a.is_contiguous()
    norms = dict((name, (x, w)) for name, x, w in rmsnorm_layouts(torch.float32, device))
    assert not norms["transposed"][0].is_contiguous() and norms["sliced_weight"][1].stride() == (2,)


def test_layouts_built_on_cpu_and_moved_lose_their_strides():
    """Why the helpers build on the device: moving a strided tensor makes it dense (shown CPU -> meta)."""
    sliced, _ = layout("sliced_with_gaps", torch.float32, "cpu")
    expanded, _ = layout("expanded", torch.float32, "cpu")
    assert _has_gaps(sliced) and 0 in expanded.stride()
    assert sliced.to("meta").is_contiguous() and expanded.to("meta").is_contiguous()


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


# -- correctness on the GPU ---------------------------------------------------------------------------
@needs_gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", layout_names())
def test_myadd_matches_aten(layers, name, dtype):
    a, b = layout(name, dtype, "cuda")
    result = myops.myadd(a, b)
    assert result.device == a.device and result.is_contiguous() and result.dtype == dtype
    torch.testing.assert_close(result, torch.add(a, b), rtol=0, atol=0)


# In place, self must be writable element by element: not the expanded layout.
IN_PLACE_LAYOUTS = [name for name in layout_names() if name != "expanded"]


@needs_gpu
@pytest.mark.parametrize("op", ["myadd_", "myadd_inplace"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", IN_PLACE_LAYOUTS)
def test_in_place_matches_aten_and_writes_only_self(layers, op, name, dtype):
    a, b = layout(name, dtype, "cuda")
    expected = torch.add(a, b)
    storage = storage_tensor(a)
    expected_storage = storage.clone()
    expected_storage.as_strided(a.shape, a.stride(), a.storage_offset()).copy_(expected)
    returned = getattr(torch.ops.myops, op)(a, b)
    if op == "myadd_":
        assert returned is a
    torch.testing.assert_close(a, expected, rtol=0, atol=0)
    torch.testing.assert_close(storage, expected_storage, rtol=0, atol=0)  # gaps and neighbours untouched


@needs_gpu
@pytest.mark.parametrize("op", ["myadd_", "myadd_inplace"])
def test_in_place_refuses_overlapping_self(layers, op):
    expanded, other = layout("expanded", torch.float32, "cuda")
    with pytest.raises(RuntimeError) as error:
        getattr(torch.ops.myops, op)(expanded, other)
    assert str(error.value).splitlines()[0] == (
        f"myops::{op}: self has elements that share memory (e.g. it was expanded); write into self.clone() instead")
    base = torch.zeros(10, device="cuda")
    with pytest.raises(RuntimeError) as error:
        getattr(torch.ops.myops, op)(base[:8], base[2:])
    assert str(error.value).splitlines()[0] == (
        f"myops::{op}: self and other partially overlap in memory; pass other.clone()")


@needs_gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", [name for name, _, _ in matmul_layouts(torch.float32, "meta")])
def test_mymatmul_matches_aten(layers, name, dtype):
    x, y = next((a, b) for case, a, b in matmul_layouts(dtype, "cuda") if case == name)
    rtol, atol = TOLERANCES[dtype]
    result = myops.mymatmul(x, y)
    assert result.device == x.device and result.shape == (x.shape[0], y.shape[1]) and result.is_contiguous()
    torch.testing.assert_close(result, (x.double() @ y.double()).to(dtype), rtol=rtol, atol=atol)


@needs_gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", [name for name, _, _ in rmsnorm_layouts(torch.float32, "meta")])
def test_myrmsnorm_matches_reference(layers, name, dtype):
    x, w = next((a, b) for case, a, b in rmsnorm_layouts(dtype, "cuda") if case == name)
    rtol, atol = TOLERANCES[dtype]
    result = myops.myrmsnorm(x, w)
    assert result.device == x.device and result.shape == x.shape and result.is_contiguous()
    torch.testing.assert_close(result, rmsnorm_reference(x, w), rtol=rtol, atol=atol)
    torch.testing.assert_close(myops.myrmsnorm(x, w, eps=0.5), rmsnorm_reference(x, w, eps=0.5), rtol=rtol, atol=atol)


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


@needs_gpu
@pytest.mark.parametrize("op", OPS)
def test_mixed_devices_are_refused(layers, op):
    x, _ = _inputs(op, lambda *shape: torch.ones(shape, device="cuda"))
    _, y = _inputs(op, lambda *shape: torch.ones(shape))
    with pytest.raises(RuntimeError) as error:
        getattr(torch.ops.myops, op)(x, y)
    assert str(error.value).splitlines()[0] == (
        f"myops::{op}: expected both tensors on the same device, got cuda:0 and cpu; move one with .to(device)")


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


# -- large inputs: 64-bit indexing and grids beyond the old limits ------------------------------------
@needs_gpu_memory(24)
def test_myadd_beyond_2_to_the_31_elements(layers):
    n = 2**31 + 64
    randn = Randn(torch.float16, "cuda")
    a, b = randn(n), randn(n)
    assert torch.equal(myops.myadd(a, b), a + b)  # the dense kernel
    at, bt = a.view(2, n // 2).t(), b.view(2, n // 2).t()
    assert torch.equal(myops.myadd(at, bt), at + bt)  # the strided kernel, 64-bit offsets
    expected = a + b
    torch.ops.myops.myadd_(a, b)
    assert torch.equal(a, expected)


@needs_gpu_memory(24)
def test_myrmsnorm_beyond_2_to_the_31_elements(layers):
    rows, cols = 2**20 + 3, 2048  # 2**31 + 6144 elements
    randn = Randn(torch.float16, "cuda")
    x, w = randn(rows, cols), randn(cols)
    result = myops.myrmsnorm(x, w)
    rtol, atol = TOLERANCES[torch.float16]
    for start in range(0, rows, 2**17):  # the float64 reference a slice at a time
        rows_here = slice(start, start + 2**17)
        torch.testing.assert_close(result[rows_here], rmsnorm_reference(x[rows_here], w), rtol=rtol, atol=atol)


@needs_gpu_memory(1)
@pytest.mark.parametrize("transposed", [False, True], ids=["row-major", "transposed"])
def test_mymatmul_beyond_65535_row_tiles(layers, transposed):
    rows = 65535 * 32 + 33  # the old kernel put row tiles on gridDim.y, which stops at 65535
    randn = Randn(torch.float32, "cuda")
    x = randn(3, rows).t() if transposed else randn(rows, 3)
    y = randn(3, 5)
    result = myops.mymatmul(x, y)
    torch.testing.assert_close(result, (x.double() @ y.double()).float(), rtol=1e-5, atol=1e-4)
    wide = myops.mymatmul(y.t(), x.t())  # as many columns: the tiles of one row of tiles
    torch.testing.assert_close(wide, (y.t().double() @ x.t().double()).float(), rtol=1e-5, atol=1e-4)
