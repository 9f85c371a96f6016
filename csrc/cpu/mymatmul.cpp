// myops::mymatmul on CPU: out[n, m] = self[n, k] @ other[k, m], for float16, bfloat16, float32 and
// float64 and any strides. The kernel, a packed, register-blocked, vectorized and multithreaded matrix
// product in the style of BLAS libraries, is in cpu/mymatmul_kernel.h; notebook 08 measures each step.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include "cpu/mymatmul_kernel.h"  // first: it decides the width of at::vec::Vectorized

#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "checks.h"
#include "trace.h"

namespace {

// BEGIN entry
at::Tensor mymatmul_cpu(const at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::CPU);
  myops::check_mymatmul_inputs(self, other);
  if (self.size(1) == 0) {  // an empty sum: zeros, like torch.matmul
    return at::zeros({self.size(0), other.size(1)}, self.options());
  }
  at::Tensor out = at::empty({self.size(0), other.size(1)}, self.options());
  if (out.numel() == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "mymatmul_cpu", [&] {
    myops::cpu::mymatmul_blocked<scalar_t, /*kVectorized=*/true, /*kThreaded=*/true>(self, other, out);
  });
  return out;
}
// END entry

}  // namespace

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, CPU, m) {
  m.impl("mymatmul", &mymatmul_cpu);
}
// END registration
