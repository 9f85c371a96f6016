// Solution of exercise 13 (notebook 13_migrating_from_2020): the 2020-style operator, brought up to date.
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
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& self, const at::Tensor& other) {
    ctx->save_for_backward({self, other});
    at::AutoDispatchBelowADInplaceOrView guard;  // 2. was at::AutoNonVariableTypeMode
    return mymul(self, other);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    return {mymul(grad_outputs[0], saved[1]), mymul(grad_outputs[0], saved[0])};
  }
};

at::Tensor mymul_autograd(const at::Tensor& self, const at::Tensor& other) {
  return MyMulFunction::apply(self, other);  // 3. was apply(...)[0]: row 0 of the product
}

// 4. One template for both autocast keys, each with its own device type for cached_cast.
template <c10::DispatchKey kAutocastKey, c10::DeviceType kDevice>
at::Tensor mymul_autocast(const at::Tensor& self, const at::Tensor& other) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocastKey);
  const at::ScalarType dtype = at::autocast::get_lower_precision_fp_from_device_type(kDevice);
  return mymul(at::autocast::cached_cast(dtype, self, kDevice), at::autocast::cached_cast(dtype, other, kDevice));
}

}  // namespace

// 1. The schema alone: kernels go to their keys, so Meta and CUDA tensors are not handed to a CPU kernel.
TORCH_LIBRARY(ex13, m) {
  m.def("mymul(Tensor self, Tensor other) -> Tensor");
}

TORCH_LIBRARY_IMPL(ex13, CPU, m) {
  m.impl("mymul", &mymul_cpu);
}

TORCH_LIBRARY_IMPL(ex13, Autograd, m) {
  m.impl("mymul", &mymul_autograd);
}

TORCH_LIBRARY_IMPL(ex13, AutocastCPU, m) {
  m.impl("mymul", &mymul_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
}

TORCH_LIBRARY_IMPL(ex13, AutocastCUDA, m) {
  m.impl("mymul", &mymul_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
}
