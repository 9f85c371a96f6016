// The steps from a textbook matrix product to myops::mymatmul, each callable on its own so that
// notebook 08 can measure what it buys. A namespace of its own (myops_bench), in a layer of its own:
// nothing of the course depends on it, and the steps run the same code as the operator, with one
// template switch turned off at a time (see cpu/mymatmul_kernel.h).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include "cpu/mymatmul_kernel.h"  // first: it decides the width of at::vec::Vectorized

#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <string_view>
#include <vector>

#include "checks.h"

namespace {

template <typename scalar_t>
void run_step(std::string_view step, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  using namespace myops::cpu;
  if (step == "naive") {
    mymatmul_naive<scalar_t>(self, other, out);                        // one dot product per element
  } else if (step == "packed") {
    mymatmul_blocked<scalar_t, false, false>(self, other, out);        // + packing, blocking, register tiles
  } else if (step == "vectorized") {
    mymatmul_blocked<scalar_t, true, false>(self, other, out);         // + at::vec::Vectorized micro-kernel
  } else if (step == "threaded") {
    mymatmul_blocked<scalar_t, true, true>(self, other, out);          // + at::parallel_for: myops::mymatmul
  } else {
    TORCH_CHECK(false, "myops_bench::mymatmul_step: unknown step '", step,
                "'; expected naive, packed, vectorized or threaded");
  }
}

at::Tensor mymatmul_step_cpu(const at::Tensor& self, const at::Tensor& other, c10::string_view step) {
  myops::check_mymatmul_inputs(self, other);
  TORCH_CHECK(self.size(1) > 0, "myops_bench::mymatmul_step: expected a non-empty inner dimension");
  at::Tensor out = at::empty({self.size(0), other.size(1)}, self.options());
  if (out.numel() > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "mymatmul_step", [&] {
      run_step<scalar_t>(std::string_view(step.data(), step.size()), self, other, out);
    });
  }
  return out;
}

// The register tile of the micro-kernel for a dtype, [rows, columns]: its width says which vectors
// this build got (cpu/vectorized.h).
std::vector<int64_t> mymatmul_tile(at::ScalarType dtype) {
  std::vector<int64_t> tile;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mymatmul_tile", [&] {
    using blocking = myops::cpu::Blocking<at::opmath_type<scalar_t>>;
    tile = {blocking::kMr, blocking::kNr};
  });
  return tile;
}

}  // namespace

TORCH_LIBRARY(myops_bench, m) {
  m.def("mymatmul_step(Tensor self, Tensor other, str step) -> Tensor");
  m.def("mymatmul_tile(ScalarType dtype) -> int[]", &mymatmul_tile);  // no tensor: a catch-all kernel
}

TORCH_LIBRARY_IMPL(myops_bench, CPU, m) {
  m.impl("mymatmul_step", &mymatmul_step_cpu);
}
