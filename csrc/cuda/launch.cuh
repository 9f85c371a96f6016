// Launch helpers shared by the CUDA kernels of myops: how many blocks a grid-stride kernel gets.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "cuda/memo.h"

namespace myops::cuda {

// The largest gridDim.x CUDA accepts (gridDim.y and gridDim.z stop at 65535, so no kernel here uses them).
constexpr int64_t kMaxGridX = 2147483647;

// BEGIN occupancy
// How many blocks of `threads` threads of `kernel` fit on one streaming multiprocessor of the current
// GPU at once, as the CUDA occupancy calculator says (it weighs registers, shared memory and the
// block limit of that GPU). Asked at the first launch on each device and remembered once it is answered (a
// query that fails throws, and the next launch asks again): a GPU is needed to answer, so it must never run
// while the library loads, and the answer depends only on the kernel, the block size and the GPU model.
inline int resident_blocks_per_sm(const void* kernel, int threads) {
  static Memo<std::tuple<const void*, int, int>, int> known;
  return known.get({kernel, threads, c10::cuda::current_device()}, [&] {
    int blocks = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, 0));
    return blocks;
  });
}

// Blocks for a grid-stride kernel with `work_blocks` blocks' worth of work: enough to keep every SM
// full, and no more, since each thread loops over the rest.
template <typename Kernel>
int64_t blocks_for(Kernel kernel, int threads, int64_t work_blocks) {
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t full = std::max(1, resident_blocks_per_sm(reinterpret_cast<const void*>(kernel), threads)) * sms;
  return std::clamp<int64_t>(std::min(work_blocks, full), 1, kMaxGridX);
}
// END occupancy

}  // namespace myops::cuda
