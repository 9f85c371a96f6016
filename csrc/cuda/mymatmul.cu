// myops::mymatmul on CUDA: out[n, m] = self[n, k] @ other[k, m].
//
// The classic shared-memory tiled kernel, one step beyond one-output-per-thread: each block of
// kTile x kThreadRows threads computes a kTile x kTile tile of the output, kRowsPerThread outputs per
// thread. The threads stage matching tiles of `self` and `other` in shared memory (converted to the
// accumulation type: float for float16/bfloat16/float32, double for float64), then every staged value of
// `other` read from shared memory serves kRowsPerThread multiply-adds. Inputs of any strides are read
// through their strides while staging, coalesced for row-major and transposed inputs alike.
// The output tiles are numbered 0, 1, ... along a one-dimensional grid that loops over them, so the
// number of rows and columns is limited only by memory (gridDim.y would stop at 65535 tiles).
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

#include <cstdlib>

#include "checks.h"
#include "cuda/launch.cuh"
#include "trace.h"

namespace {

constexpr int kTile = 32;                            // output tile kTile x kTile; also the depth staged per step
constexpr int kThreadRows = 8;                       // a block is kTile x kThreadRows threads (8 warps)
constexpr int kRowsPerThread = kTile / kThreadRows;  // outputs per thread, one column, rows kThreadRows apart
constexpr int kThreads = kTile * kThreadRows;

// BEGIN stage
// Copies the kTile x kTile block of `src` (a rows x cols matrix) at (row0, col0) into `tile`, as acc_t,
// with zeros outside the matrix. The 32 lanes of a warp (threadIdx.x) walk whichever dimension is
// contiguous in memory (`lanes_walk_rows` for a transposed operand), so each warp reads 32 neighbouring
// elements in one coalesced access.
//
// NOTE [ Shared-memory padding ]
// A tile row is kTile + 1 values wide. Shared memory has 32 banks of 4 bytes; when the lanes walk down a
// column of the tile (a transposed operand), lane r writes tile[r][c], for float accumulators at word
// r * 33 + c: 32 different banks. Without the padding the stride would be 32 words and all 32 lanes would hit one bank, 32-way
// serialized. Reads in the multiply loop go along a row or are broadcasts, conflict-free either way.
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ void stage(acc_t (&tile)[kTile][kTile + 1], const scalar_t* src, int64_t rows,
                                      int64_t cols, int64_t row0, int64_t col0, int64_t row_stride,
                                      int64_t col_stride, bool lanes_walk_rows) {
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int along = threadIdx.x;                    // the lane: 0..31
    const int across = threadIdx.y + i * kThreadRows;  // the warp's line of the tile
    const int r = lanes_walk_rows ? along : across;
    const int c = lanes_walk_rows ? across : along;
    const int64_t row = row0 + r, col = col0 + c;
    tile[r][c] = (row < rows && col < cols) ? static_cast<acc_t>(src[row * row_stride + col * col_stride]) : acc_t(0);
  }
}
// END stage

// BEGIN kernel
template <typename scalar_t>
__global__ __launch_bounds__(kThreads) void mymatmul_tiled_kernel(
    const scalar_t* a, const scalar_t* b, scalar_t* __restrict__ out, int64_t n, int64_t k, int64_t m,
    int64_t a_row, int64_t a_col, bool a_lanes_walk_rows, int64_t b_row, int64_t b_col, bool b_lanes_walk_rows) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ acc_t a_tile[kTile][kTile + 1];  // See NOTE [ Shared-memory padding ]
  __shared__ acc_t b_tile[kTile][kTile + 1];

  const int64_t col_tiles = (m + kTile - 1) / kTile;
  const int64_t tiles = (n + kTile - 1) / kTile * col_tiles;
  // All threads of a block take the same tiles, so every thread reaches every __syncthreads().
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t row0 = t / col_tiles * kTile, col0 = t % col_tiles * kTile;
    acc_t sum[kRowsPerThread] = {};
    for (int64_t p0 = 0; p0 < k; p0 += kTile) {
      stage(a_tile, a, n, k, row0, p0, a_row, a_col, a_lanes_walk_rows);
      stage(b_tile, b, k, m, p0, col0, b_row, b_col, b_lanes_walk_rows);
      __syncthreads();
#pragma unroll
      for (int p = 0; p < kTile; ++p) {
        const acc_t b_value = b_tile[p][threadIdx.x];
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) {  // a_tile[...][p] is one address per warp: a broadcast
          sum[i] += a_tile[threadIdx.y + i * kThreadRows][p] * b_value;
        }
      }
      __syncthreads();  // before the next step overwrites the tiles
    }
    const int64_t col = col0 + threadIdx.x;
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int64_t row = row0 + threadIdx.y + i * kThreadRows;
      if (row < n && col < m) {
        out[row * m + col] = static_cast<scalar_t>(sum[i]);
      }
    }
  }
}
// END kernel

// Lanes walk the rows of an operand when stepping down a column is the shorter step in memory.
bool lanes_walk_rows(int64_t row_stride, int64_t col_stride) {
  return std::abs(row_stride) < std::abs(col_stride);
}

// BEGIN entry
at::Tensor mymatmul_cuda(const at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::CUDA);
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
  const int64_t tiles = (n + kTile - 1) / kTile * ((m + kTile - 1) / kTile);
  const dim3 threads(kTile, kThreadRows);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "mymatmul_cuda", [&] {
    const auto kernel = mymatmul_tiled_kernel<scalar_t>;
    kernel<<<myops::cuda::blocks_for(kernel, kThreads, tiles), threads, 0, stream>>>(
        self.const_data_ptr<scalar_t>(), other.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(),
        n, k, m, self.stride(0), self.stride(1), lanes_walk_rows(self.stride(0), self.stride(1)),
        other.stride(0), other.stride(1), lanes_walk_rows(other.stride(0), other.stride(1)));
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
