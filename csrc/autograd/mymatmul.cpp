// The autograd kernel of myops::mymatmul. Its backward computes with myops::mymatmul itself, through
// the dispatcher: when the gradient is being differentiated again (create_graph=True), those calls
// land in this same autograd kernel and record their own nodes, so double backward works.
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "autograd/forward_ad.h"
#include "myops.h"
#include "trace.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// BEGIN function
class MyMatmulFunction : public torch::autograd::Function<MyMatmulFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Tensor& other) {
    ctx->save_for_backward({self, other});
    at::AutoDispatchBelowADInplaceOrView guard;  // See NOTE [ Why the autograd kernel excludes itself ]
    return myops::mymatmul(self, other);
  }

  // out = A B  =>  dA = grad B^T,  dB = A^T grad. Only the gradients that are needed are computed.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& self = saved[0];
    const at::Tensor& other = saved[1];
    const at::Tensor& grad = grad_outputs[0];
    at::Tensor grad_self, grad_other;
    if (ctx->needs_input_grad(0)) {
      grad_self = myops::mymatmul(grad, other.t());
    }
    if (ctx->needs_input_grad(1)) {
      grad_other = myops::mymatmul(self.t(), grad);
    }
    return {grad_self, grad_other};
  }
};
// END function

// Forward mode: (A B)' = A' B + A B', on the primals (the values without their tangents).
// See NOTE [ Forward-mode AD in a custom autograd kernel ] in myadd.cpp.
at::Tensor with_tangent(at::Tensor out, const at::Tensor& self, const at::Tensor& other) {
  const at::Tensor& self_t = self._fw_grad(myops::kForwardLevel);
  const at::Tensor& other_t = other._fw_grad(myops::kForwardLevel);
  if (!self_t.defined() && !other_t.defined()) {
    return out;
  }
  at::Tensor tangent;
  if (self_t.defined()) {
    tangent = myops::mymatmul(self_t, other._fw_primal(myops::kForwardLevel));
  }
  if (other_t.defined()) {
    at::Tensor term = myops::mymatmul(self._fw_primal(myops::kForwardLevel), other_t);
    tangent = tangent.defined() ? myops::myadd(tangent, term) : term;
  }
  out._set_fw_grad(tangent, myops::kForwardLevel, /*is_inplace_op=*/false);
  return out;
}

at::Tensor mymatmul_below_autograd(const at::Tensor& self, const at::Tensor& other) {
  at::AutoDispatchBelowADInplaceOrView guard;  // See NOTE [ Why the autograd kernel excludes itself ]
  return myops::mymatmul(self, other);
}

at::Tensor mymatmul_autograd(const at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::Autograd);
  const bool record = at::GradMode::is_enabled() && (self.requires_grad() || other.requires_grad());
  at::Tensor out = record ? MyMatmulFunction::apply(myops::without_tangent(self), myops::without_tangent(other))
                          : mymatmul_below_autograd(self, other);
  return with_tangent(out, self, other);  // outside any guard, see myadd.cpp
}

}  // namespace

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, Autograd, m) {
  m.impl("mymatmul", &mymatmul_autograd);
}
// END registration
