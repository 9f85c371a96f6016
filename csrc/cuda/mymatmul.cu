// myops::mymatmul on CUDA: out[n, m] = self[n, k] @ other[k, m].
//
// The classic shared-memory tiled kernel: each block computes a kTile x kTile tile of the output; the
// threads stage matching tiles of `self` and `other` in shared memory (converted to the accumulation
// type, float for float16/bfloat16/float32 and double for float64) and each thread accumulates one
// output element. Inputs of any strides are read through their strides while staging.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "checks.h"

namespace {

constexpr int kTile = 32;

// BEGIN kernel
template <typename scalar_t>
__global__ void mymatmul_tiled_kernel(const scalar_t* a, const scalar_t* b, scalar_t* __restrict__ out,
                                      int64_t n, int64_t k, int64_t m, int64_t a_row, int64_t a_col,
                                      int64_t b_row, int64_t b_col) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ acc_t a_tile[kTile][kTile];
  __shared__ acc_t b_tile[kTile][kTile + 1];  // +1: no bank conflicts on the transposed read

  const int64_t row = blockIdx.y * static_cast<int64_t>(kTile) + threadIdx.y;
  const int64_t col = blockIdx.x * static_cast<int64_t>(kTile) + threadIdx.x;
  acc_t sum = 0;
  for (int64_t p0 = 0; p0 < k; p0 += kTile) {
    const int64_t a_p = p0 + threadIdx.x, b_p = p0 + threadIdx.y;
    a_tile[threadIdx.y][threadIdx.x] =
        (row < n && a_p < k) ? static_cast<acc_t>(a[row * a_row + a_p * a_col]) : acc_t(0);
    b_tile[threadIdx.y][threadIdx.x] =
        (b_p < k && col < m) ? static_cast<acc_t>(b[b_p * b_row + col * b_col]) : acc_t(0);
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kTile; ++p) {
      sum += a_tile[threadIdx.y][p] * b_tile[p][threadIdx.x];
    }
    __syncthreads();
  }
  if (row < n && col < m) {
    out[row * m + col] = static_cast<scalar_t>(sum);
  }
}
// END kernel

// BEGIN entry
at::Tensor mymatmul_cuda(const at::Tensor& self, const at::Tensor& other) {
  myops::check_mymatmul_inputs(self, other);
  const c10::cuda::CUDAGuard device_guard(self.device());
  const int64_t n = self.size(0), k = self.size(1), m = other.size(1);
  if (k == 0) {
    return at::zeros({n, m}, self.options());
  }
  at::Tensor out = at::empty({n, m}, self.options());
  if (out.numel() == 0) {
    return out;
  }
  TORCH_CHECK((n + kTile - 1) / kTile <= 65535,
              "myops::mymatmul: more than ", 65535 * kTile, " rows is not supported by the CUDA kernel; "
              "split self into row blocks");
  const dim3 threads(kTile, kTile);
  const dim3 blocks(static_cast<unsigned>((m + kTile - 1) / kTile), static_cast<unsigned>((n + kTile - 1) / kTile));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "mymatmul_cuda", [&] {
    mymatmul_tiled_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
        self.const_data_ptr<scalar_t>(), other.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(),
        n, k, m, self.stride(0), self.stride(1), other.stride(0), other.stride(1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}
// END entry

}  // namespace

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, CUDA, m) {
  m.impl("mymatmul", &mymatmul_cuda);
}
// END registration
