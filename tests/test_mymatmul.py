"""myops::mymatmul on every device: values over dtypes, strides and sizes around the kernel's blocking,
reproducibility, bad inputs, and which kernel each key runs."""
import pytest
import torch

import myops
from myops import dispatch
from helpers import (DEVICES, DEVICES_AND_META, DTYPE_IDS, FLOAT_DTYPES, TOLERANCES, Randn, matmul_layouts,
                     needs_cuda_toolchain, needs_gpu, needs_gpu_memory)

MATMUL_LAYOUTS = [name for name, _, _ in matmul_layouts(torch.float32, "meta")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", MATMUL_LAYOUTS)
def test_matches_aten(layers, name, dtype, device):
    x, y = next((a, b) for case, a, b in matmul_layouts(dtype, device) if case == name)
    result = myops.mymatmul(x, y)
    assert result.device == x.device and result.dtype == dtype and result.is_contiguous()
    assert result.shape == (x.shape[0], y.shape[1])
    rtol, atol = TOLERANCES[dtype]
    torch.testing.assert_close(result, (x.double() @ y.double()).to(dtype), rtol=rtol, atol=atol)
    torch.testing.assert_close(result, torch.matmul(x, y), rtol=rtol, atol=atol)


# Sizes around the blocking of the kernel (register tiles of 6 rows and 16 to 32 columns, or 12 rows and one
# vector for an output at most that wide; row blocks of up to 96, depth slices of 256), in every layout that
# packing has to read; 20 x 300 x 16 reads a contiguous `other` in place with float32 narrow tiles.
EDGE_SIZES = [(1, 1, 1), (7, 17, 63), (17, 63, 7), (63, 65, 129), (65, 257, 17), (129, 7, 65), (97, 513, 33),
              (20, 300, 16)]
LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.t().contiguous().t(),  # same values, column-major strides
    "sliced": lambda t: t.new_empty(t.shape[0], 2 * t.shape[1])[:, ::2].copy_(t),  # column stride 2
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("size", EDGE_SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_edges_and_layouts(layers, layout, size, dtype, device):
    n, k, m = size
    randn = Randn(dtype, device, seed=n * k * m)
    x, y = randn(n, k), randn(k, m)
    rtol, atol = TOLERANCES[dtype]
    result = myops.mymatmul(LAYOUTS[layout](x), LAYOUTS[layout](y))
    torch.testing.assert_close(result, (x.double() @ y.double()).to(dtype), rtol=rtol, atol=atol)
    # Strides change how the inputs are packed, never the arithmetic: the same bits as contiguous.
    assert torch.equal(result, myops.mymatmul(x, y))


def _product_bits(threads):
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    # 131 columns take the wide tiles, 13 the narrow ones (one vector wide); both go parallel.
    return {(str(dtype), m): myops.mymatmul(torch.randn(203, 517, dtype=dtype), torch.randn(517, m, dtype=dtype))
            for dtype in FLOAT_DTYPES for m in (131, 13)}


def test_bit_for_bit_across_runs_and_thread_counts(layers):
    # See NOTE [ Why mymatmul is bit-for-bit reproducible ] in csrc/cpu/mymatmul_kernel.h. 203 rows are
    # split into blocks differently for 1, 2 and 3 threads, and 517 = 2 * 256 + 5 needs three depth slices.
    saved = torch.get_num_threads()
    try:
        runs = [_product_bits(threads) for threads in (1, 2, 3, 2)]
    finally:
        torch.set_num_threads(saved)
    for run in runs[1:]:
        for dtype, product in run.items():
            assert torch.equal(product, runs[0][dtype]), dtype


# Products whose packed `other` is larger than the buffer each thread keeps (4 MiB): it is packed and used one
# block of columns at a time, and a panel deeper than the buffer gets memory of the call's own.
LARGE_OTHER = [(13, 4096, 8200, torch.bfloat16),  # many blocks of columns, the last one partial
               (7, 3000, 1500, torch.float64),    # few rows: read in place but for a last, partial panel
               (13, 70000, 40, torch.float64)]    # one panel of 8 to 16 doubles is deeper than the buffer


@pytest.mark.parametrize("n, k, m, dtype", LARGE_OTHER, ids=lambda v: str(v).removeprefix("torch."))
def test_large_other_gives_the_bits_of_column_blocks(layers, n, k, m, dtype):
    """Blocks of 128 columns of `other` each fit in the kept buffer: their products are the same bits."""
    randn = Randn(dtype, "cpu", seed=k)
    a, b = randn(n, k), randn(k, m)
    result = myops.mymatmul(a, b)
    assert torch.equal(result, torch.cat([myops.mymatmul(a, b[:, j:j + 128]) for j in range(0, m, 128)], dim=1))
    rtol, atol = TOLERANCES[dtype]
    torch.testing.assert_close(result, (a.double() @ b.double()).to(dtype), rtol=rtol, atol=atol)


BAD_INPUTS = [  # (self size, other size, dtype of other, message); the tensors' device is the test's
    ((2, 3, 4), (4, 5), None,
     "myops::mymatmul: expected two 2-d tensors, got 3-d and 2-d; reshape them to matrices, "
     "or use torch.matmul for batched products"),
    ((3,), (3, 2), None,
     "myops::mymatmul: expected two 2-d tensors, got 1-d and 2-d; reshape them to matrices, "
     "or use torch.matmul for batched products"),
    ((2, 3), (4, 5), None,
     "myops::mymatmul: inner dimensions differ: self is [2, 3] and other is [4, 5]; "
     "self.shape[1] must equal other.shape[0]"),
    ((2, 3), (3, 2), torch.float64,
     "myops::mymatmul: expected tensors of the same dtype, got Float and Double; convert one with .to(dtype)"),
]


@pytest.mark.parametrize("device", DEVICES_AND_META)
@pytest.mark.parametrize("self_size, other_size, other_dtype, message", BAD_INPUTS,
                         ids=["3-d", "1-d", "inner", "dtypes"])
def test_bad_input_message(layers, self_size, other_size, other_dtype, message, device):
    x = torch.ones(self_size, device=device)
    y = torch.ones(other_size, device=device, dtype=other_dtype or torch.float32)
    with pytest.raises(RuntimeError) as error:
        myops.mymatmul(x, y)
    assert str(error.value).splitlines()[0] == message


@pytest.mark.parametrize("device", DEVICES_AND_META)
def test_unsupported_dtype_message(layers, device):
    x = torch.ones(2, 3, dtype=torch.int64, device=device)
    with pytest.raises(RuntimeError) as error:
        myops.mymatmul(x, x.t())
    assert str(error.value).splitlines()[0] == (
        "myops::mymatmul: unsupported dtype Long; supported are float16, bfloat16, float32 and float64, "
        "convert with .float()")


@needs_gpu
def test_mixed_devices_are_refused(layers):
    with pytest.raises(RuntimeError) as error:
        myops.mymatmul(torch.ones(4, 3, device="cuda"), torch.ones(3, 2))
    assert str(error.value).splitlines()[0] == (
        "myops::mymatmul: expected both tensors on the same device, got cuda:0 and cpu; move one with .to(device)")


def test_meta_kernel_gives_the_shape(layers):
    result = myops.mymatmul(torch.empty(5, 7, device="meta"), torch.empty(7, 2, device="meta"))
    assert result.device.type == "meta" and result.shape == (5, 2) and result.dtype == torch.float32


@needs_gpu_memory(1)
@pytest.mark.parametrize("transposed", [False, True], ids=["row-major", "transposed"])
def test_beyond_65535_row_tiles_on_the_gpu(layers, transposed):
    rows = 65535 * 32 + 33  # the old kernel put row tiles on gridDim.y, which stops at 65535
    randn = Randn(torch.float32, "cuda")
    x = randn(3, rows).t() if transposed else randn(rows, 3)
    y = randn(3, 5)
    result = myops.mymatmul(x, y)
    torch.testing.assert_close(result, (x.double() @ y.double()).float(), rtol=1e-5, atol=1e-4)
    wide = myops.mymatmul(y.t(), x.t())  # as many columns: the tiles of one row of tiles
    torch.testing.assert_close(wide, (y.t().double() @ x.t().double()).float(), rtol=1e-5, atol=1e-4)


def test_registered_kernels(layers):
    table = {entry.key: entry for entry in dispatch.dispatch_table("myops::mymatmul")}
    assert (table["CPU"].kind, table["CPU"].source) == ("kernel", "csrc/cpu/mymatmul.cpp")
    assert (table["Meta"].kind, table["Meta"].source) == ("kernel", "csrc/meta/mymatmul.cpp")


@needs_cuda_toolchain
def test_registered_cuda_kernel(layers):
    assert "cuda" in layers
    table = {entry.key: entry for entry in dispatch.dispatch_table("myops::mymatmul")}
    assert (table["CUDA"].kind, table["CUDA"].source) == ("kernel", "csrc/cuda/mymatmul.cu")
