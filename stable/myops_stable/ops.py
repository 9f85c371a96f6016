"""Typed wrappers of the stableops operators, and what the stable C++ API cannot register.

The stable ABI lets C++ define schemas and register boxed kernels for a dispatch key. A fake kernel,
an autograd formula and an autocast rule need ATen types (at::Tensor, torch::autograd::Function,
at::autocast), which are not part of it: here they are registered from Python with torch.library, a
layer that is itself stable across torch releases.
"""
import torch


def myadd(self: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """self + other elementwise (same shape, same floating dtype), computed by the stable C++ kernel."""
    return torch.ops.stableops.myadd.default(self, other)


def mymatmul(self: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """self @ other for two 2-d tensors of the same floating dtype, computed by the stable C++ kernel."""
    return torch.ops.stableops.mymatmul.default(self, other)


# -- checks: the messages of csrc/stable/checks.h, for inputs that never reach C++ (meta, fake) --------
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _dtype_name(dtype: torch.dtype) -> str:
    """c10's name of a dtype ("Float", "BFloat16"), as the C++ checks print it."""
    return torch.empty(0, dtype=dtype).type().removeprefix("torch.").removesuffix("Tensor")


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def _check_binary(op: str, self: torch.Tensor, other: torch.Tensor) -> None:
    if self.device != other.device:
        raise RuntimeError(f"{op}: expected both tensors on the same device, got {self.device} and "
                           f"{other.device}; move one with .to(device)")
    if self.dtype != other.dtype:
        raise RuntimeError(f"{op}: expected tensors of the same dtype, got {_dtype_name(self.dtype)} and "
                           f"{_dtype_name(other.dtype)}; convert one with .to(dtype)")
    if self.dtype not in _FLOATS:
        raise RuntimeError(f"{op}: unsupported dtype {_dtype_name(self.dtype)}; supported are float16, "
                           "bfloat16, float32 and float64, convert with .float()")
    if self.layout != torch.strided or other.layout != torch.strided:
        raise RuntimeError(f"{op}: expected dense (strided) tensors; convert sparse inputs with .to_dense()")


def _check_myadd(self, other):
    if self.shape != other.shape:
        raise RuntimeError(f"stableops::myadd: expected tensors of the same shape, got {_shape(self)} and "
                           f"{_shape(other)}; broadcast them first, e.g. with torch.broadcast_tensors")
    _check_binary("stableops::myadd", self, other)


def _check_mymatmul(self, other):
    if self.dim() != 2 or other.dim() != 2:
        raise RuntimeError(f"stableops::mymatmul: expected two 2-d tensors, got {self.dim()}-d and "
                           f"{other.dim()}-d; reshape them to matrices, or use torch.matmul for batched products")
    if self.shape[1] != other.shape[0]:
        raise RuntimeError(f"stableops::mymatmul: inner dimensions differ: self is {_shape(self)} and other is "
                           f"{_shape(other)}; self.shape[1] must equal other.shape[0]")
    _check_binary("stableops::mymatmul", self, other)


# -- fake kernels: shapes, dtypes and strides without data, for meta tensors, torch.compile and opcheck --
# Like the C++ kernels, they return new contiguous tensors.
@torch.library.register_fake("stableops::myadd")
def myadd_fake(self, other):
    """The fake kernel of stableops::myadd: the C++ kernel's checks, then a new contiguous tensor."""
    _check_myadd(self, other)
    return self.new_empty(self.shape)


@torch.library.register_fake("stableops::mymatmul")
def mymatmul_fake(self, other):
    """The fake kernel of stableops::mymatmul: the C++ kernel's checks, then a new [n, m] tensor."""
    _check_mymatmul(self, other)
    return self.new_empty((self.shape[0], other.shape[1]))


# -- autograd: the derivative formulas; the backward calls the operators themselves, so it is
# differentiable again (double backward) and runs on the stable kernels --------------------------------
def _save_inputs(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def myadd_backward(ctx, grad):
    """d(self + other) = (grad, grad)."""
    return grad, grad


def mymatmul_backward(ctx, grad):
    """d(self @ other) = (grad @ other^T, self^T @ grad), each only when that input needs it."""
    self, other = ctx.saved_tensors
    grad_self = mymatmul(grad, other.t()) if ctx.needs_input_grad[0] else None
    grad_other = mymatmul(self.t(), grad) if ctx.needs_input_grad[1] else None
    return grad_self, grad_other


torch.library.register_autograd("stableops::myadd", myadd_backward)
torch.library.register_autograd("stableops::mymatmul", mymatmul_backward, setup_context=_save_inputs)

# -- autocast: a matrix product runs in the autocast dtype, as torch.matmul does; an elementwise add
# keeps its inputs' dtype (ATen does not list add either) -------------------------------------------
torch.library.register_autocast("stableops::mymatmul", "cpu", torch.bfloat16)
torch.library.register_autocast("stableops::mymatmul", "cuda", torch.float16)
