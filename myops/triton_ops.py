"""myrmsnorm as a Triton kernel, and the three ways to make that kernel an operator (namespace `tritonops`).

    tritonops::myrmsnorm_opaque    torch.library.custom_op whose body launches the kernel: torch.compile sees one
                                   call it cannot look into, and needs a fake kernel to trace it
    tritonops::myrmsnorm           torch.library.triton_op, the kernel launched through wrap_triton: torch.compile
                                   can trace into the body and hand the kernel itself to Inductor
    tritonops::myrmsnorm_portable  the same triton_op plus register_kernel("cpu"): CPU tensors take a PyTorch
                                   fallback, so the operator runs where Triton cannot

All three share one kernel and one launcher, check their inputs as csrc/checks.h checks myops::myrmsnorm, and have
the derivative of `rmsnorm_backward`.

Triton compiles kernels for GPUs. On a machine without one, `TRITON_INTERPRET=1` makes `triton.jit` return an
interpreter instead (it reads the variable when it decorates, so: before this module is imported): each program
of the grid runs one after the other, its block operations done by NumPy on the tensors' CPU memory. It runs the
kernel's logic, masks and all, on CPU tensors; it is no model of speed or of GPU execution (warps, shared memory).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.library import custom_op, triton_op, wrap_triton
from torch.library import CustomOpDef

from myops.python_library import _check_binary_inputs

MAX_BLOCK = 1024  # columns one program reads at once; longer rows take several slices


def interpreted() -> bool:
    """Whether this module's kernel runs under Triton's interpreter (TRITON_INTERPRET=1 when it was imported)."""
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(rmsnorm_kernel, InterpretedFunction)


# BEGIN kernel
@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, cols, x_row_stride, x_col_stride, w_stride, eps,
                   FP64: tl.constexpr, BLOCK: tl.constexpr):
    """One program per row: the sum of squares slice by slice, then the same slices scaled into `out`."""
    acc_type = tl.float64 if FP64 else tl.float32  # float16/bfloat16 accumulate in float32, as ATen does
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * cols  # out is contiguous
    offsets = tl.arange(0, BLOCK)
    squares = tl.zeros([BLOCK], dtype=acc_type)
    for start in range(0, cols, BLOCK):
        col = start + offsets
        mask = col < cols  # the last slice of a row that is not a multiple of BLOCK reads no further
        x = tl.load(x_row + col * x_col_stride, mask=mask, other=0.0).to(acc_type)
        squares += x * x
    scale = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        col = start + offsets
        mask = col < cols
        x = tl.load(x_row + col * x_col_stride, mask=mask, other=0.0).to(acc_type)
        w = tl.load(w_ptr + col * w_stride, mask=mask, other=0.0).to(acc_type)
        tl.store(out_row + col, (x * scale * w).to(out_ptr.dtype.element_ty), mask=mask)
# END kernel


def check_inputs(op: str, self: Tensor, weight: Tensor, eps: float) -> None:
    """csrc/checks.h's check_myrmsnorm_inputs for operator `op`: RuntimeError naming the fix."""
    if self.dim() == 0:
        raise RuntimeError(f"{op}: expected a tensor with at least one dimension, got a 0-d tensor; normalize a "
                           "1-d view of it, e.g. x.reshape(1)")
    if weight.dim() != 1 or weight.shape[0] != self.shape[-1]:
        raise RuntimeError(f"{op}: expected weight of shape [{self.shape[-1]}] (the last dimension of self), got "
                           f"{list(weight.shape)}; pass one weight per element of the last dimension")
    if not eps >= 0:
        raise RuntimeError(f"{op}: eps must be >= 0, got {eps}; pass a small positive eps such as 1e-6")
    _check_binary_inputs(op, self, weight)


# BEGIN launch
def launch(kernel, self: Tensor, weight: Tensor, eps: float) -> Tensor:
    """Run `kernel` (rmsnorm_kernel, or wrap_triton(rmsnorm_kernel)) on every row; the result is contiguous."""
    cols = self.shape[-1]
    x = self.reshape(-1, cols)  # a view where the layout allows (a transposed matrix stays one), else a copy
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    if out.numel() == 0:
        return out
    block = min(MAX_BLOCK, triton.next_power_of_2(cols))
    grid = (x.shape[0],)
    kernel[grid](x, weight, out, cols, x.stride(0), x.stride(1), weight.stride(0), eps,
                 FP64=self.dtype == torch.float64, BLOCK=block)
    return out
# END launch


def fake_kernel(name: str):
    """The fake kernel of operator `name`: the result's shape, dtype and layout, for tracing on tensors without
    data (FakeTensor, meta); it checks the inputs as the kernel does, so tracing fails where running would."""

    def fake(self: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
        check_inputs(name, self, weight, eps)
        return torch.empty(self.shape, dtype=self.dtype, device=self.device)

    return fake


def reference(self: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """The same normalization in PyTorch operators, accumulating in float32 or float64 like the kernel."""
    acc = torch.float64 if self.dtype == torch.float64 else torch.float32
    x = self.to(acc)
    out = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight.to(acc)
    return out.to(self.dtype).contiguous()  # the kernel's layout, whatever the input's


# -- autograd: one derivative for all three operators ------------------------------------------------------------
def setup_context(ctx, inputs, output) -> None:
    self, weight, eps = inputs
    ctx.save_for_backward(self, weight)
    ctx.eps = eps


def rmsnorm_backward(ctx, grad: Tensor):
    """d/dx and d/dweight of x * r * w, r = 1 / sqrt(mean(x^2) + eps) per row (PyTorch operators, float32 or
    float64)."""
    self, weight = ctx.saved_tensors
    acc = torch.float64 if self.dtype == torch.float64 else torch.float32
    x, w, g = self.to(acc), weight.to(acc), grad.to(acc)
    r = torch.rsqrt(x.square().mean(-1, keepdim=True) + ctx.eps)
    gw = g * w
    grad_x = r * gw - x * r.pow(3) * (gw * x).mean(-1, keepdim=True)
    grad_w = (g * x * r).reshape(-1, x.shape[-1]).sum(0)
    return grad_x.to(self.dtype), grad_w.to(weight.dtype), None


def as_triton_op(name: str, kernel=rmsnorm_kernel) -> CustomOpDef:
    """A triton_op named `name` that launches `kernel` through wrap_triton; no registrations beyond triton_op's
    own (its body is its fake kernel too)."""

    # BEGIN triton_op
    @triton_op(name, mutates_args=())
    def op(self: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
        check_inputs(name, self, weight, eps)
        return launch(wrap_triton(kernel), self, weight, eps)
    # END triton_op

    return op


# BEGIN opaque
@custom_op("tritonops::myrmsnorm_opaque", mutates_args=())
def myrmsnorm_opaque(self: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """The kernel launched from a plain custom operator: compile sees the call, not the kernel."""
    check_inputs("tritonops::myrmsnorm_opaque", self, weight, eps)
    return launch(rmsnorm_kernel, self, weight, eps)
# END opaque


# BEGIN registrations
myrmsnorm = as_triton_op("tritonops::myrmsnorm")
myrmsnorm_portable = as_triton_op("tritonops::myrmsnorm_portable")
OPERATORS = {"tritonops::myrmsnorm_opaque": myrmsnorm_opaque, "tritonops::myrmsnorm": myrmsnorm,
             "tritonops::myrmsnorm_portable": myrmsnorm_portable}
for _name, _op in OPERATORS.items():
    _op.register_autograd(rmsnorm_backward, setup_context=setup_context)
    # custom_op has no fake kernel of its own; triton_op's is its body, which touches data when interpreted.
    _op.register_fake(fake_kernel(_name))


# CPU tensors take PyTorch operators; every other device still runs the Triton kernel.
@myrmsnorm_portable.register_kernel("cpu")
def _myrmsnorm_cpu(self: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    check_inputs("tritonops::myrmsnorm_portable", self, weight, eps)
    return reference(self, weight, eps)
# END registrations


def compiled_kernel():
    """rmsnorm_kernel as triton.jit makes it without the interpreter (for a GPU), also where this module's is
    interpreted: tracing it shows what torch.compile hands Inductor on a GPU."""
    return triton.JITFunction(rmsnorm_kernel.fn) if interpreted() else rmsnorm_kernel


def cpu_calls() -> dict[str, str]:
    """What each operator does on CPU tensors in this process: "ok", or the first line of its error."""
    x, w = torch.ones(2, 8), torch.ones(8)
    results = {}
    for name, op in OPERATORS.items():
        try:
            torch.testing.assert_close(op(x, w), reference(x, w))
            results[name] = "ok"
        except RuntimeError as error:
            results[name] = str(error).splitlines()[0]
    return results


if __name__ == "__main__":  # python -m myops.triton_ops: the three operators on CPU tensors, in a fresh process
    print(f"interpreted: {interpreted()}")
    for name, outcome in cpu_calls().items():
        print(f"{name:<30} {outcome}")
