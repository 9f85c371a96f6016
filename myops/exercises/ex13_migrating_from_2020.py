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
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = call("ex13::mymul under CPU autocast", op, x, y)
    if isinstance(out, torch.Tensor) and out.dtype != torch.bfloat16:
        raise Unsolved(f"under torch.autocast('cpu', dtype=torch.bfloat16), ex13::mymul returned {out.dtype}, "
                       "expected torch.bfloat16: give cached_cast the device type (its default is CUDA)")
    expect_close("ex13::mymul under CPU autocast", out, x.bfloat16() * y.bfloat16())
    expect_raises("ex13::mymul on meta tensors", op, torch.empty(2, device="meta"), torch.empty(2, device="meta"),
                  errors=(NotImplementedError,), hint="its kernel must serve the CPU key only")
