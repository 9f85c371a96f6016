// Argument checks shared by every backend of an operator (CPU, CUDA, Meta), so that all of them reject
// the same inputs with the same message. Each message names the operator and says what to do.
// Shapes are compared as SymInts (sym_sizes, sym_size): on real tensors they are plain integers, and under
// torch.compile with dynamic shapes a comparison becomes a guard on symbols instead of fixing each size to
// the value it had when traced (which would recompile for every new shape).
#pragma once

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <c10/core/SymBool.h>
#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace myops {

// The dtypes the myops kernels are written for.
inline bool is_supported_float(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat || t == at::kDouble;
}

// BEGIN check_binary_inputs
// What every two-tensor operator of myops requires: one device, one supported dtype, dense layout.
inline void check_binary_inputs(const char* op, const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), op, ": expected both tensors on the same device, got ",
              self.device(), " and ", other.device(), "; move one with .to(device)");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), op,
              ": expected tensors of the same dtype, got ", self.scalar_type(), " and ",
              other.scalar_type(), "; convert one with .to(dtype)");
  TORCH_CHECK(is_supported_float(self.scalar_type()), op, ": unsupported dtype ", self.scalar_type(),
              "; supported are float16, bfloat16, float32 and float64, convert with .float()");
  TORCH_CHECK(self.layout() == at::kStrided && other.layout() == at::kStrided, op,
              ": expected dense (strided) tensors; convert sparse inputs with .to_dense()");
}
// END check_binary_inputs

namespace detail {

// Whether a and b are views of one storage. Storage::is_alias_of also recognizes two storages of one block
// of shared memory, by their data pointers, which the storage of a fake tensor refuses to give.
inline bool share_storage(const at::Tensor& a, const at::Tensor& b) {
  if (!a.has_storage() || !b.has_storage()) {
    return false;
  }
  if (a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl()) {
    return true;
  }
  return !a.is_meta() && !b.is_meta() && a.storage().is_alias_of(b.storage());
}

// The first and the last element of the storage that t reaches (PyTorch has no negative strides).
inline std::pair<c10::SymInt, c10::SymInt> storage_span(const at::Tensor& t) {
  c10::SymInt last = t.sym_storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    last = last + (t.sym_size(d) - 1) * t.sym_stride(d);
  }
  return {t.sym_storage_offset(), last};
}

// Whether a and b step through memory alike: the same stride in every dimension of more than one element.
inline bool same_steps(const at::Tensor& a, const at::Tensor& b) {
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (TORCH_GUARD_OR_TRUE(a.sym_size(d).sym_gt(1)) && !TORCH_GUARD_OR_FALSE(a.sym_stride(d).sym_eq(b.sym_stride(d)))) {
      return false;
    }
  }
  return true;
}

// at::get_overlap_status for two tensors of equal shapes and dtypes, on symbolic shapes too: Full when both
// are the same elements, Partial when they overlap otherwise, No when they are apart, TooHard when that
// takes more than comparing where they start and end (a layout with gaps in one storage).
inline at::MemOverlapStatus overlap_status(const at::Tensor& a, const at::Tensor& b) {
  if (a.is_same(b)) {
    return at::MemOverlapStatus::Full;
  }
  if (TORCH_GUARD_OR_FALSE(a.sym_numel().sym_eq(0)) || !share_storage(a, b)) {
    return at::MemOverlapStatus::No;
  }
  const auto [a_first, a_last] = storage_span(a);
  const auto [b_first, b_last] = storage_span(b);
  if (TORCH_GUARD_OR_FALSE(a_last.sym_lt(b_first)) || TORCH_GUARD_OR_FALSE(b_last.sym_lt(a_first))) {
    return at::MemOverlapStatus::No;
  }
  if (!a.unsafeGetTensorImpl()->is_non_overlapping_and_dense_or_false() ||
      !b.unsafeGetTensorImpl()->is_non_overlapping_and_dense_or_false()) {
    return at::MemOverlapStatus::TooHard;
  }
  const bool same = TORCH_GUARD_OR_FALSE(a_first.sym_eq(b_first)) && same_steps(a, b);
  return same ? at::MemOverlapStatus::Full : at::MemOverlapStatus::Partial;
}

// Whether the elements of t are at distinct addresses, proven from its strides: each dimension steps further
// than all the dimensions of smaller strides reach together (true of every slice, transpose or permutation
// of one tensor; false for a zero stride, or for as_strided rows that overlap).
inline bool distinct_addresses(const at::Tensor& t) {
  for (int64_t k = 0; k < t.dim(); ++k) {
    if (!TORCH_GUARD_OR_TRUE(t.sym_size(k).sym_gt(1))) {
      continue;
    }
    c10::SymInt below = 0;
    for (int64_t j = 0; j < t.dim(); ++j) {
      if (j != k && TORCH_GUARD_OR_TRUE(t.sym_stride(j).sym_le(t.sym_stride(k)))) {
        below = below + (t.sym_size(j) - 1) * t.sym_stride(j);
      }
    }
    if (!TORCH_GUARD_OR_FALSE(t.sym_stride(k).sym_gt(below))) {
      return false;
    }
  }
  return true;
}

inline int64_t floor_div(int64_t a, int64_t b) {  // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Whether d = sum of c[k] * stride[k] with |c[k]| < size[k], over steps[k..] (size, stride; largest stride
// first; below[k]: how far steps[k..] reach together): whether two indices of a view with these steps lie d
// elements apart. Each try takes one unit of `budget`; nullopt when it runs out.
inline std::optional<bool> steps_meet(int64_t d, const std::vector<std::pair<int64_t, int64_t>>& steps,
                                      const std::vector<int64_t>& below, size_t k, int64_t& budget) {
  if (k == steps.size()) {
    return d == 0;
  }
  if (--budget < 0) {
    return std::nullopt;
  }
  const auto [size, stride] = steps[k];
  const int64_t rest = below[k + 1];  // what the smaller steps can still make up
  const int64_t low = std::max(1 - size, -floor_div(rest - d, stride));
  const int64_t high = std::min(size - 1, floor_div(d + rest, stride));
  for (int64_t c = low; c <= high; ++c) {
    const std::optional<bool> met = steps_meet(d - c * stride, steps, below, k + 1, budget);
    if (!met || *met) {
      return met;
    }
  }
  return false;
}

// See NOTE [ Which overlaps the in-place kernels refuse ]
enum class InplaceOverlap { kNone, kSelfRepeats, kSelfMayRepeat, kPartial, kMayCoincide };

inline InplaceOverlap inplace_overlap(const at::Tensor& self, const at::Tensor& other) {
  if (TORCH_GUARD_OR_FALSE(self.sym_numel().sym_eq(0))) {
    return InplaceOverlap::kNone;
  }
  const at::MemOverlap internal = at::has_internal_overlap(self);
  if (internal == at::MemOverlap::Yes) {
    return InplaceOverlap::kSelfRepeats;
  }
  if (internal == at::MemOverlap::TooHard && !distinct_addresses(self)) {
    return InplaceOverlap::kSelfMayRepeat;
  }
  const at::MemOverlapStatus status = overlap_status(self, other);
  if (status == at::MemOverlapStatus::Partial) {
    return InplaceOverlap::kPartial;
  }
  if (status != at::MemOverlapStatus::TooHard) {
    return InplaceOverlap::kNone;
  }
  if (!same_steps(self, other)) {
    return InplaceOverlap::kMayCoincide;
  }
  // other is self moved by d elements. Plain integers from here on (on symbolic shapes this specializes
  // them; only two strided views of one storage get here).
  const int64_t d = other.sym_storage_offset().guard_int(__FILE__, __LINE__) -
                    self.sym_storage_offset().guard_int(__FILE__, __LINE__);
  if (d == 0) {
    return InplaceOverlap::kNone;  // the same elements
  }
  std::vector<std::pair<int64_t, int64_t>> steps;
  for (int64_t k = 0; k < self.dim(); ++k) {
    const int64_t size = self.sym_size(k).guard_int(__FILE__, __LINE__);
    if (size > 1) {
      steps.emplace_back(size, self.sym_stride(k).guard_int(__FILE__, __LINE__));
    }
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<int64_t> below(steps.size() + 1, 0);
  for (size_t k = steps.size(); k-- > 0;) {
    below[k] = below[k + 1] + (steps[k].first - 1) * steps[k].second;
  }
  int64_t budget = 4096;
  const std::optional<bool> meet = steps_meet(d, steps, below, 0, budget);
  return !meet ? InplaceOverlap::kMayCoincide : *meet ? InplaceOverlap::kPartial : InplaceOverlap::kNone;
}

}  // namespace detail

// BEGIN check_myadd_inputs
// `op` names the family member that is checking: myadd, myadd_ or myadd_inplace.
inline void check_myadd_inputs(const at::Tensor& self, const at::Tensor& other, const char* op = "myops::myadd") {
  TORCH_CHECK(self.sym_sizes() == other.sym_sizes(), op, ": expected tensors of the same shape, got ",
              self.sym_sizes(), " and ", other.sym_sizes(), "; broadcast them first, e.g. with torch.broadcast_tensors");
  check_binary_inputs(op, self, other);
}
// END check_myadd_inputs

// BEGIN check_myadd_inplace_inputs
// NOTE [ Which overlaps the in-place kernels refuse ]
// The in-place forms (myadd_, myadd_inplace) compute self[i] = self[i] + other[i] for every index i, in any
// order and, on a GPU, all at once. That is well defined only if no address is written for one index and
// read or written for another: no two indices of self may reach one address (an expanded self), and other
// may reach the address of self[i] only at index i (myadd_(x, x) doubles x; x[:8] and x[2:] race).
// at::get_overlap_status decides this only for dense tensors and calls any layout with gaps in one storage
// "too hard", which ATen's own add_ lets through: myadd_(x[0:8:2], x[2:10:2]) reads x[2] while another
// thread writes it. Here layouts with gaps are decided as well:
//  - self must step, in each dimension, further than its smaller steps reach together (every slice,
//    transpose or permutation of a tensor does); other layouts (from as_strided) are refused;
//  - with the strides of self, other is self moved by d elements, and two indices meet exactly when d is a
//    sum of whole steps of self (x[0:8:2] and x[2:10:2] are one step apart: refused; x[0:8:2] and x[1:9:2]
//    half a step: accepted);
//  - views of one storage with different strides whose spans overlap are refused.
// The Meta kernels check the same, so tracing refuses what running refuses: all of it is read from storage
// offsets, sizes and strides as SymInts (a fake tensor has no data pointer).
inline void check_myadd_inplace_inputs(const at::Tensor& self, const at::Tensor& other, const char* op) {
  check_myadd_inputs(self, other, op);
  using detail::InplaceOverlap;
  const InplaceOverlap overlap = detail::inplace_overlap(self, other);
  TORCH_CHECK(overlap != InplaceOverlap::kSelfRepeats, op,
              ": self has elements that share memory (e.g. it was expanded); write into self.clone() instead");
  TORCH_CHECK(overlap != InplaceOverlap::kSelfMayRepeat, op, ": self may have elements that share memory (its strides are ",
              self.sym_strides(), " for sizes ", self.sym_sizes(), "); write into self.clone() instead");
  TORCH_CHECK(overlap != InplaceOverlap::kPartial, op, ": self and other partially overlap in memory; pass other.clone()");
  TORCH_CHECK(overlap != InplaceOverlap::kMayCoincide, op, ": self and other are views of one storage with different "
              "strides whose elements may coincide; pass other.clone()");
}
// END check_myadd_inplace_inputs

// BEGIN check_mymatmul_inputs
inline void check_mymatmul_inputs(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.dim() == 2 && other.dim() == 2,
              "myops::mymatmul: expected two 2-d tensors, got ", self.dim(), "-d and ", other.dim(),
              "-d; reshape them to matrices, or use torch.matmul for batched products");
  TORCH_CHECK(self.sym_size(1) == other.sym_size(0),
              "myops::mymatmul: inner dimensions differ: self is ", self.sym_sizes(), " and other is ",
              other.sym_sizes(), "; self.shape[1] must equal other.shape[0]");
  check_binary_inputs("myops::mymatmul", self, other);
}
// END check_mymatmul_inputs

// BEGIN check_myrmsnorm_inputs
inline void check_myrmsnorm_inputs(const at::Tensor& self, const at::Tensor& weight, double eps) {
  TORCH_CHECK(self.dim() >= 1, "myops::myrmsnorm: expected a tensor with at least one dimension, got a 0-d "
              "tensor; normalize a 1-d view of it, e.g. x.reshape(1)");
  TORCH_CHECK(weight.dim() == 1 && weight.sym_size(0) == self.sym_size(-1),
              "myops::myrmsnorm: expected weight of shape [", self.sym_size(-1), "] (the last dimension of self), "
              "got ", weight.sym_sizes(), "; pass one weight per element of the last dimension");
  TORCH_CHECK(eps >= 0, "myops::myrmsnorm: eps must be >= 0, got ", eps, "; pass a small positive eps such as 1e-6");
  check_binary_inputs("myops::myrmsnorm", self, weight);
}
// END check_myrmsnorm_inputs

}  // namespace myops
