"""Exercise 12: one boxed kernel serving three operators."""
import torch

from myops.dispatch import kernel_forms
from myops.exercises.expect import call, expect_close, randn, require_kernel, require_op
from myops.exercises.runner import Context, Unsolved


def check(context: Context) -> None:
    for name in ("sum2", "sum3", "scaled_sum"):
        require_op("ex12", name, f"keep the TORCH_LIBRARY block of {context.file('sum_boxed.cpp')}")
        require_kernel(context, f"ex12::{name}", "CPU", f"register sum_boxed for {name} in the "
                       "TORCH_LIBRARY_IMPL(ex12, CPU, m) block")
        # A kernel made from a boxed function has no unboxed entry: the dispatcher's own record says which.
        if kernel_forms(f"ex12::{name}", "CPU") != {"boxed"}:
            raise Unsolved(f"ex12::{name}'s CPU kernel is not a boxed function (the dispatcher lists it as "
                           f"{' and '.join(sorted(kernel_forms(f'ex12::{name}', 'CPU')))}): register sum_boxed "
                           "with torch::CppFunction::makeFromBoxedFunction")
    ops = torch.ops.ex12
    for dtype in (torch.float32, torch.float64):
        a, b, c = (randn(4, 3, dtype=dtype, seed=seed) for seed in range(3))
        expect_close(f"ex12::sum2 on {dtype}", call("ex12::sum2", ops.sum2, a, b), a + b)
        expect_close(f"ex12::sum3 on {dtype}", call("ex12::sum3", ops.sum3, a, b, c), a + b + c)
        expect_close(f"ex12::scaled_sum(a, b, 2.5) on {dtype}", call("ex12::scaled_sum", ops.scaled_sum, a, b, 2.5),
                     (a + b) * 2.5)
        before = a.clone()
        ops.sum2(a, b)
        if not torch.equal(a, before):
            raise Unsolved("ex12::sum2 changed its first argument: add into a new tensor, not into the input")
