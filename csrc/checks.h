// Argument checks shared by every backend of an operator (CPU, CUDA, Meta), so that all of them reject
// the same inputs with the same message.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

namespace myops {

// The dtypes the myops kernels are written for.
inline bool is_supported_float(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat || t == at::kDouble;
}

// BEGIN check_myadd_inputs
inline void check_myadd_inputs(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(),
              "myops::myadd: expected both tensors on the same device, got ", self.device(), " and ",
              other.device(), "; move one with .to(device)");
  TORCH_CHECK(self.sizes() == other.sizes(),
              "myops::myadd: expected tensors of the same shape, got ", self.sizes(), " and ",
              other.sizes(), "; broadcast them first, e.g. with torch.broadcast_tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(),
              "myops::myadd: expected tensors of the same dtype, got ", self.scalar_type(), " and ",
              other.scalar_type(), "; convert one with .to(dtype)");
  TORCH_CHECK(is_supported_float(self.scalar_type()),
              "myops::myadd: unsupported dtype ", self.scalar_type(),
              "; supported are float16, bfloat16, float32 and float64, convert with .float()");
  TORCH_CHECK(self.layout() == at::kStrided && other.layout() == at::kStrided,
              "myops::myadd: expected dense (strided) tensors; convert sparse inputs with .to_dense()");
}
// END check_myadd_inputs

}  // namespace myops
