"""Exercise 11 (notebook 11_python_torch_library): a whole operator stack in Python with torch.library.

Checked by myops/exercises/ex11_python_torch_library.py.

Write ex11::myrmsnorm, out = self / sqrt(mean(self^2, last dim) + eps) * weight, as a Python custom operator:
  1. the kernel, decorated with torch.library.custom_op("ex11::myrmsnorm", mutates_args=()); the schema
     `(Tensor self, Tensor weight, float eps=1e-06) -> Tensor` comes from the type hints and the default;
  2. a fake kernel (@myrmsnorm.register_fake) for torch.compile and opcheck: an output with the shape, dtype
     and strides the kernel's has (e.g. torch.empty_like(self), for a kernel computed elementwise from self;
     opcheck also passes a transposed self, where new_empty(self.shape) has the wrong strides). Both
     kernels refuse a weight whose shape is not [self.shape[-1]] (torch._check), rather than broadcast it;
  3. autograd (myrmsnorm.register_autograd(backward, setup_context=...)), with r = 1 / sqrt(mean(x^2) + eps):
       d self   = r * (g * weight) - self * r^3 * mean(self * g * weight, last dim, keepdim)
       d weight = sum over every dimension but the last of g * self * r
Check your answer with:  python -m myops.exercises check 11
"""
import torch
from torch import Tensor


@torch.library.custom_op("ex11::myrmsnorm", mutates_args=())
def myrmsnorm(self: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    raise NotImplementedError("not solved yet: write ex11::myrmsnorm in exercises/11_python_torch_library/myrmsnorm.py")


# TODO: the fake kernel.

# TODO: the autograd registration.
