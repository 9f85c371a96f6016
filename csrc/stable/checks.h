// Argument checks of the stableops operators, shared by their CPU and CUDA kernels: the checks of
// csrc/checks.h, written against the stable ABI. The Python fake kernels (myops_stable/ops.py) raise the
// same messages, so a tensor on the meta device is refused exactly as a real one.
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/Layout.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace stableops {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// NOTE [ Why stableops throws std::runtime_error itself ]
// STD_TORCH_CHECK, the stable TORCH_CHECK, also throws std::runtime_error, which the dispatcher turns
// into a Python RuntimeError. But it starts every message with the C++ function, file and line
// ("check_binary_inputs, .../checks.h:61, ..."). Our messages start with the operator's name, like
// every message of the course, so `fail` builds the message from its arguments and nothing else.
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream message;
  (message << ... << args);
  throw std::runtime_error(message.str());
}

// Shapes as Python prints them in torch.Size: [2, 3].
inline std::string format_sizes(torch::headeronly::IntHeaderOnlyArrayRef sizes) {
  std::ostringstream text;
  text << "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    text << (i ? ", " : "") << sizes[i];
  }
  text << "]";
  return text.str();
}

// Devices as Python prints them: cpu, meta, cuda:0.
inline std::string format_device(const torch::stable::Device& device) {
  using torch::headeronly::DeviceType;
  const DeviceType type = device.type();
  const std::string name = type == DeviceType::CPU    ? "cpu"
                           : type == DeviceType::CUDA ? "cuda"
                           : type == DeviceType::Meta ? "meta"
                                                      : "device type " + std::to_string(static_cast<int>(type));
  return device.has_index() && type != DeviceType::CPU ? name + ":" + std::to_string(device.index()) : name;
}

inline bool is_supported_float(ScalarType t) {
  return t == ScalarType::Half || t == ScalarType::BFloat16 || t == ScalarType::Float || t == ScalarType::Double;
}

// BEGIN check_binary_inputs
// What both operators require: one device, one supported dtype, dense layout.
inline void check_binary_inputs(const char* op, const Tensor& self, const Tensor& other) {
  if (self.device() != other.device()) {
    fail(op, ": expected both tensors on the same device, got ", format_device(self.device()), " and ",
         format_device(other.device()), "; move one with .to(device)");
  }
  if (self.scalar_type() != other.scalar_type()) {
    fail(op, ": expected tensors of the same dtype, got ", self.scalar_type(), " and ", other.scalar_type(),
         "; convert one with .to(dtype)");
  }
  if (!is_supported_float(self.scalar_type())) {
    fail(op, ": unsupported dtype ", self.scalar_type(),
         "; supported are float16, bfloat16, float32 and float64, convert with .float()");
  }
  if (self.layout() != torch::headeronly::Layout::Strided || other.layout() != torch::headeronly::Layout::Strided) {
    fail(op, ": expected dense (strided) tensors; convert sparse inputs with .to_dense()");
  }
}
// END check_binary_inputs

// BEGIN check_myadd_inputs
inline void check_myadd_inputs(const Tensor& self, const Tensor& other) {
  if (self.sizes() != other.sizes()) {
    fail("stableops::myadd: expected tensors of the same shape, got ", format_sizes(self.sizes()), " and ",
         format_sizes(other.sizes()), "; broadcast them first, e.g. with torch.broadcast_tensors");
  }
  check_binary_inputs("stableops::myadd", self, other);
}
// END check_myadd_inputs

// BEGIN check_mymatmul_inputs
inline void check_mymatmul_inputs(const Tensor& self, const Tensor& other) {
  if (self.dim() != 2 || other.dim() != 2) {
    fail("stableops::mymatmul: expected two 2-d tensors, got ", self.dim(), "-d and ", other.dim(),
         "-d; reshape them to matrices, or use torch.matmul for batched products");
  }
  if (self.size(1) != other.size(0)) {
    fail("stableops::mymatmul: inner dimensions differ: self is ", format_sizes(self.sizes()), " and other is ",
         format_sizes(other.sizes()), "; self.shape[1] must equal other.shape[0]");
  }
  check_binary_inputs("stableops::mymatmul", self, other);
}
// END check_mymatmul_inputs

}  // namespace stableops
