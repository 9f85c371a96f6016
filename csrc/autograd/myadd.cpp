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
#include <ATen/ops/zeros_like.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "autograd/forward_ad.h"
#include "myops.h"
#include "trace.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// BEGIN function
// Runs the operator with the autograd keys excluded: the forward of the Function, and the whole call
// when there is nothing to record.
at::Tensor myadd_below_autograd(const at::Tensor& self, const at::Tensor& other) {
  at::AutoDispatchBelowADInplaceOrView guard;  // See NOTE [ Why the autograd kernel excludes itself ]
  return myops::myadd(self, other);
}

class MyAddFunction : public torch::autograd::Function<MyAddFunction> {
 public:
  static at::Tensor forward(AutogradContext* /*ctx*/, const at::Tensor& self, const at::Tensor& other) {
    return myadd_below_autograd(self, other);
  }

  // d(self + other) = grad for both inputs.
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grad_outputs) {
    return {grad_outputs[0], grad_outputs[0]};
  }
};
// END function

// BEGIN forward_ad
// NOTE [ Forward-mode AD in a custom autograd kernel ]
// Forward mode (torch.autograd.forward_ad, torch.func.jvp) carries a tangent on each tensor instead of
// recording a graph. torch::autograd::Function has no jvp, so the kernel attaches the output's tangent
// itself. Without this the output would have no tangent, which forward mode reads as a zero
// derivative: a silently wrong result. (self + other)' = self' + other'.
at::Tensor with_tangent(at::Tensor out, const at::Tensor& self, const at::Tensor& other) {
  const at::Tensor& self_t = self._fw_grad(myops::kForwardLevel);
  const at::Tensor& other_t = other._fw_grad(myops::kForwardLevel);
  if (self_t.defined() || other_t.defined()) {
    out._set_fw_grad(myops::myadd(self_t.defined() ? self_t : at::zeros_like(other_t),
                                  other_t.defined() ? other_t : at::zeros_like(self_t)),
                     myops::kForwardLevel, /*is_inplace_op=*/false);
  }
  return out;
}
// END forward_ad

// BEGIN kernel
at::Tensor myadd_autograd(const at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::Autograd);
  // Nothing to record: skip the graph node that apply() would build and throw away.
  // Otherwise apply() records it and returns the forward's Tensor: not a list to index.
  const bool record = at::GradMode::is_enabled() && (self.requires_grad() || other.requires_grad());
  at::Tensor out = record ? MyAddFunction::apply(myops::without_tangent(self), myops::without_tangent(other))
                          : myadd_below_autograd(self, other);
  return with_tangent(out, self, other);  // outside any guard: forward mode is an autograd feature
}
// END kernel

}  // namespace

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, Autograd, m) {
  m.impl("myadd", &myadd_autograd);
}
// END registration
