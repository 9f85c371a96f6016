// NOTE [ Recording the path of a call ]
// With TORCH_SHOW_DISPATCH_TRACE=1 a release build of PyTorch prints no trace of the calls its own code
// makes: the printing lines are inline in ATen/core/dispatch/Dispatcher.h, under
// #if defined(HAS_TORCH_SHOW_DISPATCH_TRACE) || !defined(NDEBUG), so they exist only where the calling
// code is compiled without NDEBUG. Calls from Python and ATen's own redispatches print nothing; our
// layers (built without -DNDEBUG) print only the calls they make, and nothing says which kernel ran.
// So every kernel of the course starts with MYOPS_TRACE(key). While
// myops.dispatch.record_path records, that line appends the key the kernel is registered for, its file,
// the keys the thread excludes on entry and how deeply it is nested in the kernels that are still
// running; the rest of the time it costs two atomic loads.
//
// Each layer is a library of its own, loaded with private symbols (ctypes.CDLL: RTLD_LOCAL). How many
// copies of a variable defined in this header a process gets depends on its linkage and the compiler: a
// `static` one exists once per translation unit; an `inline` one (or a static local of an inline function)
// is a GNU unique symbol when g++ builds it (readelf: UNIQUE), one per process even across RTLD_LOCAL
// libraries, but a weak symbol, one per library, under -fno-gnu-unique or a compiler without GNU unique
// symbols. So nothing here relies on either: the one recording lives in the cpu layer (cpu/trace.cpp),
// and each library asks the dispatcher for its address, once; every copy of `found` below caches it.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace myops::trace {

struct Step {
  c10::DispatchKey key;      // the key the kernel is registered for
  const char* file;          // the kernel's source file
  c10::DispatchKeySet excluded;  // the thread-local exclude set on entry to the kernel
  int depth;                 // how many recorded kernels were running when it started
};

struct Recording {
  std::atomic<bool> on{false};
  std::thread::id thread;  // only calls on the thread that started the recording are recorded
  std::vector<Step> steps;
  int depth = 0;  // recorded kernels running now
};

// The recording of this process, or nullptr while the cpu layer is not loaded.
inline Recording* shared_recording() {
  static std::atomic<Recording*> found{nullptr};
  Recording* recording = found.load(std::memory_order_acquire);
  if (recording == nullptr) {
    const auto op = c10::Dispatcher::singleton().findOp({"myops_trace::recording", ""});
    if (!op.has_value()) {
      return nullptr;
    }
    // redispatch, not call: a direct call would show up in profilers and dispatch modes.
    const int64_t address =
        op->typed<int64_t()>().redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU));
    recording = reinterpret_cast<Recording*>(address);
    found.store(recording, std::memory_order_release);
  }
  return recording;
}

// Records the kernel on construction and its end on destruction: a kernel's scope is its whole body.
class Scope {
 public:
  Scope(c10::DispatchKey key, const char* file) {
    Recording* recording = shared_recording();
    if (recording != nullptr && recording->on.load(std::memory_order_acquire) &&
        recording->thread == std::this_thread::get_id()) {
      recording->steps.push_back(
          {key, file, c10::impl::tls_local_dispatch_key_set().excluded_, recording->depth++});
      recording_ = recording;
    }
  }
  ~Scope() {
    if (recording_ != nullptr) {
      --recording_->depth;
    }
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Recording* recording_ = nullptr;
};

}  // namespace myops::trace

// Records that the kernel registered for `key` runs (see NOTE [ Recording the path of a call ]).
#define MYOPS_TRACE(key) const ::myops::trace::Scope myops_trace_scope(key, __FILE__)
