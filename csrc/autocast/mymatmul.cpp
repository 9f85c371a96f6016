// Autocast for myops::mymatmul: under torch.autocast, run it in the lower-precision type of the
// device (bfloat16 by default on CPU, float16 on CUDA), like ATen's matmul.
//
// BEGIN note
// NOTE [ Autocast wrappers ]
// An autocast kernel casts its inputs, then calls the operator again with its own autocast key
// excluded, so the call goes on to Autograd and the backend. Two details decide whether it works:
//  - cached_cast must be told the device type. Its default is CUDA: on CPU it would leave every
//    tensor as it is, silently.
//  - CPU autocast is its own key, AutocastCPU. The old key name `Autocast` is a second name for
//    AutocastCUDA (one enum value, not an alias key that expands to several keys), so a wrapper
//    registered there never runs for CPU tensors.
// One template serves both devices.
// END note
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "myops.h"
#include "trace.h"

namespace {

// BEGIN wrapper
template <c10::DispatchKey kAutocastKey, c10::DeviceType kDevice>
at::Tensor mymatmul_autocast(const at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(kAutocastKey);
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocastKey);
  const at::ScalarType dtype = at::autocast::get_lower_precision_fp_from_device_type(kDevice);
  return myops::mymatmul(at::autocast::cached_cast(dtype, self, kDevice),
                         at::autocast::cached_cast(dtype, other, kDevice));
}
// END wrapper

}  // namespace

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, AutocastCPU, m) {
  m.impl("mymatmul", &mymatmul_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
}

TORCH_LIBRARY_IMPL(myops, AutocastCUDA, m) {
  m.impl("mymatmul", &mymatmul_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
}
// END registration
