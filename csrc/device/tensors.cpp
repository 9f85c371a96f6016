// The few ATen operators without which a device cannot hold a tensor: creating one (empty,
// empty_strided), moving data to and from it (_copy_from), and viewing it (as_strided, view).
//
// Everything else PyTorch does with tensors is built on these: x.to(device) is _to_copy, a composite
// that calls empty_strided on the device and copy_; copy_ hands any copy that involves a device it
// does not know to _copy_from; t(), expand() and slicing are composites over as_strided.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <torch/library.h>

namespace {

constexpr c10::DispatchKeySet kDeviceKeys{c10::DispatchKey::PrivateUse1};

void check_options(const char* op, std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::kStrided, op,
              ": the demo device holds only strided tensors; create a dense tensor");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), op,
              ": pinned memory is host memory for faster copies to a device; drop pin_memory=True");
}

// BEGIN factories
// A tensor on the device: storage from the device's allocator (memory.cpp), dispatch key PrivateUse1.
at::Tensor empty_device(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                        std::optional<c10::Layout> layout, std::optional<c10::Device> /*device*/,
                        std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  check_options("aten::empty.memory_format", layout, pin_memory);
  return at::detail::empty_generic(size, c10::GetAllocator(c10::DeviceType::PrivateUse1), kDeviceKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided_device(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                                std::optional<c10::Layout> layout, std::optional<c10::Device> /*device*/,
                                std::optional<bool> pin_memory) {
  check_options("aten::empty_strided", layout, pin_memory);
  return at::detail::empty_strided_generic(size, stride, c10::GetAllocator(c10::DeviceType::PrivateUse1),
                                           kDeviceKeys, c10::dtype_or_default(dtype));
}
// END factories

// BEGIN copy
// The same bytes seen as a CPU tensor: possible only because the device's memory is host memory (see
// NOTE [ A device made of host memory ] in memory.cpp). A real backend copies with its driver instead.
at::Tensor host_view(const at::Tensor& t) {
  if (t.is_cpu()) {
    return t;
  }
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(c10::kCPU));
}

// dst.copy_(self) lands here whenever self or dst is on the device: CPU -> device, device -> CPU and
// device -> device. The CPU copy_ then does dtype conversion, strides and broadcasting.
at::Tensor copy_from_device(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  host_view(dst).copy_(host_view(self), non_blocking);
  return dst;
}
// END copy

}  // namespace

// BEGIN registration
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &empty_device);
  m.impl("empty_strided", &empty_strided_device);
  m.impl("_copy_from", &copy_from_device);
  // Views only make new tensor metadata over the same storage; ATen's own device-independent
  // implementations (the ones CPU registers too) serve the device unchanged.
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
}
// END registration
