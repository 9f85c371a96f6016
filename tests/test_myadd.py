"""myops::myadd on CPU against ATen: values, dtypes, layouts, errors, registration."""
import pytest
import torch

import myops
from myops import dispatch
from myops.build import _BUILDER
from helpers import sample_inputs

FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
LAYOUTS = [name for name, _, _ in sample_inputs(torch.float32)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_matches_aten(layers, dtype, layout):
    _, x, y = next(case for case in sample_inputs(dtype) if case[0] == layout)
    result = myops.myadd(x, y)
    expected = torch.add(x, y)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    assert result.is_contiguous()
    # Same rounding as ATen (half types accumulate in float): bit-identical, not merely close.
    torch.testing.assert_close(result, expected, rtol=0, atol=0)


# The contiguous path runs whole vectors, then one partial vector: lengths around every vector width
# (8 to 64 elements, by dtype and CPU), and around the grain size where a second thread starts.
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("n", [1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 32767, 32768, 65537])
def test_vector_remainders_match_aten(layers, dtype, n):
    g = torch.Generator().manual_seed(n)
    x, y = (torch.randn(n, generator=g, dtype=dtype) for _ in range(2))
    torch.testing.assert_close(myops.myadd(x, y), torch.add(x, y), rtol=0, atol=0)
    inplace = x.clone()
    torch.ops.myops.myadd_(inplace, y)
    torch.testing.assert_close(inplace, torch.add(x, y), rtol=0, atol=0)


def test_inputs_are_not_modified(layers):
    x, y = torch.randn(64), torch.randn(64)
    x_copy, y_copy = x.clone(), y.clone()
    myops.myadd(x, y)
    assert torch.equal(x, x_copy) and torch.equal(y, y_copy)


@pytest.mark.parametrize("x, y, message", [
    (torch.ones(2, 3), torch.ones(3),
     "myops::myadd: expected tensors of the same shape, got [2, 3] and [3]; "
     "broadcast them first, e.g. with torch.broadcast_tensors"),
    (torch.ones(2), torch.ones(2, dtype=torch.float64),
     "myops::myadd: expected tensors of the same dtype, got Float and Double; convert one with .to(dtype)"),
    (torch.ones(2, dtype=torch.int32), torch.ones(2, dtype=torch.int32),
     "myops::myadd: unsupported dtype Int; supported are float16, bfloat16, float32 and float64, "
     "convert with .float()"),
    (torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool),
     "myops::myadd: unsupported dtype Bool; supported are float16, bfloat16, float32 and float64, "
     "convert with .float()"),
    (torch.ones(2, dtype=torch.complex64), torch.ones(2, dtype=torch.complex64),
     "myops::myadd: unsupported dtype ComplexFloat; supported are float16, bfloat16, float32 and float64, "
     "convert with .float()"),
])
def test_bad_input_message(layers, x, y, message):
    with pytest.raises(RuntimeError) as error:
        myops.myadd(x, y)
    assert str(error.value).splitlines()[0] == message


def test_registered_kernels(layers):
    table = {entry.key: entry for entry in dispatch.dispatch_table("myops::myadd")}
    assert table["CPU"].kind == "kernel" and table["CPU"].source == "csrc/cpu/myadd.cpp"
    assert table["Meta"].kind == "kernel" and table["Meta"].source == "csrc/meta/myadd.cpp"
    assert table["AutocastCPU"].kind == "fallthrough"  # no autocast rule: see test_autocast.py


def test_cpu_layer_is_built_with_openmp(layers):
    # at::parallel_for is inlined into the layer: without -fopenmp it has no parallel region and
    # silently runs on one thread. A parallel region compiles to a call of GOMP_parallel.
    library = _BUILDER.library_path("cpu").read_bytes()
    assert b"GOMP_parallel" in library
