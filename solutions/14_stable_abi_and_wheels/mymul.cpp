// Solution of exercise 14 (notebook 14_stable_abi_and_wheels): exercise 02's mymul on the stable ABI.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch_v2.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cstdint>

STABLE_TORCH_LIBRARY(ex14, m) {
  m.def("mymul(Tensor self, Tensor other) -> Tensor");
}

namespace {

using torch::stable::Tensor;

template <typename scalar_t>
void mymul_kernel_impl(const Tensor& self, const Tensor& other, const Tensor& out) {
  const scalar_t* a = self.const_data_ptr<scalar_t>();
  const scalar_t* b = other.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    o[i] = a[i] * b[i];
  }
}

Tensor mymul_cpu(const Tensor& self, const Tensor& other) {
  STD_TORCH_CHECK(self.sizes().equals(other.sizes()), "ex14::mymul: expected tensors of the same shape");
  STD_TORCH_CHECK(self.scalar_type() == other.scalar_type(), "ex14::mymul: expected tensors of the same dtype");
  // aten::contiguous and aten::new_empty, called through the C shim: no ATen symbol in this library.
  const Tensor a = torch::stable::contiguous(self);
  const Tensor b = torch::stable::contiguous(other);
  Tensor out = torch::stable::new_empty(a, a.sizes());
  THO_DISPATCH_V2(a.scalar_type(), "ex14::mymul", AT_WRAP([&] { mymul_kernel_impl<scalar_t>(a, b, out); }),
                  AT_FLOATING_TYPES);
  return out;
}

}  // namespace

// TORCH_BOX: the typed function in the boxed form the stable ABI registers.
STABLE_TORCH_LIBRARY_IMPL(ex14, CPU, m) {
  m.impl("mymul", TORCH_BOX(&mymul_cpu));
}
