// Meta kernel of myops::mymatmul: the output shape [self.size(0), other.size(1)], as SymInts (see
// checks.h), and the same checks as the real kernels.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "checks.h"
#include "trace.h"

namespace {

at::Tensor mymatmul_meta(const at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::Meta);
  myops::check_mymatmul_inputs(self, other);
  return at::empty_symint({self.sym_size(0), other.sym_size(1)}, self.options());
}

}  // namespace

TORCH_LIBRARY_IMPL(myops, Meta, m) {
  m.impl("mymatmul", &mymatmul_meta);
}
