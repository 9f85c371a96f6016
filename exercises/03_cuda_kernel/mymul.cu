// Exercise 03 (notebook 03_cuda_kernel): a CUDA kernel in a library of its own, registered on the CUDA key.
// Checked by myops/exercises/ex03_cuda_kernel.py.
//
// The schema of ex03::mymul (elementwise product of two tensors of the same shape and dtype) is given.
// Your part:
//   1. A `__global__` kernel that computes out[i] = a[i] * b[i] for contiguous inputs, with a grid-stride
//      loop so that any number of blocks covers any number of elements.
//   2. mymul_cuda: make the inputs contiguous and allocate the output (its options carry the inputs' device,
//      so it lands there whatever the current device is). Put a c10::cuda::CUDAGuard on the inputs' device
//      before you take the stream and launch: at::cuda::getCurrentCUDAStream() and the launch both use the
//      current device. Launch the kernel for float32 and float64 (AT_DISPATCH_FLOATING_TYPES) on that stream,
//      then C10_CUDA_KERNEL_LAUNCH_CHECK().
//   3. Register mymul_cuda for the CUDA key in the TORCH_LIBRARY_IMPL block at the end.
// Without a GPU the check proves that it compiles and registers, and checks textually that each launch passes a
// stream; with one it also compares values: strided inputs, more elements than one grid, a launch under a side
// stream, and, with two GPUs, inputs on the one that is not current.
// Check your answer with:  python -m myops.exercises check 03
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

TORCH_LIBRARY(ex03, m) {
  m.def("mymul(Tensor self, Tensor other) -> Tensor");
}

namespace {

constexpr int kThreads = 256;

// TODO: the __global__ kernel.

at::Tensor mymul_cuda(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.sizes() == other.sizes(), "ex03::mymul: expected tensors of the same shape, got ",
              self.sizes(), " and ", other.sizes());
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "ex03::mymul: expected tensors of the same dtype, got ",
              self.scalar_type(), " and ", other.scalar_type());
  TORCH_CHECK(self.device() == other.device(), "ex03::mymul: expected tensors on the same device, got ",
              self.device(), " and ", other.device());
  // TODO: replace this line with the launch.
  TORCH_CHECK(false, "not solved yet: write the body of mymul_cuda in exercises/03_cuda_kernel/mymul.cu");
}

}  // namespace

TORCH_LIBRARY_IMPL(ex03, CUDA, m) {
  // TODO: register mymul_cuda as the kernel of "mymul" here.
}
