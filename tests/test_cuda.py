"""The CUDA layer: compiled and registered wherever a CUDA toolchain exists; executed where a GPU exists."""
import pytest
import torch

import myops
from myops import dispatch, toolchain
from conftest import sample_inputs

needs_toolchain = pytest.mark.skipif(toolchain.cuda_skip_reason() is not None,
                                     reason=str(toolchain.cuda_skip_reason()))
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")

FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@needs_toolchain
def test_cuda_layer_registers_a_cuda_kernel(layers):
    assert "cuda" in layers
    table = {entry.key: entry for entry in dispatch.dispatch_table("myops::myadd")}
    assert table["CUDA"].kind == "kernel" and table["CUDA"].source == "csrc/cuda/myadd.cu"
    assert table["CPU"].source == "csrc/cpu/myadd.cpp"


@needs_gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_matches_aten_on_gpu(layers, dtype):
    for name, x, y in sample_inputs(dtype):
        x, y = x.cuda(), y.cuda()
        if name == "transposed":  # also a layout made on the device, not copied from one
            x = x.t().contiguous().t()
        result = myops.myadd(x, y)
        assert result.device == x.device and result.is_contiguous(), name
        torch.testing.assert_close(result, torch.add(x, y), rtol=0, atol=0, msg=name)


@needs_gpu
def test_unaligned_and_odd_lengths(layers):
    base = torch.randn(10_001, device="cuda")
    x, y = base[1:], base[:-1]  # 4-byte offset: not 16-byte aligned, length not a multiple of 4
    torch.testing.assert_close(myops.myadd(x, y), x + y, rtol=0, atol=0)


@needs_gpu
def test_mixed_devices_are_refused(layers):
    with pytest.raises(RuntimeError, match="myops::myadd: expected both tensors on the same device, "
                       "got cuda:0 and cpu; move one with .to\\(device\\)"):
        myops.myadd(torch.ones(2, device="cuda"), torch.ones(2))


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
    myops.myadd(x, y)  # warm up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = myops.myadd(x, y)
    x.copy_(torch.randn(4096, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
