"""myadd and mymatmul again, written in Python with `torch.library`, in their own namespace `pyops`.

The same contracts as the C++ operators of myops (same checks, messages in the same form), one registration per
layer of the C++ course:

    C++ (csrc/)                              Python (this file)
    schema.cpp    TORCH_LIBRARY              @torch.library.custom_op: the schema comes from the type hints
    cpu/, cuda/   TORCH_LIBRARY_IMPL CPU...  the decorated function: one kernel for every device
    meta/         TORCH_LIBRARY_IMPL Meta    register_fake
    autograd/     torch::autograd::Function  register_autograd (backward + setup_context)
    autocast/     AutocastCPU, AutocastCUDA  register_autocast
    myops/vmap.py register_vmap              register_vmap, with the same rules

Importing this module registers everything; Python caches the module, so importing it again registers nothing.
(Running the file again, e.g. with importlib.reload, is allowed too: custom_op replaces an operator of the same
name together with everything registered for it, where a second C++ TORCH_LIBRARY aborts the process.)
"""
import torch
import torch.autograd.forward_ad as fwAD
from torch import Tensor

from myops import vmap

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# The checks of csrc/checks.h. They raise RuntimeError, as TORCH_CHECK does, so that callers handle both
# stacks alike. The kernels and the fake kernels run them: tracing fails exactly where running would.
def _check_binary_inputs(op: str, self: Tensor, other: Tensor) -> None:
    if self.device != other.device:
        raise RuntimeError(f"{op}: expected both tensors on the same device, got {self.device} and "
                           f"{other.device}; move one with .to(device)")
    if self.dtype != other.dtype:
        raise RuntimeError(f"{op}: expected tensors of the same dtype, got {self.dtype} and {other.dtype}; "
                           "convert one with .to(dtype)")
    if self.dtype not in _FLOAT_DTYPES:
        raise RuntimeError(f"{op}: unsupported dtype {self.dtype}; supported are float16, bfloat16, float32 and "
                           "float64, convert with .float()")
    if self.layout != torch.strided or other.layout != torch.strided:
        raise RuntimeError(f"{op}: expected dense (strided) tensors; convert sparse inputs with .to_dense()")


def _refuse_tangents(op: str, *tensors: Tensor) -> None:
    # custom_op's autograd has no forward-mode formula on torch 2.14: an output would carry no tangent, which
    # forward mode (torch.func.jvp, torch.autograd.forward_ad) reads as a zero derivative. Refuse instead.
    # The C++ kernels attach the tangent themselves (csrc/autograd/myadd.cpp).
    if fwAD._current_level >= 0 and any(fwAD.unpack_dual(t).tangent is not None for t in tensors):
        raise RuntimeError(f"{op}: forward-mode AD is not supported by this Python operator; use the C++ operator "
                           f"myops::{op.split('::')[1]}, or reverse mode (backward, torch.autograd.grad)")


def check_myadd_inputs(self: Tensor, other: Tensor) -> None:
    """The checks of pyops::myadd (csrc/checks.h's for myops::myadd): raise RuntimeError naming the fix."""
    if self.shape != other.shape:
        raise RuntimeError(f"pyops::myadd: expected tensors of the same shape, got {list(self.shape)} and "
                           f"{list(other.shape)}; broadcast them first, e.g. with torch.broadcast_tensors")
    _check_binary_inputs("pyops::myadd", self, other)


def check_mymatmul_inputs(self: Tensor, other: Tensor) -> None:
    """The checks of pyops::mymatmul (csrc/checks.h's for myops::mymatmul): raise RuntimeError naming the fix."""
    if self.dim() != 2 or other.dim() != 2:
        raise RuntimeError(f"pyops::mymatmul: expected two 2-d tensors, got {self.dim()}-d and {other.dim()}-d; "
                           "reshape them to matrices, or use torch.matmul for batched products")
    if self.shape[1] != other.shape[0]:
        raise RuntimeError(f"pyops::mymatmul: inner dimensions differ: self is {list(self.shape)} and other is "
                           f"{list(other.shape)}; self.shape[1] must equal other.shape[0]")
    _check_binary_inputs("pyops::mymatmul", self, other)


# -- schema and kernel ---------------------------------------------------------------------------------------------
# custom_op defines the operator (schema "pyops::myadd(Tensor self, Tensor other) -> Tensor", read from the type
# hints) and registers the function as its kernel for every device (CompositeExplicitAutograd). It must return
# a new tensor: an output that aliases an input is an error for a custom_op. Like the C++ kernel, it returns a
# contiguous tensor whatever the inputs' strides, so the fake kernel can promise exactly that.
@torch.library.custom_op("pyops::myadd", mutates_args=())
def myadd(self: Tensor, other: Tensor) -> Tensor:
    """Elementwise sum of two tensors of the same shape and floating dtype (pyops::myadd)."""
    check_myadd_inputs(self, other)
    _refuse_tangents("pyops::myadd", self, other)
    return torch.add(self, other).contiguous()  # copies only when the inputs' layout made it non-contiguous


@torch.library.custom_op("pyops::mymatmul", mutates_args=())
def mymatmul(self: Tensor, other: Tensor) -> Tensor:
    """Matrix product of two 2-d tensors of the same floating dtype (pyops::mymatmul)."""
    check_mymatmul_inputs(self, other)
    _refuse_tangents("pyops::mymatmul", self, other)
    return torch.mm(self, other)  # a new, contiguous [n, m] tensor (zeros when the inner dimension is 0)


# -- fake (Meta) ---------------------------------------------------------------------------------------------------
# What torch.compile, FakeTensor and opcheck run instead of the kernel: same checks, the output's shape, dtype,
# device and strides, no data.
@myadd.register_fake
def myadd_fake(self: Tensor, other: Tensor) -> Tensor:
    """The fake (Meta) kernel of pyops::myadd: the checks, then an output of the right metadata, no data."""
    check_myadd_inputs(self, other)
    return self.new_empty(self.shape)


@mymatmul.register_fake
def mymatmul_fake(self: Tensor, other: Tensor) -> Tensor:
    """The fake (Meta) kernel of pyops::mymatmul: the checks, then an [n, m] output, no data."""
    check_mymatmul_inputs(self, other)
    return self.new_empty((self.shape[0], other.shape[1]))


# -- autograd ------------------------------------------------------------------------------------------------------
# The C++ layer writes a torch::autograd::Function that calls the operator again under a guard. Here torch builds
# the Function, which redispatches below autograd inside a guard; we give only the derivative, and setup_context to
# save what it needs.
# On torch 2.14 the Function it builds has no setup_context staticmethod, so torch.func.grad/vjp/jacrev refuse
# it, as they refuse the C++ one (pytorch/pytorch#168393); plain autograd, torch.compile and torch.vmap work.
def myadd_backward(ctx, grad: Tensor):
    """The derivative of pyops::myadd, registered with register_autograd."""
    return grad, grad  # d(self + other) = grad for both; nothing saved, so no setup_context


def mymatmul_setup_context(ctx, inputs, output) -> None:
    """Saves both inputs for mymatmul_backward."""
    ctx.save_for_backward(*inputs)


def mymatmul_backward(ctx, grad: Tensor):
    """The derivative of pyops::mymatmul, registered with register_autograd."""
    # out = A B  =>  dA = grad B^T,  dB = A^T grad. Computed with the operator itself, so that a second
    # differentiation (create_graph=True) goes through this same autograd registration.
    self, other = ctx.saved_tensors
    grad_self = mymatmul(grad, other.t()) if ctx.needs_input_grad[0] else None
    grad_other = mymatmul(self.t(), grad) if ctx.needs_input_grad[1] else None
    return grad_self, grad_other


myadd.register_autograd(myadd_backward)
mymatmul.register_autograd(mymatmul_backward, setup_context=mymatmul_setup_context)

# -- autocast ------------------------------------------------------------------------------------------------------
# Under torch.autocast, cast floating inputs (not float64) of that device, then run with autocast off: mymatmul in
# lower precision like ATen's matmul. Unlike the C++ wrapper, the dtype is fixed here, not the region's.
mymatmul.register_autocast("cpu", torch.bfloat16)
mymatmul.register_autocast("cuda", torch.float16)

# -- vmap ----------------------------------------------------------------------------------------------------------
# The batching rules of the C++ operators, given these operators: one call per vmap instead of one per element.
myadd.register_vmap(vmap.elementwise_rule(myadd))
mymatmul.register_vmap(vmap.matmul_rule(mymatmul))
