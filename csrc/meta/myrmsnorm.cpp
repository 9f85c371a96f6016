// Meta kernel of myops::myrmsnorm: the output has the shape and dtype of `self`.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "checks.h"
#include "trace.h"

namespace {

at::Tensor myrmsnorm_meta(const at::Tensor& self, const at::Tensor& weight, double eps) {
  MYOPS_TRACE(c10::DispatchKey::Meta);
  myops::check_myrmsnorm_inputs(self, weight, eps);
  return at::empty_symint(self.sym_sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
}

}  // namespace

TORCH_LIBRARY_IMPL(myops, Meta, m) {
  m.impl("myrmsnorm", &myrmsnorm_meta);
}
