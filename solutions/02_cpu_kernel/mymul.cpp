// Solution of exercise 02 (notebook 02_cpu_kernel): ex02::mymul on the CPU key.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS  // per-operator headers only: faster builds
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

TORCH_LIBRARY(ex02, m) {
  m.def("mymul(Tensor self, Tensor other) -> Tensor");
}

namespace {

template <typename scalar_t>
void mymul_kernel_impl(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  const scalar_t* a = self.const_data_ptr<scalar_t>();
  const scalar_t* b = other.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    o[i] = a[i] * b[i];
  }
}

at::Tensor mymul_cpu(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.sizes() == other.sizes(), "ex02::mymul: expected tensors of the same shape, got ",
              self.sizes(), " and ", other.sizes());
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "ex02::mymul: expected tensors of the same dtype, got ",
              self.scalar_type(), " and ", other.scalar_type());
  // One flat loop needs contiguous inputs; copies are made only where an input is not.
  const at::Tensor a = self.contiguous();
  const at::Tensor b = other.contiguous();
  at::Tensor out = at::empty(a.sizes(), a.options());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "mymul_cpu", [&] { mymul_kernel_impl<scalar_t>(a, b, out); });
  return out;
}

}  // namespace

// CPU only: tensors of other devices get the dispatcher's "Could not run" instead of a wrong pointer.
TORCH_LIBRARY_IMPL(ex02, CPU, m) {
  m.impl("mymul", &mymul_cpu);
}
