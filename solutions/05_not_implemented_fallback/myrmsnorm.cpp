// Solution of exercise 05 (notebook 05_not_implemented_fallback): myrmsnorm's derivative replaces the
// NotImplemented fallback.
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
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <vector>

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

at::Tensor inverse_rms(const at::Tensor& self, double eps) {
  return at::rsqrt(at::add(at::mean(at::mul(self, self), {-1}, /*keepdim=*/true), eps));
}

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
    ctx->save_for_backward({self, weight});
    ctx->saved_data["eps"] = eps;
    at::AutoDispatchBelowADInplaceOrView guard;  // run the CPU kernel, not this one again
    return ex05::myrmsnorm(self, weight, eps);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor r = inverse_rms(x, ctx->saved_data["eps"].toDouble());
    const at::Tensor gw = at::mul(grad_outputs[0], weight);
    const at::Tensor grad_x =
        at::sub(at::mul(gw, r), at::mul(at::mul(x, at::mul(at::mul(r, r), r)), at::mean(at::mul(x, gw), {-1}, /*keepdim=*/true)));
    const at::Tensor per_row = at::mul(at::mul(grad_outputs[0], x), r);
    std::vector<int64_t> rows(x.dim() - 1);  // every dimension but the last
    for (int64_t d = 0; d + 1 < x.dim(); ++d) {
      rows[d] = d;
    }
    // An empty dimension list would make at::sum reduce everything: a 1-d input has no rows to sum.
    const at::Tensor grad_weight = rows.empty() ? per_row : at::sum(per_row, rows);
    return {grad_x, grad_weight, at::Tensor()};  // eps is a float: no gradient
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
  m.impl("myrmsnorm", &myrmsnorm_autograd);
}
