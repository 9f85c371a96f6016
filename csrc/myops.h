// The C++ API of myops: one dispatch function per operator.
//
// A dispatch function is what C++ code calls instead of a kernel. It looks the operator up once (the
// handle is a function-local static) and enters the dispatcher, which picks the kernel from the
// arguments' dispatch keys: Autograd first whenever its key is in the call's key set, then the backend (CPU,
// CUDA, ...). An ordinary CPU or CUDA tensor carries the autograd key, requires_grad or not, and no_grad does
// not take it out (grad mode is a flag the autograd kernel reads, not a dispatch key). The thread-local exclude
// set does: inference_mode excludes the autograd keys (and makes tensors without them), and so do
// at::AutoDispatchBelowAutograd and at::AutoDispatchBelowADInplaceOrView (ATen/core/LegacyTypeDispatch.h),
// which autograd kernels, ours included, hold while they call on.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace myops {

// BEGIN myadd
inline at::Tensor myadd(const at::Tensor& self, const at::Tensor& other) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("myops::myadd", /*overload_name=*/"")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(self, other);
}
// END myadd

inline at::Tensor mymatmul(const at::Tensor& self, const at::Tensor& other) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("myops::mymatmul", /*overload_name=*/"")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(self, other);
}

inline at::Tensor myrmsnorm(const at::Tensor& self, const at::Tensor& weight, double eps) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("myops::myrmsnorm", /*overload_name=*/"")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  return op.call(self, weight, eps);
}

// Kernels that redispatch (instead of calling) need the operator handle itself.
inline const c10::TypedOperatorHandle<void(at::Tensor&, const at::Tensor&)>& myadd_inplace_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("myops::myadd_inplace", /*overload_name=*/"")
                             .typed<void(at::Tensor&, const at::Tensor&)>();
  return op;
}

inline void myadd_inplace(at::Tensor& self, const at::Tensor& other) {
  myadd_inplace_op().call(self, other);
}

}  // namespace myops
