// stableops::myadd on CUDA, on the LibTorch stable ABI: the device guard, the current stream and the
// output all come through the C shim, so this library too is free of libtorch's C++ symbols.
//
// Float16, bfloat16, float32 and float64, any strides: non-contiguous inputs are first copied to
// contiguous ones (torch::stable::contiguous, a no-op for contiguous tensors), then one grid-stride loop
// adds them. (The course's csrc/cuda/myadd.cu walks any strides in place and vectorizes; this file shows
// the stable API, not the fastest kernel.)
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

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;  // the grid-stride loop covers the rest

template <typename scalar_t>
using opmath_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

// BEGIN kernel
template <typename scalar_t>
__global__ void myadd_kernel(const scalar_t* a, const scalar_t* b, scalar_t* out, int64_t n) {
  using acc_t = opmath_t<scalar_t>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += step) {
    out[i] = static_cast<scalar_t>(static_cast<acc_t>(a[i]) + static_cast<acc_t>(b[i]));
  }
}

// The launch lives in a function of its own: the commas of <<<...>>> would split the arguments of the
// dtype-dispatch macro.
template <typename scalar_t>
void launch_myadd(const Tensor& a, const Tensor& b, const Tensor& out, cudaStream_t stream) {
  const int64_t n = out.numel();
  const int blocks = static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
  myadd_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(
      a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), n);
}
// END kernel

// BEGIN entry
Tensor myadd_cuda(const Tensor& self, const Tensor& other) {
  stableops::check_myadd_inputs(self, other);
  // The stable c10::cuda::CUDAGuard: allocations and the launch happen on the inputs' GPU.
  torch::stable::accelerator::DeviceGuard guard(self.get_device_index());
  const Tensor a = torch::stable::contiguous(self);
  const Tensor b = torch::stable::contiguous(other);
  Tensor out = torch::stable::new_empty(self, self.sizes());
  if (out.numel() == 0) {
    return out;
  }
  // The stream PyTorch is using on that device (at::cuda::getCurrentCUDAStream in the course's kernels).
  auto stream = static_cast<cudaStream_t>(
      torch::stable::accelerator::getCurrentStream(self.get_device_index()).nativeHandle());
  THO_DISPATCH_V2(self.scalar_type(), "stableops::myadd", AT_WRAP([&] {
    launch_myadd<scalar_t>(a, b, out, stream);
  }), AT_FLOATING_TYPES, torch::headeronly::ScalarType::Half, torch::headeronly::ScalarType::BFloat16);
  // C10_CUDA_KERNEL_LAUNCH_CHECK is not part of the stable headers: ask the runtime directly.
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) {
    stableops::fail("stableops::myadd: the CUDA kernel did not launch (", cudaGetErrorString(status),
                    "); check the device with torch.cuda.is_available()");
  }
  return out;
}
// END entry

}  // namespace

// BEGIN registration
STABLE_TORCH_LIBRARY_IMPL(stableops, CUDA, m) {
  m.impl("myadd", TORCH_BOX(&myadd_cuda));
}
// END registration
