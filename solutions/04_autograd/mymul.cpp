// Solution of exercise 04 (notebook 04_autograd): the autograd kernel of ex04::mymul.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mul.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

TORCH_LIBRARY(ex04, m) {
  m.def("mymul(Tensor self, Tensor other) -> Tensor");
}

namespace ex04 {

at::Tensor mymul(const at::Tensor& self, const at::Tensor& other) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("ex04::mymul", /*overload_name=*/"")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(self, other);
}

}  // namespace ex04

namespace {

at::Tensor mymul_cpu(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.sizes() == other.sizes(), "ex04::mymul: expected tensors of the same shape, got ",
              self.sizes(), " and ", other.sizes());
  return at::mul(self, other);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class MyMulFunction : public torch::autograd::Function<MyMulFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Tensor& other) {
    ctx->save_for_backward({self, other});
    // The guard excludes the autograd keys (and ADInplaceOrView, which a functional op does not need) until
    // forward returns: this call, and any call the CPU kernel makes, goes on below autograd instead of back to
    // mymul_autograd.
    at::AutoDispatchBelowADInplaceOrView guard;
    return ex04::mymul(self, other);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& grad = grad_outputs[0];
    // Written with the operator itself, so the backward is differentiable too (double backward).
    return {ex04::mymul(grad, saved[1]), ex04::mymul(grad, saved[0])};
  }
};

at::Tensor mymul_autograd(const at::Tensor& self, const at::Tensor& other) {
  return MyMulFunction::apply(self, other);  // a Tensor: the forward's return type, not a list
}

}  // namespace

TORCH_LIBRARY_IMPL(ex04, CPU, m) {
  m.impl("mymul", &mymul_cpu);
}

// The alias key: one registration fills AutogradCPU, AutogradCUDA and every other Autograd<Backend>.
TORCH_LIBRARY_IMPL(ex04, Autograd, m) {
  m.impl("mymul", &mymul_autograd);
}
