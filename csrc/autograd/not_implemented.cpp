// Autograd for the operators whose derivative is not written yet: myrmsnorm, the in-place myadd_ and
// the view mytranspose. (myadd_inplace has a kernel of its own, see myadd_inplace.cpp.)
//
// Without any Autograd registration, this version of PyTorch lets such an operator take part in a
// graph and only warns at backward time, leaving the inputs' .grad at None: gradients are lost
// silently. The NotImplemented fallback makes the loss loud: outputs keep requires_grad, their grad_fn
// is a NotImplemented node, and backward() raises an error that names the operator.
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, Autograd, m) {
  m.impl("myrmsnorm", torch::autograd::autogradNotImplementedFallback());
  m.impl("myadd_", torch::autograd::autogradNotImplementedFallback());
  m.impl("mytranspose", torch::autograd::autogradNotImplementedFallback());
}
// END registration
