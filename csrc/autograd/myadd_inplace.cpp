// The Autograd kernel of myops::myadd_inplace, written by hand.
//
// The NotImplemented fallback attaches its error node only to tensors an operator returns; this one
// returns nothing, so under the fallback a mutation of a tensor that requires grad would go unseen and
// gradients would be silently wrong. Until a real derivative is written, refuse that case with an
// error that names the operator, and otherwise run the operator below autograd.
#include <ATen/core/grad_mode.h>
#include <torch/library.h>

#include "myops.h"
#include "trace.h"

namespace {

// BEGIN kernel
void myadd_inplace_autograd(c10::DispatchKeySet keys, at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::Autograd);
  TORCH_CHECK(!(at::GradMode::is_enabled() && (self.requires_grad() || other.requires_grad())),
              "myops::myadd_inplace: autograd through this in-place operator is not implemented; "
              "call it under torch.no_grad(), or use myops.myadd where gradients are needed");
  myops::myadd_inplace_op().redispatch(keys & c10::after_autograd_keyset, self, other);
}
// END kernel

}  // namespace

TORCH_LIBRARY_IMPL(myops, Autograd, m) {
  m.impl("myadd_inplace", &myadd_inplace_autograd);
}
