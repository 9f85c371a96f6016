// Exercise 13 (notebook 13_migrating_from_2020): bring a 2020-style operator up to date.
// Checked by myops/exercises/ex13_migrating_from_2020.py.
//
// This file follows the 2020 tutorial's op.cpp and its autocast example, plus the one shortcut the tutorial
// warned against. It compiles and runs on PyTorch 2.14, and it is wrong in four ways that no compiler reports
// (notebook 13 shows each):
//   1. the kernel is passed to def(): a catch-all, the shortcut the 2020 tutorial warned against; PyTorch 2.14
//      files it under CompositeImplicitAutograd, so it serves every backend (Meta and CUDA tensors included)
//      instead of the CPU key;
//   2. the autograd kernel's guard is the deprecated at::AutoNonVariableTypeMode (it warns at run time);
//   3. the autograd kernel returns apply(...)[0]: apply() returns a Tensor, and [0] is its first row (a bug
//      already in 2020);
//   (2 and 3 show only once 1 is fixed: the catch-all's CompositeImplicitAutograd kernel fills AutogradCPU
//   ahead of the Autograd kernel, so mymul_autograd never runs while it is there)
//   4. the autocast wrapper sits on the `Autocast` key, which is AutocastCUDA, and calls cached_cast without a
//      device type (its default is CUDA): in 2020 autocast existed only for CUDA; today, on CPU, the wrapper
//      never runs and would cast nothing. Its guard names the same key: registered on AutocastCPU, the wrapper
//      still runs `c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::Autocast);`, which
//      excludes AutocastCUDA only, so its call to mymul() reaches AutocastCPU, the wrapper itself, again and
//      again until the stack overflows: the guard must exclude the key the wrapper is registered on.
// Fix all four. The wanted behaviour: ex13::mymul(self, other) = self * other, its CPU kernel on the CPU key,
// correct gradients, no run-time warning, and under torch.autocast("cpu") the product runs in the autocast
// dtype (at::autocast::get_lower_precision_fp_from_device_type(c10::DeviceType::CPU), bfloat16 by default).
// Check your answer with:  python -m myops.exercises check 13
#include <ATen/autocast_mode.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mul.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

namespace {

at::Tensor mymul(const at::Tensor& self, const at::Tensor& other) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("ex13::mymul", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(self, other);
}

at::Tensor mymul_cpu(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.sizes() == other.sizes(), "ex13::mymul: expected tensors of the same shape, got ",
              self.sizes(), " and ", other.sizes());
  return at::mul(self, other);
}

class MyMulFunction : public torch::autograd::Function<MyMulFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::Tensor self, at::Tensor other) {
    ctx->save_for_backward({self, other});
    at::AutoNonVariableTypeMode g;
    return mymul(self, other);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    return {mymul(grad_outputs[0], saved[1]), mymul(grad_outputs[0], saved[0])};
  }
};

at::Tensor mymul_autograd(const at::Tensor& self, const at::Tensor& other) {
  return MyMulFunction::apply(self, other)[0];
}

at::Tensor mymul_autocast(const at::Tensor& self, const at::Tensor& other) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::Autocast);
  return mymul(at::autocast::cached_cast(at::kHalf, self), at::autocast::cached_cast(at::kHalf, other));
}

}  // namespace

TORCH_LIBRARY(ex13, m) {
  m.def("mymul(Tensor self, Tensor other) -> Tensor", &mymul_cpu);
}

TORCH_LIBRARY_IMPL(ex13, Autograd, m) {
  m.impl("mymul", mymul_autograd);
}

TORCH_LIBRARY_IMPL(ex13, Autocast, m) {
  m.impl("mymul", mymul_autocast);
}
