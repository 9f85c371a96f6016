// The CPU matrix product behind myops::mymatmul: out[n, m] = a[n, k] @ b[k, m], for any strides.
//
// The structure is the one of GotoBLAS and BLIS, which the BLAS libraries behind torch.matmul share:
//   for each block of columns of b (as many as fit in a 4 MiB buffer):
//     pack it into column panels kNr wide, one kKc-deep slice at a time (contiguous, in the accumulation type);
//     in parallel, for each block of at most kMc rows of a, for each kKc-deep slice:
//       pack that part of a into row panels kMr high;
//       for each b panel (it stays in L1), for each a panel (streamed from L2):
//         micro-kernel: a kMr x kNr tile of the output, its accumulators held in vector registers.
// Packing is what makes strides free: transposed, sliced or expanded inputs are read once into the
// layout the micro-kernel wants. Half and bfloat16 are converted to float while packing.
//
// BEGIN note
// NOTE [ Why mymatmul is bit-for-bit reproducible ]
// Every output element is one chain of multiply-adds over p = 0, 1, ..., k-1, in that order: a
// kKc slice continues the chain where the previous one stored it (storing a float or double is exact),
// and a tile at the edge runs the same micro-kernel on zero-padded panels. How rows are split into
// blocks and blocks into threads decides only who computes an element, never how. So the result is the
// same on every run and for every thread count (but not across builds for different CPUs: the width
// of the vectors and the use of FMA instructions may differ).
// END note
//
// The template switches exist for notebook 08 (csrc/bench/), which measures what each step buys; the
// operator always runs the last one, mymatmul_blocked<scalar_t, /*vectorized=*/true, /*threaded=*/true>.
#pragma once

#include "cpu/vectorized.h"  // first: it decides the width of at::vec::Vectorized

#include <ATen/core/Tensor.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <cstddef>
#include <memory>

namespace myops::cpu {

// BEGIN micro_kernel
// acc[kMr x kNr] (+)= a_panel[depth x kMr] * b_panel[depth x kNr]. Each step p reads kMr consecutive
// values of the packed a and kNr consecutive values of b, whose rows are ldb apart: kNr in a packed
// panel, the row stride of `other` when it is read in place. `accumulate` is false for the first kKc
// slice: the tile starts from zero instead of reading `c`.
template <typename acc_t, int64_t kMr, int64_t kNr>
inline void micro_kernel_vectorized(const acc_t* a_panel, const acc_t* b_panel, int64_t ldb, int64_t depth,
                                    acc_t* c, int64_t ldc, bool accumulate) {
  using Vec = at::vec::Vectorized<acc_t>;
  constexpr int64_t kVecs = kNr / Vec::size();
  static_assert(kVecs * Vec::size() == kNr, "a tile row is a whole number of vectors");
  Vec acc[kMr][kVecs];  // kMr * kVecs registers: 6 x 2 of the 32 (AVX-512) or 16 (AVX2) there are
  for (int64_t r = 0; r < kMr; ++r) {
    for (int64_t v = 0; v < kVecs; ++v) {
      acc[r][v] = accumulate ? Vec::loadu(c + r * ldc + v * Vec::size()) : Vec(acc_t(0));
    }
  }
  for (int64_t p = 0; p < depth; ++p) {
    Vec b[kVecs];
    for (int64_t v = 0; v < kVecs; ++v) b[v] = Vec::loadu(b_panel + p * ldb + v * Vec::size());
    for (int64_t r = 0; r < kMr; ++r) {
      const Vec a(a_panel[p * kMr + r]);  // broadcast one value of a to every lane
      for (int64_t v = 0; v < kVecs; ++v) acc[r][v] = at::vec::fmadd(a, b[v], acc[r][v]);
    }
  }
  for (int64_t r = 0; r < kMr; ++r) {
    for (int64_t v = 0; v < kVecs; ++v) acc[r][v].store(c + r * ldc + v * Vec::size());
  }
}
// END micro_kernel

// The same tile in plain loops, left to the compiler: the "packed" step of notebook 08.
template <typename acc_t, int64_t kMr, int64_t kNr>
inline void micro_kernel_plain(const acc_t* a_panel, const acc_t* b_panel, int64_t ldb, int64_t depth, acc_t* c,
                               int64_t ldc, bool accumulate) {
  acc_t acc[kMr][kNr];
  for (int64_t r = 0; r < kMr; ++r) {
    for (int64_t q = 0; q < kNr; ++q) acc[r][q] = accumulate ? c[r * ldc + q] : acc_t(0);
  }
  for (int64_t p = 0; p < depth; ++p) {
    for (int64_t r = 0; r < kMr; ++r) {
      for (int64_t q = 0; q < kNr; ++q) acc[r][q] += a_panel[p * kMr + r] * b_panel[p * ldb + q];
    }
  }
  for (int64_t r = 0; r < kMr; ++r) {
    for (int64_t q = 0; q < kNr; ++q) c[r * ldc + q] = acc[r][q];
  }
}

// BEGIN blocking
// Block sizes, in elements. Two vectors per tile row and six rows keep 12 accumulators, two b vectors
// and one broadcast value in registers. An output at most one vector wide would leave half of those lanes
// idle: it gets tiles of twelve rows by one vector instead (12 accumulators again). A packed b panel
// (kKc x kNr) should stay in L1 while the a panels of a block (kMc x kKc) stream from L2. A portable
// build, whose 16 SSE registers hold only 64 floats, gets the 4 x 8 tile that the compiler's vectorizer
// can keep in them.
template <typename acc_t, bool kNarrow = false>
struct Blocking {
  static constexpr bool kNativeVectors = at::vec::is_vec_specialized_for_v<acc_t>;
  static constexpr int64_t kMr = kNativeVectors ? (kNarrow ? 12 : 6) : 4;
  static constexpr int64_t kNr = kNativeVectors ? (kNarrow ? 1 : 2) * at::vec::Vectorized<acc_t>::size() : 8;
  static constexpr int64_t kKc = 256;
  static constexpr int64_t kMc = 96;  // a multiple of kMr
};
// END blocking

// BEGIN pack
// Copies rows [0, rows) x depth [0, depth) of `a` (strides a_row, a_col) into panels of kMr rows,
// p-major inside a panel; rows past the end are zero, so edge tiles need no special micro-kernel.
template <int64_t kMr, typename scalar_t, typename acc_t>
void pack_a(const scalar_t* a, int64_t a_row, int64_t a_col, int64_t rows, int64_t depth, acc_t* packed) {
  for (int64_t i0 = 0; i0 < rows; i0 += kMr) {
    for (int64_t p = 0; p < depth; ++p) {
      for (int64_t r = 0; r < kMr; ++r) {
        packed[r] = i0 + r < rows ? static_cast<acc_t>(a[(i0 + r) * a_row + p * a_col]) : acc_t(0);
      }
      packed += kMr;
    }
  }
}

// Copies panel `panel` (columns [panel * kNr, +kNr)) of depth x cols of `b` into `packed`: depth rows of
// kNr values.
template <int64_t kNr, typename scalar_t, typename acc_t>
void pack_b_panel(const scalar_t* b, int64_t b_row, int64_t b_col, int64_t depth, int64_t cols, int64_t panel,
                  acc_t* packed) {
  const int64_t j0 = panel * kNr, width = std::min(kNr, cols - j0);
  for (int64_t p = 0; p < depth; ++p) {
    const scalar_t* row = b + p * b_row + j0 * b_col;
    if (b_col == 1) {  // the common case, a loop the compiler vectorizes
      for (int64_t q = 0; q < width; ++q) packed[q] = static_cast<acc_t>(row[q]);
    } else {
      for (int64_t q = 0; q < width; ++q) packed[q] = static_cast<acc_t>(row[q * b_col]);
    }
    std::fill(packed + width, packed + kNr, acc_t(0));
    packed += kNr;
  }
}
// END pack

// Packing buffers. Memory allocated afresh on every call costs a page fault per 4 KiB the first time it
// is written (measured: a fifth of the time of a 512 x 512 product on one thread, three times the time of
// 13 x 4096 x 4096), and the page faults of all threads queue on one lock. So each thread keeps one buffer
// of kKeptBufferBytes per slot between calls, allocated once and never grown: slot 0 holds a block of
// columns of packed `other` (the kernel packs `other` one such block at a time), slot 1 a block of rows of
// `self`, at most kMc x kKc (one per thread of the parallel region). Only a request larger than that (one
// panel of kNr columns deeper than the buffer, k > 2^15 for float) gets memory of its own, freed when the
// call returns. The memory comes straight from c10's CPU allocator (64-byte aligned, like every CPU tensor),
// not from at::empty, which would go through the dispatcher from OpenMP workers. A page of a kept buffer
// is resident only once it has been written.
constexpr size_t kKeptBufferBytes = size_t{4} << 20;

struct FreeCpu {
  void operator()(void* memory) const { c10::free_cpu(memory); }
};
using CpuMemory = std::unique_ptr<void, FreeCpu>;

// The calling thread's kept buffer of slot kSlot, kKeptBufferBytes long.
template <int kSlot>
void* kept_buffer() {
  thread_local CpuMemory kept;
  if (!kept) {
    kept.reset(c10::alloc_cpu(kKeptBufferBytes));
  }
  return kept.get();
}

// Room for `size` values: the kept buffer of slot kSlot, or, above its size, memory that `own` holds (and
// frees when it goes out of scope).
template <typename acc_t, int kSlot>
acc_t* packing_buffer(int64_t size, CpuMemory& own) {
  const size_t bytes = static_cast<size_t>(size) * sizeof(acc_t);
  if (bytes > kKeptBufferBytes) {
    own.reset(c10::alloc_cpu(bytes));
    return static_cast<acc_t*>(own.get());
  }
  return static_cast<acc_t*>(kept_buffer<kSlot>());
}

// BEGIN kernel
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename scalar_t, bool kVectorized, bool kThreaded, typename B>
void mymatmul_tiled(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  using acc_t = at::opmath_type<scalar_t>;  // float for half, bfloat16 and float; double for double
  constexpr int64_t kMr = B::kMr, kNr = B::kNr;
  // A portable build has only the generic Vectorized, an array with scalar loops (see cpu/vectorized.h):
  // the plain micro-kernel, which the compiler vectorizes itself, is much faster there.
  constexpr bool kUseVec = kVectorized && B::kNativeVectors;
  const int64_t n = self.size(0), k = self.size(1), m = other.size(1);
  const scalar_t* a = self.const_data_ptr<scalar_t>();
  const scalar_t* b = other.const_data_ptr<scalar_t>();

  // The accumulators live in the output itself, or, for half and bfloat16, in a float copy of it that
  // is rounded once at the end.
  constexpr bool kSeparateAcc = !std::is_same_v<scalar_t, acc_t>;
  at::Tensor acc_tensor = kSeparateAcc ? at::empty({n, m}, out.options().dtype(at::toOpMathType(out.scalar_type()))) : out;
  acc_t* c = acc_tensor.mutable_data_ptr<acc_t>();

  // Rows are split into blocks of at most kMc, as many as a multiple of the thread count, so that
  // every thread gets about the same number of rows. Products under 2^20 multiply-adds (about 20 us on one
  // core) stay on the calling thread: measured on 2 cores, 64^3 and 96^3 ran slower on two threads than on
  // one, and on a busy machine a parallel region can wait milliseconds for a core.
  const int64_t threads = kThreaded ? at::get_num_threads() : 1;
  const int64_t blocks_wanted = ceil_div(ceil_div(n, B::kMc), threads) * threads;
  const int64_t mc = ceil_div(ceil_div(n, blocks_wanted), kMr) * kMr;
  const int64_t row_blocks = ceil_div(n, mc);
  const bool parallel = kThreaded && n * m * k >= (int64_t{1} << 20);

  // `other` is packed and used one block of columns at a time: as many panels of kNr columns as fit in the
  // kept buffer, over all of k (so the buffer stays bounded however large `other` is, and a block can stay
  // in the last-level cache while every block of rows of `self` passes over it). Each block is packed slice
  // by slice (kKc rows each), its panels split across threads.
  // A packed panel pays off when many tiles of rows reuse it. With at most two tiles of rows (a batch of
  // a few vectors times a weight matrix), packing would read and write all of `other` to use each value
  // once or twice: then rows of `other` that are already contiguous in the accumulation type are read in
  // place, and only a last, partial panel is packed (zero-padded). Same arithmetic either way.
  const int64_t panels = ceil_div(m, kNr);
  const int64_t slices = ceil_div(k, B::kKc);
  const bool b_in_place = std::is_same_v<scalar_t, acc_t> && other.stride(1) == 1 && n <= 2 * kMr;
  const int64_t first_packed = b_in_place ? m / kNr : 0;  // panels before it are read in place
  const int64_t block_panels = b_in_place ? panels  // then at most one panel is packed: one block
      : std::clamp<int64_t>(static_cast<int64_t>(kKeptBufferBytes / sizeof(acc_t)) / (k * kNr), 1, panels);
  CpuMemory b_memory;  // holds the packed panels when even one is too deep for the kept buffer
  acc_t* b_packed = packing_buffer<acc_t, 0>(k * std::min(block_panels, panels - first_packed) * kNr, b_memory);
  static_assert(B::kMc * B::kKc * sizeof(acc_t) <= kKeptBufferBytes, "a block of self fits in a kept buffer");
  for (int64_t panel0 = 0; panel0 < panels; panel0 += block_panels) {
    const int64_t panel1 = std::min(panels, panel0 + block_panels);  // the block: panels [panel0, panel1)
    const int64_t pack_first = std::max(panel0, first_packed);
    const int64_t packed = std::max<int64_t>(0, panel1 - pack_first);
    // Slice p0 of packed panel `panel` is at b_packed + p0 * packed * kNr + (panel - pack_first) * depth * kNr.
    at::parallel_for(0, slices * packed, parallel ? 1 : slices * packed, [&](int64_t first, int64_t last) {
      for (int64_t task = first; task < last; ++task) {
        const int64_t p0 = task / packed * B::kKc, depth = std::min(B::kKc, k - p0);
        const int64_t panel = pack_first + task % packed;
        pack_b_panel<kNr>(b + p0 * other.stride(0), other.stride(0), other.stride(1), depth, m, panel,
                          b_packed + p0 * packed * kNr + (panel - pack_first) * depth * kNr);
      }
    });

    // Then each thread takes whole blocks of rows, through every slice of k: no thread waits for another.
    at::parallel_for(0, row_blocks, parallel ? 1 : row_blocks, [&](int64_t first, int64_t last) {
      acc_t* a_packed = static_cast<acc_t*>(kept_buffer<1>());  // mc <= kMc: see the static_assert above
      acc_t edge[kMr * kNr] = {};  // a tile that sticks out of the output is computed here, then copied
      for (int64_t block = first; block < last; ++block) {
        const int64_t i0 = block * mc, rows = std::min(mc, n - i0);
        for (int64_t p0 = 0; p0 < k; p0 += B::kKc) {
          const int64_t depth = std::min(B::kKc, k - p0);
          const bool accumulate = p0 > 0;
          pack_a<kMr>(a + i0 * self.stride(0) + p0 * self.stride(1), self.stride(0), self.stride(1), rows, depth,
                      a_packed);
          for (int64_t panel = panel0; panel < panel1; ++panel) {
            const int64_t j = panel * kNr, cols = std::min(kNr, m - j);
            const acc_t* b_panel = b_packed + p0 * packed * kNr + (panel - pack_first) * depth * kNr;
            int64_t ldb = kNr;
            if constexpr (std::is_same_v<scalar_t, acc_t>) {
              if (panel < first_packed) {
                b_panel = b + p0 * other.stride(0) + j;
                ldb = other.stride(0);
              }
            }
            for (int64_t i = 0; i < rows; i += kMr) {
              const int64_t tile_rows = std::min(kMr, rows - i);
              const bool full = tile_rows == kMr && cols == kNr;
              acc_t* tile = c + (i0 + i) * m + j;
              acc_t* target = full ? tile : edge;
              const int64_t ld = full ? m : kNr;
              if (!full && accumulate) {
                for (int64_t r = 0; r < tile_rows; ++r) std::copy(tile + r * m, tile + r * m + cols, edge + r * kNr);
              }
              if constexpr (kUseVec) {
                micro_kernel_vectorized<acc_t, kMr, kNr>(a_packed + i * depth, b_panel, ldb, depth, target, ld,
                                                         accumulate);
              } else {
                micro_kernel_plain<acc_t, kMr, kNr>(a_packed + i * depth, b_panel, ldb, depth, target, ld, accumulate);
              }
              if (!full) {
                for (int64_t r = 0; r < tile_rows; ++r) std::copy(edge + r * kNr, edge + r * kNr + cols, tile + r * m);
              }
            }
          }
        }
      }
    });
  }
  if constexpr (kSeparateAcc) {
    out.copy_(acc_tensor);  // round once, at the end
  }
}

// The tile shape is chosen by the width of the output (see Blocking). Every element is the same chain of
// multiply-adds in either shape, so the choice never changes a result.
template <typename scalar_t, bool kVectorized, bool kThreaded>
void mymatmul_blocked(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  using acc_t = at::opmath_type<scalar_t>;
  if constexpr (kVectorized) {  // the "packed" step of notebook 08 keeps the one tile it is shown with
    if (other.size(1) <= at::vec::Vectorized<acc_t>::size()) {
      mymatmul_tiled<scalar_t, kVectorized, kThreaded, Blocking<acc_t, /*kNarrow=*/true>>(self, other, out);
      return;
    }
  }
  mymatmul_tiled<scalar_t, kVectorized, kThreaded, Blocking<acc_t>>(self, other, out);
}
// END kernel

// The textbook loop, one dot product per output element, for comparison: the "scalar" step.
template <typename scalar_t>
void mymatmul_naive(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t n = self.size(0), k = self.size(1), m = other.size(1);
  const scalar_t* a = self.const_data_ptr<scalar_t>();
  const scalar_t* b = other.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      acc_t sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += static_cast<acc_t>(a[i * self.stride(0) + p * self.stride(1)]) *
               static_cast<acc_t>(b[p * other.stride(0) + j * other.stride(1)]);
      }
      o[i * m + j] = static_cast<scalar_t>(sum);
    }
  }
}

}  // namespace myops::cpu
