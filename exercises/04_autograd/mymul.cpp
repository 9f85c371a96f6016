// Exercise 04 (notebook 04_autograd): an autograd kernel that calls its operator again under the right guard.
// Checked by myops/exercises/ex04_autograd.py.
//
// ex03's elementwise product again, as ex04::mymul: its schema, CPU kernel and dispatch function are given.
// Your part:
//   1. MyMulFunction::forward: save both inputs for backward, then compute the product by calling the
//      dispatch function ex04::mymul *below autograd*: under a guard that excludes the autograd keys (for
//      an out-of-place operator, at::AutoDispatchBelowADInplaceOrView). Without it the call comes straight
//      back to this kernel, forever.
//   2. MyMulFunction::backward: one gradient per input: d(self * other) = (grad * other, grad * self),
//      with differentiable operations (ex04::mymul or at::mul) outside any guard, so that the gradient can
//      itself be differentiated (double backward).
//   3. Register mymul_autograd on the Autograd alias key in the TORCH_LIBRARY_IMPL block at the end.
// Check your answer with:  python -m myops.exercises check 04
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

// The dispatch function: enters the dispatcher, which picks the kernel from the arguments' keys.
at::Tensor mymul(const at::Tensor& self, const at::Tensor& other) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("ex04::mymul", /*overload_name=*/"")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(self, other);
}

}  // namespace ex04

namespace {

// Given: the CPU kernel (ATen does the arithmetic; the exercise is the autograd kernel).
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
    // TODO: save the inputs, then call ex04::mymul under the guard.
    TORCH_CHECK(false, "not solved yet: write MyMulFunction::forward in exercises/04_autograd/mymul.cpp");
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    // TODO: return {gradient for self, gradient for other}.
    TORCH_CHECK(false, "not solved yet: write MyMulFunction::backward in exercises/04_autograd/mymul.cpp");
  }
};

at::Tensor mymul_autograd(const at::Tensor& self, const at::Tensor& other) {
  return MyMulFunction::apply(self, other);
}

}  // namespace

TORCH_LIBRARY_IMPL(ex04, CPU, m) {
  m.impl("mymul", &mymul_cpu);
}

TORCH_LIBRARY_IMPL(ex04, Autograd, m) {
  // TODO: register mymul_autograd as the kernel of "mymul" here.
}
