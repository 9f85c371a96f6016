"""Exercise 07: a CPU autocast wrapper with the fp32 policy for a reduction, on the AutocastCPU key."""
import torch

from myops.exercises.expect import call, expect_close, randn, require_kernel, require_op
from myops.exercises.runner import Context, Unsolved


def check(context: Context) -> None:
    require_op("ex07", "mynorm", f"keep the TORCH_LIBRARY block of {context.file('mynorm.cpp')}")
    require_kernel(context, "ex07::mynorm", "AutocastCPU",
                   "register mynorm_autocast_cpu in a TORCH_LIBRARY_IMPL(ex07, AutocastCPU, m) block (the old "
                   "key name Autocast is AutocastCUDA)")
    op = torch.ops.ex07.mynorm.default
    x = randn(1000) * 10
    for dtype in (torch.bfloat16, torch.float16):
        low = x.to(dtype)
        with torch.autocast("cpu", dtype=dtype):
            out = call(f"ex07::mynorm on {dtype} under CPU autocast", op, low)
        if isinstance(out, torch.Tensor) and out.dtype == dtype:
            raise Unsolved(f"under torch.autocast('cpu', dtype={dtype}), ex07::mynorm returned {dtype}, expected "
                           "torch.float32 (the fp32 policy); does cached_cast get c10::DeviceType::CPU?")
        expect_close(f"ex07::mynorm on {dtype} under CPU autocast", out, torch.linalg.vector_norm(low.float()))
    double = x.double()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expect_close("ex07::mynorm on float64 under CPU autocast (cached_cast leaves float64 alone)",
                     call("ex07::mynorm", op, double), torch.linalg.vector_norm(double))
    low = x.bfloat16()
    expect_close("ex07::mynorm on bfloat16 outside autocast (the wrapper must not run)",
                 call("ex07::mynorm", op, low), torch.sqrt((low * low).sum(dtype=torch.bfloat16)))
