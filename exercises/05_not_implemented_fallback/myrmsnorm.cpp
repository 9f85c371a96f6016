// Exercise 05 (notebook 05_not_implemented_fallback): replace the NotImplemented fallback by a real
// autograd kernel, once the derivative is known.
// Checked by myops/exercises/ex05_not_implemented_fallback.py.
//
// ex05::myrmsnorm(self, weight, eps) = self * r * weight, with r = 1 / sqrt(mean(self^2, last dim) + eps),
// has its schema, CPU kernel and dispatch function given. Its Autograd key holds
// autogradNotImplementedFallback(): backward raises "derivative for ex05::myrmsnorm is not implemented".
// Your part:
//   1. MyRMSNormFunction::forward: save what backward needs, then call the dispatch function ex05::myrmsnorm
//      again under at::AutoDispatchBelowADInplaceOrView, a guard that excludes the autograd keys and
//      ADInplaceOrView, so that this fresh call under a guard reaches the CPU kernel instead of this one.
//   2. MyRMSNormFunction::backward, with g the incoming gradient:
//        d self   = r * (g * weight) - self * r^3 * mean(self * g * weight, last dim, keepdim)
//        d weight = sum over every dimension but the last of g * self * r. A 1-d self has no such dimension:
//                   d weight is then g * self * r as it is, not at::sum of it over an empty list of
//                   dimensions, which sums every element (torch.ones(3).sum(dim=[]) gives tensor(3.))
//        d eps    = an undefined tensor (at::Tensor()): eps is a float, it gets no gradient.
//      ATen operators (at::mul, at::sub, at::mean, at::sum, ...; their headers are included) may be used.
//   3. Register myrmsnorm_autograd on the Autograd key instead of the fallback.
// Check your answer with:  python -m myops.exercises check 05
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/add.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

TORCH_LIBRARY(ex05, m) {
  m.def("myrmsnorm(Tensor self, Tensor weight, float eps=1e-6) -> Tensor");
}

namespace ex05 {

at::Tensor myrmsnorm(const at::Tensor& self, const at::Tensor& weight, double eps) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("ex05::myrmsnorm", /*overload_name=*/"")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  return op.call(self, weight, eps);
}

}  // namespace ex05

namespace {

// Given: 1 / sqrt(mean(self^2, last dim) + eps), kept as a dimension of size 1 to broadcast.
at::Tensor inverse_rms(const at::Tensor& self, double eps) {
  return at::rsqrt(at::add(at::mean(at::mul(self, self), {-1}, /*keepdim=*/true), eps));
}

// Given: the CPU kernel.
at::Tensor myrmsnorm_cpu(const at::Tensor& self, const at::Tensor& weight, double eps) {
  TORCH_CHECK(self.dim() >= 1 && weight.dim() == 1 && weight.size(0) == self.size(-1),
              "ex05::myrmsnorm: expected weight of shape [", self.size(-1), "], got ", weight.sizes());
  return at::mul(at::mul(self, inverse_rms(self, eps)), weight);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class MyRMSNormFunction : public torch::autograd::Function<MyRMSNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Tensor& weight, double eps) {
    // TODO
    TORCH_CHECK(false, "not solved yet: write MyRMSNormFunction::forward in "
                "exercises/05_not_implemented_fallback/myrmsnorm.cpp");
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    // TODO: return {d self, d weight, at::Tensor()}.
    TORCH_CHECK(false, "not solved yet: write MyRMSNormFunction::backward in "
                "exercises/05_not_implemented_fallback/myrmsnorm.cpp");
  }
};

at::Tensor myrmsnorm_autograd(const at::Tensor& self, const at::Tensor& weight, double eps) {
  return MyRMSNormFunction::apply(self, weight, eps);
}

}  // namespace

TORCH_LIBRARY_IMPL(ex05, CPU, m) {
  m.impl("myrmsnorm", &myrmsnorm_cpu);
}

TORCH_LIBRARY_IMPL(ex05, Autograd, m) {
  // TODO: replace the fallback with myrmsnorm_autograd.
  m.impl("myrmsnorm", torch::autograd::autogradNotImplementedFallback());
}
