// stableops::myadd on CPU: csrc/cpu/myadd.cpp's kernel on the LibTorch stable ABI.
//
// Float16, bfloat16, float32 and float64; tensors of any strides, 0-dim and empty tensors. Only
// headers of torch/csrc/stable/ and torch/headeronly/ are included: the compiled library calls libtorch
// through C functions (the "shim") and nothing else, which is what lets it outlive a torch release.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch_v2.h>
#include <torch/headeronly/core/ScalarType.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "stable/checks.h"

namespace {

using torch::stable::Tensor;

// Below this many elements a thread costs more than it saves.
constexpr int64_t kGrainSize = 32768;

// Half and bfloat16 are added in float and rounded once, as ATen does. ATen's at::opmath_type is not
// part of the stable headers; this is the same rule for the four dtypes we accept.
template <typename scalar_t>
using opmath_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

// BEGIN kernel
// out = self + other elementwise; `out` is contiguous, the inputs may have any strides.
template <typename scalar_t>
void myadd_kernel_impl(const Tensor& self, const Tensor& other, const Tensor& out) {
  using acc_t = opmath_t<scalar_t>;
  const scalar_t* a = self.const_data_ptr<scalar_t>();
  const scalar_t* b = other.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();

  if (self.is_contiguous() && other.is_contiguous()) {
    // Fast path: one flat loop the compiler vectorizes. torch::stable::parallel_for hands the ranges to
    // libtorch's thread pool through the shim: no -fopenmp needed in this library.
    torch::stable::parallel_for(0, out.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        o[i] = static_cast<scalar_t>(static_cast<acc_t>(a[i]) + static_cast<acc_t>(b[i]));
      }
    });
    return;
  }

  // General path: walk the output in rows of its last dimension; each row finds where it starts in
  // each input from its strides (a stride of 0 is an expanded dimension).
  const auto sizes = out.sizes();
  const auto sa = self.strides();
  const auto sb = other.strides();
  const int64_t ndim = out.dim();
  const int64_t row_len = sizes[ndim - 1];
  const int64_t step_a = sa[ndim - 1];
  const int64_t step_b = sb[ndim - 1];
  const int64_t rows = out.numel() / row_len;
  const int64_t rows_per_task = std::max<int64_t>(1, kGrainSize / row_len);
  torch::stable::parallel_for(0, rows, rows_per_task, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t offset_a = 0, offset_b = 0, rest = row;
      for (int64_t d = ndim - 2; d >= 0; --d) {
        const int64_t index = rest % sizes[d];
        rest /= sizes[d];
        offset_a += index * sa[d];
        offset_b += index * sb[d];
      }
      scalar_t* o_row = o + row * row_len;
      for (int64_t j = 0; j < row_len; ++j) {
        o_row[j] = static_cast<scalar_t>(static_cast<acc_t>(a[offset_a + j * step_a]) +
                                         static_cast<acc_t>(b[offset_b + j * step_b]));
      }
    }
  });
}
// END kernel

// BEGIN entry
Tensor myadd_cpu(const Tensor& self, const Tensor& other) {
  stableops::check_myadd_inputs(self, other);
  // new_empty: same dtype and device as self, contiguous; an aten op called through the shim.
  Tensor out = torch::stable::new_empty(self, self.sizes());
  if (out.numel() == 0) {
    return out;
  }
  // THO_DISPATCH_V2 is the header-only AT_DISPATCH_V2: a switch on the dtype that instantiates the
  // lambda once per listed type, with scalar_t set to it.
  THO_DISPATCH_V2(self.scalar_type(), "stableops::myadd", AT_WRAP([&] {
    myadd_kernel_impl<scalar_t>(self, other, out);
  }), AT_FLOATING_TYPES, torch::headeronly::ScalarType::Half, torch::headeronly::ScalarType::BFloat16);
  return out;
}
// END entry

}  // namespace

// BEGIN registration
// TORCH_BOX turns the typed function into the boxed form the stable ABI registers: one function that
// reads its arguments from a stack of StableIValues and writes its result back onto it.
STABLE_TORCH_LIBRARY_IMPL(stableops, CPU, m) {
  m.impl("myadd", TORCH_BOX(&myadd_cpu));
}
// END registration
