// myops::myrmsnorm on CPU: out = self / sqrt(mean(self^2 over the last dim) + eps) * weight.
//
// One row of the last dimension at a time, rows split across threads; the sum of squares and the
// scaling run in the accumulation type (float for float16/bfloat16). Inputs of other layouts are made
// contiguous first: a normalization reads every row twice, so one copy is cheap next to strided reads.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <cmath>

#include "checks.h"
#include "cpu/parallel.h"
#include "trace.h"

namespace {

// BEGIN kernel
template <typename scalar_t>
void myrmsnorm_kernel_impl(const at::Tensor& self, const at::Tensor& weight, double eps, at::Tensor& out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t cols = self.size(-1);
  const int64_t rows = self.numel() / cols;
  const scalar_t* x = self.const_data_ptr<scalar_t>();
  const scalar_t* w = weight.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, rows, std::max<int64_t>(1, myops::kGrainSize / cols), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const scalar_t* x_row = x + row * cols;
      acc_t sum_of_squares = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const acc_t v = static_cast<acc_t>(x_row[j]);
        sum_of_squares += v * v;
      }
      const acc_t scale = acc_t(1) / std::sqrt(sum_of_squares / static_cast<acc_t>(cols) + static_cast<acc_t>(eps));
      scalar_t* o_row = o + row * cols;
      for (int64_t j = 0; j < cols; ++j) {
        o_row[j] = static_cast<scalar_t>(static_cast<acc_t>(x_row[j]) * scale * static_cast<acc_t>(w[j]));
      }
    }
  });
}
// END kernel

// BEGIN entry
at::Tensor myrmsnorm_cpu(const at::Tensor& self, const at::Tensor& weight, double eps) {
  MYOPS_TRACE(c10::DispatchKey::CPU);
  myops::check_myrmsnorm_inputs(self, weight, eps);
  const at::Tensor x = self.contiguous();
  const at::Tensor w = weight.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (out.numel() == 0) {
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "myrmsnorm_cpu", [&] {
    myrmsnorm_kernel_impl<scalar_t>(x, w, eps, out);
  });
  return out;
}
// END entry

}  // namespace

TORCH_LIBRARY_IMPL(myops, CPU, m) {
  m.impl("myrmsnorm", &myrmsnorm_cpu);
}
