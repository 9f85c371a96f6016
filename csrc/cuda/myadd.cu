// The myadd family on CUDA, one pair of kernels for three operators:
//   myops::myadd(self, other) -> out      a new contiguous tensor
//   myops::myadd_(self, other) -> self    in place (the classic ATen form)
//   myops::myadd_inplace(self, other)     in place, returning nothing (the torch.compile form)
//
// Float16, bfloat16, float32 and float64; tensors of any strides. When all three tensors are one dense
// run of memory in the same order (contiguous, or e.g. all channels-last), a flat grid-stride loop runs:
// vectorized (16 bytes per input per step) when all three pointers are 16-byte aligned, one element per
// step otherwise. Any other layout takes a strided loop that walks the elements in the inputs' memory
// order (see NOTE [ Iterating in memory order ] in plan.h).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <vector>

#include "checks.h"
#include "cuda/launch.cuh"
#include "cuda/plan.h"
#include "trace.h"

namespace {

using myops::cuda::Dim;
using myops::cuda::Offsets;
using myops::cuda::Path;
using myops::cuda::Plan;

constexpr int kThreads = 256;  // threads per block of both kernels
constexpr int kVecBytes = 16;  // the widest load one thread can issue (128 bits)

template <typename scalar_t>
__device__ __forceinline__ scalar_t add(scalar_t a, scalar_t b) {
  using opmath_t = at::opmath_type<scalar_t>;  // half types add in float, like ATen
  return static_cast<scalar_t>(static_cast<opmath_t>(a) + static_cast<opmath_t>(b));
}

// BEGIN vectorized
template <typename scalar_t, int kVec>
struct alignas(sizeof(scalar_t) * kVec) Pack {
  scalar_t v[kVec];
};

// No __restrict__ on these pointers: in place, `out` is `a`. Each element is still read and written by
// one thread only, so the result does not depend on the order of the threads.
template <typename scalar_t, int kVec>
__global__ __launch_bounds__(kThreads) void myadd_dense_kernel(const scalar_t* a, const scalar_t* b,
                                                               scalar_t* out, int64_t n) {
  using P = Pack<scalar_t, kVec>;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t packs = n / kVec;
  for (int64_t p = first; p < packs; p += step) {
    const P pa = reinterpret_cast<const P*>(a)[p];
    const P pb = reinterpret_cast<const P*>(b)[p];
    P po;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      po.v[k] = add(pa.v[k], pb.v[k]);
    }
    reinterpret_cast<P*>(out)[p] = po;
  }
  for (int64_t i = packs * kVec + first; i < n; i += step) {  // the last n % kVec elements
    out[i] = add(a[i], b[i]);
  }
}
// END vectorized

// BEGIN strided
// Any layout: element i of the iteration (in the plan's memory order, see NOTE [ Iterating in memory
// order ] in plan.h) is found in each tensor by offsets_of. index_t is int32_t when the plan allows it.
template <typename scalar_t, typename index_t>
__global__ __launch_bounds__(kThreads) void myadd_strided_kernel(const scalar_t* a, const scalar_t* b,
                                                                 scalar_t* out, int64_t n, Plan plan) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += step) {
    const Offsets<index_t> where = myops::cuda::offsets_of(plan, static_cast<index_t>(i));
    out[where.out] = add(a[where.self], b[where.other]);
  }
}
// END strided

bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kVecBytes == 0;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// BEGIN launch_dense
// Alignment is checked here, at launch: the plan only says that the three tensors are one dense run.
template <typename scalar_t>
void launch_dense(const scalar_t* a, const scalar_t* b, scalar_t* o, int64_t n, cudaStream_t stream) {
  using myops::cuda::blocks_for;
  constexpr int kVec = kVecBytes / sizeof(scalar_t);
  if (aligned(a) && aligned(b) && aligned(o)) {
    const auto kernel = myadd_dense_kernel<scalar_t, kVec>;
    kernel<<<blocks_for(kernel, kThreads, ceil_div(n, kThreads * kVec)), kThreads, 0, stream>>>(a, b, o, n);
  } else {
    const auto kernel = myadd_dense_kernel<scalar_t, 1>;
    kernel<<<blocks_for(kernel, kThreads, ceil_div(n, kThreads)), kThreads, 0, stream>>>(a, b, o, n);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
// END launch_dense

template <typename scalar_t, typename index_t>
void launch_strided(const scalar_t* a, const scalar_t* b, scalar_t* o, int64_t n, const std::vector<Dim>& dims,
                    cudaStream_t stream) {
  const auto kernel = myadd_strided_kernel<scalar_t, index_t>;
  kernel<<<myops::cuda::blocks_for(kernel, kThreads, ceil_div(n, kThreads)), kThreads, 0, stream>>>(
      a, b, o, n, Plan::of(dims));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// BEGIN run
// out = self + other on the current stream of the current device; `out` may be `self` (in place).
void run_myadd(const at::Tensor& self, const at::Tensor& other, const at::Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) {
    return;
  }
  const std::vector<Dim> dims = myops::cuda::iteration_dims(out, self, other);
  const Path path = myops::cuda::choose_path(n, dims);
  if (path == Path::kContiguousCopies) {  // rare: more dimensions than a Plan holds, none mergeable
    const at::Tensor a = self.contiguous(), b = other.contiguous();
    at::Tensor sum = at::empty(a.sizes(), a.options());
    run_myadd(a, b, sum);
    out.copy_(sum);
    return;
  }
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "myadd_cuda", [&] {
    const scalar_t* a = self.const_data_ptr<scalar_t>();
    const scalar_t* b = other.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    if (path == Path::kDense) {
      launch_dense(a, b, o, n, stream);
    } else if (path == Path::kStrided32) {
      launch_strided<scalar_t, int32_t>(a, b, o, n, dims, stream);
    } else {
      launch_strided<scalar_t, int64_t>(a, b, o, n, dims, stream);
    }
  });
}
// END run

// BEGIN entry
at::Tensor myadd_cuda(const at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::CUDA);
  myops::check_myadd_inputs(self, other);
  const c10::cuda::CUDAGuard device_guard(self.device());  // the current device: launch, stream, device queries
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
  run_myadd(self, other, out);
  return out;
}
// END entry

// BEGIN inplace
// The same checks as the CPU layer's in-place kernels (checks.h), with the same messages.
at::Tensor& add_into_self(const char* op, at::Tensor& self, const at::Tensor& other) {
  myops::check_myadd_inplace_inputs(self, other, op);
  const c10::cuda::CUDAGuard device_guard(self.device());
  run_myadd(self, other, self);
  return self;
}

at::Tensor& myadd__cuda(at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::CUDA);
  return add_into_self("myops::myadd_", self, other);
}

void myadd_inplace_cuda(at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::CUDA);
  add_into_self("myops::myadd_inplace", self, other);
}
// END inplace

}  // namespace

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, CUDA, m) {
  m.impl("myadd", &myadd_cuda);
  m.impl("myadd_", &myadd__cuda);
  m.impl("myadd_inplace", &myadd_inplace_cuda);
}
// END registration
