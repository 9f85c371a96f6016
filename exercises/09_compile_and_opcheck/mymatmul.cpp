// Exercise 09 (notebook 09_compile_and_opcheck): a Meta kernel, for torch.compile, FakeTensor and opcheck.
// Checked by myops/exercises/ex09_compile_and_opcheck.py.
//
// ex09::mymatmul (the product of two 2-d matrices, [n, k] x [k, m] -> [n, m]) has its schema and CPU kernel
// given. torch.compile and opcheck call it on fake tensors, which have a shape and a dtype and no data:
// they need a kernel on the Meta key that computes only what the result looks like.
// Your part:
//   1. mymatmul_meta: the same checks as the CPU kernel (they must fail on fake tensors exactly where the real
//      call would), then an empty tensor of shape [n, m] with the input's dtype and device. Read the sizes as
//      SymInts (sym_size, sym_sizes, at::empty_symint): under torch.compile(dynamic=True) they are symbols.
//      Plain size() does not fail on them: it fixes each size to the value it has now and adds a guard, so
//      the compiled graph serves that one shape and every new shape compiles again (notebook 09, section 2).
//   2. Register it on the Meta key in the TORCH_LIBRARY_IMPL block at the end.
// Check your answer with:  python -m myops.exercises check 09
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

TORCH_LIBRARY(ex09, m) {
  m.def("mymatmul(Tensor self, Tensor other) -> Tensor");
}

namespace {

// The checks every backend shares.
void check_inputs(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.dim() == 2 && other.dim() == 2, "ex09::mymatmul: expected two 2-d tensors, got ", self.dim(),
              "-d and ", other.dim(), "-d");
  TORCH_CHECK(self.sym_size(1) == other.sym_size(0), "ex09::mymatmul: inner dimensions differ: ", self.sym_sizes(),
              " and ", other.sym_sizes());
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "ex09::mymatmul: expected tensors of the same dtype, got ",
              self.scalar_type(), " and ", other.scalar_type());
}

// Given: the CPU kernel.
at::Tensor mymatmul_cpu(const at::Tensor& self, const at::Tensor& other) {
  check_inputs(self, other);
  return at::mm(self, other);
}

at::Tensor mymatmul_meta(const at::Tensor& self, const at::Tensor& other) {
  // TODO
  TORCH_CHECK(false, "not solved yet: write mymatmul_meta in exercises/09_compile_and_opcheck/mymatmul.cpp");
}

}  // namespace

TORCH_LIBRARY_IMPL(ex09, CPU, m) {
  m.impl("mymatmul", &mymatmul_cpu);
}

TORCH_LIBRARY_IMPL(ex09, Meta, m) {
  // TODO: register mymatmul_meta as the kernel of "mymatmul" here.
}
