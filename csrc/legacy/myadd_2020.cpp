// The 2020 tutorial's float-only CPU kernel, registered the way that tutorial warned against (it used
// TORCH_LIBRARY_IMPL(myops, CPU, m)): as a catch-all, by passing the function straight to def(). Kept only as
// a contrast to csrc/cpu/myadd.cpp. It lives in its own namespace, myops2020, so loading it never touches
// `myops` (see NOTE [ One TORCH_LIBRARY per namespace ] in schema.cpp).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace {

// BEGIN kernel
at::Tensor myadd_2020(const at::Tensor& self, const at::Tensor& other) {
  // The device is asserted, not checked: the author assumed only CPU tensors could ever arrive.
  TORCH_INTERNAL_ASSERT(self.device().is_cpu() && other.device().is_cpu());
  at::Tensor a = self.contiguous();
  at::Tensor b = other.contiguous();
  at::Tensor out = at::empty(a.sizes(), a.options());
  const float* pa = a.const_data_ptr<float>();
  const float* pb = b.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    po[i] = pa[i] + pb[i];
  }
  return out;
}
// END kernel

}  // namespace

// BEGIN registration
// def() with a function and no dispatch key: a catch-all. Today the dispatcher files it under
// CompositeImplicitAutograd, so it runs for every backend, Meta and CUDA included.
TORCH_LIBRARY(myops2020, m) {
  m.def("myadd(Tensor self, Tensor other) -> Tensor", &myadd_2020);
}
// END registration
