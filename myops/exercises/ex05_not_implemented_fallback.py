"""Exercise 05: myrmsnorm's backward, replacing the NotImplemented fallback on the Autograd key."""
import torch

from myops.exercises.expect import (call, expect_grads, randn, require_alias_autograd, require_op,
                                    require_own_function, rmsnorm_reference)
from myops.exercises.runner import Context, Unsolved


def check(context: Context) -> None:
    require_op("ex05", "myrmsnorm", f"keep the TORCH_LIBRARY block of {context.file('myrmsnorm.cpp')}")
    require_alias_autograd(context, "ex05::myrmsnorm", "myrmsnorm_autograd")
    op = torch.ops.ex05.myrmsnorm.default
    x, w = randn(3, 5, dtype=torch.float64, requires_grad=True), randn(5, dtype=torch.float64, seed=1,
                                                                        requires_grad=True)
    out = call("ex05::myrmsnorm", op, x, w)
    if out.grad_fn is not None and "NotImplemented" in out.grad_fn.name():
        raise Unsolved("ex05::myrmsnorm's backward still reaches the NotImplemented fallback; register "
                       "myrmsnorm_autograd on the Autograd key in its place")
    # ATen's autograd differentiates the ATen operators a kernel calls: right gradients, no backward written.
    require_own_function("ex05::myrmsnorm with requires_grad", out, "return MyRMSNormFunction::apply(self, "
                         "weight, eps) from myrmsnorm_autograd, with the backward written out")
    for eps in (1e-6, 0.5):  # a large eps shows whether the kernel uses it
        for shape in ((3, 5), (5,), (2, 3, 5)):
            x = randn(*shape, dtype=torch.float64, seed=len(shape), requires_grad=True)
            for needs in ((True, True), (True, False), (False, True)):
                xi, wi = x.detach().clone().requires_grad_(needs[0]), w.detach().clone().requires_grad_(needs[1])
                try:
                    expect_grads(f"ex05::myrmsnorm on shape {list(shape)} with eps={eps} and requires_grad={needs}",
                                 lambda a, b: op(a, b, eps), (xi, wi), lambda a, b: rmsnorm_reference(a, b, eps))
                except Unsolved as unsolved:
                    if len(shape) == 1 and "invalid gradient at index 1 - got []" in str(unsolved):
                        raise Unsolved(f"{unsolved}: a 1-d self has no dimension but the last, and at::sum over an "
                                       "empty list of dimensions sums every element; return g * self * r as it is "
                                       "there") from None
                    raise
