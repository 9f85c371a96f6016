// Forward-mode AD helpers for the custom autograd kernels.
// See NOTE [ Forward-mode AD in a custom autograd kernel ] in myadd.cpp.
#pragma once

#include <ATen/core/Tensor.h>

namespace myops {

// The forward-AD level PyTorch's own autograd kernels read (nested levels are not supported there either).
constexpr uint64_t kForwardLevel = 0;

inline bool has_tangent(const at::Tensor& t) {
  return t._fw_grad(kForwardLevel).defined();
}

// `t` without its tangent (a differentiable view), for Function::apply, which refuses tensors that carry
// one. The kernel attaches the output's tangent itself afterwards.
inline at::Tensor without_tangent(const at::Tensor& t) {
  return has_tangent(t) ? t._fw_primal(kForwardLevel) : t;
}

}  // namespace myops
