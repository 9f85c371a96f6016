"""Solution of exercise 17 (notebook 17_triton_kernels): ex17::myaxpy, a Triton kernel as an operator."""
import torch
import triton
import triton.language as tl
from torch import Tensor
from torch._subclasses.functional_tensor import FunctionalTensorMode
from torch.library import triton_op, wrap_triton
from triton.runtime.interpreter import InterpretedFunction

BLOCK = 128


def check_inputs(x: Tensor, y: Tensor) -> None:
    torch._check(x.dim() == 2 and x.shape == y.shape,
                 lambda: f"ex17::myaxpy: expected x and y of one 2-D shape, got {list(x.shape)} and {list(y.shape)}")


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n, cols, x_stride0, x_stride1, y_stride0, y_stride1,
                FP64: tl.constexpr, BLOCK: tl.constexpr):
    acc_type = tl.float64 if FP64 else tl.float32  # float16/bfloat16 compute in float32, float64 stays float64
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n  # the last block reaches past the end unless n is a multiple of BLOCK
    row, col = offsets // cols, offsets % cols
    x = tl.load(x_ptr + row * x_stride0 + col * x_stride1, mask=inside).to(acc_type)
    y = tl.load(y_ptr + row * y_stride0 + col * y_stride1, mask=inside).to(acc_type)
    tl.store(out_ptr + offsets, (alpha * x + y).to(out_ptr.dtype.element_ty), mask=inside)


# An interpreter if the interpreter was on when triton.jit decorated the kernel: the kernel then runs on CPU tensors
INTERPRETED = isinstance(axpy_kernel, InterpretedFunction)


@triton_op("ex17::myaxpy", mutates_args=())
def myaxpy(x: Tensor, y: Tensor, alpha: float) -> Tensor:
    check_inputs(x, y)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # contiguous: the kernel writes it in order
    n = out.numel()
    wrap_triton(axpy_kernel)[(triton.cdiv(n, BLOCK),)](x, y, out, alpha, n, x.shape[1], x.stride(0), x.stride(1),
                                                        y.stride(0), y.stride(1), FP64=x.dtype == torch.float64,
                                                        BLOCK=BLOCK)
    return out


# triton_op's default fake kernel is the body above, and under the interpreter the body touches data.
@myaxpy.register_fake
def _(x, y, alpha):
    check_inputs(x, y)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _setup_context(ctx, inputs, output):
    ctx.alpha = inputs[2]


def _backward(ctx, grad):
    return ctx.alpha * grad, grad, None  # alpha is a float: no gradient


myaxpy.register_autograd(_backward, setup_context=_setup_context)

if not INTERPRETED:
    # No interpreter: Triton cannot run CPU tensors, so they take the same arithmetic written in PyTorch.
    @myaxpy.register_kernel("cpu")
    def _(x, y, alpha):
        check_inputs(x, y)
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        # contiguous, as the fake kernel says and the Triton kernel writes it, whatever the inputs' strides
        return (alpha * x.to(acc) + y.to(acc)).to(x.dtype).contiguous()


# torch.compile decomposes a triton_op into its Triton kernel whatever the inputs' device (the FunctionalTensorMode
# rule triton_op registers, functional_decomp), and on CPU tensors neither the interpreter (fake tensors have no
# data) nor a GPU build of Triton runs it. This operator is compiled for CPU tensors: a rule of its own replaces
# triton_op's and keeps it whole, so the compiled graph calls it (on every device). The other triton_ops of the
# process keep their decomposition, which torch._functorch.config.decompose_custom_triton_ops = False would end.
@myaxpy.register_torch_dispatch(FunctionalTensorMode)
def _(mode, func, types, args, kwargs):
    return mode.__torch_dispatch__(func, types, args, kwargs)  # what functional_decomp does with the setting off
