"""myops::myrmsnorm on every device: values against a float64 reference over layouts, eps, bad inputs, and
which kernel each key runs. (Its autograd is the NotImplemented fallback: tests/test_fallbacks.py.)"""
import pytest
import torch

import myops
from myops import dispatch
from helpers import (DEVICES, DEVICES_AND_META, DTYPE_IDS, FLOAT_DTYPES, TOLERANCES, Randn, needs_cuda_toolchain,
                     needs_gpu, needs_gpu_memory, rmsnorm_layouts, rmsnorm_reference)

RMSNORM_LAYOUTS = [name for name, _, _ in rmsnorm_layouts(torch.float32, "meta")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", RMSNORM_LAYOUTS)
def test_matches_reference(layers, name, dtype, device):
    x, w = next((a, b) for case, a, b in rmsnorm_layouts(dtype, device) if case == name)
    rtol, atol = TOLERANCES[dtype]
    result = myops.myrmsnorm(x, w)
    assert result.device == x.device and result.dtype == dtype and result.shape == x.shape
    assert result.is_contiguous()
    torch.testing.assert_close(result, rmsnorm_reference(x, w), rtol=rtol, atol=atol)
    torch.testing.assert_close(myops.myrmsnorm(x, w, eps=0.5), rmsnorm_reference(x, w, eps=0.5), rtol=rtol, atol=atol)


@pytest.mark.parametrize("device", DEVICES)
def test_an_infinite_eps_gives_atens_zeros(layers, device):
    x, w = torch.randn(3, 8, device=device), torch.randn(8, device=device)
    expected = torch.nn.functional.rms_norm(x, (8,), w, eps=float("inf"))
    assert torch.equal(myops.myrmsnorm(x, w, eps=float("inf")), expected) and not expected.any()


@pytest.mark.parametrize("device", DEVICES)
def test_eps_is_used(layers, device):
    x, w = torch.zeros(2, 3, device=device), torch.ones(3, device=device)
    assert torch.equal(myops.myrmsnorm(x, w, eps=1.0), torch.zeros(2, 3, device=device))
    x = torch.full((1, 4), 2.0, device=device)
    torch.testing.assert_close(myops.myrmsnorm(x, torch.ones(4, device=device), eps=12.0),
                               torch.full((1, 4), 0.5, device=device))


def test_meta_kernel_gives_shape_and_dtype(layers):
    x = torch.empty(4, 8, device="meta", dtype=torch.bfloat16)
    result = myops.myrmsnorm(x, torch.empty(8, device="meta", dtype=torch.bfloat16))
    assert result.device.type == "meta" and result.shape == (4, 8) and result.dtype == torch.bfloat16


BAD_INPUTS = [  # (self, weight, eps, message) as (size, dtype) pairs; the tensors' device is the test's
    (((), None), ((1,), None), 1e-6,
     "myops::myrmsnorm: expected a tensor with at least one dimension, got a 0-d tensor; "
     "normalize a 1-d view of it, e.g. x.reshape(1)"),
    (((2, 3), None), ((4,), None), 1e-6,
     "myops::myrmsnorm: expected weight of shape [3] (the last dimension of self), got [4]; "
     "pass one weight per element of the last dimension"),
    (((2, 3), None), ((3,), None), -1.0,
     "myops::myrmsnorm: eps must be >= 0, got -1; pass a small positive eps such as 1e-6"),
    (((2, 3), None), ((3,), None), float("nan"),
     "myops::myrmsnorm: eps must be >= 0, got nan; pass a small positive eps such as 1e-6"),
    (((2, 3), torch.bfloat16), ((3,), None), 1e-6,
     "myops::myrmsnorm: expected tensors of the same dtype, got BFloat16 and Float; convert one with .to(dtype)"),
]


@pytest.mark.parametrize("device", DEVICES_AND_META)
@pytest.mark.parametrize("x, w, eps, message", BAD_INPUTS, ids=["0-d", "weight", "eps", "eps nan", "dtypes"])
def test_bad_input_message(layers, x, w, eps, message, device):
    (x_size, x_dtype), (w_size, w_dtype) = x, w
    x, w = torch.ones(x_size, dtype=x_dtype, device=device), torch.ones(w_size, dtype=w_dtype, device=device)
    with pytest.raises(RuntimeError) as error:
        myops.myrmsnorm(x, w, eps)
    assert str(error.value).splitlines()[0] == message


@needs_gpu
def test_mixed_devices_are_refused(layers):
    with pytest.raises(RuntimeError) as error:
        myops.myrmsnorm(torch.ones(4, 3, device="cuda"), torch.ones(3))
    assert str(error.value).splitlines()[0] == (
        "myops::myrmsnorm: expected both tensors on the same device, got cuda:0 and cpu; move one with .to(device)")


@needs_gpu_memory(24)
def test_beyond_2_to_the_31_elements_on_the_gpu(layers):
    rows, cols = 2**20 + 3, 2048  # 2**31 + 6144 elements
    randn = Randn(torch.float16, "cuda")
    x, w = randn(rows, cols), randn(cols)
    result = myops.myrmsnorm(x, w)
    rtol, atol = TOLERANCES[torch.float16]
    for start in range(0, rows, 2**17):  # the float64 reference a slice at a time
        rows_here = slice(start, start + 2**17)
        torch.testing.assert_close(result[rows_here], rmsnorm_reference(x[rows_here], w), rtol=rtol, atol=atol)


def test_registered_kernels(layers):
    table = {entry.key: entry for entry in dispatch.dispatch_table("myops::myrmsnorm")}
    assert (table["CPU"].kind, table["CPU"].source) == ("kernel", "csrc/cpu/myrmsnorm.cpp")
    assert (table["Meta"].kind, table["Meta"].source) == ("kernel", "csrc/meta/myrmsnorm.cpp")
    assert (table["AutocastCPU"].kind, table["AutocastCPU"].source) == ("kernel", "csrc/autocast/myrmsnorm.cpp")


@needs_cuda_toolchain
def test_registered_cuda_kernel(layers):
    assert "cuda" in layers
    table = {entry.key: entry for entry in dispatch.dispatch_table("myops::myrmsnorm")}
    assert (table["CUDA"].kind, table["CUDA"].source) == ("kernel", "csrc/cuda/myrmsnorm.cu")
