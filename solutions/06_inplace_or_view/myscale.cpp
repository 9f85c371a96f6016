// Solution of exercise 06 (notebook 06_inplace_or_view): the ADInplaceOrView kernel of ex06::myscale_.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <torch/library.h>

TORCH_LIBRARY(ex06, m) {
  m.def("myscale_(Tensor(a!) self, float factor) -> ()");
}

namespace {

const c10::TypedOperatorHandle<void(at::Tensor&, double)>& myscale__op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("ex06::myscale_", /*overload_name=*/"")
                             .typed<void(at::Tensor&, double)>();
  return op;
}

void myscale__cpu(at::Tensor& self, double factor) {
  self.mul_(factor);
}

void myscale__autograd(c10::DispatchKeySet keys, at::Tensor& self, double factor) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && self.requires_grad()),
              "ex06::myscale_: autograd through this operator is not implemented; call it under torch.no_grad()");
  myscale__op().redispatch(keys & c10::after_autograd_keyset, self, factor);
}

void myscale__ad_inplace_or_view(c10::DispatchKeySet keys, at::Tensor& self, double factor) {
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    myscale__op().redispatch(keys & c10::after_ADInplaceOrView_keyset, self, factor);
  }
  // `self` was written: tensors autograd saved from it (or from a view of it, which shares the counter)
  // are now stale, and backward will say so instead of using the new values.
  self.unsafeGetTensorImpl()->bump_version();
}

}  // namespace

TORCH_LIBRARY_IMPL(ex06, CPU, m) {
  m.impl("myscale_", &myscale__cpu);
}

TORCH_LIBRARY_IMPL(ex06, Autograd, m) {
  m.impl("myscale_", &myscale__autograd);
}

TORCH_LIBRARY_IMPL(ex06, ADInplaceOrView, m) {
  m.impl("myscale_", &myscale__ad_inplace_or_view);
}
