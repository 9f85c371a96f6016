// Solution of exercise 07 (notebook 07_autocast): ex07::mynorm runs in float32 under CPU autocast.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sum.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

TORCH_LIBRARY(ex07, m) {
  m.def("mynorm(Tensor self) -> Tensor");
}

namespace ex07 {

at::Tensor mynorm(const at::Tensor& self) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("ex07::mynorm", /*overload_name=*/"")
                             .typed<at::Tensor(const at::Tensor&)>();
  return op.call(self);
}

}  // namespace ex07

namespace {

at::Tensor mynorm_cpu(const at::Tensor& self) {
  return at::sqrt(at::sum(at::mul(self, self), self.scalar_type()));
}

at::Tensor mynorm_autocast_cpu(const at::Tensor& self) {
  // Without the exclusion the call below would come back here, forever.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  // The device type is not optional in effect: cached_cast's default is CUDA, which casts nothing on CPU.
  return ex07::mynorm(at::autocast::cached_cast(at::kFloat, self, c10::DeviceType::CPU));
}

}  // namespace

TORCH_LIBRARY_IMPL(ex07, CPU, m) {
  m.impl("mynorm", &mynorm_cpu);
}

// AutocastCPU, not Autocast: the old name is the CUDA key, which CPU tensors never reach.
TORCH_LIBRARY_IMPL(ex07, AutocastCPU, m) {
  m.impl("mynorm", &mynorm_autocast_cpu);
}
