// The cache behind the CUDA layer's occupancy answers (csrc/cuda/memo.h) run on the CPU: a standalone
// program, no torch and no CUDA, built and run by tests/test_kernel_review.py. It prints one line per case.
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cuda/memo.h"

int main() {
  myops::cuda::Memo<int, int> memo;
  int asked = 0;

  // A query that throws (a CUDA error) must leave nothing behind: the next call asks again.
  try {
    memo.get(1, [&]() -> int {
      ++asked;
      throw std::runtime_error("cudaErrorNoDevice");
    });
    std::printf("the failing query returned\n");
  } catch (const std::runtime_error& error) {
    std::printf("the failing query threw: %s\n", error.what());
  }
  const int after = memo.get(1, [&] { ++asked; return 8; });
  std::printf("after the failure: %d (asked %d times)\n", after, asked);
  const int again = memo.get(1, [&] { ++asked; return 99; });
  std::printf("remembered: %d (asked %d times)\n", again, asked);
  const int other = memo.get(2, [&] { ++asked; return 4; });
  std::printf("another key: %d (asked %d times)\n", other, asked);

  // Many threads asking for one key at once: one query, one answer for all.
  myops::cuda::Memo<int, int> shared;
  int queries = 0;
  std::vector<int> answers(8, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] { answers[t] = shared.get(7, [&] { ++queries; return 16; }); });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  int agreeing = 0;
  for (const int answer : answers) {
    agreeing += answer == 16;
  }
  std::printf("8 threads: %d answers of 16, %d query\n", agreeing, queries);
  return 0;
}
