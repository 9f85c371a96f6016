// myops::myadd on CUDA: out = self + other, elementwise.
//
// Float16, bfloat16, float32 and float64; any input strides; the output is a new contiguous tensor.
// Contiguous, 16-byte-aligned inputs take a vectorized grid-stride loop (one 16-byte load per input per
// step); anything else takes a strided grid-stride loop that finds each element from the strides.
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

namespace {

constexpr int kThreads = 256;
constexpr int kMaxDims = 12;  // more dimensions than this: inputs are made contiguous first

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

template <typename scalar_t, int kVec>
__global__ void myadd_contiguous_kernel(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
                                        scalar_t* __restrict__ out, int64_t n) {
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
struct Strides {
  int ndim;
  int64_t sizes[kMaxDims];
  int64_t a[kMaxDims];
  int64_t b[kMaxDims];
};

template <typename scalar_t>
__global__ void myadd_strided_kernel(const scalar_t* a, const scalar_t* b, scalar_t* __restrict__ out,
                                     int64_t n, Strides s) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += step) {
    int64_t rest = i, offset_a = 0, offset_b = 0;
    for (int d = s.ndim - 1; d >= 0; --d) {
      const int64_t index = rest % s.sizes[d];
      rest /= s.sizes[d];
      offset_a += index * s.a[d];
      offset_b += index * s.b[d];
    }
    out[i] = add(a[offset_a], b[offset_b]);
  }
}
// END strided

// Enough blocks to fill the GPU a few times over; the grid-stride loops cover any remainder.
int64_t blocks_for(int64_t work) {
  const int64_t wanted = (work + kThreads - 1) / kThreads;
  const int64_t fill = static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount) * 8;
  return std::max<int64_t>(1, std::min(wanted, fill));
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// BEGIN entry
at::Tensor myadd_cuda(const at::Tensor& self_in, const at::Tensor& other_in) {
  myops::check_myadd_inputs(self_in, other_in);
  const bool too_many_dims = self_in.dim() > kMaxDims;
  const at::Tensor self = too_many_dims ? self_in.contiguous() : self_in;
  const at::Tensor other = too_many_dims ? other_in.contiguous() : other_in;

  const c10::cuda::CUDAGuard device_guard(self.device());  // launch on the inputs' GPU
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
  const int64_t n = out.numel();
  if (n == 0) {
    return out;
  }
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "myadd_cuda", [&] {
    const scalar_t* a = self.const_data_ptr<scalar_t>();
    const scalar_t* b = other.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    if (self.is_contiguous() && other.is_contiguous()) {
      constexpr int kVec = 16 / sizeof(scalar_t);
      if (aligned16(a) && aligned16(b) && aligned16(o)) {
        myadd_contiguous_kernel<scalar_t, kVec><<<blocks_for(n / kVec + 1), kThreads, 0, stream>>>(a, b, o, n);
      } else {
        myadd_contiguous_kernel<scalar_t, 1><<<blocks_for(n), kThreads, 0, stream>>>(a, b, o, n);
      }
    } else {
      Strides s{};
      s.ndim = static_cast<int>(self.dim());
      for (int d = 0; d < s.ndim; ++d) {
        s.sizes[d] = self.size(d);
        s.a[d] = self.stride(d);
        s.b[d] = other.stride(d);
      }
      myadd_strided_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(a, b, o, n, s);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}
// END entry

}  // namespace

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, CUDA, m) {
  m.impl("myadd", &myadd_cuda);
}
// END registration
