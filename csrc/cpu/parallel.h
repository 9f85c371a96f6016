// How finely the CPU kernels split their work across threads.
#pragma once

#include <cstdint>

namespace myops {

// Elements per at::parallel_for task, at least: ATen's own threshold (at::internal::GRAIN_SIZE, declared
// in ATen/TensorIterator.h, a header too heavy to include for one number), so that our kernels go
// parallel at the sizes where torch's do. Below it, starting threads costs more than it saves.
constexpr int64_t kGrainSize = 32768;

}  // namespace myops
