"""Stage 7: autocast wrappers on AutocastCPU/AutocastCUDA, promote, and the two classic mistakes."""
import pytest
import torch

import myops
from helpers import needs_gpu
from myops import dispatch


@pytest.fixture(scope="module")
def with_mistakes(layers):
    return myops.load("mistakes")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mymatmul_runs_in_the_autocast_dtype(layers, dtype):
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    with torch.autocast("cpu", dtype=dtype):
        out = myops.mymatmul(x, w)
    assert out.dtype == dtype  # the kernel received `dtype` inputs
    torch.testing.assert_close(out, (x.to(dtype) @ w.to(dtype)), rtol=1e-2, atol=1e-2)


def test_outside_autocast_nothing_changes(layers):
    assert myops.mymatmul(torch.randn(2, 3), torch.randn(3, 2)).dtype == torch.float32


@pytest.mark.pytorch_pin
def test_op_without_wrapper_falls_through(layers):
    x = torch.randn(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert myops.myadd(x, x).dtype == torch.float32
    table = {entry.key: entry.kind for entry in dispatch.dispatch_table("myops::myadd")}
    assert table["AutocastCPU"] == "fallthrough"


def test_promote_casts_to_float32_when_either_input_is_float32(layers):
    x, w = torch.randn(4, 16, dtype=torch.bfloat16), torch.randn(16)
    with pytest.raises(RuntimeError, match="expected tensors of the same dtype, got BFloat16 and Float"):
        myops.myrmsnorm(x, w)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert myops.myrmsnorm(x, w).dtype == torch.float32
        assert myops.myrmsnorm(x, w.bfloat16()).dtype == torch.bfloat16
        assert myops.myrmsnorm(x.float(), w).dtype == torch.float32


def test_autocast_with_autograd(layers):
    a = torch.randn(8, 16, requires_grad=True)
    b = torch.randn(16, 4, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = myops.mymatmul(a, b)
    seen = []
    out.register_hook(lambda grad: seen.append(grad.dtype))
    out.float().sum().backward()
    assert out.dtype == torch.bfloat16 and seen == [torch.bfloat16]
    assert a.grad.dtype == b.grad.dtype == torch.float32
    torch.testing.assert_close(a.grad, torch.ones(8, 4) @ b.detach().t(), rtol=2e-2, atol=2e-2)


def test_registered_on_both_autocast_keys(layers):
    for op in ("myops::mymatmul", "myops::myrmsnorm"):
        table = {entry.key: entry for entry in dispatch.dispatch_table(op)}
        assert table["AutocastCPU"].source == table["AutocastCUDA"].source == f"csrc/autocast/{op[7:]}.cpp"


@pytest.mark.pytorch_pin
def test_cached_cast_without_device_casts_nothing_on_cpu(with_mistakes):
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.ops.mistakes.matmul_cast_without_device(x, w).dtype == torch.float32


@pytest.mark.pytorch_pin
def test_old_autocast_key_never_sees_cpu(with_mistakes):
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.ops.mistakes.matmul_on_old_autocast_key(x, w).dtype == torch.float32
    table = {entry.key: entry.kind for entry in dispatch.dispatch_table("mistakes::matmul_on_old_autocast_key")}
    assert table["AutocastCUDA"] == "kernel" and table["AutocastCPU"] == "fallthrough"


@needs_gpu
def test_cuda_autocast_uses_float16(layers):
    x, w = torch.randn(8, 16, device="cuda"), torch.randn(16, 4, device="cuda")
    with torch.autocast("cuda"):
        assert myops.mymatmul(x, w).dtype == torch.float16
