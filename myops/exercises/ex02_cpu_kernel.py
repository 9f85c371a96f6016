"""Exercise 02: an elementwise CPU kernel for any strides, registered for the CPU key only."""
import torch

from myops.exercises.expect import (call, expect_close, expect_raises, layouts, randn, require_kernel,
                                    require_no_catch_all, require_only_allocations, require_op)
from myops.exercises.runner import Context, Unsolved


def check(context: Context) -> None:
    require_op("ex02", "mymul", f"keep the TORCH_LIBRARY block of {context.file('mymul.cpp')}")
    require_no_catch_all("ex02::mymul", "ex02::mymul has a catch-all kernel (CompositeImplicitAutograd): register "
                         "the kernel for the CPU key only")
    require_kernel(context, "ex02::mymul", "CPU", "register mymul_cpu in the TORCH_LIBRARY_IMPL(ex02, CPU, m) block")
    op = torch.ops.ex02.mymul.default
    for dtype in (torch.float32, torch.float64):
        for layout, a, b in layouts(dtype):
            expect_close(f"ex02::mymul on {layout} {dtype} inputs", call("ex02::mymul", op, a, b), a * b)
    a, b = randn(3, 4), randn(4, 3, seed=1).t()
    require_only_allocations("ex02::mymul's kernel", op, a, b, hint="do the arithmetic yourself, through data "
                             "pointers and a loop (or at::parallel_for), not with another operator")
    for dtype in (torch.float16, torch.int64):  # not asked for: refused with an error, or right
        x, y = (randn(4, 3, seed=seed).mul(4).to(dtype) for seed in (2, 3))
        try:
            out = op(x, y)
        except RuntimeError:
            continue
        expect_close(f"ex02::mymul on {dtype} inputs (refuse a dtype you do not handle with a TORCH_CHECK or "
                     "AT_DISPATCH_FLOATING_TYPES, never read it as another type)", out, x * y)
    expect_raises("ex02::mymul on meta tensors", op, torch.ones(2, device="meta"), torch.ones(2, device="meta"),
                  errors=(NotImplementedError,), hint="its kernel must serve the CPU key only")
