// The myadd family on CPU, one kernel for three operators:
//   myops::myadd(self, other) -> out      a new contiguous tensor
//   myops::myadd_(self, other) -> self    in place (the classic ATen form)
//   myops::myadd_inplace(self, other)     in place, returning nothing (the torch.compile form)
//
// Float16, bfloat16, float32 and float64; tensors of any strides (transposed, sliced, expanded), 0-dim
// and empty tensors. Work is split across threads with at::parallel_for, which only runs in parallel
// because this file is compiled with -fopenmp.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS  // per-operator headers only: faster builds
// Memory-bound loops gain nothing from 512-bit vectors (on an AVX-512 Xeon they measured slower than
// 256-bit ones), so myadd, like ATen's own add, stays with AVX2 (see cpu/vectorized.h).
#define MYOPS_AT_MOST_AVX2
#include "cpu/vectorized.h"  // first: it decides the width of at::vec::Vectorized

#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/EmptyTensor.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "checks.h"
#include "cpu/parallel.h"
#include "trace.h"

namespace {

// BEGIN kernel
// out = self + other elementwise; `out` may be `self` (in place) and may have any strides.
template <typename scalar_t>
void myadd_kernel_impl(const at::Tensor& self, const at::Tensor& other, const at::Tensor& out) {
  // Half and bfloat16 are added in float, then rounded once, as ATen does.
  using opmath_t = at::opmath_type<scalar_t>;
  const scalar_t* a = self.const_data_ptr<scalar_t>();
  const scalar_t* b = other.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();

  if (self.is_contiguous() && other.is_contiguous() && out.is_contiguous()) {
    // Fast path, split across threads. The pointers are captured by value: a vector store may alias
    // anything, so through a reference the compiler would reload every pointer after every store.
    at::parallel_for(0, out.numel(), myops::kGrainSize, [a, b, o](int64_t begin, int64_t end) {
      int64_t i = begin;
      if constexpr (at::vec::is_vec_specialized_for_v<scalar_t>) {
        // Two whole vectors per step, as in ATen's vectorized loops: fewer loop branches and two
        // independent adds in flight. Vectorized<Half> and <BFloat16> add in float inside.
        using Vec = at::vec::Vectorized<scalar_t>;
        constexpr int64_t kStep = 2 * Vec::size();
        for (; i + kStep <= end; i += kStep) {
          const Vec a0 = Vec::loadu(a + i), a1 = Vec::loadu(a + i + Vec::size());
          const Vec b0 = Vec::loadu(b + i), b1 = Vec::loadu(b + i + Vec::size());
          (a0 + b0).store(o + i);
          (a1 + b1).store(o + i + Vec::size());
        }
      }
      // The rest, or everything in a portable build: there Vectorized is a generic array with scalar
      // loops (see cpu/vectorized.h), and a plain loop is better left to the compiler's vectorizer.
      for (; i < end; ++i) {
        o[i] = static_cast<scalar_t>(static_cast<opmath_t>(a[i]) + static_cast<opmath_t>(b[i]));
      }
    });
    return;
  }

  // General path: walk the output in rows of its last dimension; each row finds where it starts in
  // each tensor from its strides (a stride of 0 is an expanded dimension).
  const int64_t ndim = out.dim();
  const auto sizes = out.sizes();
  const auto sa = self.strides();
  const auto sb = other.strides();
  const auto so = out.strides();
  const int64_t row_len = sizes[ndim - 1];
  const int64_t step_a = sa[ndim - 1];
  const int64_t step_b = sb[ndim - 1];
  const int64_t step_o = so[ndim - 1];
  const int64_t rows = out.numel() / row_len;
  const int64_t rows_per_task = std::max<int64_t>(1, myops::kGrainSize / row_len);
  at::parallel_for(0, rows, rows_per_task, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t offset_a = 0, offset_b = 0, offset_o = 0, rest = row;
      for (int64_t d = ndim - 2; d >= 0; --d) {
        const int64_t index = rest % sizes[d];
        rest /= sizes[d];
        offset_a += index * sa[d];
        offset_b += index * sb[d];
        offset_o += index * so[d];
      }
      for (int64_t j = 0; j < row_len; ++j) {
        o[offset_o + j * step_o] = static_cast<scalar_t>(static_cast<opmath_t>(a[offset_a + j * step_a]) +
                                                         static_cast<opmath_t>(b[offset_b + j * step_b]));
      }
    }
  });
}
// END kernel

void run_myadd(const at::Tensor& self, const at::Tensor& other, const at::Tensor& out) {
  if (out.numel() == 0) {
    return;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "myadd_cpu", [&] {
    myadd_kernel_impl<scalar_t>(self, other, out);
  });
}

// BEGIN entry
at::Tensor myadd_cpu(const at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::CPU);
  myops::check_myadd_inputs(self, other);
  // at::empty would dispatch once more to reach the CPU allocator; this kernel is the CPU kernel
  // already, so it allocates directly, as ATen's own CPU kernels do.
  at::Tensor out(at::detail::empty_cpu(self.sizes(), self.scalar_type()));
  run_myadd(self, other, out);
  return out;
}
// END entry

// BEGIN inplace
at::Tensor& add_into_self(const char* op, at::Tensor& self, const at::Tensor& other) {
  myops::check_myadd_inplace_inputs(self, other, op);
  run_myadd(self, other, self);
  return self;
}

at::Tensor& myadd__cpu(at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::CPU);
  return add_into_self("myops::myadd_", self, other);
}

void myadd_inplace_cpu(at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::CPU);
  add_into_self("myops::myadd_inplace", self, other);
}
// END inplace

}  // namespace

// BEGIN registration
// An ordinary call reaches this kernel only when CPU is the highest backend key of its key set, so with CPU
// tensors; an explicit redispatch to the CPU key can still hand it others (notebook 02 does, with meta tensors).
TORCH_LIBRARY_IMPL(myops, CPU, m) {
  m.impl("myadd", &myadd_cpu);
  m.impl("myadd_", &myadd__cpu);
  m.impl("myadd_inplace", &myadd_inplace_cpu);
}
// END registration
