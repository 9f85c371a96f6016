// stableops::mymatmul on CPU: out[n, m] = self[n, k] @ other[k, m], on the LibTorch stable ABI.
//
// The blocked kernel the course first wrote for csrc/cpu/mymatmul.cpp, in portable C++: rows of the output
// are split across threads; each thread packs a kBlockK-deep slice of its rows of `self` and a
// kBlockK x kBlockN block of `other` into contiguous buffers in the accumulation type, then computes
// kMr x kNr output tiles whose accumulators stay in registers. It needs only data pointers, strides and
// a parallel loop, all of which the stable API has. (at::vec::Vectorized, which the course's kernel uses
// now, is not part of the stable headers: a stable kernel vectorizes through the compiler, or by hand.)
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch_v2.h>
#include <torch/headeronly/core/ScalarType.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "stable/checks.h"

namespace {

using torch::stable::Tensor;

// float for float16, bfloat16 and float32; double for float64 (ATen's at::opmath_type, which the stable
// headers do not have).
template <typename scalar_t>
using opmath_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

constexpr int64_t kBlockM = 64;   // output rows per task
constexpr int64_t kBlockK = 256;  // depth of one packed block
constexpr int64_t kBlockN = 128;  // width of one packed block of `other`
constexpr int64_t kMr = 4;        // rows of a register tile
constexpr int64_t kNr = 8;        // columns of a register tile

// BEGIN micro_kernel
// acc[rows x cols] += a_packed[rows x depth] * b_packed[depth x cols] for one register tile, whose
// size is fixed at compile time (full tiles) so that `c` lives in vector registers.
template <typename acc_t, int64_t kRows, int64_t kCols>
inline void register_tile(const acc_t* a_packed, const acc_t* b_packed, acc_t* acc, int64_t depth) {
  acc_t c[kRows][kCols];
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t q = 0; q < kCols; ++q) c[r][q] = acc[r * kBlockN + q];
  }
  for (int64_t p = 0; p < depth; ++p) {
    const acc_t* b_p = b_packed + p * kBlockN;
    for (int64_t r = 0; r < kRows; ++r) {
      const acc_t a_rp = a_packed[r * kBlockK + p];
      for (int64_t q = 0; q < kCols; ++q) c[r][q] += a_rp * b_p[q];
    }
  }
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t q = 0; q < kCols; ++q) acc[r * kBlockN + q] = c[r][q];
  }
}

// The same for the partial tiles at the right and bottom edges.
template <typename acc_t>
inline void edge_tile(const acc_t* a_packed, const acc_t* b_packed, acc_t* acc, int64_t depth,
                      int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < depth; ++p) {
      const acc_t a_rp = a_packed[r * kBlockK + p];
      for (int64_t q = 0; q < cols; ++q) acc[r * kBlockN + q] += a_rp * b_packed[p * kBlockN + q];
    }
  }
}
// END micro_kernel

// BEGIN kernel
template <typename scalar_t>
void mymatmul_kernel_impl(const Tensor& self, const Tensor& other, const Tensor& out) {
  using acc_t = opmath_t<scalar_t>;
  const int64_t n = self.size(0), k = self.size(1), m = other.size(1);
  const scalar_t* a = self.const_data_ptr<scalar_t>();
  const scalar_t* b = other.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  const int64_t a_row = self.stride(0), a_col = self.stride(1);
  const int64_t b_row = other.stride(0), b_col = other.stride(1);

  torch::stable::parallel_for(0, (n + kBlockM - 1) / kBlockM, 1, [&](int64_t first_block, int64_t end_block) {
    std::vector<acc_t> a_packed(kBlockM * kBlockK);  // this task's rows of `self`, one depth slice
    std::vector<acc_t> b_packed(kBlockK * kBlockN);  // one block of `other`, row-major
    std::vector<acc_t> acc(kBlockM * kBlockN);       // the output block being accumulated
    for (int64_t block = first_block; block < end_block; ++block) {
      const int64_t i0 = block * kBlockM, rows = std::min(kBlockM, n - i0);
      for (int64_t j0 = 0; j0 < m; j0 += kBlockN) {
        const int64_t cols = std::min(kBlockN, m - j0);
        std::fill(acc.begin(), acc.end(), acc_t(0));
        for (int64_t p0 = 0; p0 < k; p0 += kBlockK) {
          const int64_t depth = std::min(kBlockK, k - p0);
          for (int64_t i = 0; i < rows; ++i) {
            for (int64_t p = 0; p < depth; ++p) {
              a_packed[i * kBlockK + p] = static_cast<acc_t>(a[(i0 + i) * a_row + (p0 + p) * a_col]);
            }
          }
          for (int64_t p = 0; p < depth; ++p) {
            for (int64_t j = 0; j < cols; ++j) {
              b_packed[p * kBlockN + j] = static_cast<acc_t>(b[(p0 + p) * b_row + (j0 + j) * b_col]);
            }
          }
          for (int64_t i = 0; i < rows; i += kMr) {
            for (int64_t j = 0; j < cols; j += kNr) {
              const acc_t* a_tile = a_packed.data() + i * kBlockK;
              const acc_t* b_tile = b_packed.data() + j;
              acc_t* acc_tile = acc.data() + i * kBlockN + j;
              if (i + kMr <= rows && j + kNr <= cols) {
                register_tile<acc_t, kMr, kNr>(a_tile, b_tile, acc_tile, depth);
              } else {
                edge_tile(a_tile, b_tile, acc_tile, depth, std::min(kMr, rows - i), std::min(kNr, cols - j));
              }
            }
          }
        }
        for (int64_t i = 0; i < rows; ++i) {  // round once, at the end
          for (int64_t j = 0; j < cols; ++j) {
            o[(i0 + i) * m + j0 + j] = static_cast<scalar_t>(acc[i * kBlockN + j]);
          }
        }
      }
    }
  });
}
// END kernel

// BEGIN entry
Tensor mymatmul_cpu(const Tensor& self, const Tensor& other) {
  stableops::check_mymatmul_inputs(self, other);
  const int64_t n = self.size(0), m = other.size(1);
  if (self.size(1) == 0) {  // an empty sum: zeros, like torch.matmul
    return torch::stable::new_zeros(self, {n, m});
  }
  Tensor out = torch::stable::new_empty(self, {n, m});
  if (out.numel() == 0) {
    return out;
  }
  THO_DISPATCH_V2(self.scalar_type(), "stableops::mymatmul", AT_WRAP([&] {
    mymatmul_kernel_impl<scalar_t>(self, other, out);
  }), AT_FLOATING_TYPES, torch::headeronly::ScalarType::Half, torch::headeronly::ScalarType::BFloat16);
  return out;
}
// END entry

}  // namespace

// BEGIN registration
STABLE_TORCH_LIBRARY_IMPL(stableops, CPU, m) {
  m.impl("mymatmul", TORCH_BOX(&mymatmul_cpu));
}
// END registration
