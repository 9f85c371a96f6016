// What the CUDA layer remembers between launches (csrc/cuda/launch.cuh): plain C++ with no CUDA in it, so
// that tests run it on the CPU (tests/cuda_memo_check.cpp).
#pragma once

#include <map>
#include <mutex>
#include <utility>

namespace myops::cuda {

// A map filled on first use, safe to call from several threads.
template <typename Key, typename Value>
class Memo {
 public:
  // The value remembered for `key`; the first call for a key runs compute() to find it. Only a value
  // compute() returned is kept: if it throws (a CUDA error), nothing is, and the next call asks again.
  template <typename Compute>
  Value get(const Key& key, Compute&& compute) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (const auto found = known_.find(key); found != known_.end()) {
      return found->second;
    }
    const Value value = std::forward<Compute>(compute)();
    known_.emplace(key, value);
    return value;
  }

 private:
  std::mutex mutex_;
  std::map<Key, Value> known_;
};

}  // namespace myops::cuda
