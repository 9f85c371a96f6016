// Exercise 07 (notebook 07_autocast): an AutocastCPU wrapper with the fp32 policy, for a reduction.
// Checked by myops/exercises/ex07_autocast.py.
//
// ex07::mynorm(self) = sqrt(sum(self^2)), the 2-norm of all elements, has its schema, CPU kernel and dispatch
// function given. The kernel returns the dtype of its input. Under torch.autocast("cpu") a bfloat16 result
// of a sum of squares keeps 8 significant bits: a reduction is one of the operators that autocast runs in
// float32 (the "fp32 policy": on CPU e.g. ATen's prod and mse_loss, on CUDA also sum, norm and softmax), not in
// the lower precision.
// Your part:
//   1. mynorm_autocast_cpu: exclude the AutocastCPU key for the call it makes (c10::impl::ExcludeDispatchKeyGuard),
//      cast the input to float32 with `at::autocast::cached_cast(at::kFloat, self, <the device type>)`, and call
//      the dispatch function ex07::mynorm. (cached_cast leaves float64 and non-floating tensors alone.)
//   2. Register it on the AutocastCPU key in the TORCH_LIBRARY_IMPL block at the end.
// Check your answer with:  python -m myops.exercises check 07
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

// Given: the CPU kernel, in the input's dtype.
at::Tensor mynorm_cpu(const at::Tensor& self) {
  return at::sqrt(at::sum(at::mul(self, self), self.scalar_type()));
}

at::Tensor mynorm_autocast_cpu(const at::Tensor& self) {
  // TODO
  TORCH_CHECK(false, "not solved yet: write mynorm_autocast_cpu in exercises/07_autocast/mynorm.cpp");
}

}  // namespace

TORCH_LIBRARY_IMPL(ex07, CPU, m) {
  m.impl("mynorm", &mynorm_cpu);
}

TORCH_LIBRARY_IMPL(ex07, AutocastCPU, m) {
  // TODO: register mynorm_autocast_cpu as the kernel of "mynorm" here.
}
