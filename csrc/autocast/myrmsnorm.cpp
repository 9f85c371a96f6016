// Autocast for myops::myrmsnorm, a two-input operator: under torch.autocast, run it in float32 when
// either input is float32, in the autocast dtype otherwise (promote_type; it ignores float64 inputs and
// cached_cast leaves them uncast), so a bfloat16 activation with a float32 weight is normalized in
// float32 instead of failing the kernel's same-dtype check.
// See NOTE [ Autocast wrappers ] in mymatmul.cpp.
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "myops.h"
#include "trace.h"

namespace {

// BEGIN wrapper
template <c10::DispatchKey kAutocastKey, c10::DeviceType kDevice>
at::Tensor myrmsnorm_autocast(const at::Tensor& self, const at::Tensor& weight, double eps) {
  MYOPS_TRACE(kAutocastKey);
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocastKey);
  const at::ScalarType cast_to = at::autocast::promote_type(
      at::autocast::get_lower_precision_fp_from_device_type(kDevice), kDevice, self, weight);
  return myops::myrmsnorm(at::autocast::cached_cast(cast_to, self, kDevice),
                          at::autocast::cached_cast(cast_to, weight, kDevice), eps);
}
// END wrapper

}  // namespace

TORCH_LIBRARY_IMPL(myops, AutocastCPU, m) {
  m.impl("myrmsnorm", &myrmsnorm_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
}

TORCH_LIBRARY_IMPL(myops, AutocastCUDA, m) {
  m.impl("myrmsnorm", &myrmsnorm_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
}
