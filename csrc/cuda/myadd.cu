// The myadd family on CUDA, one pair of kernels for three operators:
//   myops::myadd(self, other) -> out      a new contiguous tensor
//   myops::myadd_(self, other) -> self    in place (the classic ATen form)
//   myops::myadd_inplace(self, other)     in place, returning nothing (the torch.compile form)
//
// Float16, bfloat16, float32 and float64; tensors of any strides. When all three tensors are one dense
// run of memory in the same order (contiguous, or e.g. all channels-last) and 16-byte aligned, a
// vectorized grid-stride loop moves 16 bytes per input per step. Anything else takes a strided loop that
// walks the elements in the inputs' memory order (see NOTE [ Iterating in memory order ]).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "checks.h"
#include "cuda/launch.cuh"

namespace {

constexpr int kThreads = 256;  // threads per block of both kernels
constexpr int kMaxDims = 16;   // dimensions left after merging; more: computed on contiguous copies
constexpr int kVecBytes = 16;  // the widest load one thread can issue (128 bits)

// The three tensors of one call, in the order their strides are stored.
enum Operand { kOut = 0, kSelf = 1, kOther = 2, kOperands = 3 };

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

// BEGIN plan
// NOTE [ Iterating in memory order ]
// As ATen's TensorIterator does, the strided path first makes a plan: it drops dimensions of size 1,
// orders the rest so that the innermost is the one the inputs step through fastest in memory, and merges
// neighbours that are one run of memory in every tensor. Consecutive threads then read consecutive
// addresses of a transposed or channels-last input (coalesced), and each element costs one div/mod per
// *merged* dimension — done in 32 bits when every offset fits, which is several times cheaper than 64.
// The fresh output of myadd stays contiguous (the schema promises it), so for a permuted input it is the
// write that strides: one strided stream out of three instead of two.
struct Plan {
  int ndim = 0;                               // merged dimensions, innermost first
  int64_t sizes[kMaxDims];
  int64_t strides[kOperands][kMaxDims];       // in elements, per Operand
};

struct Dim {
  int64_t size;
  int64_t stride[kOperands];
};

// Whether dimension x should be iterated inside dimension y: decided by the first input in which both
// have a nonzero stride (a zero stride, an expanded dimension, says nothing about memory order).
bool goes_inside(const Dim& x, const Dim& y) {
  for (const int t : {kSelf, kOther}) {
    if (x.stride[t] != 0 && y.stride[t] != 0 && x.stride[t] != y.stride[t]) {
      return x.stride[t] < y.stride[t];
    }
  }
  return false;
}

// The merged dimensions of out/self/other (all of the same shape), innermost first.
std::vector<Dim> iteration_dims(const at::Tensor& out, const at::Tensor& self, const at::Tensor& other) {
  std::vector<Dim> dims;
  for (int64_t d = out.dim() - 1; d >= 0; --d) {  // the last dimension first: the order of ties
    if (out.size(d) != 1) {
      dims.push_back({out.size(d), {out.stride(d), self.stride(d), other.stride(d)}});
    }
  }
  // Insertion sort, as TensorIterator uses: `goes_inside` is not a strict weak order when strides are 0.
  for (size_t i = 1; i < dims.size(); ++i) {
    for (size_t j = i; j > 0 && goes_inside(dims[j], dims[j - 1]); --j) {
      std::swap(dims[j], dims[j - 1]);
    }
  }
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty()) {
      Dim& inner = merged.back();
      bool one_run = true;
      for (int t = 0; t < kOperands; ++t) {
        one_run = one_run && d.stride[t] == inner.stride[t] * inner.size;
      }
      if (one_run) {
        inner.size *= d.size;
        continue;
      }
    }
    merged.push_back(d);
  }
  return merged;
}

// One dense run in the same order in all three tensors: the vectorized kernel can treat them as flat.
bool is_one_dense_run(const std::vector<Dim>& dims) {
  return dims.empty() || (dims.size() == 1 && dims[0].stride[kOut] == 1 && dims[0].stride[kSelf] == 1 &&
                          dims[0].stride[kOther] == 1);
}

// Whether every element index and every offset into each tensor fits in 32 bits.
bool fits_int32(int64_t n, const std::vector<Dim>& dims) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (n > kMax) {
    return false;
  }
  for (int t = 0; t < kOperands; ++t) {
    int64_t last = 0;
    for (const Dim& d : dims) {
      last += (d.size - 1) * d.stride[t];
    }
    if (last > kMax) {
      return false;
    }
  }
  return true;
}
// END plan

// BEGIN strided
// Element i of the iteration (in the plan's order) is found by splitting i into one index per merged
// dimension, innermost first. index_t is int32_t when the plan allows it, else int64_t.
template <typename scalar_t, typename index_t>
__global__ __launch_bounds__(kThreads) void myadd_strided_kernel(const scalar_t* a, const scalar_t* b,
                                                                 scalar_t* out, int64_t n, Plan plan) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += step) {
    index_t rest = static_cast<index_t>(i), offset_out = 0, offset_a = 0, offset_b = 0;
    for (int d = 0; d < plan.ndim; ++d) {
      const index_t size = static_cast<index_t>(plan.sizes[d]);
      const index_t index = rest % size;
      rest /= size;
      offset_out += index * static_cast<index_t>(plan.strides[kOut][d]);
      offset_a += index * static_cast<index_t>(plan.strides[kSelf][d]);
      offset_b += index * static_cast<index_t>(plan.strides[kOther][d]);
    }
    out[offset_out] = add(a[offset_a], b[offset_b]);
  }
}
// END strided

bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kVecBytes == 0;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

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

template <typename scalar_t, typename index_t>
void launch_strided(const scalar_t* a, const scalar_t* b, scalar_t* o, int64_t n, const std::vector<Dim>& dims,
                    cudaStream_t stream) {
  Plan plan;
  plan.ndim = static_cast<int>(dims.size());
  for (int d = 0; d < plan.ndim; ++d) {
    plan.sizes[d] = dims[d].size;
    for (int t = 0; t < kOperands; ++t) {
      plan.strides[t][d] = dims[d].stride[t];
    }
  }
  const auto kernel = myadd_strided_kernel<scalar_t, index_t>;
  kernel<<<myops::cuda::blocks_for(kernel, kThreads, ceil_div(n, kThreads)), kThreads, 0, stream>>>(a, b, o, n, plan);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// BEGIN run
// out = self + other on the current stream of the current device; `out` may be `self` (in place).
void run_myadd(const at::Tensor& self, const at::Tensor& other, const at::Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) {
    return;
  }
  const std::vector<Dim> dims = iteration_dims(out, self, other);
  if (dims.size() > kMaxDims) {
    // Rare (more than kMaxDims dimensions that no two can be merged): add contiguous copies, copy back.
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
    if (is_one_dense_run(dims)) {
      launch_dense(a, b, o, n, stream);
    } else if (fits_int32(n, dims)) {
      launch_strided<scalar_t, int32_t>(a, b, o, n, dims, stream);
    } else {
      launch_strided<scalar_t, int64_t>(a, b, o, n, dims, stream);
    }
  });
}
// END run

// BEGIN entry
at::Tensor myadd_cuda(const at::Tensor& self, const at::Tensor& other) {
  myops::check_myadd_inputs(self, other);
  const c10::cuda::CUDAGuard device_guard(self.device());  // allocate and launch on the inputs' GPU
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
  run_myadd(self, other, out);
  return out;
}
// END entry

// BEGIN inplace
// The same checks as the CPU layer's in-place kernels (csrc/cpu/myadd.cpp), with the same messages.
at::Tensor& add_into_self(const char* op, at::Tensor& self, const at::Tensor& other) {
  myops::check_myadd_inputs(self, other, op);
  TORCH_CHECK(at::has_internal_overlap(self) != at::MemOverlap::Yes, op,
              ": self has elements that share memory (e.g. it was expanded); write into self.clone() instead");
  TORCH_CHECK(at::get_overlap_status(self, other) != at::MemOverlapStatus::Partial, op,
              ": self and other partially overlap in memory; pass other.clone()");
  const c10::cuda::CUDAGuard device_guard(self.device());
  run_myadd(self, other, self);
  return self;
}

at::Tensor& myadd__cuda(at::Tensor& self, const at::Tensor& other) {
  return add_into_self("myops::myadd_", self, other);
}

void myadd_inplace_cuda(at::Tensor& self, const at::Tensor& other) {
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
