// myops::myrmsnorm on CUDA: out = self / sqrt(mean(self^2 over the last dim) + eps) * weight.
//
// A row-wise reduction: one warp per row of the last dimension. The 32 lanes read the row in coalesced
// strides of 32 elements, each sums its squares in the accumulation type (float for float16/bfloat16/
// float32, double for float64), the warp adds the 32 partial sums with shuffles (no shared memory, no
// __syncthreads), and every lane then scales its elements of the row. As on CPU, inputs of other layouts
// are made contiguous first, so that each row is one run of memory.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "checks.h"
#include "cuda/launch.cuh"
#include "trace.h"

namespace {

constexpr int kWarpSize = 32;  // lanes per warp on every NVIDIA GPU
constexpr int kThreads = 256;  // threads per block: kThreads / kWarpSize rows in flight per block
constexpr int kWarpsPerBlock = kThreads / kWarpSize;
constexpr unsigned kAllLanes = 0xffffffffu;

// BEGIN kernel
// The sum of `value` over the 32 lanes of a warp, returned to every lane (a butterfly of shuffles).
template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(kAllLanes, value, offset);
  }
  return value;
}

template <typename scalar_t>
__global__ __launch_bounds__(kThreads) void myrmsnorm_kernel(const scalar_t* __restrict__ x,
                                                             const scalar_t* __restrict__ w,
                                                             scalar_t* __restrict__ out, int64_t rows,
                                                             int64_t cols, double eps) {
  using acc_t = at::opmath_type<scalar_t>;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t first_row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarpSize;
  const int64_t row_step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  // Every lane of a warp runs the same rows, so all 32 reach each shuffle together.
  for (int64_t row = first_row; row < rows; row += row_step) {
    const scalar_t* x_row = x + row * cols;
    acc_t sum_of_squares = 0;
    for (int64_t j = lane; j < cols; j += kWarpSize) {
      const acc_t v = static_cast<acc_t>(x_row[j]);
      sum_of_squares += v * v;
    }
    sum_of_squares = warp_sum(sum_of_squares);
    const acc_t scale = acc_t(1) / sqrt(sum_of_squares / static_cast<acc_t>(cols) + static_cast<acc_t>(eps));
    scalar_t* o_row = out + row * cols;
    for (int64_t j = lane; j < cols; j += kWarpSize) {  // the second read of the row hits the cache
      o_row[j] = static_cast<scalar_t>(static_cast<acc_t>(x_row[j]) * scale * static_cast<acc_t>(w[j]));
    }
  }
}
// END kernel

// BEGIN entry
at::Tensor myrmsnorm_cuda(const at::Tensor& self, const at::Tensor& weight, double eps) {
  MYOPS_TRACE(c10::DispatchKey::CUDA);
  myops::check_myrmsnorm_inputs(self, weight, eps);
  const c10::cuda::CUDAGuard device_guard(self.device());
  const at::Tensor x = self.contiguous();
  const at::Tensor w = weight.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (out.numel() == 0) {
    return out;
  }
  const int64_t cols = x.size(-1);
  const int64_t rows = x.numel() / cols;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "myrmsnorm_cuda", [&] {
    const auto kernel = myrmsnorm_kernel<scalar_t>;
    const int64_t blocks = myops::cuda::blocks_for(kernel, kThreads, (rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
    kernel<<<blocks, kThreads, 0, stream>>>(x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
                                            out.mutable_data_ptr<scalar_t>(), rows, cols, eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}
// END entry

}  // namespace

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, CUDA, m) {
  m.impl("myrmsnorm", &myrmsnorm_cuda);
}
// END registration
