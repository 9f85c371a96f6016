// Exercise 06 (notebook 06_inplace_or_view): an ADInplaceOrView kernel for a mutating operator.
// Checked by myops/exercises/ex06_inplace_or_view.py.
//
// ex06::myscale_(Tensor(a!) self, float factor) -> () multiplies `self` by `factor` in place and returns
// nothing (the form torch.compile accepts). Its schema, CPU kernel and Autograd kernel are given; the
// Autograd kernel redispatches with the keys below autograd (keys & c10::after_autograd_keyset), which still
// hold ADInplaceOrView. Nothing is registered there yet: the key falls through. The version counter still moves
// once, but only by accident: the key-set mask affects only the next hop, so the CPU kernel's own call to ATen's
// `self.mul_` dispatches through every key again, and ATen's ADInplaceOrView kernel for mul_ bumps it. A CPU
// kernel that wrote the data itself (as myops::myadd_inplace's does) would leave the counter where it was, and
// autograd could not notice that a tensor it saved for backward was overwritten. The bump belongs to the
// operator's own ADInplaceOrView kernel; under its guard, the nested mul_ no longer bumps.
// Your part:
//   1. myscale__ad_inplace_or_view: redispatch to the kernels below this key (keys & c10::after_ADInplaceOrView_keyset,
//      under at::AutoDispatchBelowADInplaceOrView), then bump the version counter of the written tensor once.
//   2. Register it on the ADInplaceOrView key in the TORCH_LIBRARY_IMPL block at the end.
// Check your answer with:  python -m myops.exercises check 06
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

// Given: the CPU kernel.
void myscale__cpu(at::Tensor& self, double factor) {
  self.mul_(factor);
}

// Given: the Autograd kernel. It refuses to record (the derivative is not written) and goes on below the
// autograd keys, which leaves ADInplaceOrView in the key set.
void myscale__autograd(c10::DispatchKeySet keys, at::Tensor& self, double factor) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && self.requires_grad()),
              "ex06::myscale_: autograd through this operator is not implemented; call it under torch.no_grad()");
  myscale__op().redispatch(keys & c10::after_autograd_keyset, self, factor);
}

void myscale__ad_inplace_or_view(c10::DispatchKeySet keys, at::Tensor& self, double factor) {
  // TODO: redispatch below this key, then bump self's version counter.
  TORCH_CHECK(false, "not solved yet: write myscale__ad_inplace_or_view in exercises/06_inplace_or_view/myscale.cpp");
}

}  // namespace

TORCH_LIBRARY_IMPL(ex06, CPU, m) {
  m.impl("myscale_", &myscale__cpu);
}

TORCH_LIBRARY_IMPL(ex06, Autograd, m) {
  m.impl("myscale_", &myscale__autograd);
}

TORCH_LIBRARY_IMPL(ex06, ADInplaceOrView, m) {
  // TODO: register myscale__ad_inplace_or_view as the kernel of "myscale_" here.
}
