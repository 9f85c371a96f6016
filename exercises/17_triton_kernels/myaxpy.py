"""Exercise 17 (notebook 17_triton_kernels): a Triton kernel as an operator, ex17::myaxpy.

Checked by myops/exercises/ex17_triton_kernels.py, under Triton's interpreter (switched on as notebook 17 does: the
kernel runs on CPU tensors, no GPU needed) and once more without it.

ex17::myaxpy(x, y, alpha) = alpha * x + y, for x and y of one 2-D shape, any strides, any floating dtype:
  1. axpy_kernel, a @triton.jit kernel: each program computes BLOCK elements of the (contiguous) output. The
     last block reaches past the end unless the size is a multiple of BLOCK: mask its loads and stores. Read
     x and y through their strides (pass them in), compute in float32 (float64 for float64 inputs: a
     tl.constexpr flag, as notebook 17's kernel does), store in the output's dtype;
  2. myaxpy, a torch.library.triton_op("ex17::myaxpy", mutates_args=()) that calls check_inputs, makes the
     output and launches the kernel through `torch.library.wrap_triton(axpy_kernel)[grid](...)`;
  3. a fake kernel (@myaxpy.register_fake) for torch.compile and opcheck, which refuses what the operator
     refuses (call check_inputs: x and y not of one 2-D shape raise an error naming ex17::myaxpy, on fake
     tensors too) and makes the output without touching data: triton_op's own fake kernel is the body above
     (torch/_library/triton.py, triton_op), which under the interpreter touches data;
  4. autograd (myaxpy.register_autograd): d x = alpha * grad, d y = grad;
  5. a fallback written in PyTorch for CPU tensors only (myaxpy.register_kernel), registered only where
     INTERPRETED is False: there Triton cannot run CPU tensors. Under the interpreter the check runs your Triton
     kernel on CPU tensors, and a CPU kernel would take them from it (notebook 17's portable operator, whose
     fallback is registered either way, shows that);
  6. what torch.compile needs to keep the operator whole when it compiles it for CPU tensors, with or without
     a GPU in the machine (notebook 17, section 5, shows two ways: a rule of this operator's own, or a setting
     that keeps every triton_op of the process whole).
Check your answer with:  python -m myops.exercises check 17
"""
import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.library import triton_op, wrap_triton
from triton.runtime.interpreter import InterpretedFunction


def check_inputs(x: Tensor, y: Tensor) -> None:
    torch._check(x.dim() == 2 and x.shape == y.shape,
                 lambda: f"ex17::myaxpy: expected x and y of one 2-D shape, got {list(x.shape)} and {list(y.shape)}")


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    pass  # TODO: the kernel (add the arguments it needs)


# An interpreter if the interpreter was on when triton.jit decorated the kernel: the kernel then runs on CPU tensors
INTERPRETED = isinstance(axpy_kernel, InterpretedFunction)


@triton_op("ex17::myaxpy", mutates_args=())
def myaxpy(x: Tensor, y: Tensor, alpha: float) -> Tensor:
    raise NotImplementedError("not solved yet: launch axpy_kernel in exercises/17_triton_kernels/myaxpy.py")


# TODO: the fake kernel, the autograd registration, the CPU fallback, and what torch.compile needs.
