// The iteration plan of the strided myadd kernel (csrc/cuda/myadd.cu): plain C++ with no CUDA in it, so
// that tests run the same planning and index arithmetic on the CPU (tests/cuda_plan_check.cpp).
//
// NOTE [ Iterating in memory order ]
// As ATen's TensorIterator does, the plan drops dimensions of size 1, orders the rest so that the innermost
// is the one the inputs step through fastest in memory, and merges neighbours that are one run of memory in
// every tensor. Consecutive threads then read consecutive addresses of a transposed or channels-last input
// (coalesced), and each element costs one div/mod per *merged* dimension, done in 32 bits when every offset
// fits (several times cheaper than 64). myadd_cuda allocates its output contiguous (a schema says nothing
// about memory layout: the kernel's at::empty with MemoryFormat::Contiguous decides it), so for a permuted
// input it is the write that strides: one strided stream out of three, not two.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace myops::cuda {

constexpr int kMaxDims = 16;  // merged dimensions a Plan holds; more: add contiguous copies instead

// The three tensors of one call, in the order their strides are stored.
enum Operand { kOut = 0, kSelf = 1, kOther = 2, kOperands = 3 };

// BEGIN plan
struct Dim {
  int64_t size;
  int64_t stride[kOperands];  // in elements, per Operand
};

// Whether dimension x should be iterated inside dimension y: decided by the first input in which both
// have a nonzero stride (a zero stride, an expanded dimension, says nothing about memory order).
inline bool goes_inside(const Dim& x, const Dim& y) {
  for (const int t : {kSelf, kOther}) {
    if (x.stride[t] != 0 && y.stride[t] != 0 && x.stride[t] != y.stride[t]) {
      return x.stride[t] < y.stride[t];
    }
  }
  return false;
}

// The dimensions of out/self/other (one shape), innermost first, merged where they are one run of memory.
inline std::vector<Dim> iteration_dims(const at::Tensor& out, const at::Tensor& self, const at::Tensor& other) {
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
// END plan

// BEGIN path
enum class Path {
  kDense,             // one dense run in the same order in all three tensors: a flat loop (launch_dense)
  kStrided32,         // the strided loop, every index and offset in 32 bits
  kStrided64,         // the strided loop in 64 bits
  kContiguousCopies,  // more than kMaxDims merged dimensions: add contiguous copies, copy the sum back
};

inline Path choose_path(int64_t n, const std::vector<Dim>& dims) {
  if (dims.empty() || (dims.size() == 1 && dims[0].stride[kOut] == 1 && dims[0].stride[kSelf] == 1 &&
                       dims[0].stride[kOther] == 1)) {
    return Path::kDense;
  }
  if (dims.size() > static_cast<size_t>(kMaxDims)) {
    return Path::kContiguousCopies;
  }
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  bool fits = n <= kMax32;
  for (int t = 0; t < kOperands; ++t) {
    int64_t last = 0;  // the offset of the last element: the largest one
    for (const Dim& d : dims) {
      last += (d.size - 1) * d.stride[t];
    }
    fits = fits && last <= kMax32;
  }
  return fits ? Path::kStrided32 : Path::kStrided64;
}
// END path

// BEGIN offsets
// What the strided kernel receives by value: the merged dimensions, innermost first.
struct Plan {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kOperands][kMaxDims] = {};

  static Plan of(const std::vector<Dim>& dims) {
    Plan plan;
    plan.ndim = static_cast<int>(dims.size());
    for (int d = 0; d < plan.ndim; ++d) {
      plan.sizes[d] = dims[d].size;
      for (int t = 0; t < kOperands; ++t) {
        plan.strides[t][d] = dims[d].stride[t];
      }
    }
    return plan;
  }
};

template <typename index_t>
struct Offsets {
  index_t out = 0, self = 0, other = 0;
};

// Where element i of the iteration lies in each tensor: i split into one index per merged dimension,
// innermost first. Runs on the GPU in the kernel and on the CPU in the tests.
template <typename index_t>
C10_HOST_DEVICE inline Offsets<index_t> offsets_of(const Plan& plan, index_t i) {
  Offsets<index_t> where;
  for (int d = 0; d < plan.ndim; ++d) {
    const index_t size = static_cast<index_t>(plan.sizes[d]);
    const index_t index = i % size;
    i /= size;
    where.out += index * static_cast<index_t>(plan.strides[kOut][d]);
    where.self += index * static_cast<index_t>(plan.strides[kSelf][d]);
    where.other += index * static_cast<index_t>(plan.strides[kOther][d]);
  }
  return where;
}
// END offsets

}  // namespace myops::cuda
