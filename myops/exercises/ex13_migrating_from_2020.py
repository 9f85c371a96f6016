"""Exercise 13: four silent breaks of the 2020 tutorial, fixed."""
import warnings

import torch

from myops.exercises.expect import (call, captured_stderr, expect_close, expect_grads, expect_raises, randn,
                                    require_alias_autograd, require_kernel, require_no_catch_all, require_op)
from myops.exercises.runner import Context, Unsolved


def check(context: Context) -> None:
    require_op("ex13", "mymul", f"keep the schema in the TORCH_LIBRARY block of {context.file('mymul.cpp')}")
    require_no_catch_all("ex13::mymul", "ex13::mymul's kernel is still a catch-all (def(schema, fn) files it under "
                         "CompositeImplicitAutograd, for every backend): define the schema alone and register "
                         "mymul_cpu in a TORCH_LIBRARY_IMPL(ex13, CPU, m) block")
    require_kernel(context, "ex13::mymul", "CPU", "register mymul_cpu in a TORCH_LIBRARY_IMPL(ex13, CPU, m) block")
    require_alias_autograd(context, "ex13::mymul", "mymul_autograd")
    op = torch.ops.ex13.mymul.default
    a = randn(2, 3, dtype=torch.float64, requires_grad=True)
    b = randn(2, 3, dtype=torch.float64, seed=1, requires_grad=True)
    # The deprecated guard warns once per process, through c10's warning handler: straight to fd 2 here.
    with warnings.catch_warnings(record=True) as caught, captured_stderr() as stderr:
        warnings.simplefilter("always")
        out = call("ex13::mymul", op, a, b)
    if "AutoNonVariableTypeMode" in "".join(stderr) + "".join(str(w.message) for w in caught):
        raise Unsolved("ex13::mymul's autograd kernel uses at::AutoNonVariableTypeMode, which is deprecated and "
                       "warns at run time: use at::AutoDispatchBelowADInplaceOrView")
    if isinstance(out, torch.Tensor) and out.shape != a.shape:
        raise Unsolved(f"ex13::mymul with requires_grad returned shape {list(out.shape)} for inputs of shape "
                       f"{list(a.shape)}: apply() returns a Tensor, and [0] selects its first row")
    expect_grads("ex13::mymul with requires_grad", op, (a, b), torch.mul)
    require_kernel(context, "ex13::mymul", "AutocastCPU", "register the autocast wrapper on AutocastCPU (the "
                   "old key name Autocast is AutocastCUDA)")
    x, y = randn(3, 4), randn(3, 4, seed=1)
    # CPU autocast takes bfloat16 and float16 (torch/amp/autocast_mode.py, autocast.__init__).
    for dtype in (torch.bfloat16, torch.float16):
        with torch.autocast("cpu", dtype=dtype):
            out = call(f"ex13::mymul under CPU autocast to {dtype}", op, x, y)
        if isinstance(out, torch.Tensor) and out.dtype == torch.float32:
            raise Unsolved(f"under torch.autocast('cpu', dtype={dtype}), ex13::mymul returned torch.float32, "
                           f"expected {dtype}: give cached_cast the device type (its default is CUDA)")
        if isinstance(out, torch.Tensor) and out.dtype != dtype:
            raise Unsolved(f"under torch.autocast('cpu', dtype={dtype}), ex13::mymul returned {out.dtype}, expected "
                           f"{dtype}: cast to the dtype the caller's autocast asks for, "
                           "at::autocast::get_lower_precision_fp_from_device_type(device type), not a fixed one")
        expect_close(f"ex13::mymul under CPU autocast to {dtype}", out, x.to(dtype) * y.to(dtype))
    expect_raises("ex13::mymul on meta tensors", op, torch.empty(2, device="meta"), torch.empty(2, device="meta"),
                  errors=(NotImplementedError,), hint="its kernel must serve the CPU key only")
