"""myops::mymatmul on CPU against ATen: values over dtypes and strides, bad inputs, registration."""
import pytest
import torch

import myops
from myops import dispatch

# (rtol, atol) against a float64 reference: the output is rounded once from a float32 (float64)
# accumulator, so errors stay within a few units in the last place of the output dtype.
TOLERANCES = {
    torch.float64: (1e-12, 1e-10),
    torch.float32: (1e-5, 1e-4),
    torch.bfloat16: (2 * 2**-8, 1e-4),
    torch.float16: (2 * 2**-11, 1e-3),
}


def matmul_cases(dtype, device="cpu"):
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(shape, generator=g, dtype=dtype).to(device)

    yield "square", randn(64, 64), randn(64, 64)
    yield "ragged", randn(67, 301), randn(301, 129)  # no dimension a multiple of any block
    yield "transposed", randn(40, 30).t(), randn(50, 40).t()
    yield "sliced", randn(50, 80)[::2, 1::2], randn(60, 33)[:40, 1:]
    yield "expanded", randn(1, 20).expand(9, 20), randn(20, 1).expand(20, 7)
    yield "vector-like", randn(1, 300), randn(300, 1)
    yield "empty rows", randn(0, 5), randn(5, 3)
    yield "empty inner", randn(4, 0), randn(0, 3)
    yield "large", randn(300, 257), randn(257, 515)  # many row blocks: several threads


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("case", [name for name, _, _ in matmul_cases(torch.float32)])
def test_matches_aten(layers, dtype, case):
    _, x, y = next(c for c in matmul_cases(dtype) if c[0] == case)
    result = myops.mymatmul(x, y)
    assert result.dtype == dtype and result.shape == (x.shape[0], y.shape[1]) and result.is_contiguous()
    rtol, atol = TOLERANCES[dtype]
    reference = (x.double() @ y.double()).to(dtype)
    torch.testing.assert_close(result, reference, rtol=rtol, atol=atol)
    torch.testing.assert_close(result, torch.matmul(x, y), rtol=rtol, atol=atol)


# Sizes around the blocking of the kernel (register tiles of 6 rows and 16 to 32 columns, row blocks
# of up to 96, depth slices of 256), in every layout that packing has to read.
EDGE_SIZES = [(1, 1, 1), (7, 17, 63), (17, 63, 7), (63, 65, 129), (65, 257, 17), (129, 7, 65), (97, 513, 33)]
LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.t().contiguous().t(),  # same values, column-major strides
    "sliced": lambda t: torch.empty(t.shape[0], 2 * t.shape[1], dtype=t.dtype)[:, ::2].copy_(t),  # column stride 2
}


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("size", EDGE_SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_edges_and_layouts(layers, dtype, size, layout):
    n, k, m = size
    g = torch.Generator().manual_seed(n * k * m)
    x, y = torch.randn(n, k, generator=g, dtype=dtype), torch.randn(k, m, generator=g, dtype=dtype)
    rtol, atol = TOLERANCES[dtype]
    result = myops.mymatmul(LAYOUTS[layout](x), LAYOUTS[layout](y))
    torch.testing.assert_close(result, (x.double() @ y.double()).to(dtype), rtol=rtol, atol=atol)
    # Strides change how the inputs are packed, never the arithmetic: the same bits as contiguous.
    assert torch.equal(result, myops.mymatmul(x, y))


def _product_bits(threads):
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    return {str(dtype): myops.mymatmul(torch.randn(203, 517, dtype=dtype), torch.randn(517, 131, dtype=dtype))
            for dtype in TOLERANCES}


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


@pytest.mark.parametrize("x, y, message", [
    (torch.ones(2, 3, 4), torch.ones(4, 5),
     "myops::mymatmul: expected two 2-d tensors, got 3-d and 2-d; reshape them to matrices, "
     "or use torch.matmul for batched products"),
    (torch.ones(3), torch.ones(3, 2),
     "myops::mymatmul: expected two 2-d tensors, got 1-d and 2-d; reshape them to matrices, "
     "or use torch.matmul for batched products"),
    (torch.ones(2, 3), torch.ones(4, 5),
     "myops::mymatmul: inner dimensions differ: self is [2, 3] and other is [4, 5]; "
     "self.shape[1] must equal other.shape[0]"),
    (torch.ones(2, 3), torch.ones(3, 2, dtype=torch.float64),
     "myops::mymatmul: expected tensors of the same dtype, got Float and Double; convert one with .to(dtype)"),
    (torch.ones(2, 3, dtype=torch.int64), torch.ones(3, 2, dtype=torch.int64),
     "myops::mymatmul: unsupported dtype Long; supported are float16, bfloat16, float32 and float64, "
     "convert with .float()"),
])
def test_bad_input_message(layers, x, y, message):
    with pytest.raises(RuntimeError) as error:
        myops.mymatmul(x, y)
    assert str(error.value).splitlines()[0] == message


def test_registered_for_cpu(layers):
    table = {entry.key: entry for entry in dispatch.dispatch_table("myops::mymatmul")}
    assert table["CPU"].source == "csrc/cpu/mymatmul.cpp"
