"""Exercise 04: a torch::autograd::Function kernel on the Autograd key that calls its operator again under the guard."""
import torch

from myops.exercises.expect import (call, expect_close, expect_grads, expect_raises, randn, require_alias_autograd,
                                    require_op, require_own_function)
from myops.exercises.runner import Context, Unsolved


def check(context: Context) -> None:
    require_op("ex04", "mymul", f"keep the TORCH_LIBRARY block of {context.file('mymul.cpp')}")
    require_alias_autograd(context, "ex04::mymul", "mymul_autograd")
    op = torch.ops.ex04.mymul.default
    a, b = randn(3, 4, dtype=torch.float64), randn(3, 4, dtype=torch.float64, seed=1)
    # Nothing requires grad: the kernel must still compute (through the guard to the CPU kernel).
    expect_close("ex04::mymul without grad", call("ex04::mymul", op, a, b), a * b)
    x, y = a.clone().requires_grad_(), b.clone().requires_grad_()
    # ATen's own autograd would record MulBackward0 for a kernel that just calls at::mul: gradients right,
    # the exercise skipped.
    require_own_function("ex04::mymul with requires_grad", call("ex04::mymul", op, x, y),
                         "return MyMulFunction::apply(self, other) from mymul_autograd")
    for needs in ((True, True), (True, False), (False, True)):
        expect_grads(f"ex04::mymul with requires_grad={needs}", op,
                     (a.clone().requires_grad_(needs[0]), b.clone().requires_grad_(needs[1])), torch.mul)
    # The CPU kernel refuses shapes that at::mul would broadcast: an error from it proves the forward went on
    # to the kernel below autograd instead of computing the product itself.
    expect_raises("ex04::mymul with requires_grad on shapes [3, 4] and [4]", op, x, randn(4, dtype=torch.float64),
                  match="ex04::mymul: expected tensors of the same shape",
                  hint="the forward must call ex04::mymul under the guard, which runs the given CPU kernel, not "
                  "compute the product another way")
    if not torch.autograd.gradcheck(op, (x, y), raise_exception=False):
        raise Unsolved("torch.autograd.gradcheck of ex04::mymul fails: the backward is not the derivative")
    if not call("torch.autograd.gradgradcheck of ex04::mymul", torch.autograd.gradgradcheck, op, (x, y),
                raise_exception=False):
        raise Unsolved("double backward of ex04::mymul fails (torch.autograd.gradgradcheck): write backward with "
                       "differentiable operations (ex04::mymul or at::mul), outside any guard")
