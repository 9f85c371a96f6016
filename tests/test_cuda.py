"""The CUDA layer: compiled and registered wherever a CUDA toolchain exists; executed where a GPU exists."""
import pytest
import torch

import myops
from myops import dispatch, toolchain
from conftest import sample_inputs
from test_mymatmul import TOLERANCES, matmul_cases

needs_toolchain = pytest.mark.skipif(toolchain.cuda_skip_reason() is not None,
                                     reason=str(toolchain.cuda_skip_reason()))
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")

FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@needs_toolchain
def test_cuda_layer_registers_a_cuda_kernel(layers):
    assert "cuda" in layers
    for op in ("myadd", "mymatmul"):
        table = {entry.key: entry for entry in dispatch.dispatch_table(f"myops::{op}")}
        assert table["CUDA"].kind == "kernel" and table["CUDA"].source == f"csrc/cuda/{op}.cu"
        assert table["CPU"].source == f"csrc/cpu/{op}.cpp"


@needs_gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_matches_aten_on_gpu(layers, dtype):
    for name, x, y in sample_inputs(dtype):
        x, y = x.cuda(), y.cuda()
        result = myops.myadd(x, y)
        assert result.device == x.device and result.is_contiguous(), name
        torch.testing.assert_close(result, torch.add(x, y), rtol=0, atol=0, msg=name)


@needs_gpu
def test_unaligned_and_odd_lengths(layers):
    base = torch.randn(10_001, device="cuda")
    x, y = base[1:], base[:-1]  # 4-byte offset: not 16-byte aligned, length not a multiple of 4
    torch.testing.assert_close(myops.myadd(x, y), x + y, rtol=0, atol=0)


@needs_gpu
@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
def test_mymatmul_matches_aten_on_gpu(layers, dtype):
    rtol, atol = TOLERANCES[dtype]
    for name, x, y in matmul_cases(dtype, device="cuda"):
        result = myops.mymatmul(x, y)
        assert result.device == x.device and result.shape == (x.shape[0], y.shape[1]), name
        reference = (x.double() @ y.double()).to(dtype)
        torch.testing.assert_close(result, reference, rtol=rtol, atol=atol, msg=name)


@needs_gpu
def test_gradients_on_gpu(layers):
    x = torch.randn(20, 30, device="cuda", dtype=torch.float64, requires_grad=True)
    y = torch.randn(30, 10, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(myops.mymatmul, (x, y))
    assert torch.autograd.gradgradcheck(myops.mymatmul, (x, y))
    z = torch.randn(20, 30, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(myops.myadd, (x, z))


@needs_gpu
@pytest.mark.parametrize("op", [myops.myadd, myops.mymatmul])
def test_mixed_devices_are_refused(layers, op):
    name = op.__name__
    with pytest.raises(RuntimeError, match=f"myops::{name}: expected both tensors on the same device, "
                       "got cuda:0 and cpu; move one with .to\\(device\\)"):
        op(torch.ones(2, 2, device="cuda"), torch.ones(2, 2))


@needs_gpu
def test_runs_on_the_current_stream(layers):
    x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = myops.myadd(x, y)
    side.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@needs_gpu
def test_captured_in_a_cuda_graph(layers):
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    m = torch.randn(64, 64, device="cuda")
    myops.mymatmul(m, myops.myadd(x, y)[:64 * 64].view(64, 64))  # warm up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = myops.mymatmul(m, myops.myadd(x, y)[:64 * 64].view(64, 64))
    x.copy_(torch.randn(4096, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    expected = (m.double() @ (x + y)[:64 * 64].view(64, 64).double()).float()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-4)
