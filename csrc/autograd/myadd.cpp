// The autograd kernel of myops::myadd, registered on the Autograd alias key (which stands for
// AutogradCPU, AutogradCUDA, ... : one kernel for every backend).
//
// BEGIN note
// NOTE [ Why the autograd kernel excludes itself ]
// The kernel records a node in the autograd graph, then must run the operator *below* autograd. It
// does so by calling the dispatch function again with the autograd keys (and ADInplaceOrView)
// excluded for the current thread, via at::AutoDispatchBelowADInplaceOrView. Without the guard the
// call would dispatch straight back to this kernel, forever.
// END note
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "myops.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// BEGIN function
class MyAddFunction : public torch::autograd::Function<MyAddFunction> {
 public:
  static at::Tensor forward(AutogradContext* /*ctx*/, const at::Tensor& self, const at::Tensor& other) {
    at::AutoDispatchBelowADInplaceOrView guard;  // See NOTE [ Why the autograd kernel excludes itself ]
    return myops::myadd(self, other);
  }

  // d(self + other) = grad for both inputs.
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grad_outputs) {
    return {grad_outputs[0], grad_outputs[0]};
  }
};
// END function

// BEGIN kernel
at::Tensor myadd_autograd(const at::Tensor& self, const at::Tensor& other) {
  if (!at::GradMode::is_enabled() || !(self.requires_grad() || other.requires_grad())) {
    // Nothing to record: skip building a graph node (a third of the cost of a call on tiny tensors).
    at::AutoDispatchBelowADInplaceOrView guard;
    return myops::myadd(self, other);
  }
  // apply() returns the forward's Tensor itself, with its grad_fn set: not a list to index.
  return MyAddFunction::apply(self, other);
}
// END kernel

}  // namespace

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, Autograd, m) {
  m.impl("myadd", &myadd_autograd);
}
// END registration
