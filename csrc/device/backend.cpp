// What PyTorch asks of a device besides kernels: a device guard (current device, streams, events),
// the hooks of "the accelerator", and the device's name.
//
// BEGIN note
// NOTE [ Why the demo device registers a name ]
// Kernels alone do not make autograd work on a device. The autograd engine of this PyTorch asks the
// process's *accelerator* for the stream of every gradient on an accelerator device, and PrivateUse1
// counts as one: unless the backend is registered, that accelerator is CUDA on a CUDA build of torch,
// and backward through a privateuseone tensor fails (without a GPU, with a CUDA error). Registering
// the backend (here, under the name "mydevice") makes PrivateUse1 *the* accelerator of the process
// (torch.accelerator.current_accelerator()), which in turn requires the hooks interface below. All of
// it is process-wide and final: one PrivateUse1 backend per process, one name, no unloading.
//
// The engine also starts its device threads once, at the first backward of the process: as many as the
// largest device count among the device types registered by then, device i of every type sharing thread
// i. With no such device at that moment (a machine without a GPU) it starts none, and a device registered
// later finds no queue. Load the layer before any backward runs, as real backends register themselves
// when they are imported.
// END note
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace {

constexpr const char* kName = "mydevice";
constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
const c10::Device kDevice{kType, 0};

// BEGIN guard
// c10::DeviceGuard, streams and events for a device with one index and one stream, whose kernels run
// on the calling thread and are finished when they return (it is the host): there is nothing to
// switch or wait for, and every event is complete as soon as it is recorded.
struct SynchronousDeviceGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kType;
  }
  c10::Device exchangeDevice(c10::Device device) const override {
    setDevice(device);
    return kDevice;
  }
  c10::Device getDevice() const override {
    return kDevice;
  }
  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.index() <= 0, kName, ": there is only device 0, got ", device, "; use ", kDevice);
  }
  void uncheckedSetDevice(c10::Device /*device*/) const noexcept override {}
  c10::Stream getStream(c10::Device /*device*/) const override {
    return c10::Stream(c10::Stream::DEFAULT, kDevice);
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return getStream(device);
  }
  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    return getStream(device);
  }
  c10::Stream exchangeStream(c10::Stream /*stream*/) const override {
    return getStream(kDevice);
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return 1;
  }
  void record(void** /*event*/, const c10::Stream& /*stream*/, c10::DeviceIndex /*device_index*/,
              c10::EventFlag /*flag*/) const override {}
  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}
  bool queryEvent(void* /*event*/) const override {
    return true;
  }
  void destroyEvent(void* /*event*/, c10::DeviceIndex /*device_index*/) const noexcept override {}
  bool queryStream(const c10::Stream& /*stream*/) const override {
    return true;
  }
  void synchronizeStream(const c10::Stream& /*stream*/) const override {}
  void synchronizeEvent(void* /*event*/) const override {}
  void synchronizeDevice(c10::DeviceIndex /*device_index*/) const override {}
};
// END guard

// BEGIN hooks
// What PyTorch asks "the accelerator" without knowing which one it is. The demo device is always
// there and ready; it has no random number generator and no pinned memory, so those hooks keep
// PyTorch's default answer, a NotImplementedError naming the hook.
struct DeviceHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }
  bool isAvailable() const override {
    return true;
  }
  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override {
    return true;
  }
  c10::DeviceIndex deviceCount() const override {
    return 1;
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return 0;
  }
  at::Device getDeviceFromPtr(void* /*data*/) const override {
    return kDevice;
  }
};
// END hooks

}  // namespace

// BEGIN registration
C10_REGISTER_GUARD_IMPL(PrivateUse1, SynchronousDeviceGuard);

namespace {
// Runs when the library is loaded; a process loads one build of it once (see NOTE [ Why the demo
// device registers a name ]). A name registered before, e.g. with torch.utils.rename_privateuse1_backend,
// is kept rather than failing the load: the name can be set only once per process.
[[maybe_unused]] const bool registered = [] {
  if (!c10::is_privateuse1_backend_registered()) {
    c10::register_privateuse1_backend(kName);
  }
  if (!at::isPrivateUse1HooksRegistered()) {
    at::RegisterPrivateUse1HooksInterface(new DeviceHooks());  // never freed: PyTorch keeps the pointer
  }
  return true;
}();
}  // namespace
// END registration
