// Where the bytes of a tensor on the demo device live.
//
// NOTE [ A device made of host memory ]
// The demo device is PyTorch's PrivateUse1 dispatch key, the key out-of-tree backends plug into. Its
// memory is ordinary host memory, so the layer runs on any machine; what makes a tensor "on the
// device" is only its device type and its dispatch key, PrivateUse1. Kernels may read the data
// directly, or look at it through a CPU tensor wrapped around the same pointer (see tensors.cpp); a
// real backend calls its own runtime (a driver's malloc, memcpy and kernel launch) at those places.
#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <cstring>

namespace {

// BEGIN allocator
// Hands out host memory and labels it as memory of device 0 of PrivateUse1: the DataPtr's device is
// what a storage, and every tensor on it, reports as its device.
struct HostMemoryAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes == 0 ? nullptr : c10::alloc_cpu(nbytes);
    return {data, data, &release, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  }

  static void release(void* data) {
    c10::free_cpu(data);
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &release;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

HostMemoryAllocator host_memory_allocator;
// END allocator

}  // namespace

// at::GetAllocator(kPrivateUse1), used by the factories in tensors.cpp, returns it from now on.
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &host_memory_allocator);
