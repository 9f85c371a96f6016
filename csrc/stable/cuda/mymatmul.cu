// stableops::mymatmul on CUDA, on the LibTorch stable ABI: out[n, m] = self[n, k] @ other[k, m].
//
// A shared-memory tiled kernel: each block computes a kTile x kTile tile of the output, loading matching
// tiles of both inputs (converted to the accumulation type) into shared memory, one depth step at a time.
// Inputs of any strides are copied to contiguous ones first. The output tiles are numbered 0, 1, ... along a
// one-dimensional grid that loops over them, so the number of rows and columns is limited only by memory
// (gridDim.y would stop at 65535 tiles of rows: 1,048,560 rows).
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch_v2.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "stable/checks.h"

namespace {

using torch::stable::Tensor;

constexpr int kTile = 16;
constexpr int64_t kMaxGridX = 2147483647;  // the CUDA limit on gridDim.x

template <typename scalar_t>
using opmath_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

// BEGIN kernel
template <typename scalar_t>
__global__ void mymatmul_kernel(const scalar_t* a, const scalar_t* b, scalar_t* out, int64_t n, int64_t k,
                                int64_t m) {
  using acc_t = opmath_t<scalar_t>;
  __shared__ acc_t tile_a[kTile][kTile];
  __shared__ acc_t tile_b[kTile][kTile];
  const int64_t col_tiles = (m + kTile - 1) / kTile;
  const int64_t tiles = (n + kTile - 1) / kTile * col_tiles;
  // All threads of a block take the same tiles, so every thread reaches every __syncthreads().
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t row = t / col_tiles * kTile + threadIdx.y;
    const int64_t col = t % col_tiles * kTile + threadIdx.x;
    acc_t sum = 0;
    for (int64_t p0 = 0; p0 < k; p0 += kTile) {
      const int64_t pa = p0 + threadIdx.x, pb = p0 + threadIdx.y;
      tile_a[threadIdx.y][threadIdx.x] = row < n && pa < k ? static_cast<acc_t>(a[row * k + pa]) : acc_t(0);
      tile_b[threadIdx.y][threadIdx.x] = pb < k && col < m ? static_cast<acc_t>(b[pb * m + col]) : acc_t(0);
      __syncthreads();
      for (int p = 0; p < kTile; ++p) {
        sum += tile_a[threadIdx.y][p] * tile_b[p][threadIdx.x];
      }
      __syncthreads();
    }
    if (row < n && col < m) {
      out[row * m + col] = static_cast<scalar_t>(sum);  // round once, at the end
    }
  }
}

// A function of its own: the commas of <<<...>>> would split the arguments of the dtype-dispatch macro.
template <typename scalar_t>
void launch_mymatmul(const Tensor& a, const Tensor& b, const Tensor& out, cudaStream_t stream) {
  const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
  const int64_t tiles = (n + kTile - 1) / kTile * ((m + kTile - 1) / kTile);
  const dim3 threads(kTile, kTile);
  const dim3 blocks(static_cast<unsigned>(std::min(tiles, kMaxGridX)));  // more tiles: the blocks loop over them
  mymatmul_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
      a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), n, k, m);
}
// END kernel

// BEGIN entry
Tensor mymatmul_cuda(const Tensor& self, const Tensor& other) {
  stableops::check_mymatmul_inputs(self, other);
  torch::stable::accelerator::DeviceGuard guard(self.get_device_index());
  const int64_t n = self.size(0), k = self.size(1), m = other.size(1);
  if (k == 0) {  // an empty sum: zeros, like torch.matmul
    return torch::stable::new_zeros(self, {n, m});
  }
  Tensor out = torch::stable::new_empty(self, {n, m});
  if (out.numel() == 0) {
    return out;
  }
  const Tensor a = torch::stable::contiguous(self);
  const Tensor b = torch::stable::contiguous(other);
  auto stream = static_cast<cudaStream_t>(
      torch::stable::accelerator::getCurrentStream(self.get_device_index()).nativeHandle());
  THO_DISPATCH_V2(self.scalar_type(), "stableops::mymatmul", AT_WRAP([&] {
    launch_mymatmul<scalar_t>(a, b, out, stream);
  }), AT_FLOATING_TYPES, torch::headeronly::ScalarType::Half, torch::headeronly::ScalarType::BFloat16);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) {
    stableops::fail("stableops::mymatmul: the CUDA kernel did not launch (", cudaGetErrorString(status),
                    "); check the device with torch.cuda.is_available()");
  }
  return out;
}
// END entry

}  // namespace

// BEGIN registration
STABLE_TORCH_LIBRARY_IMPL(stableops, CUDA, m) {
  m.impl("mymatmul", TORCH_BOX(&mymatmul_cuda));
}
// END registration
