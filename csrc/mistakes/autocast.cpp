// Two classic mistakes in autocast wrappers, for comparison with csrc/autocast/mymatmul.cpp
// (see NOTE [ Autocast wrappers ] there):
//
//   mistakes::matmul_cast_without_device  registered on AutocastCPU, but calls cached_cast without the
//                                         device type: the default is CUDA, so on CPU nothing is cast.
//   mistakes::matmul_on_old_autocast_key  casts correctly, but is registered on `Autocast`, the old name
//                                         of AutocastCUDA: CPU autocast never reaches it.
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "myops.h"

namespace {

// BEGIN without_device
at::Tensor matmul_cast_without_device(const at::Tensor& self, const at::Tensor& other) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  const at::ScalarType dtype = at::autocast::get_lower_precision_fp_from_device_type(c10::DeviceType::CPU);
  // BUG: no device type, so cached_cast only casts CUDA tensors.
  return myops::mymatmul(at::autocast::cached_cast(dtype, self), at::autocast::cached_cast(dtype, other));
}
// END without_device

at::Tensor matmul_cast_for_cpu(const at::Tensor& self, const at::Tensor& other) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  const at::ScalarType dtype = at::autocast::get_lower_precision_fp_from_device_type(c10::DeviceType::CPU);
  return myops::mymatmul(at::autocast::cached_cast(dtype, self, c10::DeviceType::CPU),
                         at::autocast::cached_cast(dtype, other, c10::DeviceType::CPU));
}

// Below autocast both are mymatmul, with every autocast key excluded so that the dtype that arrives
// here is the dtype the (broken) wrapper passed on.
at::Tensor matmul_below_autocast(const at::Tensor& self, const at::Tensor& other) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  return myops::mymatmul(self, other);
}

}  // namespace

TORCH_LIBRARY_IMPL(mistakes, CPU, m) {
  m.impl("matmul_cast_without_device", &matmul_below_autocast);
  m.impl("matmul_on_old_autocast_key", &matmul_below_autocast);
}

// BEGIN registration
TORCH_LIBRARY_IMPL(mistakes, AutocastCPU, m) {
  m.impl("matmul_cast_without_device", &matmul_cast_without_device);
}

// BUG: `Autocast` is a second name for AutocastCUDA (the same enum value), so this lands on CUDA only.
TORCH_LIBRARY_IMPL(mistakes, Autocast, m) {
  m.impl("matmul_on_old_autocast_key", &matmul_cast_for_cpu);
}
// END registration
