"""Exercise 07: a CPU autocast wrapper with the fp32 policy for a reduction, on the AutocastCPU key."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from myops.exercises.expect import call, expect_close, randn, require_kernel, require_op
from myops.exercises.runner import Context, Unsolved


class BelowAutocast(TorchDispatchMode):
    """Records each operator (with its tensors' dtypes) that reaches the Python key, which the dispatcher
    serves after AutocastCPU: what an autocast kernel called, and with what."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append((func, [a.dtype for a in args if isinstance(a, torch.Tensor)]))
        return func(*args, **(kwargs or {}))


def check(context: Context) -> None:
    require_op("ex07", "mynorm", f"keep the TORCH_LIBRARY block of {context.file('mynorm.cpp')}")
    require_kernel(context, "ex07::mynorm", "AutocastCPU",
                   "register mynorm_autocast_cpu in a TORCH_LIBRARY_IMPL(ex07, AutocastCPU, m) block (the old "
                   "key name Autocast is AutocastCUDA)")
    op = torch.ops.ex07.mynorm.default
    x = randn(1000) * 10  # its sum of squares overflows float16: a norm left in float16 is inf
    # Inputs of the autocast dtype, then of the other low-precision one: the fp32 policy casts both.
    for autocast, dtype in ((torch.bfloat16, torch.bfloat16), (torch.float16, torch.float16),
                            (torch.bfloat16, torch.float16), (torch.float16, torch.bfloat16)):
        low = x.to(dtype)
        what = f"ex07::mynorm on {dtype} under torch.autocast('cpu', dtype={autocast})"
        with torch.autocast("cpu", dtype=autocast), BelowAutocast() as below:
            out = call(what, op, low)
        inner = [dtypes for func, dtypes in below.calls if func is op]
        if not inner:
            seen = ", ".join(dict.fromkeys(str(func) for func, _ in below.calls)) or "nothing"
            raise Unsolved(f"under CPU autocast, ex07::mynorm's AutocastCPU kernel did not call ex07::mynorm (the "
                           f"keys below it saw {seen}): call the dispatch function ex07::mynorm under the guard, not "
                           "the CPU kernel or ATen operators")
        if inner[0] != [torch.float32] and dtype == autocast:
            raise Unsolved(f"under torch.autocast('cpu', dtype={autocast}), the AutocastCPU kernel passed "
                           f"{', '.join(map(str, inner[0]))} to ex07::mynorm, expected torch.float32 (the fp32 "
                           "policy): cast with at::autocast::cached_cast(at::kFloat, self, c10::DeviceType::CPU) "
                           "(its device type defaults to CUDA, which leaves a CPU tensor as it is)")
        if inner[0] != [torch.float32]:
            raise Unsolved(f"{what}: the AutocastCPU kernel passed {', '.join(map(str, inner[0]))} to ex07::mynorm, "
                           "expected torch.float32: the fp32 policy casts every floating input but float64, not only "
                           "one of the autocast dtype (at::autocast::cached_cast(at::kFloat, self, "
                           "c10::DeviceType::CPU) does)")
        if isinstance(out, torch.Tensor) and out.dtype != torch.float32:
            raise Unsolved(f"under torch.autocast('cpu', dtype={autocast}), ex07::mynorm returned {out.dtype}, "
                           "expected torch.float32: return what ex07::mynorm computed in float32, not cast back")
        expect_close(what, out, torch.linalg.vector_norm(low.float()))
    double = x.double()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expect_close("ex07::mynorm on float64 under CPU autocast (cached_cast leaves float64 alone)",
                     call("ex07::mynorm", op, double), torch.linalg.vector_norm(double))
    low = x.bfloat16()
    expect_close("ex07::mynorm on bfloat16 outside autocast (the wrapper must not run)",
                 call("ex07::mynorm", op, low), torch.sqrt((low * low).sum(dtype=torch.bfloat16)))
