"""Solution of exercise 11 (notebook 11_python_torch_library): ex11::myrmsnorm with torch.library."""
import torch
from torch import Tensor


def _check_weight(self: Tensor, weight: Tensor) -> None:
    torch._check(weight.dim() == 1 and weight.shape[0] == self.shape[-1],
                 lambda: f"ex11::myrmsnorm: expected weight of shape [{self.shape[-1]}], got {list(weight.shape)}")


@torch.library.custom_op("ex11::myrmsnorm", mutates_args=())
def myrmsnorm(self: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    _check_weight(self, weight)  # a weight of another shape would broadcast: a wrong answer, not an error
    return self * torch.rsqrt(self.square().mean(-1, keepdim=True) + eps) * weight


@myrmsnorm.register_fake
def _(self, weight, eps=1e-6):
    _check_weight(self, weight)  # the fake kernel refuses what the kernel refuses
    return torch.empty_like(self)


def _setup_context(ctx, inputs, output):
    self, weight, eps = inputs
    ctx.save_for_backward(self, weight)
    ctx.eps = eps


def _backward(ctx, grad):
    x, weight = ctx.saved_tensors
    r = torch.rsqrt(x.square().mean(-1, keepdim=True) + ctx.eps)
    gw = grad * weight
    grad_x = r * gw - x * r**3 * (x * gw).mean(-1, keepdim=True)
    grad_weight = (grad * x * r).reshape(-1, x.shape[-1]).sum(0)
    return grad_x, grad_weight, None  # eps is a float: no gradient


myrmsnorm.register_autograd(_backward, setup_context=_setup_context)
