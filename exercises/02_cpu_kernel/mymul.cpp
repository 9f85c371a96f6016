// Exercise 02 (notebook 02_cpu_kernel): a CPU kernel, registered on the CPU key.
// Checked by myops/exercises/ex02_cpu_kernel.py.
//
// The schema of ex02::mymul (elementwise product) is given. Your part:
//   1. Write the body of mymul_cpu: a new contiguous tensor out = self * other, elementwise, for float32
//      and float64 (AT_DISPATCH_FLOATING_TYPES), for inputs of any strides (transposed, sliced, expanded:
//      the simplest correct way is to work on self.contiguous() and other.contiguous()), and for empty
//      tensors. Do the arithmetic yourself (data pointers and a loop), do not call at::mul.
//   2. Register it for the CPU key only (not as a catch-all), in the TORCH_LIBRARY_IMPL block at the end.
// Check your answer with:  python -m myops.exercises check 02
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS  // per-operator headers only: faster builds
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

TORCH_LIBRARY(ex02, m) {
  m.def("mymul(Tensor self, Tensor other) -> Tensor");
}

namespace {

at::Tensor mymul_cpu(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.sizes() == other.sizes(), "ex02::mymul: expected tensors of the same shape, got ",
              self.sizes(), " and ", other.sizes());
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "ex02::mymul: expected tensors of the same dtype, got ",
              self.scalar_type(), " and ", other.scalar_type());
  // TODO: replace this line with the kernel.
  TORCH_CHECK(false, "not solved yet: write the body of mymul_cpu in exercises/02_cpu_kernel/mymul.cpp");
}

}  // namespace

TORCH_LIBRARY_IMPL(ex02, CPU, m) {
  // TODO: register mymul_cpu as the kernel of "mymul" here.
}
