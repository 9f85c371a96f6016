// Solution of exercise 09 (notebook 09_compile_and_opcheck): the Meta kernel of ex09::mymatmul.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

TORCH_LIBRARY(ex09, m) {
  m.def("mymatmul(Tensor self, Tensor other) -> Tensor");
}

namespace {

void check_inputs(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.dim() == 2 && other.dim() == 2, "ex09::mymatmul: expected two 2-d tensors, got ", self.dim(),
              "-d and ", other.dim(), "-d");
  TORCH_CHECK(self.sym_size(1) == other.sym_size(0), "ex09::mymatmul: inner dimensions differ: ", self.sym_sizes(),
              " and ", other.sym_sizes());
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "ex09::mymatmul: expected tensors of the same dtype, got ",
              self.scalar_type(), " and ", other.scalar_type());
}

at::Tensor mymatmul_cpu(const at::Tensor& self, const at::Tensor& other) {
  check_inputs(self, other);
  return at::mm(self, other);
}

at::Tensor mymatmul_meta(const at::Tensor& self, const at::Tensor& other) {
  check_inputs(self, other);
  // SymInts throughout: under dynamic shapes the result's shape is an expression in the inputs' symbols.
  return at::empty_symint({self.sym_size(0), other.sym_size(1)}, self.options());
}

}  // namespace

TORCH_LIBRARY_IMPL(ex09, CPU, m) {
  m.impl("mymatmul", &mymatmul_cpu);
}

TORCH_LIBRARY_IMPL(ex09, Meta, m) {
  m.impl("mymatmul", &mymatmul_meta);
}
