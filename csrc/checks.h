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

#include <utility>

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
// takes more than comparing where they start and end (a layout with gaps).
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
// The in-place forms (myadd_, myadd_inplace) write `self`. Writing through a tensor whose elements share
// memory (expanded), or reading from one that partially overlaps what is written, would make the result
// depend on the order of the loop. The Meta kernels make these checks too, so tracing refuses what running
// refuses; the overlap is decided from storage offsets, sizes and strides (no data pointer, which fake
// tensors do not have), as SymInts.
inline void check_myadd_inplace_inputs(const at::Tensor& self, const at::Tensor& other, const char* op) {
  check_myadd_inputs(self, other, op);
  TORCH_CHECK(at::has_internal_overlap(self) != at::MemOverlap::Yes, op,
              ": self has elements that share memory (e.g. it was expanded); write into self.clone() instead");
  TORCH_CHECK(detail::overlap_status(self, other) != at::MemOverlapStatus::Partial, op,
              ": self and other partially overlap in memory; pass other.clone()");
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
